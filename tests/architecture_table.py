"""The counts tools/build_architectures.py and benchmarks/parameter_counts.py stored from
transformers, and the bare config of each table key, shared by the tests that read them."""

from __future__ import annotations

import json
from pathlib import Path

_DATA = Path(__file__).resolve().parent / "data" / "architectures"
EXPECTED: dict = json.loads((_DATA / "expected.json").read_text())["types"]
# Configs of every type at sizes the table was not learned at, and real published ones.
HELD_OUT: list = json.loads((_DATA / "held_out.json").read_text())["cases"]
# One attribute of each type's default config changed alone (benchmarks/perturbed_counts.py).
PERTURBED: list = json.loads((_DATA / "perturbed.json").read_text())["cases"]


def bare(key: str) -> dict:
    """The bare config of a table key: ``model_type`` or ``model_type:Class``."""
    model_type, _, class_name = key.partition(":")
    return {"model_type": model_type, **({"architectures": [class_name]} if class_name else {})}
