"""llama.cpp's tensor overrides: ``--override-tensor PATTERN=DEVICE``, ``--cpu-moe`` and
``--n-cpu-moe N`` as its command line spells them (``common/arg.cpp``, ``common/common.h``).

An override moves every tensor whose GGUF name a regular expression finds (``std::regex_search``)
to a buffer type, whatever layer the tensor belongs to; the first pattern that matches wins
(``llama_model_loader::create_tensor``). ``--cpu-moe`` is the pattern
``\\.ffn_(up|down|gate|gate_up)_(ch|)exps`` to the CPU; ``--n-cpu-moe N`` is the same pattern
prefixed with ``blk\\.i`` for each of the first N layers. The KV cache of a layer stays with the
layer's device whatever its tensors do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.offload.devices import CPU, gpu_device

# common/common.h: LLM_FFN_EXPS_REGEX and LLM_FFN_DENSE_REGEX.
FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."
# Buffer-type names of GPU backends as llama.cpp prints them: CUDA0, ROCm1, Vulkan0, SYCL0...
_GPU_BUFFER = re.compile(r"^(CUDA|ROCm|Vulkan|SYCL|CANN|MUSA|OpenCL|RPC)(\d+)$")
# A pattern longer than this is a typing mistake, and a regular expression that long costs time.
_MAX_PATTERN = 2000


@dataclass(frozen=True, slots=True)
class TensorOverride:
    """One ``PATTERN=DEVICE`` pair.

    Attributes:
        pattern: the regular expression searched in each GGUF tensor name.
        device: ``cpu`` or ``gpu:i``.
        buffer: the buffer type as llama.cpp names it (``CPU``, ``CUDA1``): the launch line's.
    """

    pattern: str
    device: str
    buffer: str

    def matches(self, name: str) -> bool:
        return _compiled(self.pattern).search(name) is not None

    @property
    def text(self) -> str:
        return f"{self.pattern}={self.buffer}"


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _CACHE.get(pattern)
    if found is None:
        found = _CACHE[pattern] = re.compile(pattern)
    return found


def buffer_device(buffer: str) -> str:
    """The device of a llama.cpp buffer-type name: ``CPU`` -> ``cpu``, ``CUDA1`` -> ``gpu:1``.

    Raises:
        WorkloadError: a name llama.cpp would not know.
    """
    if buffer == "CPU":
        return CPU
    if buffer == "Metal":
        return gpu_device(0)
    match = _GPU_BUFFER.match(buffer)
    if match is None:
        raise WorkloadError(
            f"unknown buffer type {buffer!r}: llama.cpp names them CPU, CUDA0, CUDA1... "
            "(ROCm0, Vulkan0, Metal on other backends)"
        )
    return gpu_device(int(match.group(2)))


def parse_overrides(text: str) -> tuple[TensorOverride, ...]:
    """``--override-tensor`` as llama.cpp reads it: ``PATTERN=BUFFER`` pairs separated by commas.

    Raises:
        WorkloadError: a pair without ``=``, an empty or invalid pattern, an unknown buffer type.
    """
    out = []
    for pair in text.split(","):
        pattern, sep, buffer = pair.rpartition("=")
        if not sep or not pattern:
            raise WorkloadError(
                Message(
                    "{setting} takes PATTERN=DEVICE pairs (exps=CPU), got {pair!r}",
                    setting=Setting("overrides"),
                    pair=pair,
                )
            )
        out.append(override(pattern, buffer))
    return tuple(out)


def override(pattern: str, buffer: str) -> TensorOverride:
    """One override, its pattern checked.

    Raises:
        WorkloadError: an invalid or overlong pattern, an unknown buffer type.
    """
    if len(pattern) > _MAX_PATTERN:
        raise WorkloadError(f"an override pattern is {len(pattern):,} characters long; too long")
    try:
        _compiled(pattern)
    except re.error as exc:
        raise WorkloadError(
            f"override pattern {pattern!r} is not a regular expression: {exc}"
        ) from None
    return TensorOverride(pattern, buffer_device(buffer), buffer)


def _negative(setting: str, value: int) -> Message:
    return Message(
        "{setting} must be 0 or more, got {value}", setting=Setting(setting), value=value
    )


def cpu_moe() -> tuple[TensorOverride, ...]:
    """``--cpu-moe``: every layer's routed experts in host memory."""
    return (TensorOverride(FFN_EXPS_REGEX, CPU, "CPU"),)


def n_cpu_moe(n: int) -> tuple[TensorOverride, ...]:
    """``--n-cpu-moe N``: the routed experts of layers 0 to N - 1 in host memory.

    Raises:
        WorkloadError: a negative count.
    """
    return _first_layers(n, FFN_EXPS_REGEX, "n_cpu_moe")


def n_cpu_ffn(n: int) -> tuple[TensorOverride, ...]:
    """``--n-cpu-ffn N``: the dense feed-forward weights of layers 0 to N - 1 in host memory.

    Raises:
        WorkloadError: a negative count.
    """
    return _first_layers(n, FFN_DENSE_REGEX, "n_cpu_ffn")


def _first_layers(n: int, regex: str, setting: str) -> tuple[TensorOverride, ...]:
    if n < 0:
        raise WorkloadError(_negative(setting, n))
    return tuple(TensorOverride(rf"blk\.{i}{regex}", CPU, "CPU") for i in range(n))


def device_of(name: str, overrides: tuple[TensorOverride, ...]) -> str | None:
    """The device the first matching override gives tensor ``name``, or None."""
    for o in overrides:
        if o.matches(name):
            return o.device
    return None


SPLIT_MODES = ("layer", "row", "none")


@dataclass(frozen=True, slots=True)
class LlamaCppLayout:
    """What llama.cpp is told about placement besides ``-ngl``.

    Attributes:
        overrides: ``--override-tensor`` pairs in command-line order.
        cpu_moe: ``--cpu-moe``: every layer's routed experts in host memory.
        n_cpu_moe: ``--n-cpu-moe N``: the routed experts of the first N layers in host memory.
        tensor_split: ``--tensor-split`` proportions, one per GPU; empty: in proportion to each
            GPU's memory (llama.cpp splits by free memory when none is given).
        split_mode: ``--split-mode``: ``layer`` (whole layers per GPU, each with its KV cache and
            compute buffer), ``row`` (every matrix shared out by rows; the KV cache, the other
            tensors and the compute buffer on the main GPU) or ``none`` (the main GPU only).
        main_gpu: ``--main-gpu``, for ``row`` and ``none``.
        kv_offload: False keeps the KV cache in host memory (``--no-kv-offload``).
        op_offload: False keeps the products of weights in host memory on the CPU whatever the
            batch (``--no-op-offload``); by default the GPU takes those of 32 tokens or more,
            copying the weight into its compute buffer.
    """

    overrides: tuple[TensorOverride, ...] = ()
    cpu_moe: bool = False
    n_cpu_moe: int = 0
    tensor_split: tuple[float, ...] = ()
    split_mode: str = "layer"
    main_gpu: int = 0
    kv_offload: bool = True
    op_offload: bool = True

    def __post_init__(self) -> None:
        if self.split_mode not in SPLIT_MODES:
            raise WorkloadError(
                Message(
                    "{setting} must be one of {modes}, got {value!r}",
                    setting=Setting("split_mode"),
                    modes=", ".join(SPLIT_MODES),
                    value=self.split_mode,
                )
            )
        if self.n_cpu_moe < 0:
            raise WorkloadError(_negative("n_cpu_moe", self.n_cpu_moe))
        if self.main_gpu < 0:
            raise WorkloadError(_negative("main_gpu", self.main_gpu))
        if any(not 0 <= share < 1e9 for share in self.tensor_split) or (
            self.tensor_split and not sum(self.tensor_split) > 0
        ):
            raise WorkloadError(
                Message(
                    "{setting} takes proportions of 0 or more, at least one above 0 (3,1)",
                    setting=Setting("tensor_split"),
                )
            )

    @property
    def moves_experts(self) -> bool:
        """Whether routed experts are kept in host memory by ``--cpu-moe`` or ``--n-cpu-moe``."""
        return self.cpu_moe or self.n_cpu_moe > 0

    def device_of(self, name: str, layer: int | None) -> str | None:
        """Where the overrides send tensor ``name`` of block ``layer`` (None: nowhere special).

        The command line's order: ``-ot`` pairs, then ``--cpu-moe``, then ``--n-cpu-moe``; the
        first that matches wins. The last two are matched by layer and name, as their patterns
        would.
        """
        if self.overrides:
            found = device_of(name, self.overrides)
            if found is not None:
                return found
        moved = self.cpu_moe or (layer is not None and layer < self.n_cpu_moe)
        if moved and _is_routed_expert(name):
            return CPU
        return None


_ROUTED: dict[str, bool] = {}


def _is_routed_expert(name: str) -> bool:
    found = _ROUTED.get(name)
    if found is None:
        if len(_ROUTED) > 100_000:
            _ROUTED.clear()
        found = _ROUTED[name] = _compiled(FFN_EXPS_REGEX).search(name) is not None
    return found


def parse_tensor_split(text: str) -> tuple[float, ...]:
    """``--tensor-split`` as llama.cpp reads it: proportions separated by commas or slashes.

    Raises:
        WorkloadError: a value that is not a number.
    """
    try:
        return tuple(float(v) for v in re.split(r"[,/]+", text.strip()) if v)
    except ValueError:
        raise WorkloadError(
            Message(
                "{setting} takes proportions such as 3,1; got {text!r}",
                setting=Setting("tensor_split"),
                text=text,
            )
        ) from None
