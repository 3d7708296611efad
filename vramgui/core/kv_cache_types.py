"""The KV cache types (``--kv-dtype``): one table of the choices, read by the workload's checks,
the fit advisor, the launch lines and the window. Which engine takes each, and what its own flag
calls it, is the engine's (``Engine.kv_cache``, ``core/engines/``).

fp8 is vLLM's and SGLang's, q8_0 / q4_0 are llama.cpp's cache types. What a cached element
weighs is ``dtypes.KV_DTYPE_BYTES``.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core.engines import ENGINES


@dataclass(frozen=True, slots=True, kw_only=True)
class KvCacheType:
    """One ``--kv-dtype`` choice.

    Attributes:
        name: the ``--kv-dtype`` value.
        switch_to: the engines to suggest, best first, when the current one does not take it
            (empty: every engine does).
        saving: what the fit advisor calls it when it offers it to save memory ("": it does
            not offer it).
        saving_cost: the trade-off the advisor names.
    """

    name: str
    switch_to: tuple[str, ...] = ()
    saving: str = ""
    saving_cost: str = ""

    @property
    def engines(self) -> frozenset[str]:
        """The keys of the engines that take it."""
        return frozenset(e.key for e in ENGINES if e.takes_kv(self.name))


KV_CACHE_TYPES = (
    KvCacheType(name="auto"),
    KvCacheType(name="fp32", switch_to=("vllm", "transformers")),
    KvCacheType(name="fp16", switch_to=("vllm", "transformers")),
    KvCacheType(name="bf16"),
    KvCacheType(
        name="fp8",
        switch_to=("vllm",),
        saving="FP8",
        saving_cost="slightly less accurate attention",
    ),
    KvCacheType(
        name="q8_0",
        switch_to=("llamacpp",),
        saving="q8_0",
        saving_cost="negligible quality loss",
    ),
    KvCacheType(
        name="q4_0",
        switch_to=("llamacpp",),
        saving="q4_0",
        saving_cost="some quality loss on long contexts",
    ),
)
KV_CACHE_TYPE = {t.name: t for t in KV_CACHE_TYPES}
