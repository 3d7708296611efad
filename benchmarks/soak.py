"""Soak test: the real window for N minutes under a script, watched for errors, freezes and growth.

The window runs under Xvfb when it is installed (else Qt's offscreen platform) with the real
services, except that the Hub is a fake one on 127.0.0.1 (``tests/fakehub``) and the GPU probe
reports no driver. A timer script keeps poking it the way a person would:

- changes inputs through the widgets (context, batch, quantization, dtypes, mode, method, LoRA
  rank, parallelism), a few per second;
- searches the Hub by typing into the search field, while the fake Hub answers normally, slowly
  (3 s), with a server error or with "too many requests";
- opens saved profiles from the Profiles tab and switches tabs.

Recorded: every exception (``sys.excepthook``, ``threading.excepthook``, worker failures that
are not vramgui's own errors, logged errors), Qt critical messages, frozen frames (the largest
gaps between ticks of a 10 ms timer; over 100 ms counts as frozen) and resident memory (sampled
every 5 s; growth is measured from the end of the first fifth of the run).

    python benchmarks/soak.py [--minutes 10] [--seed 1] [--platform auto|xvfb|offscreen] [--trace]

``--trace`` samples the GUI thread's Python stack every 5 ms while its event loop has not ticked
for 40 ms and prints, with each frame over 50 ms (frozen or not), where the thread was and the
garbage collections that ran.

``--memory N`` follows Python's allocations with tracemalloc: it prints what the first N actions
left allocated (by where it was allocated, the largest first) and, from there to the end, what
the rest added. Memory Qt allocates in C++ (pixmaps, glyphs) is not seen: compare with the RSS.

Prints a summary and exits 1 when an exception, a frozen frame or memory growth was seen.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType, TracebackType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FROZEN_MS = 100.0
SLOW_MS = 50.0  # with --trace, frames over this are traced too
# Where an idle thread waits (a lock, a socket, a sleep): not competing for the interpreter.
IDLE_FUNCTIONS = frozenset(
    {"wait", "select", "poll", "accept", "sleep", "readinto", "recv_into", "_recv_into", "get"}
)
TICK_MS = 10
STEP_MS = 250
RSS_EVERY_S = 5.0
GROWTH_LIMIT_MIB = 30.0
SEARCH_WORDS = ("llama", "qwen", "mistral", "gemma", "phi", "tiny", "zzz-nothing")
HUB_MODES = ("ok", "slow", "error", "throttled")
FAMILIES = ROOT / "tests" / "data" / "families" / "tiny_configs.json"


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass
class Record:
    """What the watchers saw."""

    exceptions: list[str] = field(default_factory=list)
    qt_messages: list[str] = field(default_factory=list)
    # Gaps by whole milliseconds: a list of every tick would itself grow by MiBs in a long run.
    gaps_ms: Counter[int] = field(default_factory=Counter)
    frozen: list[tuple[float, float, float, str]] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)

    def exception(self, text: str) -> None:
        self.exceptions.append(text)
        print(f"soak: exception: {text.splitlines()[-1] if text else text}", flush=True)


def _where(frame: FrameType | None, depth: int = 4) -> str:
    """The innermost ``depth`` frames of a stack, and the innermost of vramgui's own if deeper."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    if not frames:
        return "(no Python frame: Qt's own work)"

    def name(f: FrameType) -> str:
        path = f.f_code.co_filename
        for marker in ("site-packages/", f"{ROOT}/"):
            path = path.split(marker, 1)[-1]
        return f"{path}:{f.f_lineno} {f.f_code.co_name}"

    shown = frames[:depth]
    own = next((f for f in frames if "/vramgui/" in f.f_code.co_filename), None)
    parts = [name(f) for f in shown]
    if own is not None and own not in shown:
        parts.append("... " + name(own))
    return " < ".join(parts)


class FreezeTracer:
    """Samples the GUI thread's stack from another thread while its event loop is not ticking.

    Garbage collections of 5 ms or more are counted too, on whichever thread ran them: the
    collector holds the interpreter lock throughout, so one on a worker stops the GUI thread.
    """

    AFTER_S = 0.04
    EVERY_S = 0.005

    def __init__(self) -> None:
        self._gui = threading.get_ident()
        self._last_tick = time.monotonic()
        self._samples: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="freeze tracer", daemon=True)
        self._thread.start()
        self._gc_started: dict[int, float] = {}
        gc.callbacks.append(self._collected)

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        thread = threading.get_ident()
        if phase == "start":
            self._gc_started[thread] = time.perf_counter()
            return
        seconds = time.perf_counter() - self._gc_started.pop(thread, time.perf_counter())
        if seconds >= 0.005:
            where = "the GUI thread" if thread == self._gui else threading.current_thread().name
            key = f"garbage collection (generation {info['generation']}) on {where}"
            with self._lock:
                self._samples[key] += round(seconds / self.EVERY_S)

    def ticked(self) -> Counter[str]:
        """Called on each tick: the stacks sampled since the previous one."""
        with self._lock:
            samples, self._samples = self._samples, Counter()
            self._last_tick = time.monotonic()
        return samples

    def stop(self) -> None:
        gc.callbacks.remove(self._collected)
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.EVERY_S):
            if time.monotonic() - self._last_tick < self.AFTER_S:
                continue
            frames = sys._current_frames()
            where = [_where(frames.pop(self._gui, None))]
            frames.pop(threading.get_ident(), None)
            # Other threads running Python hold the interpreter lock the GUI thread waits for.
            where += [
                f"(meanwhile, another thread: {_where(frame, depth=2)})"
                for frame in frames.values()
                if frame.f_code.co_name not in IDLE_FUNCTIONS
            ]
            with self._lock:
                self._samples.update(where)


def start_display(platform: str) -> subprocess.Popen[bytes] | None:
    """Start Xvfb on a free display (and select Qt's xcb platform) or select offscreen."""
    use_xvfb = platform == "xvfb" or (platform == "auto" and shutil.which("Xvfb") is not None)
    if not use_xvfb:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        return None
    for number in range(120, 160):
        if Path(f"/tmp/.X11-unix/X{number}").exists() or Path(f"/tmp/.X{number}-lock").exists():
            continue
        server = subprocess.Popen(
            ["Xvfb", f":{number}", "-screen", "0", "1920x1200x24", "-nolisten", "tcp"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and server.poll() is None:
            if Path(f"/tmp/.X11-unix/X{number}").exists():
                os.environ["DISPLAY"] = f":{number}"
                os.environ["QT_QPA_PLATFORM"] = "xcb"
                return server
            time.sleep(0.05)
        server.kill()
    raise SystemExit("soak: Xvfb did not start")


def fake_hub_with_models():  # -> FakeHub; imported late so HF_ENDPOINT is set first
    """A started fake Hub holding the tiny test configs as searchable repos."""
    from tests.fakehub.server import FakeHub

    hub = FakeHub().start()
    configs = json.loads(FAMILIES.read_text(encoding="utf-8"))
    for i, (name, config) in enumerate(sorted(configs.items())):
        hub.add(
            f"soak/{name}",
            {"config.json": json.dumps(config).encode()},
            downloads=1000 - i,
            parameters=1_000_000 * (i + 1),
        )
    return hub


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--platform", choices=("auto", "xvfb", "offscreen"), default="auto")
    parser.add_argument(
        "--trace", action="store_true", help="print where the GUI thread was in each frozen frame"
    )
    parser.add_argument(
        "--memory",
        type=int,
        default=0,
        metavar="N",
        help="with tracemalloc: what the first N actions kept, and what the rest added",
    )
    args = parser.parse_args()

    display = start_display(args.platform)
    home = tempfile.mkdtemp(prefix="vramgui-soak-")
    os.environ["VRAMGUI_HOME"] = home
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    hub = fake_hub_with_models()
    os.environ["HF_ENDPOINT"] = hub.url
    os.environ["HF_HUB_OFFLINE"] = "0"
    try:
        return soak(args, hub)
    finally:
        hub.stop()
        if display is not None:
            display.terminate()
            display.wait(5)
        shutil.rmtree(home, ignore_errors=True)


def soak(args: argparse.Namespace, hub) -> int:
    """Run the window under the script for ``args.minutes``; returns the exit status."""
    from PySide6.QtCore import (
        QElapsedTimer,
        QSettings,
        QThreadPool,
        QTimer,
        QtMsgType,
        qInstallMessageHandler,
    )
    from PySide6.QtTest import QTest

    from vramgui.core.errors import VramguiError
    from vramgui.core.model import ModelRef
    from vramgui.core.workload import Workload
    from vramgui.hardware import GpuSnapshot
    from vramgui.profiles.model import Profile
    from vramgui.profiles.store import ProfileStore
    from vramgui.ui import app, extra_views
    from vramgui.ui.main_window import build_window

    record = Record()
    rng = random.Random(args.seed)
    memory = MemoryWatch(args.memory) if args.memory else None

    def excepthook(
        kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        record.exception("".join(traceback.format_exception(kind, value, tb)))

    def thread_hook(info: threading.ExceptHookArgs) -> None:
        record.exception(
            "".join(traceback.format_exception(info.exc_type, info.exc_value, info.exc_traceback))
        )

    sys.excepthook = excepthook
    threading.excepthook = thread_hook

    def qt_messages(kind: QtMsgType, _context: object, message: str) -> None:
        if kind in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
            record.exception(f"Qt {kind.name}: {message}")
        else:
            record.qt_messages.append(f"{kind.name}: {message}")

    qInstallMessageHandler(qt_messages)

    class ErrorLog(logging.Handler):
        def emit(self, entry: logging.LogRecord) -> None:
            if entry.levelno >= logging.ERROR:
                record.exception(self.format(entry))

    logging.getLogger().addHandler(ErrorLog())

    def guarded(fn):
        """The service, with anything but vramgui's own errors recorded as a bug."""

        def call(*a):
            try:
                return fn(*a)
            except VramguiError:
                raise
            except Exception:
                record.exception(traceback.format_exc())
                raise

        return call

    qapp = app.create_application(sys.argv[:1])
    base = app.real_services()
    services = replace(
        base,
        probe=lambda: GpuSnapshot(reason="No NVIDIA driver found (soak test)."),
        gpu_refresh_ms=0,
        search_models=guarded(base.search_models),
        load_model=guarded(base.load_model),
    )
    store = ProfileStore()
    names = []
    for i, (model, mode) in enumerate(
        (("llama-3.1-8b", "inference"), ("qwen2.5-7b", "training"), ("mixtral-8x7b", "inference"))
    ):
        try:
            store.save(
                Profile(
                    name=f"soak {i} {model}",
                    model=ModelRef(kind="catalog", id=model),
                    workload=Workload(mode=mode, batch=1 + i, seq=1024 * (i + 1)),
                )
            )
            names.append(f"soak {i} {model}")
        except VramguiError as exc:
            print(f"soak: profile for {model} not saved: {exc}")
    settings = QSettings(
        str(Path(os.environ["VRAMGUI_HOME"]) / "soak.ini"), QSettings.Format.IniFormat
    )
    window = build_window(services, settings)
    window.resize(1600, 1000)
    window.show()
    app.freeze_startup_objects()  # as app.main does once the window shows
    profiles_tab = window.extra_tabs.get("Profiles")
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    panel, precision = window.workload_panel, window.precision_panel

    clock = QElapsedTimer()
    clock.start()
    started = time.monotonic()
    duration_s = args.minutes * 60
    last = {"tick": clock.elapsed(), "step": "start", "cpu": time.thread_time()}
    tracer = FreezeTracer() if args.trace else None

    def tick() -> None:
        now = clock.elapsed()
        gap = float(now - last["tick"])
        cpu_ms = (time.thread_time() - last["cpu"]) * 1000
        record.gaps_ms[int(gap)] += 1
        samples = tracer.ticked() if tracer is not None else Counter()
        if gap > FROZEN_MS:
            record.frozen.append(
                (
                    round(time.monotonic() - started, 1),
                    gap,
                    cpu_ms,
                    str(last["step"]),
                )
            )
        if gap > FROZEN_MS or (tracer is not None and gap > SLOW_MS):
            what = "frozen" if gap > FROZEN_MS else "slow (traced, not counted)"
            print(
                f"soak: {what} {gap:.0f} ms after {last['step']} (main thread CPU {cpu_ms:.0f} ms)",
                flush=True,
            )
            for where, count in samples.most_common(4):
                print(
                    f"soak:   {count * FreezeTracer.EVERY_S * 1000:4.0f} ms in {where}", flush=True
                )
        last["tick"] = now
        last["cpu"] = time.thread_time()

    def set_hub(mode: str) -> None:
        hub.delay_s.pop("search", None)
        hub.fail.pop("search", None)
        if mode == "slow":
            hub.delay_s["search"] = 3.0
        elif mode == "error":
            hub.fail["search"] = 500
        elif mode == "throttled":
            hub.fail["search"] = 429

    def combo(widget) -> None:
        widget.setCurrentIndex(rng.randrange(widget.count()))

    inputs = {
        "seq": lambda: panel.seq.spin.setValue(rng.choice((128, 512, 2048, 8192, 32768))),
        "batch": lambda: panel.batch.spin.setValue(rng.randint(1, 64)),
        "quant": lambda: combo(precision.quant),
        "dtype": lambda: combo(precision.dtype),
        "kv_dtype": lambda: combo(precision.kv_dtype),
        "mode": lambda: combo(panel.mode),
        "method": lambda: combo(panel.method),
        "engine": lambda: combo(panel.engine),
        "attention": lambda: combo(panel.attention),
        "optimizer": lambda: combo(panel.optimizer),
        "lora_rank": lambda: panel.lora_rank.spin.setValue(rng.choice((4, 8, 16, 64, 256))),
        "gpus": lambda: panel.gpus.setValue(rng.choice((1, 2, 4, 8))),
        "zero": lambda: combo(panel.zero),
        "tp": lambda: panel.tp.setValue(rng.choice((1, 2, 4))),
        "checkpointing": panel.grad_checkpointing.toggle,
        "seq typed": lambda: (
            panel.seq.spin.selectAll(),
            QTest.keyClicks(panel.seq.spin, str(rng.randint(1, 99999))),
        ),
    }

    def search() -> None:
        mode = rng.choice(HUB_MODES)
        set_hub(mode)
        query = window.model_panel.query
        query.clear()
        QTest.keyClicks(query, rng.choice(SEARCH_WORDS))
        last["step"] = f"search ({mode} Hub)"

    def open_profile() -> None:
        if profiles_tab is None or not names:
            return
        if isinstance(profiles_tab, extra_views.LazyTab) and not profiles_tab.is_built:
            # The view is built when its tab is first shown: go there the way a person would.
            window.tabs.setCurrentIndex(titles.index("Profiles"))
            return
        profiles = extra_views.view_of(profiles_tab)
        if not hasattr(profiles, "select"):
            return
        profiles.select([rng.choice(names)])
        profiles.open_selected()

    def switch_tab() -> None:
        window.tabs.setCurrentIndex(rng.randrange(window.tabs.count()))
        last["step"] = f"tab {window.tabs.tabText(window.tabs.currentIndex())}"

    def step() -> None:
        elapsed = time.monotonic() - started
        if elapsed >= duration_s:
            qapp.quit()
            return
        if memory is not None:
            memory.action(sum(record.steps.values()))
        roll = rng.random()
        # Which tab is showing decides what an input redraws (the Offloading view follows it).
        tab = window.tabs.tabText(window.tabs.currentIndex())
        if roll < 0.06:
            kind = "search"
            search()
        elif roll < 0.08:
            kind = "profile"
            open_profile()
            last["step"] = f"open profile ({tab} tab)"
        elif roll < 0.10:
            kind = "tab"
            switch_tab()
        else:
            kind = rng.choice(tuple(inputs))
            inputs[kind]()
            last["step"] = f"input {kind} ({tab} tab)"
        record.steps[kind] = record.steps.get(kind, 0) + 1

    def sample_rss() -> None:
        record.rss.append((time.monotonic() - started, rss_mib()))

    ticker = QTimer()
    ticker.setInterval(TICK_MS)
    ticker.timeout.connect(tick)
    stepper = QTimer()
    stepper.setInterval(STEP_MS)
    stepper.timeout.connect(step)
    sampler = QTimer()
    sampler.setInterval(int(RSS_EVERY_S * 1000))
    sampler.timeout.connect(sample_rss)

    deadline = time.monotonic() + 60
    while window.controller.outlook is None and time.monotonic() < deadline:
        qapp.processEvents()
    sample_rss()
    if memory is not None:
        memory.start()
    last["tick"], last["cpu"] = clock.elapsed(), time.thread_time()
    for timer in (ticker, stepper, sampler):
        timer.start()
    qapp.exec()
    sample_rss()
    if memory is not None:
        memory.finish()
    for timer in (ticker, stepper, sampler):
        timer.stop()
    if tracer is not None:
        tracer.stop()
    window.close()
    QThreadPool.globalInstance().waitForDone(10_000)
    return summarize(args, record, qapp.platformName())


class MemoryWatch:
    """What the window keeps of the first ``after`` actions, and what the rest add (tracemalloc)."""

    FRAMES = 8
    TOP = 15

    def __init__(self, after: int) -> None:
        import tracemalloc

        self._tracemalloc = tracemalloc
        self.after = after
        self.baseline = None
        self.middle = None
        tracemalloc.start(self.FRAMES)

    def start(self) -> None:
        """The baseline: the window up, its first estimate drawn."""
        gc.collect()
        self.baseline = self._tracemalloc.take_snapshot()

    def action(self, done: int) -> None:
        if done == self.after and self.middle is None:
            gc.collect()
            self.middle = self._tracemalloc.take_snapshot()
            self._print(f"the first {self.after} actions kept", self.baseline, self.middle)

    def finish(self) -> None:
        gc.collect()
        end = self._tracemalloc.take_snapshot()
        if self.middle is not None:
            self._print(f"after action {self.after}, the rest added", self.middle, end)
        self._tracemalloc.stop()

    def _print(self, title: str, before, after) -> None:
        ignore = (self._tracemalloc.Filter(False, self._tracemalloc.__file__),)
        before, after = before.filter_traces(ignore), after.filter_traces(ignore)
        diff = after.compare_to(before, "traceback")
        total = sum(d.size_diff for d in diff)
        print(f"soak: memory: {title}: {total / 2**20:+.2f} MiB of Python objects", flush=True)
        for stat in diff[: self.TOP]:
            if stat.size_diff <= 0:
                continue
            frames = [
                f"{Path(f.filename).name}:{f.lineno}"
                for f in stat.traceback
                if "vramgui" in f.filename or "benchmarks" in f.filename
            ] or [f"{Path(f.filename).name}:{f.lineno}" for f in stat.traceback[:3]]
            print(
                f"soak:   {stat.size_diff / 2**10:+9.1f} KiB in {stat.count_diff:+6d} blocks"
                f"  {' < '.join(frames[:4])}",
                flush=True,
            )


def percentile(counts: Counter[int], q: float) -> float:
    """The ``q`` quantile of values given as value -> count."""
    total = counts.total()
    if not total:
        return 0.0
    rank = min(total - 1, int(q * total))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen > rank:
            return float(value)
    return float(max(counts))


def summarize(args: argparse.Namespace, record: Record, platform: str) -> int:
    """Print what was seen; 1 when anything failed."""
    settled = [mib for t, mib in record.rss if t >= args.minutes * 60 / 5]
    start_mib = record.rss[0][1]
    base_mib = settled[0] if settled else start_mib
    end_mib = record.rss[-1][1]
    growth = end_mib - base_mib
    gaps = record.gaps_ms
    ticks = gaps.total()
    p99 = percentile(gaps, 0.99)
    print(f"soak: {args.minutes:g} min on Qt platform {platform!r}, seed {args.seed}")
    print(
        f"  steps: {sum(record.steps.values())} ({', '.join(f'{k} {v}' for k, v in sorted(record.steps.items()))})"
    )
    print(f"  exceptions: {len(record.exceptions)}")
    for text in record.exceptions[:10]:
        print("    " + text.strip().replace("\n", "\n    "))
    print(f"  Qt messages (not critical): {len(record.qt_messages)}")
    for text in sorted(set(record.qt_messages))[:5]:
        print(f"    {text}")
    print(
        f"  event loop: {ticks} ticks of {TICK_MS} ms, gap median {percentile(gaps, 0.5):.1f} ms,"
        f" p99 {p99:.1f} ms, max {max(gaps, default=0):.0f} ms; frozen (> {FROZEN_MS:.0f} ms): {len(record.frozen)}"
    )
    busy = [f for f in record.frozen if f[2] >= FROZEN_MS]
    print(
        f"    of which the GUI thread itself computed for over {FROZEN_MS:.0f} ms: {len(busy)};"
        " the rest waited (for the CPU or the interpreter lock held by worker threads)"
    )
    by_action: dict[str, list[int]] = {}
    for _at, _gap, cpu_ms, after in record.frozen:
        counts = by_action.setdefault(after, [0, 0])
        counts[0] += 1
        counts[1] += cpu_ms >= FROZEN_MS
    if by_action:
        print(
            "    by the step before: "
            + ", ".join(
                f"{after} {n} ({busy} GUI-busy)"
                for after, (n, busy) in sorted(by_action.items(), key=lambda kv: -kv[1][0])
            )
        )
    for at, gap, cpu_ms, after in sorted(record.frozen, key=lambda f: -f[1])[:10]:
        print(f"    at {at:.0f} s: {gap:.0f} ms after {after} (GUI thread CPU {cpu_ms:.0f} ms)")
    print(
        f"  RSS: {start_mib:.0f} MiB after start, {base_mib:.0f} MiB at {args.minutes / 5:g} min,"
        f" {end_mib:.0f} MiB at the end; growth {growth:+.1f} MiB (limit {GROWTH_LIMIT_MIB:.0f})"
    )
    failed = bool(record.exceptions) or bool(record.frozen) or growth > GROWTH_LIMIT_MIB
    print(f"soak: {'FAILED' if failed else 'passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
