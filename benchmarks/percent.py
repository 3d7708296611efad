"""Signed percentages for the accuracy tables: "+1.2%", "-0.4%", and "0.00%" for an error that
rounds to nothing (Python writes a tiny negative one as "-0.00%")."""

from __future__ import annotations


def signed(value: float, digits: int) -> str:
    """``value`` (a fraction) as a percentage with its sign and ``digits`` decimals; one that
    rounds to zero has no sign."""
    text = f"{value:+.{digits}%}"
    return text[1:] if float(text[:-1]) == 0 else text
