"""The counts tools/build_architectures.py stored from transformers, and the bare config of each
table key, shared by the tests that read them."""

from __future__ import annotations

import json
from pathlib import Path

EXPECTED: dict = json.loads(
    (Path(__file__).resolve().parent / "data" / "architectures" / "expected.json").read_text()
)["types"]


def bare(key: str) -> dict:
    """The bare config of a table key: ``model_type`` or ``model_type:Class``."""
    model_type, _, class_name = key.partition(":")
    return {"model_type": model_type, **({"architectures": [class_name]} if class_name else {})}
