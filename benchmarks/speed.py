"""Speed benchmark: the figures people feel, each against its target; exit 1 when one is missed.

Measured on the machine it runs on (Qt's offscreen platform, a temporary VRAMGUI_HOME):

- start: process start to the first paint event of the main window, the way ``vramgui`` opens
  it (``vramgui.ui.app``: logging, identity, real services, the default catalog model), median of
  several cold starts in fresh subprocesses; also which heavy modules were imported by then;
- ``vramgui estimate`` process time (``python -m vramgui estimate MODEL --json``), median;
- the command line's start: ``python -m vramgui --help`` and ``python -m vramgui COMMAND --help``
  for each subcommand, median, as a multiple of a bare ``python -c pass``; both with the modules'
  bytecode compiled, as an installed copy has it (written to a temporary folder);
- core estimate latency (``vramgui.core.estimate.estimate``) for an inference and a training
  setup, median and p99;
- a 256-point context sweep (``vramgui.core.fit.sweep``), median;
- input change to redraw in the window: ``benchmarks/ui_speed.py``'s figure (run as it is);
- the event loop's largest stall while a search waits on a slow Hub (a fake Hub on 127.0.0.1
  answering after 2 s; a 5 ms QTimer measures the gaps between its ticks);
- resident memory of the app after start and after 1,000 estimate changes (growth).

    python benchmarks/speed.py [--starts 5] [--model llama-3.1-8b] [--quick] [--only NAME ...]

``--only stall`` (repeatable; start, cli, core, redraw, stall, memory) measures one part.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEAVY_MODULES = ("huggingface_hub", "gguf", "pynvml", "torch", "transformers")
SLOW_HUB_S = 2.0
TICK_MS = 5
GROWTH_LIMIT_MIB = 16.0
# What --only selects; "stall" and "memory" share one window.
PARTS = ("start", "cli", "core", "redraw", "stall", "memory")


@dataclass
class Figure:
    """One measured figure and its target (``None``: reported, no target)."""

    name: str
    value: float
    unit: str
    target: float | None = None
    detail: str = ""

    @property
    def met(self) -> bool:
        return self.target is None or self.value < self.target

    def line(self) -> str:
        goal = f"< {self.target:g} {self.unit}" if self.target is not None else "(reported)"
        verdict = "ok" if self.met else "MISSED"
        text = f"{self.name:<44} {self.value:>9.2f} {self.unit:<4} target {goal:<12} {verdict}"
        return f"{text}  {self.detail}" if self.detail else text


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def child_env(home: str) -> dict[str, str]:
    """The environment of a measured subprocess: offscreen, its own empty user folder."""
    env = dict(os.environ)
    env.update(QT_QPA_PLATFORM="offscreen", VRAMGUI_HOME=home, PYTHONPATH=str(ROOT))
    return env


# --- start to first paint ---------------------------------------------------------------------


class ImportWatch:
    """A meta-path hook that notes which thread first imports each heavy module (imports nothing)."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name in HEAVY_MODULES and name not in self.seen:
            thread = threading.current_thread()
            self.seen[name] = "GUI thread" if thread is threading.main_thread() else "worker"


def first_paint_child() -> int:
    """In a fresh process: open the window as ``app.main`` does; print when it first paints."""
    watch = ImportWatch()
    sys.meta_path.insert(0, watch)  # type: ignore[arg-type]
    from PySide6.QtCore import QEvent, QObject, QThreadPool, QTimer

    from vramgui.ui import app

    app.setup_logging()
    qapp = app.create_application(sys.argv[:1])
    window = app.build_window(app.real_services(), app.settings())

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if watched is window and event.type() == QEvent.Type.Paint:
                window.removeEventFilter(self)
                heavy = {m: watch.seen.get(m, "?") for m in HEAVY_MODULES if m in sys.modules}
                print(f"PAINTED {json.dumps({'heavy': heavy, 'rss_mib': rss_mib()})}", flush=True)
                complete.start()
            return False

    def check_complete() -> None:
        # Everything drawn: the estimate and its outlook (sweep and advice, computed on a worker).
        if window.controller.outlook is not None:
            complete.stop()
            print("COMPLETE", flush=True)
            QTimer.singleShot(0, qapp.quit)

    complete = QTimer()
    complete.setInterval(5)
    complete.timeout.connect(check_complete)
    watcher = FirstPaint()
    window.installEventFilter(watcher)
    window.show()
    qapp.exec()
    # Quitting while the start-up work still runs on the pool crashes at exit (see docs).
    QThreadPool.globalInstance().waitForDone(30_000)
    return 0


def measure_start(starts: int) -> tuple[list[Figure], dict[str, str], float]:
    """Median seconds from launching ``python`` to the first paint, over ``starts`` cold starts.

    Also reported: the time until the window is complete (the estimate and both charts drawn).
    """
    times: list[float] = []
    complete: list[float] = []
    rss: list[float] = []
    heavy: dict[str, str] = {}
    for _ in range(starts):
        with tempfile.TemporaryDirectory(prefix="vramgui-speed-") as home:
            begin = time.perf_counter()
            child = subprocess.Popen(
                [sys.executable, __file__, "--first-paint-child"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=child_env(home),
                cwd=home,
            )
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("PAINTED "):
                    times.append(time.perf_counter() - begin)
                    info = json.loads(line.split(" ", 1)[1])
                    heavy.update(info["heavy"])
                    rss.append(info["rss_mib"])
                elif line.startswith("COMPLETE"):
                    complete.append(time.perf_counter() - begin)
                    break
            child.wait(60)
            if child.returncode:
                raise SystemExit(f"the window did not start (exit {child.returncode})")
    figures = [
        Figure(
            "start to first paint (median)",
            statistics.median(times),
            "s",
            1.5,
            f"{len(times)} cold starts, min {min(times):.2f} s, max {max(times):.2f} s",
        ),
        Figure(
            "start to complete window (median)",
            statistics.median(complete),
            "s",
            None,
            "estimate, sweep and advice drawn",
        ),
    ]
    return figures, heavy, statistics.median(rss)


def measure_cli(model: str, runs: int) -> Figure:
    """Median seconds of ``python -m vramgui estimate MODEL --json`` as a process."""
    times = []
    with tempfile.TemporaryDirectory(prefix="vramgui-speed-") as home:
        for _ in range(runs):
            begin = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "vramgui", "estimate", model, "--json"],
                check=True,
                stdout=subprocess.DEVNULL,
                env=child_env(home),
                cwd=ROOT,
            )
            times.append(time.perf_counter() - begin)
    return Figure(
        "`vramgui estimate` process (median)",
        statistics.median(times),
        "s",
        1.0,
        f"{runs} runs, catalog model {model}",
    )


def measure_cli_start(runs: int) -> list[Figure]:
    """The command line's start as a multiple of a bare interpreter's, median of ``runs``.

    ``--help`` builds the parser of the subcommand named and prints it: what every run of that
    subcommand pays before its work starts. Each round starts the bare interpreter and every
    command once, so that a busy machine slows both alike.
    """
    from vramgui.cli import SUBCOMMANDS

    bare = (sys.executable, "-c", "pass")
    commands = [("--help",), *((name, "--help") for name in SUBCOMMANDS)]
    argvs = [bare, *((sys.executable, "-m", "vramgui", *command) for command in commands)]
    times: dict[tuple[str, ...], list[float]] = {argv: [] for argv in argvs}
    with tempfile.TemporaryDirectory(prefix="vramgui-speed-") as home:
        env = child_env(home)
        # Python here may run without writing bytecode; an installed copy has its .pyc files.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(home) / "pycache")
        for round_ in range(runs + 1):
            for argv in argvs:
                begin = time.perf_counter()
                subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
                if round_:  # the first round writes the bytecode
                    times[argv].append(time.perf_counter() - begin)
    bare_s = statistics.median(times[bare])
    figures = []
    for command, argv in zip(commands, argvs[1:], strict=True):
        seconds = statistics.median(times[argv])
        figures.append(
            Figure(
                f"`vramgui {' '.join(command)}` start (median)",
                seconds / bare_s,
                "x",
                3.0,
                f"{seconds * 1000:.0f} ms; bare interpreter {bare_s * 1000:.0f} ms",
            )
        )
    return figures


# --- the core ---------------------------------------------------------------------------------


def timed_ms(fn: Callable[[], object], rounds: int) -> list[float]:
    """Milliseconds of each of ``rounds`` calls of ``fn``."""
    out = []
    for _ in range(rounds):
        begin = time.perf_counter()
        fn()
        out.append((time.perf_counter() - begin) * 1000)
    return out


def timed_each_ms(fn: Callable[[Any], object], items: list[Any]) -> list[float]:
    """Milliseconds of ``fn(item)`` for each item."""
    out = []
    for item in items:
        begin = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - begin) * 1000)
    return out


def measure_core(model: str, rounds: int) -> list[Figure]:
    """Estimate latency (inference, training) and a 256-point sweep."""
    from vramgui.core import fit
    from vramgui.core.estimate import estimate
    from vramgui.core.workload import Workload
    from vramgui.sources.resolve import load_model

    spec = load_model(model).spec
    setups = {
        "inference": Workload(seq=8192, batch=4, quant="Q4_K_M", engine="llamacpp"),
        "training": Workload(
            mode="training", method="lora", seq=2048, batch=2, grad_checkpointing=True
        ),
        "training, ZeRO-3 x 8": Workload(mode="training", seq=4096, gpus=8, zero=3),
    }
    figures = []
    for label, workload in setups.items():
        estimate(spec, workload)  # warm
        # A different context each call, as when a slider moves (no two calls alike).
        variants = [workload.with_(seq=workload.seq + 16 * i) for i in range(rounds)]
        times = timed_each_ms(lambda w: estimate(spec, w), variants)
        figures.append(Figure(f"estimate, {label} (median)", statistics.median(times), "ms", 1.0))
        figures.append(
            Figure(
                f"estimate, {label} (p99)",
                percentile(times, 0.99),
                "ms",
                None,
                f"{rounds} calls, each a different context",
            )
        )
    values = [256 * (i + 1) for i in range(256)]
    workload = Workload(seq=2048)
    times = timed_ms(lambda: fit.sweep(spec, workload, "seq", values), max(5, rounds // 50))
    figures.append(
        Figure("sweep, 256 contexts (median)", statistics.median(times), "ms", 20.0, model)
    )
    return figures


# --- the window -------------------------------------------------------------------------------


def measure_redraw(model: str, rounds: int) -> list[Figure]:
    """``benchmarks/ui_speed.py``'s estimate + redraw medians, run as its author wrote it."""
    with tempfile.TemporaryDirectory(prefix="vramgui-speed-") as home:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "ui_speed.py"),
                "--rounds",
                str(rounds),
                "--model",
                model,
            ],
            check=False,
            capture_output=True,
            text=True,
            env=child_env(home),
            cwd=ROOT,
            timeout=600,
        )
    figures = []
    # Its table: a header naming the columns, then per mode "median / p99" pairs, the first
    # being estimate + redraw.
    columns: list[str] = []
    for line in done.stdout.splitlines():
        if "estimate + redraw" in line:
            columns = [c.strip() for c in re.split(r"\s{2,}", line.strip()) if c.strip()]
            continue
        pairs = re.findall(r"([\d.]+)\s*/\s*([\d.]+)", line)
        label = line.split()[0] if line.split() else ""
        if not pairs or not label.isalpha():
            continue
        rest = "; ".join(
            f"{name} {float(median):.1f}/{float(p99):.1f}"
            for name, (median, p99) in zip(columns[1:], pairs[1:], strict=False)
        )
        figures.append(
            Figure(
                f"input change to redraw, {label} (median)",
                float(pairs[0][0]),
                "ms",
                16.0,
                f"p99 {float(pairs[0][1]):.1f} ms; median/p99 ms of {rest}",
            )
        )
    if not figures:
        raise SystemExit(f"ui_speed.py printed no figures:\n{done.stdout}\n{done.stderr}")
    return figures


class Window:
    """The main window as the application builds it, with a fixed GPU snapshot and no GPU refresh."""

    def __init__(self, model: str) -> None:
        from PySide6.QtCore import QSettings

        from vramgui.hardware import GpuSnapshot
        from vramgui.ui import app
        from vramgui.ui.main_window import build_window

        self.qapp = app.create_application(sys.argv[:1])
        services = replace(
            app.real_services(),
            probe=lambda: GpuSnapshot(reason="benchmark"),
            gpu_refresh_ms=0,
            default_source=model,
        )
        settings = QSettings(
            str(Path(os.environ["VRAMGUI_HOME"]) / "speed.ini"), QSettings.Format.IniFormat
        )
        self.window = build_window(services, settings)
        self.window.resize(1600, 1000)
        self.window.show()
        app.freeze_startup_objects()
        self.settle(lambda: self.window.controller.outlook is not None)
        self.started_mib = rss_mib()

    def settle(self, until: Callable[[], bool], limit_s: float = 60) -> None:
        """Run the event loop until ``until()`` holds, then until the workers are done."""
        from PySide6.QtCore import QThreadPool

        deadline = time.monotonic() + limit_s
        while not until() and time.monotonic() < deadline:
            self.qapp.processEvents()
        QThreadPool.globalInstance().waitForDone(10_000)
        self.qapp.processEvents()

    def close(self) -> None:
        from PySide6.QtCore import QThreadPool

        self.window.close()
        QThreadPool.globalInstance().waitForDone(5000)


def largest_gaps(
    qapp: Any, act: Callable[[], None], busy: Callable[[], bool], limit_s: float
) -> float:
    """The largest gap (ms) between ticks of a 5 ms QTimer from ``act()`` until ``busy()`` ends."""
    from PySide6.QtCore import QElapsedTimer, QTimer

    clock = QElapsedTimer()
    gaps: list[float] = []
    last = [0]

    def tick() -> None:
        now = clock.elapsed()
        gaps.append(float(now - last[0]))
        last[0] = now

    ticker = QTimer()
    ticker.setInterval(TICK_MS)
    ticker.timeout.connect(tick)
    clock.start()
    ticker.start()
    act()
    until = time.monotonic() + limit_s
    while time.monotonic() < until and busy():
        qapp.processEvents()
        time.sleep(0.001)
    ticker.stop()
    return max(gaps, default=0.0)


def measure_stall(shown: Window, hub) -> Figure:
    """The event loop's largest gap while typed searches wait on a slow Hub (the first included).

    The same loop on the idle window, for as long as one search, gives the machine's own floor
    (a shared machine deschedules the GUI thread now and then), reported beside it.
    """
    from PySide6.QtTest import QTest

    panel = shown.window.model_panel
    worst = []
    for word in ("slow", "llama", "qwen"):
        requests = len(hub.requests)
        panel.query.clear()
        worst.append(
            largest_gaps(
                shown.qapp,
                lambda word=word: QTest.keyClicks(panel.query, word),
                lambda requests=requests: len(hub.requests) == requests or panel.searching,
                SLOW_HUB_S + 20,
            )
        )
    idle_until = time.monotonic() + SLOW_HUB_S
    idle = largest_gaps(shown.qapp, lambda: None, lambda: time.monotonic() < idle_until, 60)
    return Figure(
        "event-loop stall, slow Hub search (max)",
        max(worst),
        "ms",
        50.0,
        f"{len(worst)} searches, each answered after {SLOW_HUB_S:g} s; worst per search "
        + ", ".join(f"{w:.0f}" for w in worst)
        + f"; idle window {idle:.0f}",
    )


def measure_memory(shown: Window, changes: int) -> list[Figure]:
    """RSS after start, and its growth over ``changes`` estimate changes after 100 warm-up ones."""
    from PySide6.QtCore import QThreadPool

    controller = shown.window.controller
    workloads = [
        {"seq": 512 * (1 + i % 32), "batch": 1 + i % 8, "quant": ("none", "nf4", "Q4_K_M")[i % 3]}
        for i in range(changes + 100)
    ]
    warm_mib = rss_mib()
    for i, change in enumerate(workloads):
        if i == 100:
            QThreadPool.globalInstance().waitForDone(10_000)
            shown.qapp.processEvents()
            warm_mib = rss_mib()
        controller.update(**change)
        controller.recompute_now()
        shown.qapp.processEvents()
    shown.settle(lambda: True)
    end_mib = rss_mib()
    return [
        Figure("RSS after start (window drawn)", shown.started_mib, "MiB", None),
        Figure(
            f"RSS growth over {changes} estimate changes",
            end_mib - warm_mib,
            "MiB",
            GROWTH_LIMIT_MIB,
            f"{warm_mib:.0f} MiB after 100 changes, {end_mib:.0f} MiB after {changes} more",
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="cold starts to time")
    parser.add_argument("--model", default="llama-3.1-8b", help="catalog model")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument(
        "--only",
        action="append",
        choices=PARTS,
        metavar="NAME",
        help=f"measure only this part (repeatable): {', '.join(PARTS)}",
    )
    parser.add_argument("--first-paint-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_paint_child:
        return first_paint_child()
    parts = args.only or PARTS

    from tests.fakehub.server import FakeHub

    home = tempfile.mkdtemp(prefix="vramgui-speed-")
    hub = FakeHub().start()  # before anything reads HF_ENDPOINT
    hub.add("bench/slow-llama", {"config.json": b"{}"}, downloads=10)
    hub.delay_s["search"] = SLOW_HUB_S
    os.environ.update(QT_QPA_PLATFORM="offscreen", VRAMGUI_HOME=home, HF_ENDPOINT=hub.url)
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    rounds = 200 if args.quick else 2000
    figures: list[Figure] = []
    heavy: dict[str, str] = {}
    if "start" in parts:
        start, heavy, start_rss = measure_start(2 if args.quick else args.starts)
        figures.extend(start)
        figures.append(Figure("RSS at first paint (median)", start_rss, "MiB", None))
    if "cli" in parts:
        figures.append(measure_cli(args.model, 2 if args.quick else 5))
        figures.extend(measure_cli_start(3 if args.quick else 11))
    if "core" in parts:
        figures.extend(measure_core(args.model, rounds))
    if "redraw" in parts:
        figures.extend(measure_redraw(args.model, 10 if args.quick else 40))
    try:
        if "stall" in parts or "memory" in parts:
            shown = Window(args.model)
            if "stall" in parts:
                figures.append(measure_stall(shown, hub))
            if "memory" in parts:
                figures.extend(measure_memory(shown, 200 if args.quick else 1000))
            shown.close()
    finally:
        hub.stop()

    print(
        f"vramgui speed, {time.strftime('%Y-%m-%d %H:%M')}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    for figure in figures:
        print(figure.line())
    missed = [f.name for f in figures if not f.met]
    if "start" in parts:
        found = ", ".join(f"{m} (by a {t})" for m, t in heavy.items()) or "none"
        print(
            f"heavy modules imported by the first paint: {found}; checked {', '.join(HEAVY_MODULES)}"
        )
        if any(t != "worker" for t in heavy.values()):
            missed.append("heavy imports on the GUI thread before the first paint")
    print(f"missed: {', '.join(missed)}" if missed else "every target met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
