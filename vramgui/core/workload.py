"""Workload: what the user wants to do with the model (serve it, or train it) and on how many GPUs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from operator import attrgetter
from typing import Any

from vramgui.core.errors import WorkloadError

MODES = ("inference", "training")
DTYPES = ("fp32", "fp16", "bf16")
ENGINES = ("transformers", "vllm", "llamacpp")
KV_DTYPES = ("auto", "fp32", "fp16", "bf16", "fp8", "q8_0", "q4_0")
ATTENTIONS = ("eager", "sdpa", "flash")
METHODS = ("full", "lora", "qlora")
PRECISIONS = ("mixed", "pure", "fp32")
OPTIMIZERS = ("adamw", "adamw-fused", "adamw-8bit", "sgd", "adafactor", "lion")
# trainer: transformers' Trainer drops the model's outputs once it has the loss; custom: the loop
# of tutorials and accelerate's examples keeps ``outputs`` (the logits) through backward.
LOOPS = ("trainer", "custom")
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")

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
        engine: inference engine whose allocation behaviour to follow.
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

    def __post_init__(self) -> None:
        _check_choice("mode", self.mode, MODES)
        _check_choice("dtype", self.dtype, DTYPES)
        _check_choice("engine", self.engine, ENGINES)
        _check_choice("kv-dtype", self.kv_dtype, KV_DTYPES)
        _check_choice("attention", self.attention, ATTENTIONS)
        _check_choice("method", self.method, METHODS)
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        _check_choice("loop", self.loop, LOOPS)
        _check_range("batch", self.batch, 1, MAX_BATCH)
        _check_range("seq", self.seq, 1, MAX_SEQ)
        _check_range("lora-rank", self.lora_rank, 1, 1 << 16)
        _check_range("grad-accum", self.grad_accum, 1, 1 << 20)
        _check_range("gpus", self.gpus, 1, MAX_GPUS)
        _check_range("zero", self.zero, 0, 3)
        _check_range("tp", self.tp, 1, MAX_GPUS)
        _check_range("pp", self.pp, 1, MAX_GPUS)
        if self.overhead_bytes is not None:
            _check_range("overhead", self.overhead_bytes, 0, 1 << 50)
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise WorkloadError(
                f"gpu-memory-utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if not self.lora_targets or any(not t for t in self.lora_targets):
            raise WorkloadError("lora-targets must name at least one module, e.g. q_proj,v_proj")
        if self.tp * self.pp > self.gpus:
            raise WorkloadError(
                f"tp x pp = {self.tp * self.pp} needs at least that many GPUs, got --gpus {self.gpus}"
            )
        if self.gpus % (self.tp * self.pp):
            raise WorkloadError(
                f"--gpus {self.gpus} is not a multiple of tp x pp = {self.tp * self.pp}"
            )
        if self.zero and self.fsdp:
            raise WorkloadError("choose ZeRO or FSDP, not both")

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
        _check_range(field, value, 1, limit)
        # Slot by slot: copy.copy of a slotted dataclass goes through __reduce_ex__ and
        # fields(), four times slower, and this runs for every point of a sweep. Both tuples
        # list the fields in one order.
        clone = _new_workload(Workload)
        for set_slot, setting in zip(_SLOT_SETTERS, _settings(self), strict=False):
            set_slot(clone, setting)
        _SIZE_SETTERS[field](clone, value)
        return clone

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
            kwargs[key] = _coerce(key, value)
        return cls(**kwargs)


_SIZE_LIMITS = {"batch": MAX_BATCH, "seq": MAX_SEQ}
_new_workload = object.__new__
# Setters of Workload's slots (past the frozen __setattr__) and a getter of every setting, in the
# same order.
_SLOT_SETTERS = tuple(Workload.__dict__[f.name].__set__ for f in fields(Workload))
_SIZE_SETTERS = {name: Workload.__dict__[name].__set__ for name in _SIZE_LIMITS}
_settings = attrgetter(*(f.name for f in fields(Workload)))

_INT_FIELDS = {"batch", "seq", "lora_rank", "grad_accum", "gpus", "zero", "tp", "pp"}
_BOOL_FIELDS = {"grad_checkpointing", "fsdp", "cpu_offload"}


def _coerce(key: str, value: Any) -> Any:
    if key == "lora_targets":
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        if isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
            return tuple(value)
        raise WorkloadError("lora-targets must be a comma-separated string or a list of names")
    if key in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError(f"{key.replace('_', '-')} must be an integer, got {value!r}")
        return value
    if key in _BOOL_FIELDS:
        if not isinstance(value, bool):
            raise WorkloadError(f"{key.replace('_', '-')} must be true or false, got {value!r}")
        return value
    if key == "overhead_bytes":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError(f"overhead-bytes must be an integer, got {value!r}")
        return value
    if key == "gpu_memory_utilization":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WorkloadError(f"gpu-memory-utilization must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise WorkloadError(f"{key.replace('_', '-')} must be a string, got {value!r}")
    return value


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise WorkloadError(f"--{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(f"--{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise WorkloadError(f"--{name} must be between {low} and {high:,}, got {value:,}")
