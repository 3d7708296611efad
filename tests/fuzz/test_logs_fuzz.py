"""Engine logs from anywhere: published logs cut, shuffled, spliced with noise and lies.

``read_log`` may refuse a text only with ``LogUnreadable`` and ``explain`` only with a vramgui
error; neither hangs, nor takes more memory than the bound, whatever the text claims (a buffer of
10^15 MiB, a context of 10^12 tokens, a million layers).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, parse_safely
from tests.logs_fixtures import SOURCES, text
from vramgui.answers.explain import explain
from vramgui.core.logs import read_log

# A few logs of each engine, to cut and splice.
SEEDS = [
    text(name)
    for name in (
        "llamacpp-glm-z1-32b-3090ti-32k.log",
        "llamacpp-pull370-8.log",
        "ollama-old-4gpu-64k.log",
        "ollama-new-qwen-5gib.log",
        "vllm-dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM.log",
        "vllm-refusal-arc-b70-100k.log",
        "sglang-qwen3-235b-fp8-tp4.log",
        "pytorch-oom-24gib-22mib.log",
    )
    if name in SOURCES
]
LIES = [
    "llama_context: n_ctx         = 1000000000000",
    "print_info: n_layer          = 1000000",
    "llama_kv_cache_init:      CUDA0 KV buffer size = 999999999999999.00 MiB",
    "load_tensors: offloaded -5/99999999 layers to GPU",
    "INFO 09-04 [gpu_worker.py:276] Available KV cache memory: -99999.00 GiB",
    "KV Cache is allocated. #tokens: 99999999999999, K size: 1e300 GB, V size: nan GB",
    'msg=offload layers.offload=-1 layers.model=0 memory.available="[1e999 GiB]"',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9999999 TiB. GPU 0 has a total capacity of 0 B of which 0 B is free.",
    "\x1b[31m\x00\x07\u202e",
    "-ot " + "(" * 500 + "=CUDA0",
]


@st.composite
def mutated_logs(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SEEDS)).splitlines()
    start = draw(st.integers(0, len(lines)))
    end = draw(st.integers(start, len(lines)))
    kept = lines[start:end]
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(kept)))
        kept.insert(at, draw(st.one_of(st.sampled_from(LIES), st.text(max_size=200))))
    if draw(st.booleans()):
        kept = draw(st.permutations(kept))
    return "\n".join(kept)


@FUZZ
@given(mutated_logs())
@example("")
@example("\n".join(LIES))
def test_mutated_logs_are_read_or_refused_cleanly(log: str) -> None:
    setup = parse_safely(lambda: read_log(log))
    if setup is not None:
        parse_safely(lambda: explain(setup))
