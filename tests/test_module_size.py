"""No core module over 800 lines: a module that grows past it holds more than one concern and is
split by concern (as core/vllm/ and core/training/work.py were), not trimmed of its comments."""

from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "vramgui" / "core"
MAX_LINES = 800


def test_no_core_module_is_over_800_lines():
    lengths = {
        str(path.relative_to(CORE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in CORE.rglob("*.py")
    }
    assert len(lengths) > 50  # the walk found the package
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"split these by concern: {too_long}"
