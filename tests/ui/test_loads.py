"""The window's model loads run in child processes that can be stopped.

Two loads that never end once held both of the pool's threads: cancelled or superseded, they
kept running, and every later load (a good one included) waited forever. Now each load is a
child process the window stops when a newer load supersedes it or when it runs past its time
bound, and says why; the threads the outlook and the searches use are never the ones a load
waits on.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.bounded import run_bounded
from tests.ui.slow_loads import load
from vramgui.ui import workers
from vramgui.ui.controller import EstimateController

HOSTILE_CONFIG = {"model_type": "gemma4_text", "head_dim": [256] * 500_000 + [512] * 500_000}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child stays a zombie until its parent (the process server) reaps it; it may be
    # reaped between the signal above and this read.
    if not Path("/proc").is_dir():
        return True
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def _pid(path: Path, qtbot) -> int:
    qtbot.waitUntil(lambda: path.exists() and bool(path.read_text()), timeout=20000)
    return int(path.read_text())


@pytest.fixture
def controller():
    return EstimateController(workers.in_process(load))


def test_superseded_loads_are_stopped_and_a_later_load_finishes(qtbot, controller, tmp_path):
    pids = [tmp_path / "first", tmp_path / "second"]
    for path in pids:
        controller.load_source(f"hang:{path}")
        _pid(path, qtbot)
    controller.load_source("gpt2")
    qtbot.waitUntil(lambda: controller.spec is not None, timeout=20000)
    assert controller.source == "gpt2"
    for path in pids:
        qtbot.waitUntil(lambda p=path: not _alive(int(p.read_text())), timeout=5000)


def test_a_load_past_its_time_bound_is_stopped_and_the_window_says_so(qtbot, tmp_path):
    controller = EstimateController(workers.in_process(load, seconds=1.0))
    said: list[str] = []
    controller.message.connect(said.append)
    controller.load_source(f"hang:{tmp_path / 'pid'}")
    qtbot.waitUntil(lambda: bool(said), timeout=20000)
    assert "it took longer than 1 s (a folder on a slow or hung disk" in said[0]
    if (tmp_path / "pid").exists():  # on a busy machine the bound may come before the child ran
        pid = _pid(tmp_path / "pid", qtbot)
        qtbot.waitUntil(lambda: not _alive(pid), timeout=5000)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("memory:", "Stopped reading 'memory:': it took more than 4 GiB of memory"),
        ("crash:", "the process reading it ended on signal 9"),
    ],
)
def test_a_load_that_runs_out_of_memory_or_dies_says_why(qtbot, controller, source, why):
    said: list[str] = []
    controller.message.connect(said.append)
    controller.load_source(source)
    qtbot.waitUntil(lambda: bool(said), timeout=20000)
    assert why in said[0]
    controller.load_source("gpt2")
    qtbot.waitUntil(lambda: controller.spec is not None, timeout=20000)


def test_a_waiting_load_never_holds_the_threads_other_work_needs(qtbot, controller, tmp_path):
    for name in ("a", "b", "c"):
        controller.load_source(f"hang:{tmp_path / name}")
        # Each supersedes the last; a cancelled load stops within a poll.
    _pid(tmp_path / "c", qtbot)
    got: list[int] = []
    for value in range(4):
        workers.submit(lambda v=value: v, got.append, got.append)
    qtbot.waitUntil(lambda: sorted(got) == [0, 1, 2, 3], timeout=5000)
    controller.load_source("gpt2")
    qtbot.waitUntil(lambda: controller.spec is not None, timeout=20000)


def test_a_failure_in_the_child_is_written_to_the_log_file_with_its_traceback(
    qtbot, controller, log_file
):
    said: list[str] = []
    controller.message.connect(said.append)
    controller.load_source("bug:a reader broke")
    qtbot.waitUntil(lambda: bool(said), timeout=20000)
    assert said[0] == "Could not read the model: RuntimeError: a reader broke"
    logged = log_file.read_text()
    assert "ERROR vramgui.ui.workers: The process reading 'bug:a reader broke' failed: " in logged
    assert "failed: Traceback (most recent call last)" in logged
    # The child's own frames: where it raised, not where the window re-raised it.
    assert 'slow_loads.py", line' in logged
    assert "raise RuntimeError(rest)" in logged
    assert logged.rstrip().endswith("RuntimeError: a reader broke")


def test_a_child_that_dies_is_written_to_the_log_file(qtbot, controller, log_file):
    controller.load_source("crash:")
    qtbot.waitUntil(lambda: "ended on signal 9" in log_file.read_text(), timeout=20000)


def test_the_hostile_config_of_the_probe_ends_in_a_message(qtbot, tmp_path):
    """The config that once froze a worker for minutes: in the application's own load."""
    from vramgui.ui import app

    folder = tmp_path / "gemma4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(HOSTILE_CONFIG, separators=(",", ":")))
    controller = EstimateController(app.real_services().load_model)
    said: list[str] = []
    controller.message.connect(said.append)
    controller.load_source(str(folder))
    qtbot.waitUntil(lambda: bool(said), timeout=20000)
    assert "'head_dim' lists 1,000,000 entries" in said[0]


def test_work_can_ask_whether_it_was_cancelled(qtbot):
    seen: list[bool] = []

    def long_work() -> None:
        while not workers.cancelled():
            time.sleep(0.01)
        seen.append(True)

    worker = workers.submit(long_work, lambda _r: None, lambda _e: None)
    qtbot.wait(50)
    worker.cancel()
    qtbot.waitUntil(lambda: seen == [True], timeout=5000)
    assert workers.cancelled() is False  # off a worker


@pytest.mark.parametrize(
    ("source", "bundled"),
    [
        ("llama-3.1-8b", True),
        ("gpt2", True),
        ("meta-llama/Llama-3.1-8B", False),  # a Hub id: its download may be in the HF cache
        ("ollama:llama3.2", False),
        ("./config.json", False),
        ("no-such-model", False),
    ],
)
def test_only_the_bundled_catalog_is_read_in_the_window_process(source, bundled):
    from vramgui.sources.resolve import is_bundled

    assert is_bundled(source) is bundled


def test_a_folder_named_like_a_catalog_model_is_read_as_the_folder(tmp_path, monkeypatch):
    from vramgui.sources.resolve import is_bundled

    (tmp_path / "gpt2").mkdir()
    monkeypatch.chdir(tmp_path)
    assert not is_bundled("gpt2")


def test_a_child_ends_when_the_window_dies_before_stopping_it(tmp_path):
    """The window killed mid-load: its child once lived on for ever (and the process server
    with it), a hung read holding both."""
    pid_file = tmp_path / "pid"
    run_bounded(
        f"""
        import os, threading, time
        from pathlib import Path
        from tests.ui.slow_loads import load
        from vramgui.ui import workers
        threading.Thread(target=workers.run_in_process, args=(load, "hang:{pid_file}"),
                         daemon=True).start()
        while not Path("{pid_file}").exists():
            time.sleep(0.05)
        os._exit(0)  # no cleanup: as a crash
        """
    )
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
