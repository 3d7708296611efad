"""The published engine logs of tests/data/logs, with where each comes from (sources.json)."""

import json
from pathlib import Path

LOGS = Path(__file__).resolve().parent / "data" / "logs"
SOURCES: dict[str, dict] = json.loads((LOGS / "sources.json").read_text(encoding="utf-8"))


def text(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")
