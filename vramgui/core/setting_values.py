"""A setting's value checked: against its choices or its range, and a saved workload's values
read by their kind (an integer, a switch, a number...), each refusal naming the setting."""

from __future__ import annotations

from typing import Any

from vramgui.core.errors import Message, Setting, WorkloadError, shown

_INT_FIELDS = {
    "batch",
    "seq",
    "lora_rank",
    "grad_accum",
    "gpus",
    "zero",
    "tp",
    "pp",
    "max_loras",
    "max_lora_rank",
    "num_speculative_tokens",
    "ubatch_size",
    "batch_size",
}
_OPTIONAL_INT_FIELDS = {
    "overhead_bytes",
    "max_num_seqs",
    "max_num_batched_tokens",
    "prompt",
    "rope_original_context",
}
_FLOAT_FIELDS = {"gpu_memory_utilization", "cpu_offload_gb", "rope_factor"}
_BOOL_FIELDS = {
    "grad_checkpointing",
    "fsdp",
    "cpu_offload",
    "enforce_eager",
    "enable_lora",
    "mtp",
}
_OPTIONAL_BOOL_FIELDS = {"enable_prefix_caching"}
_OPTIONAL_FLOAT_FIELDS = {"mem_fraction_static"}


def coerce(key: str, value: Any) -> Any:
    """A saved workload's value of setting ``key`` as the setting takes it.

    Raises:
        WorkloadError: a value of the wrong kind.
    """
    if key == "lora_targets":
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        if isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
            return tuple(value)
        raise WorkloadError(
            Message(
                "{setting} must be a comma-separated string or a list of names",
                setting=Setting("lora_targets"),
            )
        )
    if key in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError(_not_a(key, "an integer", value))
        return value
    if key in _BOOL_FIELDS:
        if not isinstance(value, bool):
            raise WorkloadError(_not_a(key, "true or false", value))
        return value
    if key in _OPTIONAL_BOOL_FIELDS:
        if value is not None and not isinstance(value, bool):
            raise WorkloadError(_not_a(key, "true, false or null", value))
        return value
    if key in _OPTIONAL_INT_FIELDS:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError(_not_a(key, "an integer", value))
        return value
    if key in _OPTIONAL_FLOAT_FIELDS and value is None:
        return None
    if key in _FLOAT_FIELDS | _OPTIONAL_FLOAT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WorkloadError(_not_a(key, "a number", value))
        return float(value)
    if not isinstance(value, str):
        raise WorkloadError(_not_a(key, "a string", value))
    return value


def _not_a(key: str, kind: str, value: object) -> Message:
    """A setting of a saved workload that holds a value of the wrong kind."""
    return Message(
        "{setting} must be {kind}, got {value}", setting=Setting(key), kind=kind, value=shown(value)
    )


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """Refuse a ``value`` of setting ``name`` that is not one of ``choices``."""
    if value not in choices:
        raise WorkloadError(
            Message(
                "{setting} must be one of {choices}; got {value}",
                setting=Setting(name),
                choices=", ".join(choices),
                value=shown(value),
            )
        )


def check_range(name: str, value: int, low: int, high: int) -> None:
    """Refuse a ``value`` of setting ``name`` that is not an integer from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(
            Message(
                "{setting} must be an integer, got {value!r}", setting=Setting(name), value=value
            )
        )
    if not low <= value <= high:
        raise WorkloadError(
            Message(
                "{setting} must be between {low} and {high:,}, got {value:,}",
                setting=Setting(name),
                low=low,
                high=high,
                value=value,
            )
        )
