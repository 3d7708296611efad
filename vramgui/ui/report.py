"""The current estimate as text for people and as the CLI's JSON document, for the clipboard.

The JSON is the command line's document, built by the same answer
(``answers.documents.estimate_json``), so that both front ends give one contract.
"""

from __future__ import annotations

import json
from typing import Any

from vramgui.core.model import Inventory
from vramgui.core.units import Unit, format_bytes
from vramgui.ui.controller import Analysis
from vramgui.ui.palette import component_label


def as_json(document: dict[str, Any]) -> str:
    """``document`` as ``vramgui estimate --json`` prints it, to the last newline."""
    return json.dumps(document, indent=2) + "\n"


def title_lines(analysis: Analysis, unit: Unit) -> list[str]:
    """The model and setup, then the peak: the head of the text and the title of an exported
    chart."""
    est = analysis.estimate
    w = est.workload
    what = (
        f"inference, batch {w.batch}, context {w.seq:,}, {w.engine}"
        if w.mode == "inference"
        else f"training ({w.method}, {w.optimizer}), batch {w.batch}, sequence {w.seq:,}"
    )
    quant = "" if w.quant == "none" else f", {w.quant}"
    about = "about " if analysis.spec.inventory is Inventory.APPROXIMATE else ""
    return [
        f"{est.model_name}: {what}, {w.dtype}{quant}, {w.gpus} GPU(s)",
        f"Peak per GPU: {about}{format_bytes(est.total_bytes, unit)} ({est.phase})",
    ]


def as_text(analysis: Analysis, unit: Unit) -> str:
    """A plain-text table a person can paste into a chat or an issue."""
    est = analysis.estimate
    lines = [*title_lines(analysis, unit), f"Model inventory: {analysis.spec.inventory.value}"]
    width = max(len(component_label(name)) for name in est.components) if est.components else 0
    for name, size in est.components.items():
        lines.append(f"  {component_label(name):<{width}}  {format_bytes(size, unit):>12}")
    for row in analysis.fit:
        verdict = "fits" if row.fits else "does not fit"
        lines.append(
            f"{row.gpu} ({format_bytes(row.capacity_bytes, unit)}): {verdict}, "
            f"headroom {format_bytes(row.headroom_bytes, unit)}"
        )
    lines.extend(f"Note: {note}" for note in est.notes)
    return "\n".join(lines)
