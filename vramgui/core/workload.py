"""Workload: what the user wants to do with the model (serve it, or train it) and on how many GPUs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from operator import attrgetter
from typing import Any

from vramgui.core import dtypes, scopes
from vramgui.core.engines import ENGINE_KEYS, engine
from vramgui.core.engines.llamacpp import ENGINE as _LLAMACPP
from vramgui.core.errors import Message, Setting, WorkloadError, shown
from vramgui.core.kv_cache_types import KV_CACHE_TYPES
from vramgui.core.setting_values import check_choice, check_range, coerce

MODES = ("inference", "training")
DTYPES = ("fp32", "fp16", "bf16")
ENGINES = ENGINE_KEYS
KV_DTYPES = tuple(t.name for t in KV_CACHE_TYPES)
ATTENTIONS = ("eager", "sdpa", "flash")
METHODS = ("full", "lora", "qlora")
PRECISIONS = ("mixed", "pure", "fp32")
OPTIMIZERS = ("adamw", "adamw-fused", "adamw-8bit", "sgd", "adafactor", "lion")
# trainer: transformers' Trainer drops the model's outputs once it has the loss; custom: the loop
# of tutorials and accelerate's examples keeps ``outputs`` (the logits) through backward.
LOOPS = ("trainer", "custom")
# Speculative decoding under vLLM: none, the model's own multi-token-prediction layers, or a draft
# model (``draft_model`` names it).
SPECULATIVE = ("none", "draft")
# The smallest share of a GPU vLLM's --gpu-memory-utilization or SGLang's --mem-fraction-static may
# give (1%: under a gigabyte of most GPUs); below it the figures that divide by it overflow.
MIN_MEMORY_FRACTION = 0.01
# The vLLM versions whose start-up rules the estimate follows (core/vllm/rules.py): 0.20 stands for
# 0.20.2 and later, the default.
VLLM_VERSIONS = ("0.10", "0.11", "0.20")
# The SGLang versions whose start-up rules the estimate follows (core/sglang_startup.py): each
# stands for the releases that share its default --mem-fraction-static (0.4.4: 0.4.0 to 0.4.8,
# by tensor-parallel size; 0.4.9: 0.4.9 to 0.4.10, by GPU memory; 0.5.6: the 0.5 line, by
# chunked prefill and CUDA graph sizes), the default.
SGLANG_VERSIONS = ("0.4.4", "0.4.9", "0.5.6")
# RoPE scalings a user may set to run past the model's context (core/rope.py): "none" leaves the
# config's own. llama.cpp takes yarn and linear, vLLM, SGLang and transformers all three.
ROPE_SCALINGS = ("none", "yarn", "linear", "dynamic")
MAX_ROPE_FACTOR = 1024.0
# llama-server's logical batch (-b, --batch-size) and physical micro-batch (-ub, --ubatch-size)
# defaults (common/common.h: n_batch 2048, n_ubatch 512).
LLAMACPP_BATCH = 2048
LLAMACPP_UBATCH = 512
# The transformers releases whose model code the estimate follows: what changes between them is
# how a MoE block holds its routed experts (core/storage.py, ``experts_fused``). 5.0 stands for
# the 5 line, the default.
TRANSFORMERS_VERSIONS = ("4.46", "4.57", "5.0")
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")

ENGINE_NAMES = {e: engine(e).name for e in ENGINE_KEYS}
# NVIDIA GPU generations by compute capability: what a checkpoint's format runs natively on
# (FP8 tensor cores from Ada, FP4 from Blackwell). "auto": none given (the first --gpu's when one
# is, else one that runs the format natively, the other cases said in the notes).
GPU_ARCHS: dict[str, tuple[int, int]] = {
    "volta": (7, 0),
    "turing": (7, 5),
    "ampere": (8, 0),
    "ada": (8, 9),
    "hopper": (9, 0),
    "blackwell": (10, 0),
}
GPU_ARCH_CHOICES = ("auto", *GPU_ARCHS)

# Formats llama.cpp runs natively, as a GGUF file type (``Engine.gguf_of_family``).
GGUF_OF_FAMILY = _LLAMACPP.gguf_of_family

# The engine to switch to for a setting the current one does not run, by quantization family or
# KV cache dtype, best first.
_ENGINES_FOR = {
    "gguf": ("llamacpp", "vllm"),
    "bitsandbytes": ("transformers", "vllm"),
    "gptq-awq": ("transformers", "vllm"),
    "fp8": ("transformers", "vllm"),
    "mxfp4": ("transformers", "vllm"),
    "int": ("vllm", "transformers"),
    "nvfp4": ("vllm",),
    "modelopt": ("vllm",),
    **{f"kv:{t.name}": t.switch_to for t in KV_CACHE_TYPES if t.switch_to},
}

# How LoRA and QLoRA are usually run, applied when the method is picked (the window) or left to
# its defaults (the command line). A full fine-tune keeps fp32 master weights under 16-bit
# autocast. LoRA loads the frozen base in 16 bits (torch_dtype) with fp32 adapters. QLoRA is the
# QLoRA paper's recipe as peft runs it: an NF4 base, prepare_model_for_kbit_training (which
# upcasts what is not quantized to fp32: precision "mixed"; "pure" is a script that skips it and
# keeps everything in the 16-bit dtype, as Answer.AI's fsdp_qlora train.py does) and gradient
# checkpointing on, as that function and the QLoRA training script turn it on; LoRA scripts
# commonly keep it on too.
METHOD_RECIPES: dict[str, dict[str, Any]] = {
    "full": {"precision": "mixed"},
    "lora": {"precision": "pure", "grad_checkpointing": True},
    "qlora": {"precision": "mixed", "quant": "nf4", "grad_checkpointing": True},
}

# Sizes above these are typing mistakes, not workloads; they would only make the arithmetic absurd.
MAX_BATCH = 1 << 20
MAX_SEQ = 1 << 24
MAX_GPUS = 1 << 16


@dataclass(frozen=True, slots=True)
class Workload:
    """Every setting of an estimate, with the CLI's names (``--lora-rank`` -> ``lora_rank``).

    Attributes:
        mode: inference (serve ``batch`` sequences of ``seq`` tokens) or training (one step).
        batch: sequences per forward (per GPU for data parallel training).
        seq: context length for inference, sequence length for training.
        dtype: 16/32-bit dtype of weights and compute.
        quant: weight quantization scheme, "none" or a name known to ``core.dtypes``.
        engine: the key of the inference engine whose behaviour to follow (``core.engines``).
        kv_dtype: KV cache dtype; "auto" follows ``dtype``.
        attention: attention implementation.
        method: full fine-tune, LoRA or QLoRA.
        precision: mixed (fp32 master weights, 16-bit autocast), pure (all in ``dtype``) or fp32.
        optimizer: optimizer name.
        grad_checkpointing: recompute activations in backward.
        lora_rank: LoRA rank r.
        lora_targets: module names LoRA adapts, or ("all-linear",).
        grad_accum: gradient accumulation steps.
        gpus: GPUs in total.
        zero: DeepSpeed ZeRO stage 0-3.
        fsdp: PyTorch FSDP full shard.
        tp: tensor-parallel degree.
        pp: pipeline-parallel degree.
        overhead_bytes: runtime overhead per GPU; None takes the measured default.
        gpu_memory_utilization: vLLM's fraction of GPU memory it may take.
        cpu_offload: offload optimizer states (and with ZeRO-3, parameters) to host RAM.
        loop: the training loop around the model: "trainer" (transformers' Trainer) or "custom"
            (``outputs = model(**batch); loss = outputs.loss; loss.backward()``).
        max_num_seqs: vLLM's ``--max-num-seqs``; None takes vLLM's default for the GPU.
        max_num_batched_tokens: vLLM's ``--max-num-batched-tokens``; None takes its default.
        enforce_eager: vLLM's ``--enforce-eager`` (no CUDA graphs).
        enable_lora: vLLM's ``--enable-lora``, with ``max_loras`` adapter slots of rank
            ``max_lora_rank`` (``--max-loras``, ``--max-lora-rank``).
        max_loras: LoRA adapters vLLM holds on the GPU at once.
        max_lora_rank: the largest LoRA rank vLLM reserves room for.
        speculative: speculative decoding with a separate draft model under vLLM: "none" or
            "draft" (``draft_model``); the model's own multi-token-prediction layers are
            ``mtp``.
        num_speculative_tokens: tokens proposed per step when speculating (MTP or draft).
        draft_model: the draft model's source (catalog name, Hub id, path) for "draft".
        cpu_offload_gb: vLLM's ``--cpu-offload-gb``: GiB of weights per GPU kept in host RAM.
        enable_prefix_caching: vLLM's ``--enable-prefix-caching`` (True) or
            ``--no-enable-prefix-caching`` (False); None takes the version's default. It
            changes the pool only for models with state layers (Mamba, linear attention),
            whose states it keeps per block.
        vllm_version: the vLLM version whose start-up rules to follow (``VLLM_VERSIONS``).
        gpu_arch: the GPU generation the engine runs on (``GPU_ARCHS``), which decides what it
            does with a checkpoint's format; "auto" when no GPU says.
        mtp: load the checkpoint's multi-token-prediction layers (vLLM's MTP speculative
            decoding).
        mem_fraction_static: SGLang's ``--mem-fraction-static``: the share of the GPU's free
            memory its weights and KV pool take; None takes the version's default for the GPU.
            (vLLM's ``gpu_memory_utilization`` does not apply to SGLang: the two fractions are of
            different totals and leave different things outside.)
        sglang_version: the SGLang version whose start-up rules to follow (``SGLANG_VERSIONS``).
        rope_scaling: the RoPE scaling to run the model with past its context (``ROPE_SCALINGS``);
            "none" keeps the config's own, if any.
        rope_factor: the scaling's factor (more than 1 when one is set).
        rope_original_context: the context the scaling stretches; None takes the config's
            (its scaling's original context, else ``max_position_embeddings``).
        ubatch_size: llama.cpp's physical micro-batch (``-ub``): its compute buffer is sized for
            one micro-batch of this many tokens.
        batch_size: llama.cpp's logical batch (``-b``); llama.cpp runs micro-batches of at most
            this many tokens (``n_ubatch = min(n_batch, n_ubatch)``).
        prompt: tokens the transformers engine prefills (the rest of ``seq`` is generated), at
            most ``seq`` (a longer prompt is the whole context); None: the whole context.
        transformers_version: the transformers release whose model code to follow
            (``TRANSFORMERS_VERSIONS``): transformers 5 holds every MoE block's experts as
            stacked parameters, which bitsandbytes leaves unquantized.
    """

    mode: str = "inference"
    batch: int = 1
    seq: int = 2048
    dtype: str = "bf16"
    quant: str = "none"
    engine: str = "transformers"
    kv_dtype: str = "auto"
    attention: str = "sdpa"
    method: str = "full"
    precision: str = "mixed"
    optimizer: str = "adamw"
    grad_checkpointing: bool = False
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    grad_accum: int = 1
    gpus: int = 1
    zero: int = 0
    fsdp: bool = False
    tp: int = 1
    pp: int = 1
    overhead_bytes: int | None = None
    gpu_memory_utilization: float = 0.9
    cpu_offload: bool = False
    loop: str = "trainer"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    speculative: str = "none"
    num_speculative_tokens: int = 1
    draft_model: str = ""
    cpu_offload_gb: float = 0.0
    enable_prefix_caching: bool | None = None
    vllm_version: str = VLLM_VERSIONS[-1]
    gpu_arch: str = "auto"
    mtp: bool = False
    mem_fraction_static: float | None = None
    sglang_version: str = SGLANG_VERSIONS[-1]
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_original_context: int | None = None
    ubatch_size: int = LLAMACPP_UBATCH
    batch_size: int = LLAMACPP_BATCH
    prompt: int | None = None
    transformers_version: str = TRANSFORMERS_VERSIONS[-1]

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, MODES)
        check_choice("dtype", self.dtype, DTYPES)
        check_choice("engine", self.engine, ENGINES)
        check_choice("kv_dtype", self.kv_dtype, KV_DTYPES)
        check_choice("attention", self.attention, ATTENTIONS)
        check_choice("method", self.method, METHODS)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("loop", self.loop, LOOPS)
        check_choice("speculative", self.speculative, SPECULATIVE)
        check_choice("vllm_version", self.vllm_version, VLLM_VERSIONS)
        check_choice("sglang_version", self.sglang_version, SGLANG_VERSIONS)
        check_choice("gpu_arch", self.gpu_arch, GPU_ARCH_CHOICES)
        check_choice("rope_scaling", self.rope_scaling, ROPE_SCALINGS)
        self._check_rope()
        check_choice("transformers_version", self.transformers_version, TRANSFORMERS_VERSIONS)
        check_range("batch", self.batch, 1, MAX_BATCH)
        check_range("seq", self.seq, 1, MAX_SEQ)
        check_range("lora_rank", self.lora_rank, 1, 1 << 16)
        check_range("grad_accum", self.grad_accum, 1, 1 << 20)
        check_range("gpus", self.gpus, 1, MAX_GPUS)
        check_range("zero", self.zero, 0, 3)
        check_range("tp", self.tp, 1, MAX_GPUS)
        check_range("pp", self.pp, 1, MAX_GPUS)
        if self.overhead_bytes is not None:
            check_range("overhead_bytes", self.overhead_bytes, 0, 1 << 50)
        if self.max_num_seqs is not None:
            check_range("max_num_seqs", self.max_num_seqs, 1, MAX_BATCH)
        if self.max_num_batched_tokens is not None:
            check_range("max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_SEQ)
        check_range("max_loras", self.max_loras, 1, 1 << 10)
        check_range("max_lora_rank", self.max_lora_rank, 1, 1 << 16)
        check_range("num_speculative_tokens", self.num_speculative_tokens, 1, 64)
        check_range("ubatch_size", self.ubatch_size, 1, MAX_SEQ)
        check_range("batch_size", self.batch_size, 1, MAX_SEQ)
        if self.prompt is not None:
            check_range("prompt", self.prompt, 1, MAX_SEQ)
        if self.mtp and self.speculative == "draft":
            raise WorkloadError(
                Message(
                    "speculate with the model's MTP layers ({mtp}) or a draft model ({draft}), "
                    "not both",
                    mtp=Setting("mtp"),
                    draft=Setting("draft_model"),
                )
            )
        if isinstance(self.cpu_offload_gb, bool) or not 0 <= self.cpu_offload_gb < 1 << 20:
            raise WorkloadError(
                Message(
                    "{setting} must be a size in GiB, 0 or more, got {value}",
                    setting=Setting("cpu_offload_gb"),
                    value=self.cpu_offload_gb,
                )
            )
        if not MIN_MEMORY_FRACTION <= self.gpu_memory_utilization <= 1.0:
            raise WorkloadError(
                Message(
                    "{setting} must be from {low} to 1, got {value}",
                    setting=Setting("gpu_memory_utilization"),
                    low=MIN_MEMORY_FRACTION,
                    value=self.gpu_memory_utilization,
                )
            )
        fraction = self.mem_fraction_static
        if fraction is not None and not MIN_MEMORY_FRACTION <= fraction <= 1.0:
            raise WorkloadError(
                Message(
                    "{setting} must be from {low} to 1, got {value}",
                    setting=Setting("mem_fraction_static"),
                    low=MIN_MEMORY_FRACTION,
                    value=fraction,
                )
            )
        if not self.lora_targets or any(not t for t in self.lora_targets):
            raise WorkloadError(
                Message(
                    "{setting} must name at least one module, e.g. q_proj,v_proj",
                    setting=Setting("lora_targets"),
                )
            )
        if self.tp * self.pp > self.gpus:
            raise WorkloadError(
                Message(
                    "tp x pp = {stages} needs at least that many GPUs, got {gpus}",
                    stages=self.tp * self.pp,
                    gpus=Setting("gpus", self.gpus),
                )
            )
        if self.gpus % (self.tp * self.pp):
            raise WorkloadError(
                Message(
                    "{gpus} is not a multiple of tp x pp = {stages}",
                    gpus=Setting("gpus", self.gpus),
                    stages=self.tp * self.pp,
                )
            )
        if self.zero and self.fsdp:
            raise WorkloadError("choose ZeRO or FSDP, not both")
        if self.mode == "training" and self.method == "qlora" and self.precision == "fp32":
            raise WorkloadError(
                Message(
                    "{fp32} does not apply to QLoRA: its 4-bit layers compute in {dtype}; its "
                    "recipe (mixed) keeps what is not quantized in fp32, {pure} in {dtype}",
                    fp32=Setting("precision", "fp32"),
                    pure=Setting("precision", "pure"),
                    dtype=Setting("dtype"),
                )
            )
        if self.mode == "inference":
            # llama.cpp's MXFP4 is its MXFP4_MOE GGUF: --quant mxfp4 / MXFP4 name it there.
            object.__setattr__(self, "quant", engine_quant(self.engine, self.quant))
        conflicts = engine_conflicts(self.mode, self.engine, self.quant, self.kv_dtype)
        if conflicts:
            raise EngineConflictError(conflicts[0])

    def _check_rope(self) -> None:
        factor, unset = self.rope_factor, self.rope_scaling == "none"
        if isinstance(factor, bool) or not 1.0 <= factor <= MAX_ROPE_FACTOR:
            raise WorkloadError(
                Message(
                    "{setting} must be from 1 to {most:g}, got {value}",
                    setting=Setting("rope_factor"),
                    most=MAX_ROPE_FACTOR,
                    value=factor,
                )
            )
        if unset and (factor != 1.0 or self.rope_original_context is not None):
            choices = ", ".join(ROPE_SCALINGS[1:])
            raise WorkloadError(
                Message(
                    "{factor} and {original} need {scaling} ({choices})",
                    factor=Setting("rope_factor"),
                    original=Setting("rope_original_context"),
                    scaling=Setting("rope_scaling"),
                    choices=choices,
                )
            )
        if not unset and factor <= 1.0:
            raise WorkloadError(
                Message(
                    "{scaling} needs {factor} above 1 (how many times the context it stretches to)",
                    scaling=Setting("rope_scaling", self.rope_scaling),
                    factor=Setting("rope_factor"),
                )
            )
        if self.rope_original_context is not None:
            check_range("rope_original_context", self.rope_original_context, 1, MAX_SEQ)

    def check_checkpoint(self, stored: str | None) -> None:
        """Refuse a checkpoint stored as ``stored`` (``ModelSpec.quantization``) that the engine
        cannot load as it is (a GGUF file under transformers, an AWQ checkpoint under llama.cpp).

        Raises:
            EngineConflictError: the engine does not run it; the error names the engines that do.
        """
        if stored is None:
            return
        conflicts = engine_conflicts(self.mode, self.engine, self.quant, self.kv_dtype, stored)
        if conflicts:
            raise EngineConflictError(conflicts[0])

    @property
    def speculative_tokens(self) -> int:
        """Tokens vLLM proposes per step (0: no speculative decoding)."""
        return self.num_speculative_tokens if self.mtp or self.speculative == "draft" else 0

    @property
    def data_parallel(self) -> int:
        """Data-parallel replicas: GPUs not used by tensor or pipeline parallelism."""
        return self.gpus // (self.tp * self.pp)

    def with_(self, **changes: Any) -> Workload:
        """A copy with some settings changed (validated like a new one)."""
        return replace(self, **changes)

    def with_size(self, field: str, value: int) -> Workload:
        """A copy with ``batch`` or ``seq`` changed, checking only that field.

        Sweeps and solvers call this for every point; nothing else depends on these two sizes,
        so the full validation of ``with_`` would only repeat itself.
        """
        limit = _SIZE_LIMITS.get(field)
        if limit is None:
            raise ValueError(f"with_size changes batch or seq, not {field!r}")
        check_range(field, value, 1, limit)
        # Slot by slot: copy.copy of a slotted dataclass goes through __reduce_ex__ and
        # fields(), four times slower, and this runs for every point of a sweep. Both tuples
        # list the fields in one order.
        clone = _new_workload(Workload)
        for set_slot, setting in zip(_SLOT_SETTERS, _settings(self), strict=False):
            set_slot(clone, setting)
        _SIZE_SETTERS[field](clone, value)
        return clone

    def unused(self) -> frozenset[str]:
        """The settings this workload carries that do not apply to it (``core.scopes``): the
        training settings when serving, another engine's, LoRA's for a full fine-tune."""
        return scopes.unused(self.mode, self.engine, self.method)

    def applicable(self) -> Workload:
        """This workload with the settings that do not apply to it (:meth:`unused`) at their
        defaults: what is left of another mode's setup says nothing of this one."""
        defaults = Workload()
        return replace(self, **{name: getattr(defaults, name) for name in self.unused()})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict, with the CLI's option names (dashes)."""
        out = asdict(self)
        out["lora_targets"] = ",".join(self.lora_targets)
        return {k.replace("_", "-"): v for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        """Read a dict written by ``to_dict`` (or with underscores); unknown keys are ignored.

        Raises:
            WorkloadError: a value has the wrong type or is out of range.
        """
        if not isinstance(data, dict):
            raise WorkloadError("workload must be a JSON object")
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for raw_key, value in data.items():
            key = str(raw_key).replace("-", "_")
            if key not in known:
                continue
            kwargs[key] = coerce(key, value)
        return cls(**kwargs)


@dataclass(frozen=True, slots=True)
class EngineConflict:
    """A setting an inference engine does not run, and the engines that do.

    Attributes:
        setting: "quant" (the chosen quantization), "kv_dtype", or "stored" (the quantization the
            checkpoint itself is stored in).
        value: the quantization or KV dtype name.
        engine: the engine that does not run it.
        engines: the engines that do, best first.
        family: the quantization family of ``value`` ("" for a KV dtype).
    """

    setting: str
    value: str
    engine: str
    engines: tuple[str, ...]
    family: str = ""

    def message(self) -> str:
        """What is wrong and what to pick instead, in the command line's words."""
        eng = engine(self.engine)
        name = eng.name
        others = " or ".join(f"--engine {e}" for e in self.engines)
        if self.setting == "kv_dtype":
            runs = ", ".join(eng.kv_dtypes)
            return (
                f"{name} has no {self.value} KV cache: use --kv-dtype {runs.replace(', ', ' / ')}"
                f", or {others} for {self.value}"
            )
        if self.family in eng.dequantized_families:
            what = "this GGUF file" if self.setting == "stored" else f"GGUF {self.value}"
            fix = "" if self.setting == "stored" else ", or --quant none"
            return (
                f"{name} dequantizes GGUF to --dtype when it loads it, so {what} would not "
                f"keep its size: use {others}{fix}"
            )
        if self.family in eng.gguf_of_family:
            gguf = eng.gguf_of_family[self.family]
            return (
                f"{name} runs {self.value} weights as the GGUF type {gguf}: use --quant {gguf}, "
                f"or {others}"
            )
        if eng.ggml:
            what = (
                f"this checkpoint, stored as {self.value}"
                if self.setting == "stored"
                else f"--quant {self.value}"
            )
            fix = "convert the original to GGUF" if self.setting == "stored" else "use --quant"
            return (
                f"{name} runs GGUF files only, not {what}: {fix} with a GGUF type "
                f"(e.g. Q4_K_M) or none, or {others}"
            )
        return f"{name} does not run {self.value} weights: use {others}"


class EngineConflictError(WorkloadError):
    """A setting the chosen inference engine does not run (``conflict`` says which)."""

    def __init__(self, conflict: EngineConflict) -> None:
        super().__init__(conflict.message())
        self.conflict = conflict


def quant_family(name: str) -> str | None:
    """The family of a quantization name (a ``--quant`` value or a checkpoint's own scheme).

    A GGUF checkpoint may name its most common ggml type (``Q4_K``) rather than a file type.
    None: a scheme vramgui does not know, on which it has no opinion.
    """
    if name.startswith("modelopt"):
        return "modelopt"  # ModelOpt's FP8 layout (a stored format, not a --quant choice)
    if dtypes.names_ggml_type(name):
        return "gguf"
    try:
        return dtypes.get_scheme(name).family
    except WorkloadError:
        return "gguf" if name.upper() in dtypes.GGML_TYPE_SIZES else None


def served_family(quant: str, stored: str | None = None) -> str | None:
    """The quantization family the engine loads: the chosen scheme's, or under "none" the one the
    checkpoint is stored in (None: a stored scheme vramgui does not know).

    Raises:
        WorkloadError: an unknown ``quant``.
    """
    family = dtypes.get_scheme(quant).family
    if family == "none" and stored is not None:
        return quant_family(stored)
    return family


def engine_quant(engine_key: str, quant: str, stored: str | None = None) -> str:
    """The ``--quant`` the engine ``engine_key`` names runs ``quant`` as, on a checkpoint stored as ``stored``.

    llama.cpp runs MXFP4 natively, as its MXFP4_MOE GGUF (``Engine.gguf_of_family``): a checkpoint
    stored in MXFP4 under "none" (as stored), and ``--quant mxfp4`` / ``MXFP4``, become
    ``MXFP4_MOE`` there. Every other setting is run as it is.

    Raises:
        WorkloadError: an unknown quantization name.
    """
    native = engine(engine_key).gguf_of_family
    if not native:
        return quant
    return native.get(served_family(quant, stored) or "", quant)


def engine_conflicts(
    mode: str, engine_key: str, quant: str, kv_dtype: str, stored: str | None = None
) -> tuple[EngineConflict, ...]:
    """The settings the engine ``engine_key`` names does not run, when serving (training runs no
    engine).

    Args:
        mode, engine_key, quant, kv_dtype: the workload's settings.
        stored: the quantization the checkpoint is stored in (``ModelSpec.quantization``), if any.

    Raises:
        WorkloadError: an unknown quantization name or KV cache dtype.
    """
    if mode != "inference" or engine_key not in ENGINE_KEYS:
        return ()
    # A KV dtype no engine offers (a corrupt saved profile) is refused by name, not looked up.
    check_choice("kv_dtype", kv_dtype, KV_DTYPES)
    eng = engine(engine_key)
    out = []
    family = served_family(quant, stored) or "none"
    from_checkpoint = quant == "none" and stored is not None
    if not eng.loads(family):
        setting, value = ("stored", stored) if from_checkpoint else ("quant", quant)
        out.append(EngineConflict(setting, value, eng.key, _ENGINES_FOR[family], family))  # type: ignore[arg-type]
    if not eng.takes_kv(kv_dtype):
        out.append(EngineConflict("kv_dtype", kv_dtype, eng.key, _ENGINES_FOR[f"kv:{kv_dtype}"]))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Reset:
    """A setting changed because it did not carry over.

    Attributes:
        setting: "engine", "quant" or "kv_dtype".
        old: its value before.
        new: its value now.
        conflict: what the engine did not run, or None for a training method's base (QLoRA
            trains on a 4-bit base, full and LoRA fine-tuning on a 16-bit one) and for ``gguf``.
        gguf: the quantization became the GGUF type llama.cpp runs it as (``engine_quant``).
    """

    setting: str
    old: str
    new: str
    conflict: EngineConflict | None
    gguf: bool = False


_RESET_TO = {"quant": "none", "kv_dtype": "auto"}
# The 4-bit bitsandbytes schemes a QLoRA base is quantized with (as core.training accepts them).
QLORA_QUANTS = ("nf4", "fp4")


def _training_base(method: str, quant: str) -> str:
    """The quantization a training method's base takes, keeping ``quant`` where it applies."""
    if method == "qlora":
        return quant if quant in QLORA_QUANTS else METHOD_RECIPES["qlora"]["quant"]
    return "none"


def adjusted(
    current: Workload, changes: Mapping[str, Any], stored: str | None = None
) -> tuple[Workload, tuple[Reset, ...]]:
    """``current`` with ``changes``, where what the engine would not run is made to fit it.

    What the user just changed wins: a quantization or KV cache picked for an engine that does
    not run it switches the engine; a new engine (or a switch to inference) resets the settings
    that do not carry over to their defaults; in training, the quantization follows the method
    (QLoRA's 4-bit base, a 16-bit one otherwise). Each adjustment is returned, for the user to
    see.

    Args:
        current: the settings now.
        changes: the settings the user changed.
        stored: the checkpoint's own quantization (``ModelSpec.quantization``), if any.

    Raises:
        EngineConflictError: the user picked an engine that cannot run the checkpoint as stored.
        WorkloadError: the changes are invalid for another reason.
    """
    settings = {f.name: getattr(current, f.name) for f in fields(Workload)} | dict(changes)
    fixed = set(changes)
    resets: list[Reset] = []
    if settings["mode"] == "training" and "quant" not in fixed:
        # The base a training method trains on: what served inference does not carry over.
        base = _training_base(settings["method"], settings["quant"])
        if base != settings["quant"]:
            resets.append(Reset("quant", settings["quant"], base, None))
            settings["quant"] = base
    # Each round settles one conflict; the engine switches at most once and each setting resets
    # at most once, so a few rounds always suffice.
    for _ in range(4):
        if settings["mode"] == "inference":
            served = engine_quant(settings["engine"], settings["quant"], stored)
            if served != settings["quant"]:
                resets.append(Reset("quant", settings["quant"], served, None, gguf=True))
                settings["quant"] = served
        found = engine_conflicts(
            settings["mode"], settings["engine"], settings["quant"], settings["kv_dtype"], stored
        )
        if not found:
            break
        conflict = found[0]
        setting = "quant" if conflict.setting == "stored" else conflict.setting
        pinned = conflict.setting == "stored" or setting in fixed
        if pinned and "engine" in fixed:
            raise EngineConflictError(conflict)
        if pinned:
            new = conflict.engines[0]
            resets.append(Reset("engine", settings["engine"], new, conflict))
            settings["engine"] = new
            fixed.add("engine")
        else:
            resets.append(Reset(setting, settings[setting], _RESET_TO[setting], conflict))
            settings[setting] = _RESET_TO[setting]
            fixed.add(setting)
    return Workload(**settings), tuple(resets)


def transformers_release(version: str) -> str:
    """The release of ``TRANSFORMERS_VERSIONS`` whose rules a transformers version follows: the
    latest not above it ("4.48.1" -> "4.46"; the oldest for anything older).

    Raises:
        WorkloadError: not a version number.
    """
    try:
        wanted = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        raise WorkloadError(f"not a transformers version: {shown(version)}") from None
    known = [v for v in TRANSFORMERS_VERSIONS if tuple(map(int, v.split("."))) <= wanted]
    return known[-1] if known else TRANSFORMERS_VERSIONS[0]


def default_engine(quant: str, stored: str | None = None) -> str:
    """The engine that runs a quantization (and a checkpoint stored as ``stored``) as it is."""
    family = served_family(quant, stored)
    return _ENGINES_FOR[family][0] if family in _ENGINES_FOR else "transformers"


_SIZE_LIMITS = {"batch": MAX_BATCH, "seq": MAX_SEQ}
_new_workload = object.__new__
# Setters of Workload's slots (past the frozen __setattr__) and a getter of every setting, in the
# same order.
_SLOT_SETTERS = tuple(Workload.__dict__[f.name].__set__ for f in fields(Workload))
_SIZE_SETTERS = {name: Workload.__dict__[name].__set__ for name in _SIZE_LIMITS}
_settings = attrgetter(*(f.name for f in fields(Workload)))
