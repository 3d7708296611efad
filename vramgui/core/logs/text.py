"""A pasted log made plain: escape sequences out, prefixes off, wrapped lines joined, sizes read."""

from __future__ import annotations

import re

from vramgui.core.units import GB, GiB, MiB

# The most of a log that is read: start-up lines come first, and a megabyte of noise after them
# should cost no more than reading a megabyte.
MAX_CHARS = 4_000_000
MAX_LINE = 20_000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Prefixes other programs put before a line: journald ("Jul 24 21:50:02 host ollama[123]: "),
# docker compose ("ollama  | "), llama.cpp's own timestamp ("0.00.612.795 I "), LLamaSharp
# ("[llama Info]: "), a process id in brackets ("[47161] ").
_PREFIXES = (
    re.compile(r"^[A-Za-zéû.]{3,6} +\d{1,2} \d\d:\d\d:\d\d \S+ [\w.-]+\[\d+\]: ?"),
    re.compile(r"^[\w.-]+ +\| "),
    re.compile(r"^\[\d+\] "),
    re.compile(r"^\d+\.\d\d\.\d\d\d\.\d\d\d [DIWE] "),
    re.compile(r"^\[llama \w+\]: "),
)

_UNITS = {
    "b": 1,
    "bytes": 1,
    "kib": 1024,
    "kb": 1000,
    "mib": MiB,
    "mb": 1000**2,
    "gib": GiB,
    "gb": GB,
    "tib": 1024**4,
    "tb": 1000**4,
}
SIZE = r"(\d+(?:\.\d+)?)\s*(TiB|GiB|MiB|KiB|TB|GB|MB|KB|bytes|B)\b"
_SIZE = re.compile(SIZE)


def size_bytes(number: str, unit: str) -> int:
    """``"13.9", "GiB"`` -> bytes."""
    return round(float(number) * _UNITS[unit.lower()])


def parse_size(text: str) -> int | None:
    """The first size in ``text`` ("11.5 GiB", "0 B", "8.23 GB"), or None."""
    match = _SIZE.search(text)
    return size_bytes(match.group(1), match.group(2)) if match else None


def without_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (colours, cursor moves, titles): what a log box
    shows of a log copied from a terminal."""
    return _ANSI.sub("", text)


def plain_lines(text: str) -> list[str]:
    """The log's lines, without escape sequences, control characters and other programs'
    prefixes, with lines that journald or a reporter wrapped joined again; a line is at most
    ``MAX_LINE`` characters."""
    text = without_escapes(text[:MAX_CHARS]).replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    for raw in text.split("\n"):
        line = _CONTROL.sub("", raw)[:MAX_LINE]
        for prefix in _PREFIXES:
            line = prefix.sub("", line, count=1)
        if out and _continues(out[-1], line):
            out[-1] = out[-1] + " " + line.strip()
            continue
        out.append(line.rstrip())
    return out


def _continues(previous: str, line: str) -> bool:
    """Whether ``line`` is the rest of ``previous``, broken by a reporter or a pager: an indented
    line after an open quote or starting with a key=value, or any line after an Ollama line cut
    right after its ``source=`` or ``msg=offload``."""
    if not line.strip():
        return False
    if line.startswith(" ") and (
        previous.count('"') % 2 == 1 or (re.match(r"\s+[\w.]+=", line) and "=" in previous)
    ):
        return True
    return previous.endswith("msg=offload") or re.search(r" source=\S+$", previous) is not None
