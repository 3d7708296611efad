"""How long the window takes from an input change to a redrawn estimate (target: under 16 ms).

Runs the real window offscreen on a catalog model and, for a series of input changes made through
the widgets (context, batch, quantization, training method), times:

- *estimate + redraw*: from the change until the breakdown, fit badges, table and headline are
  redrawn and painted (what the user sees move);
- the same in CPU time of this process, which a loaded machine does not inflate;
- *sweep + advice*: the follow-up sweep, largest-fitting search and advice, computed on a worker
  thread while the window stays live, until they are drawn.

Usage: ``python benchmarks/ui_speed.py [--rounds N] [--model NAME]``. Prints median and p99.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
os.environ.setdefault("VRAMGUI_HOME", tempfile.mkdtemp(prefix="vramgui-bench-"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QSettings, QThreadPool

from vramgui.core.errors import VramguiError
from vramgui.core.estimate import estimate
from vramgui.hardware import GpuSnapshot
from vramgui.ui import app
from vramgui.ui.main_window import build_window


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--model", default="llama-3.1-8b")
    args = parser.parse_args()

    qapp = app.create_application(sys.argv[:1])
    services = replace(
        app.real_services(),
        probe=lambda: GpuSnapshot(reason="benchmark"),
        gpu_refresh_ms=0,
        default_source=args.model,
    )
    settings = QSettings(
        str(Path(os.environ["VRAMGUI_HOME"]) / "bench.ini"), QSettings.Format.IniFormat
    )
    window = build_window(services, settings)
    window.resize(1600, 1000)
    window.show()
    controller = window.controller
    deadline = time.monotonic() + 60
    while controller.outlook is None and time.monotonic() < deadline:
        qapp.processEvents()
    if controller.outlook is None:
        print("the model did not load", file=sys.stderr)
        return 1

    panel, precision = window.workload_panel, window.precision_panel
    changes = [
        lambda i: panel.seq.spin.setValue(1024 * (1 + i % 16)),
        lambda i: panel.batch.spin.setValue(1 + i % 8),
        lambda i: precision.quant.setCurrentIndex(
            precision.quant.findData(("none", "nf4", "Q4_K_M", "gptq-int4")[i % 4])
        ),
    ]
    training = [
        lambda i: panel.method.setCurrentIndex(
            panel.method.findData(("full", "lora", "qlora")[i % 3])
        ),
        lambda i: panel.seq.spin.setValue(512 * (1 + i % 8)),
    ]
    failures: list[str] = []
    controller.estimate_failed.connect(failures.append)
    controller.message.connect(failures.append)
    results: dict[str, tuple[list[float], ...]] = {}
    for label, mode, edits in (
        ("inference", "inference", changes),
        ("training", "training", training),
    ):
        controller.update(mode=mode, quant="none")
        qapp.processEvents()
        first, second, core, paint, cpu = [], [], [], [], []
        for i in range(args.rounds):
            edit = edits[i % len(edits)]
            before = controller.outlook
            cpu_start = time.process_time()
            start = time.perf_counter()
            edit(i)
            controller.recompute_now()  # what the coalescing timer runs on the next turn
            slots = time.perf_counter()
            qapp.processEvents()  # lays out and paints what changed, as the event loop would
            estimated = time.perf_counter()
            cpu.append((time.process_time() - cpu_start) * 1000)
            target = controller.capacities[0][1] if controller.capacities else None
            core_start = time.perf_counter()
            with contextlib.suppress(VramguiError):
                estimate(controller.spec, controller.workload, target)
            core.append((time.perf_counter() - core_start) * 1000)
            paint.append((estimated - slots) * 1000)
            failed = len(failures)
            while controller.outlook is before and len(failures) == failed:
                qapp.processEvents()
            if len(failures) > failed:
                print(f"skipped a change the core refused: {failures[-1]}", file=sys.stderr)
                continue
            qapp.processEvents()
            # What drawing the outlook left queued (laying out the advice) belongs to it, not to
            # the next change: the event loop runs it right after.
            qapp.sendPostedEvents()
            qapp.processEvents()
            done = time.perf_counter()
            first.append((estimated - start) * 1000)
            second.append((done - estimated) * 1000)
        results[label] = (first, cpu, core, paint, second)

    print(f"model {args.model}, {args.rounds} changes per mode, window 1600x1000 offscreen")
    print("times in ms: median / p99")
    header = (
        "estimate + redraw",
        "same, CPU time",
        "of which core",
        "of which paint",
        "sweep + advice",
    )
    print(f"{'':>10}" + "".join(f"  {h:>24}" for h in header))
    for label, columns in results.items():
        cells = [f"{statistics.median(v):7.1f} / {_percentile(v, 0.99):7.1f}" for v in columns]
        print(f"{label:>10}" + "".join(f"  {c:>24}" for c in cells))
    window.close()
    QThreadPool.globalInstance().waitForDone(2000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
