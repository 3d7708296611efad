"""Verify on the Estimate tab: ``vramgui measure`` in another process, its result on the chart.

Measuring imports PyTorch, which takes seconds and hundreds of megabytes and could take the GPU:
the window never imports it. It starts ``python -m vramgui measure ... --json --progress`` with
QProcess, follows the progress lines the command writes on stderr, can stop it (the process and
whatever it held on the GPU go with it), and draws the measured peak across the breakdown bar.
What it has to say (the result, an error, what to install) it says with ``said``, for the window
to show where its messages go. A measurement belongs to the model and settings it was made for;
any change clears it.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Callable, Sequence

from PySide6.QtCore import QProcess, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMenu,
    QProgressBar,
    QPushButton,
    QToolButton,
    QWidget,
)

from vramgui.core.model import Inventory, ModelRef
from vramgui.core.units import GiB, format_bytes
from vramgui.core.workload import Workload
from vramgui.measure import extra, request
from vramgui.profiles import source_of
from vramgui.ui.breakdown_chart import BreakdownChart, MeasuredMark
from vramgui.ui.controller import Analysis, EstimateController

# A cancelled process gets this long to free the GPU on its own before it is killed.
TERMINATE_GRACE_MS = 3000
STDERR_LINES = 40
WITHIN = 0.03  # an error this small reads as a match
# What ``said`` carries as its kind: a measurement close to the estimate, one further off, a run
# that could not start or failed, what keeps Verify from running, and a plain word.
KINDS = ("match", "mismatch", "error", "warning", "info")
FAKE_TIP = (
    "Run this setup with transformers and PyTorch under FakeTensorMode on the CPU: the exact "
    "tensor memory for any architecture, in seconds, with no GPU and no download"
)
APPROXIMATE_TIP = (
    "This estimate is approximate (see the model's notes). Verify runs the model's own "
    "transformers code under FakeTensorMode for the exact figure: seconds, no GPU and no "
    "download needed."
)

Command = Callable[[str, Workload, str], list[str]]


def workload_arguments(workload: Workload) -> list[str]:
    """The ``vramgui estimate`` options that give ``workload`` back."""
    args: list[str] = []
    for key, value in workload.to_dict().items():
        if key == "overhead-bytes":
            if value is not None:
                args += ["--overhead-gib", repr(value / GiB)]
        elif value is None:
            continue  # a default the command line leaves to the engine
        elif key == "speculative":
            continue  # a draft model names itself (--speculative-model)
        elif key == "prompt":
            continue  # the harness prefills the whole context, and `measure` estimates that
        elif key == "draft-model":
            args += ["--speculative-model", value] if value else []
        elif key == "enable-prefix-caching":
            args += ["--enable-prefix-caching" if value else "--no-enable-prefix-caching"]
        elif isinstance(value, bool):
            args += [f"--{key}"] if value else []
        else:
            args += [f"--{key}", str(value)]
    return args


def measure_command(source: str, workload: Workload, device: str) -> list[str]:
    """The command line that measures ``workload`` on ``source`` with this Python."""
    return [
        sys.executable,
        "-m",
        "vramgui",
        "measure",
        source,
        *workload_arguments(workload),
        "--device",
        device,
        "--json",
        "--progress",
    ]


def source_text(source: str | None, ref: ModelRef) -> str:
    """What to pass the command for the current model: what the user typed, else its reference."""
    return source or source_of(ref)


def signed_percent(error: float) -> str:
    """``+1.2%``, ``-3.4%``; an error under 0.05 % reads ``±0.0%``, not ``-0.0%``."""
    return "±0.0%" if abs(error) < 0.0005 else f"{error:+.1%}"


def _where(measured: dict) -> str:
    if measured["device"] == request.FAKE:
        return "by a fake run"
    return f"on {measured.get('cuda', {}).get('device') or 'the GPU'}"


def _compared(measured: dict) -> dict:
    """The GPU's total where it was measured, else the peak tensors."""
    total = measured.get("total_bytes")
    return total if total and total["measured"] is not None else measured["tensor_bytes"]


def measured_marks(measured: dict) -> list[MeasuredMark]:
    """The figures of a ``measured`` block to draw across the bar."""
    tensors = measured["tensor_bytes"]
    marks = [
        MeasuredMark(
            "Measured tensors",
            tensors["measured"],
            f"Measured {_where(measured)}: tensors peak at {format_bytes(tensors['measured'])} "
            f"({measured['phase']}); the estimate without its runtime overhead is "
            f"{format_bytes(tensors['estimate'])} ({signed_percent(tensors['error'])}).",
        )
    ]
    total = measured.get("total_bytes")
    if total and total["measured"] is not None:
        marks.append(
            MeasuredMark(
                "Measured on the GPU",
                total["measured"],
                f"Measured {_where(measured)}: {format_bytes(total['measured'])} in use at the "
                "peak (the allocator's reserved memory and the CUDA context); the estimate is "
                f"{format_bytes(total['estimate'])} ({signed_percent(total['error'])}).",
            )
        )
    return marks


def summary(measured: dict) -> str:
    """A few words: where it was measured and the estimate's error."""
    return f"Verified {_where(measured)}: estimate {signed_percent(_compared(measured)['error'])}"


def result_text(measured: dict) -> str:
    """The result in a sentence: the error, and the two figures it compares."""
    total = measured.get("total_bytes")
    if total and total["measured"] is not None:
        figures = (
            f"in use on the GPU at the peak {format_bytes(total['measured'])}, the estimate "
            f"{format_bytes(total['estimate'])}"
        )
    else:
        tensors = measured["tensor_bytes"]
        figures = (
            f"tensors peak at {format_bytes(tensors['measured'])} ({measured['phase']}), the "
            f"estimate's {format_bytes(tensors['estimate'])} without its runtime overhead"
        )
    return f"{summary(measured)}: {figures}."


def details(measured: dict) -> str:
    """The whole result in sentences, its notes last."""
    tensors = measured["tensor_bytes"]
    lines = [
        f"Measured {_where(measured)}: tensors peak at {format_bytes(tensors['measured'])} "
        f"({measured['phase']}); the estimate's tensors {format_bytes(tensors['estimate'])} "
        f"({signed_percent(tensors['error'])})."
    ]
    total = measured.get("total_bytes")
    if total and total["measured"] is not None:
        lines.append(
            f"In use on the GPU at the peak: {format_bytes(total['measured'])}; the estimate "
            f"{format_bytes(total['estimate'])} ({signed_percent(total['error'])})."
        )
    return "\n".join([*lines, *measured.get("notes", ())])


class VerifyBar(QWidget):
    """A progress bar, Verify (fake run or this GPU) and Cancel; ``said`` tells the outcome.

    Args:
        controller: the window's controller (model, settings, estimate).
        chart: the breakdown chart to draw the measured figures on.
        command: ``(source, workload, device) -> argv``; by default ``measure_command`` (tests
            pass a scripted process).
        missing: what of the measure extra is missing; by default ``extra.missing_packages``.
    """

    finished = Signal(object)  # the measured block, or None when the run failed or was stopped
    said = Signal(str, str, str)  # text, kind (one of KINDS), the details behind the text

    def __init__(
        self,
        controller: EstimateController,
        chart: BreakdownChart,
        *,
        command: Command | None = None,
        missing: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        super().__init__()
        self._controller = controller
        self._chart = chart
        self._command = command or measure_command
        self._missing = missing or extra.missing_packages
        self._process: QProcess | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._buffer = b""
        self._cancelled = False
        self._setup: tuple[str, Workload] | None = None  # what is measured, or was
        self.measured: dict | None = None
        self.message: tuple[str, str, str] = ("", "", "")  # what ``said`` last told

        self.progress = QProgressBar()
        self.progress.setFixedWidth(180)
        self.progress.hide()
        self.button = QToolButton()
        self.fake_action = QAction("Verify", self)
        self.fake_action.setToolTip(FAKE_TIP)
        self.gpu_action = QAction("Verify on this machine's GPU", self)
        self.gpu_action.setToolTip(
            "Run this setup on the local NVIDIA GPU (weights created on it from config.json): "
            "the allocator's peak, the CUDA context and what NVML sees"
        )
        menu = QMenu(self.button)
        menu.addAction(self.fake_action)
        menu.addAction(self.gpu_action)
        self.button.setMenu(menu)
        self.button.setDefaultAction(self.fake_action)
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.hide()

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.progress)
        layout.addWidget(self.cancel_button)
        layout.addWidget(self.button)

        self.fake_action.triggered.connect(lambda: self.start(request.FAKE))
        self.gpu_action.triggered.connect(lambda: self.start(request.CUDA))
        self.cancel_button.clicked.connect(self.cancel)
        controller.estimate_changed.connect(self._estimate_changed)
        controller.estimate_failed.connect(lambda _text: self._estimate_changed(None))

    # ----------------------------------------------------------------------------- running
    @property
    def running(self) -> bool:
        return self._process is not None

    def start(self, device: str) -> None:
        """Measure the current setup on ``device`` ("fake" or "cuda")."""
        analysis = self._controller.analysis
        model = self._controller.model
        if self.running or analysis is None or model is None:
            return
        problems = tuple(self._missing())
        if problems:
            self._tell(
                f"Verify needs the measure extra (PyTorch, transformers, peft): "
                f"{_missing_text(problems)}. Install it with {extra.INSTALL} (Details: the "
                "commands for this Python, and a CPU-only PyTorch).",
                "warning",
                "\n\n".join(filter(None, (extra.install_hint(problems), _this_python()))),
            )
            return
        reason = request.unmeasurable_reason(analysis.spec, analysis.estimate.workload, device)
        if reason:
            self._tell(f"Verify cannot run this setup: {reason}.", "warning")
            return
        source = source_text(self._controller.source, model.ref)
        workload = analysis.estimate.workload
        self._clear_measurement()
        self._setup = (source, workload)
        self._cancelled = False
        self._stderr.clear()
        self._buffer = b""
        argv = self._command(source, workload, device)
        process = QProcess(self)
        # Nothing the run does may wait for an answer on standard input.
        process.setStandardInputFile(QProcess.nullDevice())
        process.readyReadStandardError.connect(self._read_stderr)
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._error)
        self._process = process
        self.progress.setRange(0, 0)
        self.progress.setFormat("starting")
        self.progress.show()
        self.cancel_button.show()
        self.button.setEnabled(False)
        self._tell("Measuring… (the breakdown shows the result when it comes)", "info")
        process.start(argv[0], argv[1:])

    def cancel(self) -> None:
        """Stop the measuring process; a GPU run's memory is freed as it exits."""
        process = self._process
        if process is None:
            return
        self._cancelled = True
        self.progress.setFormat("stopping")
        if sys.platform == "win32":
            process.kill()  # a console process ignores terminate() there
            return
        process.terminate()
        QTimer.singleShot(TERMINATE_GRACE_MS, lambda: self._kill(process))

    def shutdown(self) -> None:
        """Stop a running measurement at once and wait for it (the window is closing)."""
        process = self._process
        if process is not None:
            self._cancelled = True
            process.kill()
            process.waitForFinished(TERMINATE_GRACE_MS)

    def _kill(self, process: QProcess) -> None:
        if process is self._process and process.state() != QProcess.ProcessState.NotRunning:
            process.kill()

    def _read_stderr(self) -> None:
        process = self._process
        if process is None:
            return
        self._buffer += bytes(process.readAllStandardError().data())
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").strip()
            step = _progress_of(line)
            if step is None:
                if line:
                    self._stderr.append(line)
                continue
            done, of = int(step.get("done", 0)), max(1, int(step.get("of", 1)))
            self.progress.setFormat(f"{step.get('step', '')} ({min(done + 1, of)}/{of})")
            self.progress.setRange(0, of)
            self.progress.setValue(done)

    def _finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        process = self._process
        if process is None:
            return
        self._read_stderr()
        output = bytes(process.readAllStandardOutput().data())
        self._process = None
        process.deleteLater()
        self._idle()
        if self._cancelled:
            self._tell("Verification stopped.", "info")
            self.finished.emit(None)
            return
        if code != 0:
            self._tell(f"Verify failed: {self._failure()}", "error", "\n".join(self._stderr))
            self.finished.emit(None)
            return
        try:
            measured = json.loads(output)["measured"]
        except (ValueError, KeyError, TypeError):
            self._tell(
                "Verify failed: the measuring process gave no result it could read.", "error"
            )
            self.finished.emit(None)
            return
        if self._setup != self._current_setup():
            self._tell("The settings changed while measuring: Verify again.", "info")
            self.finished.emit(None)
            return
        self.measured = measured
        self._chart.set_measured(measured_marks(measured))
        error = _compared(measured)["error"]
        close = error is not None and abs(error) <= WITHIN
        self._tell(result_text(measured), "match" if close else "mismatch", details(measured))
        self.finished.emit(measured)

    def _error(self, error: QProcess.ProcessError) -> None:
        if error != QProcess.ProcessError.FailedToStart or self._process is None:
            return
        process, self._process = self._process, None
        process.deleteLater()
        self._idle()
        self._tell(f"Could not start the measuring process: {process.errorString()}", "error")
        self.finished.emit(None)

    def _failure(self) -> str:
        """The command's one-line message (``vramgui: ...``), else the last thing it said."""
        for line in reversed(self._stderr):
            if line.startswith("vramgui: "):
                return line.removeprefix("vramgui: ")
        return self._stderr[-1] if self._stderr else "The measuring process failed."

    def _idle(self) -> None:
        self.progress.hide()
        self.cancel_button.hide()
        self.button.setEnabled(True)

    # ----------------------------------------------------------------------------- state
    def _current_setup(self) -> tuple[str, Workload] | None:
        analysis, model = self._controller.analysis, self._controller.model
        if analysis is None or model is None:
            return None
        return source_text(self._controller.source, model.ref), analysis.estimate.workload

    def _clear_measurement(self) -> None:
        if self.measured is not None:
            self.measured = None
            self._chart.set_measured(())

    def _estimate_changed(self, analysis: Analysis | None) -> None:
        if self.running:
            return
        if self.measured is not None and self._setup == self._current_setup():
            return
        self._clear_measurement()
        approximate = analysis is not None and analysis.spec.inventory == Inventory.APPROXIMATE
        tip = APPROXIMATE_TIP if approximate else FAKE_TIP
        if self.fake_action.toolTip() != tip:
            self.fake_action.setToolTip(tip)

    def _tell(self, text: str, kind: str, details: str = "") -> None:
        self.message = (text, kind, details or text)
        self.said.emit(*self.message)


def _missing_text(problems: Sequence[str]) -> str:
    """What is missing, short: "torch and peft are not installed; transformers 5.1 is older..."."""
    absent = [p.removesuffix(" is not installed") for p in problems if p.endswith(" not installed")]
    others = [p for p in problems if not p.endswith(" not installed")]
    if len(absent) > 1:
        absent = [f"{', '.join(absent[:-1])} and {absent[-1]} are not installed"]
    elif absent:
        absent = [f"{absent[0]} is not installed"]
    return "; ".join([*absent, *others])


def _this_python() -> str:
    """The commands that install the extra into the Python this window runs on (the first
    ``pip`` on the PATH may be another's); nothing for the bundled application, which has none."""
    if getattr(sys, "frozen", False):
        return ""
    python = f'"{sys.executable}" -m'
    return (
        f"Into the Python this window runs on, without an NVIDIA GPU: {python} "
        f"{extra.CPU_TORCH}, then {python} {extra.INSTALL}. With one: {python} {extra.INSTALL}."
    )


def _progress_of(line: str) -> dict | None:
    """The step of a ``{"progress": {...}}`` line, or None for any other line."""
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    step = value.get("progress") if isinstance(value, dict) else None
    return step if isinstance(step, dict) else None
