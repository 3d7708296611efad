"""The questions vramgui answers, one function each, for every front end.

A front end (``cli``, ``ui``) asks here and renders what comes back; it computes nothing of its
own, so that one setup gives one figure everywhere. Each answer is a typed, immutable result (or
a typed refusal carrying its data), and its ``to_dict`` is the JSON the documents hold.

- ``host``: the host RAM and disk speed offloading uses, as set or as this machine has them;
- ``rates``: a GPU's speeds, its rental price and the utilization it is timed with;
- ``offload``: where each layer goes (llama.cpp, accelerate, streaming), how fast it runs, the
  fastest placement llama.cpp can take and its alternatives;
- ``timing``: how fast a setup runs and what it costs, on the placement that would run, and the
  GPUs to rent ranked by it;
- ``advice``: what makes a setup fit: offloading under llama.cpp, then core's changes;
- ``capacity``: vLLM's start-up on each GPU (the Serving tab, ``estimate``'s serving_report);
- ``estimate``: a setup's estimate on the GPUs chosen, and its outlook (the sweep, the largest
  context and batch that fit, advice, rules of thumb, the GPUs to rent);
- ``setup``: what the checkpoint stores and leaves to choose, the longest context it takes;
- ``placement``: the names an offload plan is drawn with (devices, pieces, bounds, curves);
- ``documents``: the estimate document with its timing (estimate, profiles);
- ``explain``: an engine's log beside the estimate (``vramgui explain``, the window's log view).

Modules are imported where they are used: ``vramgui plan --help`` costs none of them.
"""
