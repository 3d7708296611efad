"""What every inference engine is, for the estimate: its data and the hooks its rules answer.

An engine is one module of this package holding one :class:`Engine` (``ENGINE``); the registry
(``vramgui.core.engines``) lists the modules present. Code outside this package asks the engine
object (``engine(workload.engine)``) and never compares an engine's name.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


class StartUp(enum.Enum):
    """The start-up an engine that pre-allocates its KV pool follows, as modelled in core."""

    VLLM = "core/vllm/"  # vLLM's profile run, CUDA graphs and --gpu-memory-utilization
    SGLANG = "core/sglang_startup.py"  # SGLang's --mem-fraction-static and token pool


@dataclass(frozen=True, slots=True, kw_only=True)
class Planner:
    """One offload planner (``vramgui plan --planner``, the Offloading tab).

    Attributes:
        key: the ``--planner`` value.
        label: how the Offloading tab names it.
        engine: the key of the engine that loads the model when this planner places it.
        order: its place in the planner lists (``--planner``'s choices, the Offloading tab).
    """

    key: str
    label: str
    engine: str
    order: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    """One inference engine: what it loads, what it caches, how it allocates and is launched.

    Attributes:
        key: the ``--engine`` value and the workload's ``engine`` (kept in profiles and the JSON).
        name: how text names it ("vLLM").
        label: how the window's Engine box names it ("Transformers").
        order: its place in the engine lists (the Engine box, ``--engine``'s choices).
        quant_families: the quantization families (``core.dtypes.Scheme.family``) it loads.
        kv_cache: the ``--kv-dtype`` values it takes, in the table's order
            (``core.kv_cache_types``), each with the value of its own flag for it (None: no
            flag, its default).
        auto_kv_dtype: the dtype it caches K and V in under ``--kv-dtype auto`` whatever the
            weights are computed in (None: the compute dtype).
        dequantized_families: the quantization families it loads only by dequantizing them to
            the compute dtype (refused: their size would not hold).
        gguf_of_family: the quantization families it runs as a GGUF file type of its own, and
            that type (what ``--quant`` becomes there).
        startup: the pre-allocating start-up it follows (None: it sizes what it is given).
        eager_pytorch: it runs the model's own PyTorch code (transformers' ``generate``): the
            peak is the prefill forward, the prompt's K/V is kept whole (sliding windows
            included), recurrent states are handed over in fp32, the caching allocator's slack
            counts, and ``vramgui measure`` can run it.
        ggml: it runs on llama.cpp's ggml: GGUF files, layers split across GPUs and host RAM
            (not tensors), token embeddings in host RAM, micro-batches (``-ub``), its own CUDA
            context, its own measured speed model and offload plan.
        sizes_for_context: it sizes its memory for the whole context and its own batch, whatever
            the prompt's length.
        loads_mtp: it loads a checkpoint's multi-token-prediction layers (MTP speculative
            decoding).
        splits_tensors: it shards tensors across GPUs (tensor parallelism) when given several.
        towers_apart: it loads a multimodal checkpoint's vision / audio towers and projectors
            from a separate file, and only when told to (llama.cpp's mmproj GGUF, ``--mmproj``):
            the model it serves by default is the language model alone.
        tensor_parallel_flag: its launch flag for tensor parallelism ("": none on its line).
        products_dtype: the 16-bit type its kernels multiply in whatever the checkpoint's dtype
            (ggml's cuBLAS, MMQ and Metal kernels: fp16), which its speed is timed at; None: the
            workload's dtype.
        step_model: the engine whose published serving runs fitted the forward step that times
            this one's decode (``core.serving_steps``: "vLLM"); "": the datasheet roofline does.
        serving_runs_on: the catalog GPUs that published serving runs of it ran on, read with
            that step's figures (benchmarks/data/serving_published.json): its speed is measured
            there and extrapolated elsewhere.
        narrower_quants: the quantizations the fit advisor offers it to save memory, widest first.
        moe_quants: those it offers first for a mixture of experts.
        planners: the offload planners that load the model with it.
    """

    key: str
    name: str
    label: str
    order: int
    quant_families: frozenset[str]
    kv_cache: Mapping[str, str | None]
    auto_kv_dtype: str | None = None
    dequantized_families: frozenset[str] = frozenset()
    gguf_of_family: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    startup: StartUp | None = None
    eager_pytorch: bool = False
    ggml: bool = False
    sizes_for_context: bool = True
    loads_mtp: bool = False
    splits_tensors: bool = True
    towers_apart: bool = False
    tensor_parallel_flag: str = ""
    products_dtype: str | None = None
    step_model: str = ""
    serving_runs_on: frozenset[str] = frozenset()
    narrower_quants: tuple[str, ...] = ()
    moe_quants: tuple[str, ...] = ()
    planners: tuple[Planner, ...] = ()

    def __post_init__(self) -> None:
        # Read-only copies: an engine is shared by every workload that names it.
        object.__setattr__(self, "kv_cache", MappingProxyType(dict(self.kv_cache)))
        object.__setattr__(self, "gguf_of_family", MappingProxyType(dict(self.gguf_of_family)))

    @property
    def pre_allocates(self) -> bool:
        """Whether it takes a share of the GPU for its KV pool at start-up (vLLM, SGLang)."""
        return self.startup is not None

    @property
    def kv_dtypes(self) -> tuple[str, ...]:
        """The ``--kv-dtype`` values it takes, in the table's order."""
        return tuple(self.kv_cache)

    def takes_kv(self, kv_dtype: str) -> bool:
        """Whether it caches K and V as ``kv_dtype``."""
        return kv_dtype in self.kv_cache

    def kv_flag(self, kv_dtype: str) -> str | None:
        """Its own flag's value for ``kv_dtype`` (None: none, it takes its default)."""
        return self.kv_cache.get(kv_dtype)

    def timing_dtype(self, dtype: str) -> str:
        """The dtype a setup computing in ``dtype`` is timed at on this engine."""
        return self.products_dtype or dtype

    def loads(self, family: str) -> bool:
        """Whether it loads weights of the quantization ``family``."""
        return family in self.quant_families
