"""Hostile profile folders and files: one bad profile, huge or special files, crashed savers,
several writers at once, export targets that are not regular files.

Each test is a reproduction that broke the store before (the message or hang it gave is in its
comment) and must keep passing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from tests.fuzz.conftest import bounded
from vramgui import files
from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload
from vramgui.profiles import (
    MAX_BUNDLE_BYTES,
    MAX_NOTES_LENGTH,
    MAX_PROFILE_BYTES,
    Profile,
    ProfileError,
    ProfileStore,
)
from vramgui.profiles import store as store_module

ROOT = Path(__file__).resolve().parents[2]
GOOD_ESTIMATE = {
    "schema": "vramgui.estimate/1",
    "model": {"name": "llama-3.1-8b", "parameters": 8_030_261_248},
    "per_gpu": {
        "total_bytes": 18_000_000_000,
        "phase": "decode",
        "components": {"weights": 16_000_000_000, "kv_cache": 2_000_000_000},
    },
    "fit": [{"gpu": "RTX 4090", "capacity_bytes": 24 * 2**30, "fits": True, "headroom_bytes": 7}],
}


def make(name: str, **changes) -> Profile:
    fields = {
        "name": name,
        "model": ModelRef(kind="catalog", id="llama-3.1-8b"),
        "workload": Workload(seq=8192),
        "gpus": ("RTX 4090",),
        "saved_estimate": GOOD_ESTIMATE,
    }
    fields.update(changes)
    return Profile(**fields)


@pytest.fixture
def store(tmp_path) -> ProfileStore:
    return ProfileStore(tmp_path / "profiles")


@contextlib.contextmanager
def peak_allocation():
    """Yields a one-item list that holds the peak Python allocation of the block afterwards."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def mutate(doc: dict, path: str, value: object) -> dict:
    doc = json.loads(json.dumps(doc))
    *parents, key = path.split(".")
    inner = doc
    for part in parents:
        inner = inner[part]
    inner[key] = value
    return doc


# Item 5: one bad profile broke list, show, compare, export and even saving a new profile
# (OverflowError), or crashed `profile list` / `profile show` (AttributeError, TypeError).
BAD_FIELDS = [
    ("workload.gpu-memory-utilization", 10**400, "'workload' holds a number out of range"),
    ("model.mtime", 10**400, "'model.mtime' is not a time (a number of about 401 digits)"),
    ("model.size_bytes", -5, "'model.size_bytes' is not a size"),
    ("saved_estimate.per_gpu", "x", "'saved_estimate.per_gpu' must be a JSON object"),
    ("saved_estimate.per_gpu", None, "'saved_estimate.per_gpu' must be a JSON object"),
    ("saved_estimate.fit", 5, "'saved_estimate.fit' must be a list"),
    ("saved_estimate.fit", [5], "'saved_estimate.fit[0]' must be a JSON object"),
    ("saved_estimate.per_gpu.components", [], "components' must be a JSON object"),
    ("saved_estimate.per_gpu.total_bytes", 10**400, "is not a byte count"),
    ("saved_estimate.per_gpu.components.weights", "many", "is not a byte count"),
    ("saved_estimate.fit", [{"gpu": 3}], "'saved_estimate.fit[0].gpu' must be text"),
    ("saved_estimate.model", {"name": {"deep": []}}, "must be a plain value"),
]


@pytest.mark.parametrize(
    ("field", "value", "reason"), BAD_FIELDS, ids=[f"{f}={v!r:.12}" for f, v, _ in BAD_FIELDS]
)
def test_one_bad_profile_leaves_every_other_working(store, tmp_path, field, value, reason):
    good = store.save(make("Good"))
    bad_doc = mutate(make("Bad").to_dict(), field, value)
    bad = store.directory / "bad.json"
    bad.write_text(json.dumps(bad_doc))
    before = bad.read_bytes()

    listings = store.list()
    assert [(i.name, i.readable) for i in listings] == [("Good", True), ("Bad", False)]
    assert reason in listings[1].error
    with pytest.raises(ProfileError, match="'Bad' cannot be read"):
        store.get("bad")
    assert store.get("good") == good
    store.save(make("Another"))
    store.save(make("Good", notes="updated"), update=True)
    assert store.export([], tmp_path / "all.json") == ["Another", "Good"]
    assert bad.read_bytes() == before  # never touched


def test_the_profile_tab_reader_survives_what_the_core_raises(store, monkeypatch):
    # A field the core's own reader chokes on (any exception, not only ours) costs that file.
    store.save(make("Good"))
    (store.directory / "odd.json").write_text(json.dumps(make("Odd").to_dict()))
    real = Profile.from_dict.__func__

    def from_dict(cls, data):
        if data.get("name") == "Odd":
            raise ZeroDivisionError("a bug in a reader")
        return real(cls, data)

    monkeypatch.setattr(Profile, "from_dict", classmethod(from_dict))
    listings = store.list()
    assert [i.readable for i in listings] == [True, False]
    assert "ZeroDivisionError: a bug in a reader" in listings[1].error


# Item 6: import and listing read whole files with no cap: /dev/zero was read until the process
# was killed at 5.9 GB, and a profile with 100 MB of notes cost 312 MB on every listing.
def test_import_refuses_a_device_at_once(store):
    # In a child with its memory capped: a reader that regressed fails with MemoryError there
    # instead of taking the test machine's memory.
    script = textwrap.dedent(
        """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
        from pathlib import Path
        from vramgui.profiles import ProfileError, ProfileStore
        try:
            ProfileStore(Path(sys.argv[1])).import_(Path("/dev/zero"))
        except ProfileError as exc:
            print(exc)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", script, str(store.directory)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.stdout.strip() == "cannot read /dev/zero: a device, not a regular file", done.stderr


def test_import_refuses_a_named_pipe_without_waiting_for_a_writer(store, tmp_path):
    pipe = tmp_path / "plans.json"
    os.mkfifo(pipe)
    with bounded(5), pytest.raises(ProfileError, match="a named pipe, not a regular file"):
        store.import_(pipe)


def test_import_refuses_a_file_past_the_cap_before_reading_it(store, tmp_path):
    huge = tmp_path / "huge.json"
    with huge.open("wb") as fh:
        fh.truncate(MAX_BUNDLE_BYTES + 1)  # sparse: no disk used, no bytes to read
    with peak_allocation() as peak, pytest.raises(ProfileError, match=r"more than the 32\.00 MiB"):
        store.import_(huge)
    assert peak[0] < 1 * 2**20
    assert store.list() == []


def test_a_huge_profile_file_is_listed_unreadable_without_being_read(store):
    store.save(make("Good"))
    huge = store.directory / "notes.json"
    doc = make("Big notes").to_dict()
    doc["notes"] = "x" * (100 * 2**20)
    huge.write_text(json.dumps(doc))
    with peak_allocation() as peak:
        listings = store.list()
    assert peak[0] < 2 * 2**20  # was 312 MB for this file
    assert [i.readable for i in listings] == [True, False]
    assert "100.00 MiB, more than the 1.00 MiB accepted" in listings[1].error


def test_special_files_in_the_folder_are_listed_not_read(store):
    store.save(make("Good"))
    os.mkfifo(store.directory / "pipe.json")
    (store.directory / "zero.json").symlink_to("/dev/zero")
    (store.directory / "folder.json").mkdir()
    with bounded(5):
        listings = store.list()
        store.save(make("Other"))
    unreadable = {i.path.name: i.error for i in listings if not i.readable}
    assert unreadable == {
        "folder.json": "cannot be read: a folder, not a regular file",
        "pipe.json": "cannot be read: a named pipe, not a regular file",
        "zero.json": "cannot be read: a device, not a regular file",
    }


def test_notes_are_capped_on_save_and_import(store, tmp_path):
    long_notes = "n" * (MAX_NOTES_LENGTH + 1)
    with pytest.raises(ProfileError, match="at most 20,000 characters"):
        store.save(make("Long", notes=long_notes))
    bundle = tmp_path / "long.json"
    bundle.write_text(json.dumps(make("Long", notes=long_notes).to_dict()))
    with pytest.raises(ProfileError, match="profile 1: profile notes can have at most"):
        store.import_(bundle)
    assert store.list() == []
    assert store.save(make("Fits", notes="n" * MAX_NOTES_LENGTH)).notes


def test_the_largest_real_profile_is_far_below_the_file_cap(store):
    # 126 layers, three GPUs, the longest notes: what vramgui writes must read back.
    estimate = dict(GOOD_ESTIMATE, layers=[{"index": i, "bytes": 2**30} for i in range(126)])
    store.save(make("Big", notes="n" * MAX_NOTES_LENGTH, saved_estimate=estimate))
    [path] = store.directory.glob("*.json")
    assert path.stat().st_size < MAX_PROFILE_BYTES / 4
    assert store.get("Big").notes


# Item 7: a crash mid-save left a `.lock` that blocked saves for 30 s and `.tmp` files forever;
# breaking a stale lock was racy; every save re-read the folder under the lock, so of four
# writers at once two were refused.
CHILD = textwrap.dedent(
    """
    import os, sys, time, pathlib
    from vramgui.core.model import ModelRef
    from vramgui.profiles import Profile, ProfileStore

    folder, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
    store = ProfileStore(folder)
    if mode == "hang-in-save":
        def hang(fd):
            print("writing", flush=True)
            time.sleep(600)
        os.fsync = hang
        store.save(Profile(name="Never finished", model=ModelRef("catalog", "gpt2")))
    elif mode == "writer":
        # Parsing a profile takes 2 ms here (a slow disk, a busy machine): work that grows with
        # the folder while holding the lock shows as saves refused as busy.
        import json
        parse = json.loads
        def slow(text, *args, **kwargs):
            time.sleep(0.002)
            return parse(text, *args, **kwargs)
        json.loads = slow
        go = pathlib.Path(sys.argv[3])
        while not go.exists():
            time.sleep(0.002)
        for i in range(int(sys.argv[5])):
            store.save(Profile(name=f"{sys.argv[4]} {i}", model=ModelRef("catalog", "gpt2")))
        print("done", flush=True)
    """
)


def child(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, text=True, env=env
    )


def test_a_save_killed_while_holding_the_lock_blocks_nothing_and_leaves_no_temp_file(
    store, monkeypatch
):
    store.save(make("Kept"))
    proc = child(str(store.directory), "hang-in-save")
    assert proc.stdout.readline().strip() == "writing"  # inside the lock, temp file written
    assert list(store.directory.glob(".*.tmp"))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    # The dead process's lock went with it: a save neither waits 30 s nor is refused as busy.
    monkeypatch.setattr(store_module, "LOCK_WAIT_SECONDS", 1.0)
    store.save(make("After the crash"))
    assert sorted(store.names()) == ["After the crash", "Kept"]
    assert not list(store.directory.glob(".*.tmp"))
    assert (store.directory / ".lock").exists()  # the lock file stays; its lock does not


def test_a_lock_file_left_by_an_older_version_blocks_nothing(store, monkeypatch):
    store.directory.mkdir(parents=True)
    (store.directory / ".lock").write_text("12345")  # fresh: the old scheme waited 30 s on it
    monkeypatch.setattr(store_module, "LOCK_WAIT_SECONDS", 1.0)
    store.save(make("Plan"))
    assert store.names() == ["Plan"]


def test_a_live_holder_makes_others_wait_then_refuse_as_busy(store, monkeypatch):
    store.directory.mkdir(parents=True)
    monkeypatch.setattr(store_module, "LOCK_WAIT_SECONDS", 0.2)
    held, release = threading.Event(), threading.Event()

    def hold():
        with files.locked(store.directory / ".lock", 5):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        with pytest.raises(ProfileError, match="is busy"):
            store.save(make("Plan"))
    finally:
        release.set()
        holder.join()
    store.save(make("Plan"))
    assert store.names() == ["Plan"]


def test_four_writers_at_once_all_succeed(store, tmp_path):
    # Each save parsed every profile of the folder while holding the lock, so writers waited
    # past the deadline and were refused as busy.
    store.directory.mkdir(parents=True)
    estimate = dict(GOOD_ESTIMATE, layers=[{"index": i, "bytes": 2**30} for i in range(126)])
    for i in range(400):
        doc = make(f"Existing {i}", saved_estimate=estimate).to_dict()
        (store.directory / f"existing-{i}.json").write_text(json.dumps(doc, indent=1))
    go = tmp_path / "go"
    writers = [child(str(store.directory), "writer", str(go), f"Writer {w}", "10") for w in "ABCD"]
    time.sleep(1.0)  # the interpreters start and wait on the signal
    go.touch()
    outputs = [w.communicate(timeout=120)[0].strip() for w in writers]
    assert outputs == ["done"] * 4
    names = set(store.names())
    assert len(names) == 440
    assert {f"Writer {w} {i}" for w in "ABCD" for i in range(10)} <= names
    assert not list(store.directory.glob(".*.tmp"))


def test_the_listing_parses_a_file_again_only_when_it_changed(store, monkeypatch):
    for i in range(5):
        store.save(make(f"Plan {i}"))
    store.list()
    reads = []
    real = store_module._read_listing
    monkeypatch.setattr(store_module, "_read_listing", lambda p: reads.append(p.name) or real(p))
    store.list()
    assert reads == []
    store.save(make("Plan 0", notes="changed"), update=True)
    store.list()
    assert reads == ["plan-0.json"]


# Item 8: export replaced whatever was there: a symlink or named pipe became a regular file,
# and as root `profile export /dev/stdout` replaced the device link.
def test_export_never_writes_through_or_replaces_a_symlink(store, tmp_path):
    store.save(make("Plan"))
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    for replace in (False, True):
        with pytest.raises(ProfileError, match="is a symbolic link: an export is written only"):
            store.export([], link, replace=replace)
    assert link.is_symlink() and target.read_text() == "keep me"


def test_export_refuses_a_named_pipe_and_a_device(store, tmp_path):
    store.save(make("Plan"))
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    with bounded(5), pytest.raises(ProfileError, match="is a named pipe"):
        store.export([], pipe, replace=True)
    assert pipe.is_fifo()
    with pytest.raises(ProfileError, match="is a device"):
        store.export([], Path("/dev/null"), replace=True)
    stdout_link = tmp_path / "stdout"
    stdout_link.symlink_to("/dev/stdout")
    with pytest.raises(ProfileError, match="is a symbolic link"):
        store.export([], stdout_link, replace=True)
    assert stdout_link.is_symlink()


def test_export_replaces_a_regular_file_only_when_asked(store, tmp_path):
    store.save(make("Plan"))
    existing = tmp_path / "plans.json"
    existing.write_text("an older export")
    with pytest.raises(ProfileError, match="exists; choose another file name"):
        store.export([], existing)
    assert existing.read_text() == "an older export"
    assert store.export([], existing, replace=True) == ["Plan"]
    assert json.loads(existing.read_text())["profiles"][0]["name"] == "Plan"


def test_read_regular_refuses_a_file_that_grows_past_the_cap(tmp_path, monkeypatch):
    path = tmp_path / "growing.json"
    path.write_bytes(b"x" * 10)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, n) + b"y" * 20)
    with pytest.raises(files.RefusedFile, match="more than the"):
        files.read_regular(path, 16)
