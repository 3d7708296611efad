"""What the measurements of each architecture say (validation.json, written by
benchmarks/architectures.py): how far the inference peak was from transformers' own code at the
shapes and sizes measured, and which shapes and sizes those were."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True, slots=True)
class Checked:
    """The shapes and sizes one architecture's inference peak was measured at."""

    seq: tuple[int, int]  # shortest and longest prompt
    batch: int  # the largest batch
    hidden: tuple[int, ...]  # the widths of the configs measured
    worst_error: float
    worst_shape: tuple[int, int]

    def outside(self, batch: int, seq: int, hidden: int, experts: bool = False) -> list[str]:
        """What of a workload lies outside the measured range, in words (empty: nothing);
        ``experts``: the model has mixture-of-experts blocks the measured configs had none of."""
        out = ["a mixture-of-experts block"] if experts else []
        low, high = self.seq
        if not low <= seq <= high:
            out.append(f"a {seq:,}-token prompt")
        if batch > self.batch:
            out.append(f"batch {batch}")
        if self.hidden and not min(self.hidden) <= hidden <= max(self.hidden):
            out.append(f"a hidden size of {hidden:,}")
        return out

    def described(self) -> str:
        """The measured range in words."""
        text = f"prompts of {self.seq[0]:,} to {self.seq[1]:,} tokens, batches up to {self.batch}"
        if self.hidden:
            low, high = min(self.hidden), max(self.hidden)
            text += (
                f", hidden sizes {low:,} to {high:,}" if low != high else f", hidden size {low:,}"
            )
        return text


@cache
def _validation() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("validation.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def checked(model_type: str) -> Checked | None:
    """The measured range of this architecture, or None if it was not measured."""
    entry = _validation()["types"].get(model_type)
    if not entry or not entry.get("seq"):
        return None
    return Checked(
        seq=(entry["seq"][0], entry["seq"][1]),
        batch=entry["batch"],
        hidden=tuple(entry.get("hidden", ())),
        worst_error=entry["worst_error"],
        worst_shape=(entry["worst_shape"][0], entry["worst_shape"][1]),
    )


def measured_miss(model_type: str) -> str | None:
    """How far this architecture's inference peak was from transformers' own code when
    benchmarks/architectures.py last measured it, where beyond its tolerance; else None."""
    c = checked(model_type)
    if c is None or abs(c.worst_error) <= _validation()["tolerance"]:
        return None
    batch, seq = c.worst_shape
    return (
        f"measured against transformers' own code, this architecture's inference peak was "
        f"{c.worst_error:+.0%} off (batch {batch} x {seq:,} tokens, {_validation()['dtype']})"
    )


@cache
def measured_without_experts(model_type: str) -> bool:
    """Whether this architecture's measurements, made on its default config and sizes of it,
    had no mixture-of-experts blocks (Gemma 4's default is dense; its experts are a switch)."""
    from vramgui.core.errors import ConfigError
    from vramgui.core.families import spec_from_config

    try:
        return not spec_from_config({"model_type": model_type}).facts.num_experts
    except ConfigError:
        return True
