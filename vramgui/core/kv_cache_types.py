"""The KV cache types (``--kv-dtype``) and which inference engine takes each: one table, read by
the workload's checks, the fit advisor, the launch lines and the window.

fp8 is vLLM's and SGLang's, q8_0 / q4_0 are llama.cpp's cache types. SGLang's
``--kv-cache-dtype`` takes auto (the model's dtype), bf16 and fp8_e4m3 / fp8_e5m2
(server_args.py), both one byte: "fp8" here. What a cached element weighs is
``dtypes.KV_DTYPE_BYTES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class KvCacheType:
    """One ``--kv-dtype`` choice.

    Attributes:
        name: the ``--kv-dtype`` value.
        engines: the inference engines that take it.
        switch_to: the engines to suggest, best first, when the current one does not take it
            (empty: every engine does).
        flags: per engine (and Ollama, which runs llama.cpp), the value of its own setting
            for it (llama.cpp's ``--cache-type-k`` / ``-v``, vLLM's and SGLang's
            ``--kv-cache-dtype``, ``OLLAMA_KV_CACHE_TYPE``); one left out is given no setting:
            its default.
        saving: what the fit advisor calls it when it offers it to save memory ("": it does
            not offer it).
        saving_cost: the trade-off the advisor names.
    """

    name: str
    engines: frozenset[str]
    switch_to: tuple[str, ...] = ()
    flags: dict[str, str] = field(default_factory=dict)
    saving: str = ""
    saving_cost: str = ""


_EVERY_ENGINE = frozenset({"transformers", "vllm", "llamacpp", "sglang"})

KV_CACHE_TYPES = (
    KvCacheType(name="auto", engines=_EVERY_ENGINE, flags={"llamacpp": "f16"}),
    KvCacheType(
        name="fp32",
        engines=frozenset({"transformers", "vllm", "llamacpp"}),
        switch_to=("vllm", "transformers"),
        flags={"llamacpp": "f32"},
    ),
    KvCacheType(
        name="fp16",
        engines=frozenset({"transformers", "vllm", "llamacpp"}),
        switch_to=("vllm", "transformers"),
        flags={"llamacpp": "f16"},
    ),
    KvCacheType(name="bf16", engines=_EVERY_ENGINE, flags={"llamacpp": "bf16", "sglang": "bf16"}),
    KvCacheType(
        name="fp8",
        engines=frozenset({"vllm", "sglang"}),
        switch_to=("vllm",),
        flags={"vllm": "fp8", "sglang": "fp8_e4m3"},
        saving="FP8",
        saving_cost="slightly less accurate attention",
    ),
    KvCacheType(
        name="q8_0",
        engines=frozenset({"llamacpp"}),
        switch_to=("llamacpp",),
        flags={"llamacpp": "q8_0", "ollama": "q8_0"},
        saving="q8_0",
        saving_cost="negligible quality loss",
    ),
    KvCacheType(
        name="q4_0",
        engines=frozenset({"llamacpp"}),
        switch_to=("llamacpp",),
        flags={"llamacpp": "q4_0", "ollama": "q4_0"},
        saving="q4_0",
        saving_cost="some quality loss on long contexts",
    ),
)
KV_CACHE_TYPE = {t.name: t for t in KV_CACHE_TYPES}
# The KV cache dtypes each engine takes, in the table's order.
ENGINE_KV_DTYPES: dict[str, tuple[str, ...]] = {
    engine: tuple(t.name for t in KV_CACHE_TYPES if engine in t.engines)
    for engine in ("transformers", "vllm", "llamacpp", "sglang")
}
