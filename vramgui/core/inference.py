"""Inference memory per GPU: weights, KV cache, the prefill's transient activations, engine buffers.

The transformers engine is modelled as ``model.generate`` runs it: one prefill forward over the whole
prompt under ``torch.no_grad`` with a DynamicCache and ``logits_to_keep=1``, written in core/prefill
as the tensors its code makes and lets go of (the order and lifetimes follow transformers'
modelling code), each block where the cache of every earlier layer is written. vLLM, SGLang and
llama.cpp are modelled by their own allocation rules.

Sweeps and solvers estimate one setup at many batch sizes and context lengths, so
:class:`InferencePlan` works out once what does not depend on the two sizes.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from vramgui.core import dtypes, engines, serving, sglang_startup, storage
from vramgui.core.activations import (
    llamacpp_compute_buffer,
    llamacpp_flash_attention,
    llamacpp_ubatch,
    vllm_profile_peak,
)
from vramgui.core.engines import StartUp
from vramgui.core.errors import Message, Setting, VramguiError, WorkloadError, phrase
from vramgui.core.families import validation
from vramgui.core.model import LayerType, ModelSpec
from vramgui.core.prefill import LEARNED_POSITIONS, Prefill, attention_used, buffer_bytes
from vramgui.core.prefill.attention import SDPA_GQA_HEAD_DIM
from vramgui.core.prefill.mixers import recurrent_fp32_elements
from vramgui.core.prefill.program import BATCH, TOKENS, Size
from vramgui.core.rank_weights import rank_tensor_bytes, resident_weights
from vramgui.core.units import GiB
from vramgui.core.vllm.encoders import towers_named, unmodelled_note
from vramgui.core.vllm.kv_layout import layer_specs
from vramgui.core.vllm.profile import CUDA_CONTEXT_BYTES, CUDA_RESERVED_BYTES, SERVE_BATCHED_TOKENS
from vramgui.core.vllm.startup import Draft, VllmEngine, VllmPlan, rotary_cache_bytes
from vramgui.core.workload import Workload

# The peak of an engine that pre-allocates its KV pool (vLLM, SGLang): sized for one GPU, or,
# without a GPU to size it, the KV cache of the tokens asked for.
POOLED_PHASE = "serving (pre-allocated KV pool)"
UNPOOLED_PHASE = "serving (KV cache of the requested tokens; no GPU to size the pool)"


@dataclass(frozen=True, slots=True)
class InferenceBreakdown:
    """Per-GPU inference memory, before runtime overhead.

    Attributes:
        weights_bytes: weights resident on each GPU.
        kv_cache_bytes: KV cache (or vLLM's pre-allocated pool) on each GPU.
        activations_bytes: transient activations / compute buffers at the peak.
        host_bytes: weights kept in host RAM (llama.cpp's token embeddings).
        phase: when the peak falls.
        notes: what the user should know about this estimate.
        details: engine-specific figures.
        vllm: vLLM's start-up on any GPU (the vLLM engine only).
        sglang: SGLang's start-up on any GPU (the SGLang engine only).
        overhead_bytes: the runtime overhead the engine itself decides (vLLM: its CUDA context,
            or without a GPU the share --gpu-memory-utilization leaves free); None: the
            default.
    """

    weights_bytes: int
    kv_cache_bytes: int
    activations_bytes: int
    host_bytes: int
    phase: str
    notes: tuple[str, ...]
    details: dict[str, int | float | bool | str]
    vllm: VllmEngine | None = None
    overhead_bytes: int | None = None
    sglang: sglang_startup.SglangEngine | None = None


def kv_bytes_per_token(spec: ModelSpec, workload: Workload) -> float:
    """KV cache bytes one token occupies across the attention layers on one GPU."""
    return _kv_shape(spec, workload).bytes_per_token


def kv_cache_bytes(spec: ModelSpec, workload: Workload, tokens: int | None = None) -> int:
    """KV cache held on one GPU for ``batch`` sequences of ``tokens`` (default: ``seq``) tokens."""
    kv = _kv_shape(spec, workload)
    return kv.bytes(workload.batch, workload.seq if tokens is None else tokens)


def _kv_shape(spec: ModelSpec, workload: Workload) -> _KvShape:
    workload = engine_kv_workload(spec, workload)
    key = (
        "inference_kv",
        workload.kv_dtype,
        workload.dtype,
        workload.engine,
        workload.tp,
        llamacpp_ubatch(workload),
    )
    return spec.cached(key, lambda: _KvShape.of(spec, workload))


def engine_kv_workload(spec: ModelSpec, workload: Workload) -> Workload:
    """``workload`` with the KV cache dtype the engine takes from the checkpoint under
    ``--kv-dtype auto`` (``serving.checkpoint_kv_dtype``), else ``workload`` itself."""
    kv = serving.checkpoint_kv_dtype(spec, workload)
    return workload if kv is None else workload.with_(kv_dtype=kv)


@dataclass(frozen=True, slots=True)
class _KvShape:
    """The KV cache of one model and setup on one GPU, whatever the batch and context."""

    full: int  # K/V elements one token keeps across the full-attention layers on one GPU
    sliding: int  # ... across the sliding-window layers
    chunked: int  # ... across the chunked-attention layers
    state_bytes: int  # the fixed state one sequence keeps (linear attention, Mamba, convolutions)
    per_elem: float
    window: int | None  # the most tokens a sliding-window layer keeps; None: every token
    chunk: int | None  # the most tokens a chunked-attention layer keeps; None: every token
    # llama.cpp sizes its sliding-window cache to the window of every sequence plus one
    # micro-batch, in whole 256-cell pages (llama_kv_cache_iswa); 0 for the other engines.
    window_ubatch: int = 0

    @classmethod
    def of(cls, spec: ModelSpec, workload: Workload) -> _KvShape:
        facts = spec.facts
        tp = workload.tp
        # llama.cpp caches K and V in f16 unless told otherwise (--cache-type-k / -v), whatever
        # the weights are stored or computed in.
        engine = engines.engine(workload.engine)
        cached = engine.auto_kv_dtype or workload.dtype
        per_elem = dtypes.kv_bytes_per_element(workload.kv_dtype, cached)
        widths = _kv_widths_per_gpu(spec, workload.engine, tp)
        sums = Counter[LayerType]()
        for kind, width in zip(_layer_types(spec), widths, strict=True):
            sums[kind] += width
        # Engines that size sliding-window and chunked layers to their span save it;
        # transformers keeps the whole prompt's K/V through the prefill (measured), so its peak
        # sees the full length.
        bounded = not engine.eager_pytorch
        return cls(
            full=sums[LayerType.FULL],
            sliding=sums[LayerType.SLIDING],
            chunked=sums[LayerType.CHUNKED],
            state_bytes=sum(_state_bytes(spec, workload)),
            per_elem=per_elem,
            window=facts.sliding_window if bounded and facts.sliding_window else None,
            chunk=facts.attention_chunk_size if bounded and facts.attention_chunk_size else None,
            window_ubatch=llamacpp_ubatch(workload) if engine.ggml else 0,
        )

    @property
    def bytes_per_token(self) -> float:
        return (self.full + self.sliding + self.chunked) * self.per_elem

    def bytes(self, batch: int, tokens: int) -> int:
        """The cache of ``batch`` sequences of ``tokens`` tokens."""
        total: float = batch * self.state_bytes
        total += batch * tokens * self.full * self.per_elem
        if self.window is None:
            cells = batch * tokens
        elif self.window_ubatch:
            pages = -(-(self.window * batch + self.window_ubatch) // 256) * 256
            cells = min(batch * tokens, pages)
        else:
            cells = batch * min(tokens, self.window)
        total += cells * self.sliding * self.per_elem
        kept = tokens if self.chunk is None else min(tokens, self.chunk)
        total += batch * kept * self.chunked * self.per_elem
        return round(total)


def _kv_widths_per_gpu(spec: ModelSpec, engine: str, tp: int) -> tuple[int, ...]:
    """Per layer, the K/V elements one token keeps on one GPU (0 where the layer keeps none)."""
    facts = spec.facts
    kinds = _layer_types(spec)
    if facts.layer_kv_widths:
        out = []
        for width, heads in zip(facts.layer_kv_widths, facts.layer_kv_heads, strict=True):
            # With fewer KV heads than tensor-parallel ranks, engines replicate heads.
            out.append(width * -(-heads // tp) // heads if heads else 0)
        return tuple(out)
    width = _kv_width(spec, engine, _kv_heads_per_gpu(spec, tp))
    return tuple(width if kind.has_kv else 0 for kind in kinds)


def _layer_type_counts(spec: ModelSpec) -> Counter[LayerType]:
    return spec.cached("layer_type_counts", lambda: Counter(_layer_types(spec)))


def _kv_width(spec: ModelSpec, engine: str, kv_heads: int) -> int:
    """Elements one token stores per layer (K and V together)."""
    facts = spec.facts
    if facts.is_mla:
        # Every engine (transformers 5 too) caches the compressed latent and the rotary key:
        # one copy per token, whatever the head count.
        return (facts.kv_lora_rank or 0) + (facts.qk_rope_head_dim or 0)
    v_dim = facts.v_head_dim or facts.head_dim
    return kv_heads * (facts.head_dim + v_dim)


def _kv_heads_per_gpu(spec: ModelSpec, tp: int) -> int:
    facts = spec.facts
    if facts.is_mla:
        return max(1, facts.num_heads // tp)
    # With fewer KV heads than tensor-parallel ranks, engines replicate heads: one per rank.
    return max(1, -(-facts.num_kv_heads // tp))


def _decode_repeat_per_token(spec: ModelSpec, workload: Workload) -> int:
    """Bytes per cached token of one layer's keys and values repeated to every query head on
    one GPU, where transformers' attention repeats them (``repeat_kv``): eager attention, or
    SDPA with heads its GQA kernel does not take; 0 where it does not."""
    facts = spec.facts
    if facts.is_mla or facts.num_kv_heads in (1, facts.num_heads):
        return 0
    v_dim = facts.v_head_dim or facts.head_dim
    sdpa_repeats = facts.head_dim > SDPA_GQA_HEAD_DIM or facts.head_dim != v_dim
    if attention_used(spec, workload) != "eager" and not sdpa_repeats:
        return 0
    heads = max(1, facts.num_heads // workload.tp)
    return heads * (facts.head_dim + v_dim) * dtypes.DTYPE_BYTES[workload.dtype]


def _layer_caches(spec: ModelSpec, workload: Workload) -> tuple[Size, ...]:
    """Per layer, what transformers' cache holds for it once the prompt is written: the whole
    prompt's keys and values, or a fixed state per sequence."""
    per_elem = round(dtypes.kv_bytes_per_element(workload.kv_dtype, workload.dtype))
    widths = _kv_widths_per_gpu(spec, workload.engine, workload.tp)
    return tuple(
        TOKENS * (width * per_elem) + BATCH * state
        for width, state in zip(widths, _state_bytes(spec, workload), strict=True)
    )


def _state_bytes(spec: ModelSpec, workload: Workload) -> tuple[int, ...]:
    """Per layer, the bytes of the fixed state one sequence keeps on one GPU: in the compute
    dtype, but for the recurrent state transformers' gated delta rule hands the cache in fp32."""
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    states = spec.facts.layer_state_elements or (0,) * spec.facts.num_layers
    eager = engines.engine(workload.engine).eager_pytorch
    out = []
    for layer, elements in enumerate(states):
        fp32 = recurrent_fp32_elements(spec, layer) if eager else 0
        out.append(-(-((elements - fp32) * e + fp32 * 4) // tp))
    return tuple(out)


def _layer_types(spec: ModelSpec) -> tuple[LayerType, ...]:
    facts = spec.facts
    if facts.layer_types:
        return facts.layer_types
    return (LayerType.FULL,) * facts.num_layers


def inference_breakdown(
    spec: ModelSpec,
    workload: Workload,
    capacity_bytes: int | None = None,
    gpu_name: str = "",
    draft: ModelSpec | None = None,
    *,
    device: str = "cuda",
) -> InferenceBreakdown:
    """Inference memory on one GPU at the worst moment of serving.

    Args:
        spec: the model.
        workload: inference settings.
        capacity_bytes: GPU memory, needed to size vLLM's pre-allocated KV pool.
        gpu_name: the GPU's name (vLLM's defaults depend on it).
        draft: the draft model of vLLM's speculative decoding, if any.
        device: "cuda", or "cpu" for the kernels PyTorch runs on a CPU (the measuring harness's
            fake run), where transformers' prefill keeps other tensors.

    Raises:
        WorkloadError: a setting the engine does not support.
    """
    plan = InferencePlan(spec, workload, capacity_bytes, gpu_name, draft, device=device)
    return plan.breakdown(workload.batch, workload.seq)


class InferencePlan:
    """Inference memory of one model and setup at any batch size and context length.

    What does not depend on the two sizes (the weights, the KV cache per token, the prefill's
    widths and kernels, vLLM's pool, the notes) is worked out once; :meth:`breakdown` adds what
    does. ``InferencePlan(spec, w, c).breakdown(w.batch, w.seq)`` is
    ``inference_breakdown(spec, w, c)``, and invalid settings raise from ``breakdown`` what
    ``inference_breakdown`` raises, in its order.
    """

    __slots__ = (
        "_capacity",
        "_checked",
        "_decode_repeat",
        "_details",
        "_error",
        "_facts",
        "_format_notes",
        "_gpu_name",
        "_host",
        "_kv",
        "_layer_caches",
        "_max_seq",
        "_notes",
        "_phase",
        "_prefill",
        "_rotary",
        "_sglang",
        "_spec",
        "_vllm",
        "_weights",
        "_workload",
    )

    def __init__(
        self,
        spec: ModelSpec,
        workload: Workload,
        capacity_bytes: int | None = None,
        gpu_name: str = "",
        draft: ModelSpec | None = None,
        *,
        device: str = "cuda",
    ) -> None:
        facts = spec.facts
        self._spec = spec
        self._workload = workload
        self._facts = facts
        learned = facts.model_type in LEARNED_POSITIONS
        self._max_seq = facts.max_position_embeddings if learned else None
        self._error: VramguiError | None = None
        self._capacity, self._gpu_name = capacity_bytes, gpu_name
        try:
            self._prepare(spec, workload, draft, device)
        except VramguiError as exc:
            self._error = exc

    def _prepare(
        self, spec: ModelSpec, asked: Workload, draft: ModelSpec | None, device: str
    ) -> None:
        workload = engine_kv_workload(spec, asked)
        engine = engines.engine(workload.engine)
        _check_model(spec, workload)
        weights, host = resident_weights(spec, workload)
        self._format_notes = serving.served_storage(spec, workload).notes
        if engine.eager_pytorch:
            weights += buffer_bytes(spec)
        self._weights, self._host = weights, host
        self._kv = _kv_shape(spec, workload) if spec.facts.is_decoder else None
        self._prefill = None
        self._vllm: VllmEngine | None = None
        self._sglang: sglang_startup.SglangEngine | None = None
        self._rotary = 0
        self._details: dict[str, int | float | bool | str] = {}
        self._notes: tuple[str, ...] = ()
        self._checked: validation.Checked | None = None
        self._layer_caches: tuple[Size, ...] = ()
        self._decode_repeat = 0
        if engine.eager_pytorch:
            self._checked = validation.checked(spec.facts.model_type)
            self._layer_caches = _layer_caches(spec, workload)
            self._decode_repeat = _decode_repeat_per_token(spec, workload)
            self._prefill = spec.cached(
                ("inference_prefill", workload.dtype, workload.attention, workload.tp, device),
                lambda: Prefill.of(spec, workload, self._layer_caches, device=device),
            )
            self._phase = "prefill" if spec.facts.is_decoder else "forward"
            notes = []
            if spec.facts.is_moe and not storage.experts_stacked(
                spec.facts.model_type, workload.transformers_version
            ):
                notes.append(
                    "The experts' activations follow transformers 5's MoE code, measured; "
                    f"transformers {workload.transformers_version} runs them expert by expert, "
                    "so they are approximate."
                )
            if attention_used(spec, workload) != workload.attention:
                notes.append(
                    f"transformers runs {spec.facts.model_type} with eager attention only; "
                    "estimated with eager."
                )
            if (
                _layer_type_counts(spec)[LayerType.SLIDING]
                or _layer_type_counts(spec)[LayerType.CHUNKED]
            ):
                notes.append(
                    "transformers keeps the whole prompt's K/V of sliding-window layers through "
                    "the prefill, so the window does not lower this peak."
                )
            self._notes = tuple(notes)
        elif engine.startup is StartUp.VLLM:
            vllm = VllmEngine(
                spec, workload, rank_tensor_bytes(spec, workload), _draft(draft, workload)
            )
            plan = vllm.plan(self._capacity, self._gpu_name)  # raises what vLLM refuses
            self._vllm = vllm
            # vLLM counts its rotary cos / sin table in "Model loading took"; here it is a
            # buffer beside the weights, in the runtime overhead.
            self._rotary = rotary_cache_bytes(spec, workload)
            self._weights = plan.weights_bytes - self._rotary
            self._phase = POOLED_PHASE if self._capacity is not None else UNPOOLED_PHASE
            if workload.speculative == "draft" and draft is None:
                self._notes = (
                    "No draft model read yet: its weights and KV cache are left out of this "
                    "estimate.",
                )
            if plan.encoder is not None:
                self._notes = (*self._notes, plan.encoder.note)
            if plan.unmodelled:
                note = unmodelled_note(spec, plan.unmodelled, plan.rules)
                self._notes = (*self._notes, note)
            self._details = {
                "kv_bytes_per_token": kv_bytes_per_token(spec, workload),
                "vllm_version": workload.vllm_version,
                "vllm_max_num_seqs": plan.scheduler.max_num_seqs,
                "vllm_max_num_batched_tokens": plan.scheduler.max_num_batched_tokens,
                "vllm_activation_bytes": max(s.activation_bytes for s in plan.stages),
                "vllm_non_torch_bytes": max(s.non_torch_bytes for s in plan.stages),
                "vllm_cuda_graph_bytes": max(s.cuda_graph_bytes for s in plan.stages),
                "vllm_lora_bytes": max(s.lora_bytes for s in plan.stages),
                "kv_block_size": plan.stages[-1].layout.block_size,
            }
        elif engine.startup is StartUp.SGLANG:
            sglang = sglang_startup.SglangEngine(spec, workload, rank_tensor_bytes(spec, workload))
            served = sglang.plan()  # raises what SGLang refuses
            self._sglang = sglang
            # SGLang's rotary table is loaded with the weights ("Load weight end. mem usage");
            # here it is a buffer beside them, in the runtime overhead.
            self._rotary = rotary_cache_bytes(spec, workload)
            self._weights = served.weights_bytes - self._rotary
            self._phase = POOLED_PHASE if self._capacity is not None else UNPOOLED_PHASE
            self._notes = sglang_startup.notes(spec, workload)
            self._details = {
                "kv_bytes_per_token": kv_bytes_per_token(spec, workload),
                "sglang_version": workload.sglang_version,
                "sglang_cell_bytes": max(s.cell_bytes for s in served.stages),
            }
        else:
            self._phase = "context allocated up front"
            self._details = {"host_embedding_bytes": host}
            if workload.ubatch_size > workload.batch_size:
                self._notes = (
                    f"llama.cpp runs micro-batches of at most -b {workload.batch_size:,} tokens, "
                    f"so -ub {workload.ubatch_size:,} sizes nothing beyond it.",
                )
        if engine.sizes_for_context and workload.prompt is not None:
            self._notes = (
                *self._notes,
                f"{engine.name} sizes its memory for the whole context and "
                "its own batch, whatever the prompt's length.",
            )
        if workload is not asked:
            self._notes = (*self._notes, serving.checkpoint_kv_note(spec, asked))
            self._details["kv_cache_dtype"] = workload.kv_dtype

    def breakdown(self, batch: int, seq: int, *, layer_split: bool = False) -> InferenceBreakdown:
        """Inference memory on one GPU serving ``batch`` sequences of ``seq`` tokens;
        ``layer_split``: llama.cpp on several GPUs splits the layers across them and the GPU that
        holds the most is given (False: one GPU's whole graph, what the planners size).

        Raises:
            WorkloadError: a setting the engine or the model does not support.
        """
        if self._max_seq is not None and seq > self._max_seq:
            raise WorkloadError(
                Message(
                    "{kind} has learned position embeddings for {most:,} tokens; {seq:,} is longer",
                    kind=self._facts.model_type,
                    most=self._max_seq,
                    seq=Setting("seq", seq),
                )
            )
        if self._error is not None:
            raise self._error.with_traceback(None)
        kv = self._kv.bytes(batch, seq) if self._kv is not None else 0
        weights, host = self._weights, self._host
        notes = self._notes
        details = dict(self._details)
        overhead = None
        phase = self._phase
        if self._prefill is not None:  # the transformers engine
            prompt = min(self._workload.prompt or seq, seq)
            activations, phase, said = self._transformers_moment(batch, prompt, seq, kv)
            notes = (*notes, *said, *self._outside(batch, prompt))
        elif self._vllm is not None:
            kv, activations, notes, needs = self._vllm_breakdown(batch, seq, details)
            overhead = CUDA_CONTEXT_BYTES + self._rotary
            if needs is not None:
                # No GPU, or one vLLM refuses: the total is the GPU vLLM needs to start.
                overhead = needs - (self._weights + kv + activations)
        elif self._sglang is not None:
            kv, activations, notes, total = self._sglang_breakdown(batch, seq, details)
            # What the weights, pool and activations do not hold of the total is CUDA's
            # reservation and context, the distributed set-up and the rotary table.
            overhead = total - (self._weights + kv + activations)
        elif layer_split and self._workload.gpus > 1:
            from vramgui.core.offload.llamacpp import fullest_gpu

            weights, kv, activations, host, split = fullest_gpu(
                self._spec, self._workload.with_(batch=batch, seq=seq), self._capacity
            )
            notes = (*notes, split)
        else:
            activations = llamacpp_compute_buffer(
                self._facts,
                batch,
                seq,
                flash_attention=llamacpp_flash_attention(self._workload),
                ubatch=llamacpp_ubatch(self._workload),
            )
        return InferenceBreakdown(
            weights_bytes=weights,
            kv_cache_bytes=kv,
            activations_bytes=activations,
            host_bytes=host,
            phase=phase,
            notes=(*self._format_notes, *notes),
            details=details,
            vllm=self._vllm,
            overhead_bytes=overhead,
            sglang=self._sglang,
        )

    def _transformers_moment(
        self, batch: int, prompt: int, seq: int, kv: int
    ) -> tuple[int, str, tuple[str, ...]]:
        """transformers' activations at the peak of ``generate``, its phase and a note: the
        prefill of ``prompt`` tokens beside their KV cache, or the last decoding step, with the
        KV cache of ``seq`` tokens and the step's own tensors, whichever holds more.

        The step is a one-token forward beside the larger of two transients over one layer's
        whole cache: DynamicCache's concatenation (each layer's keys, then values, written into
        a new tensor one token longer before the old one is freed) and, where attention repeats
        grouped K / V to every query head (eager; SDPA past its GQA kernel's head size), the
        repeated keys and values."""
        assert self._prefill is not None
        prefill = self._prefill.peak(batch, prompt)
        if prompt == seq or self._kv is None:
            return prefill, self._phase, ()
        at_prompt = self._kv.bytes(batch, prompt) + prefill
        concatenation = max((c.at(batch, seq) for c in self._layer_caches), default=0) // 2
        repeated = batch * seq * self._decode_repeat
        step = self._prefill.peak(batch, 1) + max(concatenation, repeated)
        note = (
            f"transformers prefills the prompt of {prompt:,} tokens and generates up to {seq:,}: "
            f"the peak is the larger of the prefill (its activations beside the KV cache of "
            f"{prompt:,} tokens) and the last step (the KV cache of {seq:,} tokens); here "
            f"{'the prefill' if at_prompt > kv + step else 'the last step'}."
        )
        if at_prompt > kv + step:
            return at_prompt - kv, self._phase, (note,)
        return step, "generation (the last step, the KV cache at the full context)", (note,)

    def _outside(self, batch: int, seq: int) -> tuple[str, ...]:
        """A note where the workload lies outside the shapes and sizes this architecture's
        prefill was measured at, or where it was never measured."""
        checked = self._checked
        if checked is None:
            return (
                f"{self._facts.model_type}'s prefill has not been measured against "
                "transformers (benchmarks/architectures.py), so these activations are "
                "approximate.",
            )
        facts = self._facts
        experts = bool(facts.num_experts) and validation.measured_without_experts(facts.model_type)
        outside = checked.outside(batch, seq, facts.hidden_size, experts)
        if not outside:
            return ()
        return (
            f"{self._facts.model_type}'s prefill was measured against transformers at "
            f"{checked.described()}; {' and '.join(outside)} "
            f"{'is' if len(outside) == 1 else 'are'} outside that, so these activations are "
            "approximate.",
        )

    def _vllm_needs(self, plan: VllmPlan, kv: int) -> int:
        """The GPU (as nvidia-smi counts it) on which vLLM holds ``kv`` of KV pool besides the
        rest of ``plan``: its share (--gpu-memory-utilization) holds them, and what it leaves
        free holds the CUDA context."""
        utilization = self._workload.gpu_memory_utilization
        held = self._weights + self._rotary + kv + plan.activation_bytes
        share = math.ceil(held / utilization)
        if utilization < 1:
            share = max(share, math.ceil(CUDA_CONTEXT_BYTES / (1 - utilization)))
        return share + CUDA_RESERVED_BYTES

    def _vllm_breakdown(
        self, batch: int, seq: int, details: dict[str, int | float | bool | str]
    ) -> tuple[int, int, tuple[str, ...], int | None]:
        """vLLM's KV cache, activations and notes at ``--max-model-len seq``: the pool it
        allocates on the GPU given, or what ``batch`` requests need without one; and the GPU
        vLLM needs to start when there is none or it refuses the one given (else None)."""
        assert self._vllm is not None
        plan = self._vllm.plan(self._capacity, self._gpu_name)
        activations = plan.activation_bytes
        needed = plan.needed_bytes(seq)
        details["kv_needed_bytes"] = needed
        base_notes = self._notes
        if self._capacity is None:
            note: str = phrase(
                "No GPU named, so vLLM's KV pool is not sized: name a GPU to see the pool vLLM "
                "pre-allocates, whether it starts and how many requests it holds. Here the KV "
                "cache is what "
                f"{batch:,} request{'s' if batch > 1 else ''} of {seq:,} tokens "
                f"{'need' if batch > 1 else 'needs'}, and the total the GPU vLLM needs for them: "
                "its share (",
                Setting("gpu_memory_utilization", f"{self._workload.gpu_memory_utilization:g}"),
                ") holds the rest, the remainder stays free.",
            )
            kv = plan.needed_bytes(seq, batch)
            needs = self._vllm_needs(plan, kv)
            large = self._vllm.plan(needs, self._gpu_name)
            if large is not plan:
                # A GPU that large takes vLLM's larger scheduler defaults: size for them.
                plan, activations = large, large.activation_bytes
                kv = plan.needed_bytes(seq, batch)
                needs = self._vllm_needs(plan, kv)
            return kv, activations, (*base_notes, note), needs
        up = plan.startup(self._capacity, self._workload.gpu_memory_utilization, seq)
        details.update(
            vllm_starts=up.starts,
            vllm_requested_bytes=up.requested_bytes,
            kv_pool_bytes=max(up.available_bytes, 0),
            kv_pool_blocks=up.blocks,
            kv_pool_tokens=up.pool_tokens,
            max_concurrency=round(up.max_concurrency, 2),
            largest_max_model_len=up.largest_model_len,
        )
        if up.unmodelled:
            # The pool, the concurrency and the longest length are upper bounds.
            details["vllm_unmodelled"] = " and ".join(up.unmodelled)
        if not up.starts:
            details["vllm_error"] = up.message
            where = f" on {self._gpu_name}" if self._gpu_name else ""
            kv = needed
            if up.message.startswith("max_num_seqs"):
                # Enough for one request but too few blocks for --max-num-seqs states.
                blocks = plan.scheduler.max_num_seqs * max(
                    s.layout.block_bytes for s in plan.stages
                )
                kv = max(needed, blocks)
            needs = max(self._vllm_needs(plan, kv), self._capacity + 1)
            note = f"vLLM would not start{where}: {up.message}"
            return needed, activations, (*base_notes, note), needs
        at_most = "at most " if up.unmodelled else ""
        notes = [
            f"vLLM takes {self._workload.gpu_memory_utilization:.0%} of the GPU; its KV pool "
            f"holds {at_most}{up.pool_tokens:,} tokens: {at_most}{up.max_concurrency:.2f} "
            f"requests of {seq:,} tokens at once"
            + (
                f" (less by what the profile of its {towers_named(up.unmodelled)} takes)."
                if up.unmodelled
                else "."
            )
        ]
        if up.max_concurrency < batch:
            notes.append(
                f"{batch:,} requests of {seq:,} tokens do not fit the pool at once; vLLM queues "
                "or preempts the rest."
            )
        if batch > plan.scheduler.max_num_seqs:
            notes.append(
                phrase(
                    Setting("max_num_seqs", plan.scheduler.max_num_seqs),
                    f" runs at most that many requests at once, fewer than the batch of {batch:,}.",
                )
            )
        return max(up.available_bytes, 0), activations, (*base_notes, *notes), None

    def _sglang_breakdown(
        self, batch: int, seq: int, details: dict[str, int | float | bool | str]
    ) -> tuple[int, int, tuple[str, ...], int]:
        """SGLang's KV pool, the activations of its largest forward (a chunked prefill) and
        notes at ``--context-length seq``: on the GPU given, or without one what ``batch``
        requests need; and the total: what SGLang holds on the GPU given when it serves there,
        else the GPU it needs."""
        assert self._sglang is not None
        w = self._workload
        plan = self._sglang.plan()
        cell = max(s.cell_bytes for s in plan.stages)
        state = max(s.state_bytes for s in plan.stages)
        needed = seq * cell
        details["kv_needed_bytes"] = needed
        if self._capacity is None:
            kv = batch * needed
            gpu = plan.needed_gpu_bytes(w, kv, batch)
            up = plan.startup(w, gpu, seq)
            note: str = phrase(
                "No GPU named, so SGLang's KV pool is not sized: name a GPU to see the pool "
                "SGLang allocates and how many requests it holds. Here the KV cache is what "
                f"{batch:,} request{'s' if batch > 1 else ''} of {seq:,} tokens "
                f"{'need' if batch > 1 else 'needs'}, and the total the GPU SGLang needs for "
                "them at ",
                Setting("mem_fraction_static", f"{up.mem_fraction_static:g}"),
                ".",
            )
            return kv + batch * state, up.activation_bytes, (*self._notes, note), gpu
        up = plan.startup(w, self._capacity, seq)
        details.update(
            sglang_starts=up.starts,
            sglang_serves=up.serves,
            sglang_mem_fraction_static=round(up.mem_fraction_static, 4),
            sglang_free_bytes=up.free_bytes,
            sglang_reserve_bytes=up.reserve_bytes,
            sglang_chunked_prefill_size=up.chunked_prefill_size,
            sglang_max_running_requests=up.max_running_requests,
            kv_pool_bytes=max(up.available_bytes, 0),
            kv_pool_tokens=up.pool_tokens,
            max_concurrency=round(up.max_concurrency, 2),
            largest_context_length=up.largest_context,
        )
        if up.state_requests:
            details["sglang_state_requests"] = up.state_requests
        where = f" on {self._gpu_name}" if self._gpu_name else ""
        if not up.serves:
            details["sglang_error"] = up.message
            gpu = max(plan.needed_gpu_bytes(w, needed + state, 0), self._capacity + 1)
            fitted = plan.startup(w, gpu, seq)
            verb = "would not start" if not up.starts else "would not serve this context"
            note = f"SGLang {verb}{where}: {up.message}"
            return needed + state, fitted.activation_bytes, (*self._notes, note), gpu
        notes: list[str] = [
            phrase(
                f"SGLang takes {up.mem_fraction_static:.1%} of the free memory for weights and KV "
                "pool (",
                Setting("mem_fraction_static", f"{up.mem_fraction_static:g}"),
                f"); its pool holds {up.pool_tokens:,} tokens: {up.max_concurrency:.2f} requests "
                f"of {seq:,} tokens at once. It leaves {up.reserve_bytes / GiB:.2f} GiB for "
                "activations and CUDA graphs, which it does not profile; the activations here are "
                f"those of one chunked prefill of {up.chunked_prefill_size:,} tokens "
                "(approximate), CUDA graphs are left out.",
            ),
        ]
        if up.activation_bytes > up.reserve_bytes:
            notes.append(
                phrase(
                    f"A chunked prefill of {up.chunked_prefill_size:,} tokens needs about "
                    f"{up.activation_bytes / GiB:.2f} GiB, more than the reserve: SGLang may run "
                    "out of memory under load (lower ",
                    Setting("mem_fraction_static"),
                    " or SGLang's --chunked-prefill-size).",
                )
            )
        if up.max_concurrency < batch:
            notes.append(
                f"{batch:,} requests of {seq:,} tokens do not fit the pool at once; SGLang "
                "queues or retracts the rest."
            )
        kv = max(up.available_bytes, 0) + up.state_requests * state
        return kv, up.activation_bytes, (*self._notes, *notes), up.used_bytes + up.activation_bytes


def _draft(draft: ModelSpec | None, w: Workload) -> Draft | None:
    """A draft model's share of one GPU, served in the target's dtype and tensor parallelism."""
    if draft is None or w.speculative != "draft":
        return None
    plain = w.with_(quant="none", enable_lora=False, speculative="none", mtp=False)
    weights = sum(size for _, _, size in rank_tensor_bytes(draft, plain))
    layers = range(draft.facts.num_layers)
    specs = tuple(layer_specs(draft, plain, layers))
    tokens = w.max_num_batched_tokens or SERVE_BATCHED_TOKENS[0]
    activation = vllm_profile_peak(draft, plain, tokens, 0)
    return Draft(draft.name, weights, specs, activation)


def _check_model(spec: ModelSpec, workload: Workload) -> None:
    """The checks after the context's own (see InferencePlan.breakdown)."""
    facts = spec.facts
    if workload.tp > 1 and facts.num_heads % workload.tp:
        raise WorkloadError(
            Message(
                "{tp} does not divide the model's {heads} attention heads",
                tp=Setting("tp", workload.tp),
                heads=facts.num_heads,
            )
        )
    if not engines.engine(workload.engine).eager_pytorch and not facts.is_decoder:
        raise WorkloadError(f"{workload.engine} serves decoder models; this one is an encoder")
