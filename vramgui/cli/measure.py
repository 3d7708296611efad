"""``vramgui measure SOURCE [options]``: run the setup and put what it used beside the estimate.

Same options as ``estimate``. ``--device fake`` builds the transformers model from config.json and
runs it under PyTorch's FakeTensorMode on the CPU (no memory, no GPU, no weights downloaded);
``--device cuda`` runs it on the local GPU. Needs the ``measure`` extra; without it, says what to
install. The document is the estimate's (``--json``: schema vramgui.estimate/1) with a
``measured`` block.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.estimate import add_estimate_options, workload_from_args
from vramgui.cli.text import printable
from vramgui.core.engines import engine
from vramgui.core.units import format_bytes
from vramgui.measure import extra, request
from vramgui.measure.request import CUDA, FAKE, MeasureError

if TYPE_CHECKING:
    from vramgui.core.model import ModelSpec
    from vramgui.core.workload import Workload

PROGRESS_KEY = "progress"


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "measure",
        help=SUBCOMMANDS["measure"],
        description="Run the setup with transformers and PyTorch (under FakeTensorMode on the "
        "CPU, or on the local GPU) and show the measured memory beside the estimate. "
        f"Needs the measure extra: {extra.INSTALL}.",
    )
    parser.add_argument("source", help="config.json, model folder, Hub id or catalog name")
    add_estimate_options(parser)
    parser.add_argument(
        "--device",
        choices=request.DEVICES,
        default=None,
        help="fake: FakeTensorMode on the CPU, seconds and no memory even for a 600B model "
        "(the default without a CUDA GPU); cuda: the local GPU (the default with one)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run on the GPU even where the estimate says it does not fit",
    )
    parser.add_argument(
        "--no-timing",
        action="store_true",
        help="on a GPU, skip timing a few training steps (which calibrates the speed estimate "
        "for this GPU model and stores it)",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help=f'report each phase on stderr as it begins, one JSON object a line ({{"{PROGRESS_KEY}": ...}})',
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=run)


class _Progress:
    """Writes ``{"progress": {"step", "done", "of"}}`` lines on stderr (a ``PhaseListener``)."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        self._steps = steps
        self._done = 0

    def step(self, name: str) -> None:
        line = {PROGRESS_KEY: {"step": name, "done": self._done, "of": len(self._steps)}}
        print(json.dumps(line), file=sys.stderr, flush=True)
        self._done = min(self._done + 1, len(self._steps))

    def phase_started(self, ended: str, started: str) -> None:
        if started:
            self.step(started)

    def window_started(self) -> None:
        """A new peak window is no new step."""


@contextlib.contextmanager
def _no_questions() -> Iterator[None]:
    """Standard input at its end while the run goes: nothing a library runs can ask a question
    and wait for the answer (transformers asks whether to run a model's own code; the harness
    never lets it, and this is the second lock)."""
    previous = sys.stdin
    sys.stdin = io.StringIO()
    try:
        yield
    finally:
        sys.stdin = previous


@contextlib.contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM (the window's Cancel) unwinds like Ctrl-C, so the run frees the GPU on its way out."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cpu_kernels_bytes(spec: ModelSpec, workload: Workload) -> int | None:
    """The estimate's peak tensors for PyTorch's CPU kernels (what a fake run executes): for
    training with CUDA autocast's float32 rules as the harness applies them, for transformers'
    prefill with the CPU's SDPA choices; None for other engines."""
    if workload.mode == "training":
        from vramgui.core.training import training_estimate

        return training_estimate(spec, workload, device="cpu", autocast_rules="cuda").total_bytes
    if not engine(workload.engine).eager_pytorch:
        return None
    from vramgui.core.inference import inference_breakdown

    cpu = inference_breakdown(spec, workload, device="cpu")
    return cpu.weights_bytes + cpu.kv_cache_bytes + cpu.activations_bytes


def run(args: argparse.Namespace) -> int:
    problems = extra.missing_packages()
    if problems:
        raise MeasureError(extra.install_hint(problems))
    from vramgui.core.estimate import estimate
    from vramgui.core.fit import fit_rows
    from vramgui.core.report import estimate_document
    from vramgui.hardware.capacity import resolve_capacities
    from vramgui.measure import compare
    from vramgui.sources.configs import config_of
    from vramgui.sources.resolve import load_model

    workload = workload_from_args(args)
    loaded = load_model(args.source)
    # Refused before anything is fetched or imported.
    settings_for_steps = request.harness_settings(loaded.spec, workload, args.device)
    config = config_of(loaded.ref)
    capacities = resolve_capacities(args.gpu, False)
    est = estimate(loaded.spec, workload, capacities[0][1] if capacities else None)
    doc = estimate_document(loaded.spec, est, fit_rows(est, capacities))
    doc["source"] = loaded.ref.to_dict()
    doc["notices"] = list(loaded.notices)

    steps = ("starting", *request.steps(settings_for_steps, loaded.spec.facts.is_decoder))
    progress = _Progress(steps) if args.progress else None
    if progress is not None:
        progress.step("starting")  # importing PyTorch and transformers takes seconds
    from vramgui.measure import runner

    device = args.device or runner.default_device()
    settings = request.harness_settings(loaded.spec, workload, device)
    listeners: tuple[_Progress, ...] = ()
    if progress is not None:
        progress.step("load")
        listeners = (progress,)
    with _terminated_as_interrupt(), _no_questions():
        result = runner.run(
            config,
            settings,
            device,
            listeners=listeners,
            required_bytes=est.total_bytes,
            force=args.force,
        )
        speed = None
        if device == CUDA and workload.mode == "training" and not args.no_timing:
            from vramgui.measure import timing

            speed = timing.calibrate_from_run(loaded.spec, workload, config, settings)
    cpu = cpu_kernels_bytes(loaded.spec, workload) if device == FAKE else None
    doc["measured"] = compare.measured_block(
        doc, result, device, config=config, cpu_kernels_bytes=cpu
    )
    # What the run built: eager for a model transformers runs eager only, whatever was asked.
    doc["measured"]["attention_used"] = settings["attention"]
    if speed is not None:
        doc["measured"]["speed"] = speed
    print(json.dumps(doc, indent=2) if args.json else format_table(doc))
    return 0


_DEVICE_WORDS = {FAKE: "by a fake run on the CPU (FakeTensorMode)"}


def _error(value: float | None) -> str:
    return "" if value is None else f"{value:+.2%}"


def format_table(doc: dict[str, Any]) -> str:
    """The estimate and the measurement side by side, for people."""
    from vramgui.measure import compare

    model, measured = doc["model"], doc["measured"]
    s = doc["settings"]
    asked = s["attention"]
    used = measured.get("attention_used", asked)
    attention = (
        used
        if used == asked
        else f"{used} attention (transformers runs {model['architecture']} with {used} only, "
        f"not {asked})"
    )
    what = f"{s['mode']}: batch {s['batch']}, seq {s['seq']:,}, {s['dtype']}, {attention}" + (
        "" if s["mode"] == "inference" else f", {s['method']}, {s['optimizer']}"
    )
    lines = [
        f"{printable(model['name'])}  ({model['architecture']}, {model['parameters']:,} parameters, "
        f"inventory {model['inventory']})",
        what,
        f"measured {_DEVICE_WORDS.get(measured['device'], 'on ' + measured['device'])} "
        f"in {measured['seconds']:.1f} s",
        "",
        f"  {'':<22}{'estimate':>14}{'measured':>14}{'error':>10}",
    ]

    def row(label: str, fig: dict[str, Any]) -> None:
        shown = "-" if fig["measured"] is None else format_bytes(fig["measured"])
        lines.append(
            f"  {label:<22}{format_bytes(fig['estimate']):>14}{shown:>14}{_error(fig['error']):>10}"
        )

    for name, fig in measured["components"].items():
        if name in compare.GROUPS and (fig["estimate"] or fig["measured"]):
            row(name.replace("_", " "), fig)
    row("tensors at peak", measured["tensor_bytes"])
    if "cpu_kernels" in measured:
        row("for the CPU kernels", measured["cpu_kernels"])
    overhead = doc["per_gpu"]["components"].get("runtime_overhead", 0)
    if "total_bytes" in measured:
        row("runtime overhead", measured["components"]["runtime_overhead"])
        row("total on the GPU", measured["total_bytes"])
    elif overhead:
        row("runtime overhead", compare.figure(overhead, None))
        row("total per GPU", compare.figure(doc["per_gpu"]["total_bytes"], None))
    lines.append(
        f"  peak: estimated at {measured['estimate_phase']}, measured at {measured['phase']}"
    )
    params = measured["parameters"]
    if params["difference"]:
        lines.append(
            f"  parameters: estimate {params['estimate']:,}, model built {params['measured']:,}"
        )
    if "speed" in measured:
        lines.extend(speed_lines(measured["speed"]))
    for note in [*doc.get("notices", []), *measured["notes"]]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def speed_lines(speed: dict[str, Any]) -> list[str]:
    """The timed steps and what became of the calibration."""
    if "tokens_per_second" not in speed:
        return ["", f"speed: {speed.get('reason', 'not timed')}"]
    lines = [
        "",
        f"speed: {speed['tokens_per_second']:,.0f} tokens/s over {len(speed['steps_seconds'])} "
        f"timed steps (median {speed['step_seconds']:.3g} s) on {speed['device']}",
    ]
    if "default_tokens_per_second" in speed:
        lines.append(
            f"  the estimate's default for this GPU: {speed['default_tokens_per_second']:,.0f} "
            "tokens/s"
        )
    if speed["stored"]:
        lines.append(
            f"  calibrated: matrix products at {speed['matmul']:.0%} of {speed['gpu']}'s peak; "
            f"estimates for this GPU use it from now on ({speed['stored']})"
        )
    else:
        lines.append(f"  not calibrated: {speed.get('reason', '')}")
    return lines
