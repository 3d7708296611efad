"""Plain-text tables for the command line's human output, and text from files made safe to
print."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence


def printable(text: str) -> str:
    """``text`` with its control and format characters escaped (``\\x1b``, ``\\n``,
    ``\\u202e``): a name read from a file or a folder (an Ollama model, a config's name) never
    moves the cursor, recolours or clears the terminal, or starts a line of its own."""
    if text.isprintable():
        return text
    return "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c)[0] == "C" else c
        for c in text
    )


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """Left-aligned columns two spaces apart, as wide as their widest cell; every cell printable."""
    header = tuple(printable(cell) for cell in header)
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)
