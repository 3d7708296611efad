"""Real model configs (tests/data/families/configs.json) as ModelSpecs, shared by core tests."""

import json
from functools import cache
from pathlib import Path

import pytest

from vramgui.core.families import spec_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "families" / "configs.json"


@cache
def _configs() -> dict:
    return json.loads(CONFIGS.read_text(encoding="utf-8"))


@pytest.fixture
def real_spec():
    def make(hub_id: str):
        return spec_from_config(_configs()[hub_id], hub_id)

    return make
