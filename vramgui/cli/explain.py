"""``vramgui explain LOG``: what an engine's log printed, beside the estimate, and what to change."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.text import printable, table
from vramgui.core.errors import VramguiError
from vramgui.core.units import format_bytes

if TYPE_CHECKING:
    from vramgui.answers.explain import Explanation

# A log is read up to this many bytes: start-up lines come first.
MAX_BYTES = 4_000_000


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help=SUBCOMMANDS["explain"], description=SUBCOMMANDS["explain"])
    p.add_argument(
        "log", help="the log file (llama.cpp, Ollama, vLLM, SGLang, a PyTorch OOM); - for stdin"
    )
    p.add_argument("--json", action="store_true", help="print the vramgui.explain/1 document")
    p.add_argument("--model", help="the model, when the log names none vramgui knows")
    p.add_argument("--gpu", help="the GPU (catalog name), when the log prints no capacity")
    p.add_argument("--quant", help="the checkpoint's quantization, when the log hides it")
    p.set_defaults(run=run)


class LogFileError(VramguiError):
    """The log file cannot be read."""


def read_text(path: str) -> str:
    """The first ``MAX_BYTES`` of the file (or standard input), decoded leniently."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_BYTES)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_BYTES)
    except OSError as exc:
        raise LogFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    return data.decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    from vramgui.answers.explain import explain_text, to_json

    result = explain_text(
        read_text(args.log),
        model_name=args.model or "",
        gpu=args.gpu or "",
        quant=args.quant or "",
    )
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        print(render(result))
    return 0


def render(e: Explanation) -> str:
    """The explanation as text, every string from the log made printable."""
    from vramgui.answers.explain import (
        DIFFERENCE_MEANING,
        accuracy_text,
        advice_text,
        device_label,
        difference_text,
        shown_settings,
    )
    from vramgui.core.logs import component_label

    s = e.setup
    out = [
        f"Engine: {s.engine_name}" + (f" {printable(s.engine_version)}" if s.engine_version else "")
    ]
    if e.model_name:
        out.append(
            f"Model: {printable(e.model_name)}" + (f" ({e.model_source})" if e.model_source else "")
        )
    if settings := shown_settings(e):
        out.append("Settings: " + ", ".join(f"{k}={printable(v)}" for k, v in settings))
    if s.assumed:
        out.append(f"Assumed (not in the log; the engine's default): {', '.join(s.assumed)}")
    if e.components:
        rows = [
            (
                component_label(r.name),
                printable(device_label(r.device)),
                format_bytes(r.logged_bytes),
                "not estimated" if r.estimated_bytes is None else format_bytes(r.estimated_bytes),
                difference_text(r),
                ("! " if r.flagged else "") + accuracy_text(r),
            )
            for r in e.components
        ]
        header = ("component", "device", "logged", "estimate", "difference", "accuracy")
        out += ["", table(header, rows), f"difference: {DIFFERENCE_MEANING}"]
    if e.decision_lines:
        out += ["", "Why:"] + [f"  {printable(line)}" for line in e.decision_lines]
    if e.advice:
        out += ["", "What to change (those that fit first, then the cheapest):"]
        out += [f"  - {printable(advice_text(a))}" for a in e.advice]
    if e.launch_line:
        out += ["", "Launch:"] + [f"  {printable(line)}" for line in e.launch_line.splitlines()]
    if e.notes:
        out += ["", "Notes:"] + [f"  - {printable(n)}" for n in e.notes]
    return "\n".join(out)
