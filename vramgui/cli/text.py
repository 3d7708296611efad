"""Plain-text tables for the command line's human output, and text from files made safe to
print."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

# What an approximate estimate says of itself, after its figures.
APPROXIMATE = (
    "approximate: part of this model was guessed (the notes below say which part); its figures "
    "may be off by more than they show"
)


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


class SafeStream:
    """A text stream for the terminal: every control or format character but newline is written
    escaped, and what the stream's encoding cannot hold (a name in CJK on a cp1252
    console, output redirected on Windows) as a backslash escape instead of UnicodeEncodeError.

    The one place every line of text output passes: whatever a table, note or message quotes
    from a file, it cannot drive the terminal. (A name's own newline is escaped where the name
    is printed: ``printable``.)
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._encoding = getattr(inner, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        safe = "\n".join(printable(part) for part in text.split("\n"))
        try:
            safe.encode(self._encoding)
        except UnicodeEncodeError:
            safe = safe.encode(self._encoding, "backslashreplace").decode(self._encoding)
        except LookupError:  # an encoding Python does not know: ASCII holds everything escaped
            safe = safe.encode("ascii", "backslashreplace").decode("ascii")
        self._inner.write(safe)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


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


def model_line(model: dict[str, Any]) -> str:
    """A document's model as a heading: name, architecture, parameters (an approximate count is
    said to be one) and the format its checkpoint is stored in, if it is quantized."""
    count = f"{model['parameters']:,} parameters"
    if model.get("inventory") == "approximate":
        count = f"about {count}, approximate"
    stored = model.get("stored_format")
    return f"{printable(model['name'])}  ({printable(model['architecture'])}, {count}" + (
        f"; stored as {printable(stored)})" if stored else ")"
    )


def is_approximate(doc: dict[str, Any]) -> bool:
    return bool(doc.get("model", {}).get("inventory") == "approximate")


def note_lines(doc: dict[str, Any]) -> list[str]:
    """A document's notices and notes (the model's warnings first among them: what an
    approximate estimate guessed), one ``note:`` line each, as every table ends."""
    return [f"note: {note}" for note in [*doc.get("notices", []), *doc["notes"]]]
