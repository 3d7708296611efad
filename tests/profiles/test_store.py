"""ProfileStore: round trips, and user data surviving every fault we can simulate.

We run as root, where chmod does not stop writes, so a read-only folder is simulated by making the
OS calls that create, rename or link files fail with EACCES, as they do in a read-only folder.
"""

import datetime as dt
import errno
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload
from vramgui.profiles import FORMAT_VERSION, NameTaken, Profile, ProfileError, ProfileStore
from vramgui.profiles.store import slugify


def make(name="70B QLoRA plan", **changes):
    fields = {
        "name": name,
        "model": ModelRef(kind="catalog", id="llama-3.1-70b"),
        "workload": Workload(mode="training", method="qlora", batch=2, seq=4096),
        "gpus": ("RTX 4090",),
        "notes": "two cards",
    }
    fields.update(changes)
    return Profile(**fields)


@pytest.fixture
def store(tmp_path):
    return ProfileStore(tmp_path / "profiles")


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_field_survives_a_round_trip(store):
    stamp = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    profile = Profile(
        name="Serving Qwen on the two 4090s ✓",
        model=ModelRef(kind="local", id="/models/qwen", revision="abc123", file="q4.gguf",
                       size_bytes=4_368_438_272, mtime=1_700_000_000.5),
        workload=Workload(mode="training", batch=3, seq=1234, dtype="fp16", quant="nf4",
                          engine="vllm", kv_dtype="fp8", attention="eager", method="lora",
                          precision="pure", optimizer="adamw-8bit", grad_checkpointing=True,
                          lora_rank=64, lora_targets=("q_proj", "v_proj"), grad_accum=4, gpus=4,
                          zero=3, tp=2, pp=1, overhead_bytes=123_456,
                          gpu_memory_utilization=0.8, cpu_offload=True),
        gpus=("RTX 4090", "local"),
        notes="line one\nline two — ünïcode",
        saved_estimate={"schema": "vramgui.estimate/1", "per_gpu": {"total_bytes": 10**12}},
        created=stamp,
    )  # fmt: skip
    saved = store.save(profile)
    [listing] = store.list()
    assert listing.readable and listing.error is None
    loaded = store.get("serving qwen on the two 4090s ✓")
    assert loaded == saved
    assert loaded.created == stamp  # kept from the profile
    assert loaded.modified >= stamp and loaded.modified.tzinfo is not None
    assert loaded.format_version == FORMAT_VERSION
    for name in ("name", "model", "workload", "gpus", "notes", "saved_estimate"):
        assert getattr(loaded, name) == getattr(profile, name), name


def test_file_format(store):
    store.save(make())
    [path] = store.directory.glob("*.json")
    assert path.name == "70b-qlora-plan.json"
    doc = json.loads(path.read_text())
    assert doc["format"] == "vramgui.profile" and doc["format_version"] == 1
    assert doc["name"] == "70B QLoRA plan"
    assert doc["workload"]["lora-targets"] == "q_proj,k_proj,v_proj,o_proj"


def test_default_directory_follows_vramgui_home(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMGUI_HOME", str(tmp_path / "portable"))
    store = ProfileStore()
    assert store.directory == tmp_path / "portable" / "data" / "profiles"
    assert store.list() == []
    assert not store.directory.exists()  # created on first save, not before
    store.save(make())
    assert store.names() == ["70B QLoRA plan"]


def test_names_are_unique_case_insensitively(store):
    store.save(make("Plan A"))
    with pytest.raises(ProfileError, match="a profile named 'Plan A' exists"):
        store.save(make("  plan a "))
    assert len(list(store.directory.glob("*.json"))) == 1


def test_bad_names(store):
    for bad in ("", "   ", "a\nb", "x" * 201):
        with pytest.raises(ProfileError):
            store.save(make(bad))
    assert store.list() == []


def test_update_keeps_created_and_the_previous_version(store):
    first = store.save(make(created=dt.datetime(2024, 1, 1, tzinfo=dt.UTC)))
    second = store.save(make(notes="changed", created=dt.datetime(2025, 1, 1, tzinfo=dt.UTC)),
                        update=True)  # fmt: skip
    assert second.created == first.created
    assert store.get(first.name).notes == "changed"
    assert len(list(store.directory.glob("*.json"))) == 1
    [kept] = store.versions("70b qlora plan")
    assert kept.profile == first and kept.path.parent == store.directory / "versions"


def test_saving_a_taken_name_replaces_nothing(store):
    # A second save under the name of an existing profile used to replace it when asked to; now
    # only update=True replaces, and even then the replaced version stays restorable.
    store.save(make("Plan", workload=Workload(quant="Q4_K_M", engine="llamacpp")))
    before = snapshot(store.directory)
    with pytest.raises(NameTaken, match="a profile named 'Plan' exists") as taken:
        store.save(make("plan", workload=Workload(quant="Q2_K", engine="llamacpp")))
    assert taken.value.name == "Plan"
    assert snapshot(store.directory) == before
    assert store.versions() == []


def test_restoring_a_version_keeps_the_one_it_replaces(store):
    q4 = store.save(make("Plan", workload=Workload(quant="Q4_K_M", engine="llamacpp")))
    store.save(make("Plan", workload=Workload(quant="Q2_K", engine="llamacpp")), update=True)
    [previous] = store.versions("PLAN")
    restored = store.restore_version(previous)
    assert restored.workload.quant == "Q4_K_M" and restored.created == q4.created
    assert store.get("Plan").workload.quant == "Q4_K_M"
    # Both setups are kept: the restored one as the profile, the Q2_K one as a version.
    assert [v.profile.workload.quant for v in store.versions("plan")] == ["Q2_K", "Q4_K_M"]
    # Restoring again undoes the restore.
    store.restore_version(store.versions("plan")[0])
    assert store.get("Plan").workload.quant == "Q2_K"


def test_a_version_of_a_deleted_or_renamed_profile_comes_back_as_new(store):
    store.save(make("Plan", notes="one"))
    store.save(make("Plan", notes="two"), update=True)
    store.rename("Plan", "Renamed")
    [kept] = store.versions("Plan")
    assert store.restore_version(kept).notes == "one"
    assert sorted(store.names()) == ["Plan", "Renamed"]
    assert [v.name for v in store.versions()] == ["Plan"]


def test_update_of_a_missing_name_saves_a_new_profile(store):
    store.save(make("Fresh"), update=True)
    assert store.names() == ["Fresh"] and store.versions() == []


def test_slug_collisions_get_a_suffix(store):
    store.save(make("Plan: A"))
    store.save(make("Plan A!"))
    assert sorted(p.name for p in store.directory.glob("*.json")) == [
        "plan-a-2.json",
        "plan-a.json",
    ]
    assert slugify("Ünïcödé / name") == "unicode-name"
    assert slugify("★★★") == "profile"
    assert len(slugify("x" * 200)) <= 60


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"format": "vramgui.profile", "format_version": 1, "name": "Tr', "not valid JSON"),
        (b"\x00\xff\xfegarbage\x81", "not valid JSON"),
        (b"", "empty file"),
        (b"[1, 2, 3]", "not a profile"),
        (b'{"hello": "world"}', "not a vramgui profile"),
        (b'{"format": "vramgui.profile", "format_version": 2, "name": "Future"}', "newer vramgui"),
        (b'{"format": "vramgui.profile", "format_version": 1, "name": "X", "model": 3}', "bad profile field"),
        (b'{"format": "vramgui.profile", "format_version": 1, "name": "X", '
         b'"model": {"kind": "hub", "id": "a/b"}, "workload": {"batch": -1}, "gpus": [], '
         b'"created": "2025-01-01T00:00:00+00:00", "modified": "2025-01-01T00:00:00+00:00"}', "bad profile field"),
    ],
)  # fmt: skip
def test_unreadable_files_are_listed_and_never_touched(store, content, reason):
    store.directory.mkdir(parents=True)
    bad = store.directory / "plan-a.json"
    bad.write_bytes(content)
    store.save(make("Plan A"))  # maps to the same slug: must pick another file
    store.save(make("Plan A"), update=True)
    store.save(make("Other"))
    store.delete("Other")
    listings = store.list()
    assert [i.name for i in listings if i.readable] == ["Plan A"]
    [unreadable] = [i for i in listings if not i.readable]
    assert unreadable.path == bad and reason in unreadable.error
    assert bad.read_bytes() == content
    assert store.get("plan a").notes == "two cards"


def test_newer_format_shows_its_name(store):
    store.directory.mkdir(parents=True)
    (store.directory / "future.json").write_text(
        '{"format": "vramgui.profile", "format_version": 9, "name": "From the future"}'
    )
    [listing] = store.list()
    assert listing.name == "From the future" and not listing.readable
    with pytest.raises(ProfileError, match="newer vramgui"):
        store.get("from the future")
    with pytest.raises(ProfileError, match="cannot be read"):
        store.delete("From the future")
    assert (store.directory / "future.json").exists()


def fail_with(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize("call", ["write", "fsync"])
def test_full_disk_loses_nothing(store, monkeypatch, call):
    store.save(make("Keep me"))
    store.save(make("Plan A"))
    before = snapshot(store.directory)
    monkeypatch.setattr(os, call, fail_with(errno.ENOSPC))
    with pytest.raises(ProfileError, match="disk is full"):
        store.save(make("New one"))
    with pytest.raises(ProfileError, match="disk is full"):
        store.save(make("Plan A", notes="changed"), update=True)
    monkeypatch.undo()
    assert snapshot(store.directory) == before  # no temp files left, old files intact
    assert store.get("Plan A").notes == "two cards"


def test_read_only_folder_loses_nothing(store, monkeypatch):
    store.save(make("Keep me"))
    before = snapshot(store.directory)
    real_open = os.open

    def open_read_only(path, flags, *args, **kwargs):
        if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_read_only)
    for name in ("replace", "rename", "link", "unlink", "mkdir"):
        monkeypatch.setattr(os, name, fail_with(errno.EROFS))
    for action in (
        lambda: store.save(make("New")),
        lambda: store.save(make("Keep me", notes="x"), update=True),
        lambda: store.rename("Keep me", "Renamed"),
        lambda: store.delete("Keep me"),
    ):
        with pytest.raises(ProfileError, match="read-only"):
            action()
    monkeypatch.undo()
    assert snapshot(store.directory) == before
    assert store.names() == ["Keep me"]


def test_failing_temp_file_creation(store, monkeypatch):
    store.save(make("Keep me"))
    before = snapshot(store.directory)
    monkeypatch.setattr(tempfile, "mkstemp", fail_with(errno.EACCES))
    with pytest.raises(ProfileError, match="read-only"):
        store.save(make("New"))
    monkeypatch.undo()
    assert snapshot(store.directory) == before


def test_interrupted_write_leaves_the_old_file(store, monkeypatch):
    store.save(make("Plan A"))
    before = snapshot(store.directory)
    real_write = os.write

    def half_then_crash(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        store.save(make("Plan A", notes="new"), update=True)
    monkeypatch.undo()
    assert snapshot(store.directory) == before


def test_file_systems_without_hard_links(store, monkeypatch):
    # FAT and some network shares refuse hard links: saving still works and still never overwrites.
    store.directory.mkdir(parents=True)
    unreadable = store.directory / "plan.json"
    unreadable.write_text("garbage")
    monkeypatch.setattr(os, "link", fail_with(errno.EPERM))
    store.save(make("Plan"))
    store.save(make("Other"))
    assert sorted(store.names()) == ["Other", "Plan"]
    assert unreadable.read_text() == "garbage"
    assert store.get("Plan").name == "Plan"
    assert not list(store.directory.glob(".*.tmp"))


def test_racing_saves_under_one_name(store):
    store.directory.mkdir(parents=True)
    threads_count = 6
    barrier = threading.Barrier(threads_count)
    results: list[object] = []

    def save(i):
        barrier.wait()
        try:
            results.append(store.save(make("Same name", notes=f"writer {i}")))
        except ProfileError as exc:
            results.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(threads_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if isinstance(r, Profile)]
    losers = [r for r in results if isinstance(r, ProfileError)]
    assert len(winners) == 1 and len(losers) == threads_count - 1
    assert all("exists" in str(e) for e in losers)
    [listing] = store.list()
    assert listing.profile.notes == winners[0].notes
    assert not list(store.directory.glob(".*.tmp"))


def test_racing_saves_under_different_names_all_land(store):
    names = [f"Plan {i}" for i in range(8)]
    barrier = threading.Barrier(len(names))

    def save(name):
        barrier.wait()
        store.save(make(name))

    threads = [threading.Thread(target=save, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(store.names()) == names


def test_rename(store):
    store.save(make("Old"))
    store.save(make("Other"))
    with pytest.raises(ProfileError, match="exists"):
        store.rename("Old", "other")
    renamed = store.rename("old", "New name")
    assert renamed.name == "New name"
    assert sorted(store.names()) == ["New name", "Other"]
    assert sorted(p.name for p in store.directory.glob("*.json")) == ["new-name.json", "other.json"]
    store.rename("New name", "NEW NAME")  # case only: same file
    assert sorted(store.names()) == ["NEW NAME", "Other"]
    with pytest.raises(ProfileError, match="no profile named"):
        store.rename("missing", "x")


def test_duplicate(store):
    store.save(make("Plan"))
    assert store.duplicate("plan").name == "Plan (copy)"
    assert store.duplicate("Plan").name == "Plan (copy) (2)"
    assert store.duplicate("Plan", "Variant").workload == store.get("Plan").workload
    with pytest.raises(ProfileError, match="exists"):
        store.duplicate("Plan", "variant")


def test_delete_and_restore(store):
    original = store.save(make("Plan"))
    trashed = store.delete("plan")
    assert store.names() == [] and trashed.trash_path.exists()
    assert trashed.trash_path.parent == store.directory / "trash"
    restored = store.restore(trashed)
    assert restored == original and store.get("Plan") == original
    assert not trashed.trash_path.exists()


def test_restore_refuses_when_the_name_was_taken(store):
    store.save(make("Plan"))
    trashed = store.delete("Plan")
    store.save(make("PLAN", notes="new"))
    with pytest.raises(ProfileError, match="exists now"):
        store.restore(trashed)
    assert trashed.trash_path.exists() and store.get("plan").notes == "new"


def test_export_import_round_trip(store, tmp_path):
    a = store.save(make("A", saved_estimate={"per_gpu": {"total_bytes": 5}}))
    b = store.save(make("B", gpus=("local",)))
    bundle = tmp_path / "share.json"
    assert store.export([], bundle) == ["A", "B"]
    doc = json.loads(bundle.read_text())
    assert doc["format"] == "vramgui.profiles" and len(doc["profiles"]) == 2

    other = ProfileStore(tmp_path / "colleague")
    assert other.import_(bundle) == ["A", "B"]
    assert other.get("A") == a and other.get("B") == b
    # A second import never overwrites: names get a suffix.
    assert other.import_(bundle) == ["A (2)", "B (2)"]
    assert other.get("A (2)").saved_estimate == a.saved_estimate


def test_export_some_and_import_a_single_profile_file(store, tmp_path):
    store.save(make("A"))
    store.save(make("B"))
    bundle = tmp_path / "one.json"
    assert store.export(["b"], bundle) == ["B"]
    assert len(json.loads(bundle.read_text())["profiles"]) == 1
    with pytest.raises(ProfileError, match="no profile named"):
        store.export(["missing"], bundle)
    other = ProfileStore(tmp_path / "other")
    [single] = store.directory.glob("a.json")
    assert other.import_(single) == ["A"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json", "not a JSON file"),
        (b'{"format": "vramgui.profiles", "format_version": 5, "profiles": []}', "newer vramgui"),
        (b'{"format": "vramgui.profiles", "profiles": {}}', "must be a list"),
        (
            b'{"format": "vramgui.profiles", "profiles": [{"format": "vramgui.profile"}]}',
            "profile 1",
        ),
    ],
)
def test_bad_imports_import_nothing(store, tmp_path, content, message):
    store.save(make("Existing"))
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ProfileError, match=message):
        store.import_(path)
    assert store.names() == ["Existing"]


def test_import_of_a_missing_file(store, tmp_path):
    with pytest.raises(ProfileError, match="cannot read"):
        store.import_(tmp_path / "nope.json")


def test_racing_saves_from_separate_processes(store, tmp_path):
    # Two app instances saving under one name: the lock file works across processes too.
    go = tmp_path / "go"
    script = (
        "import sys, time, pathlib\n"
        "from vramgui.core.model import ModelRef\n"
        "from vramgui.profiles import Profile, ProfileError, ProfileStore\n"
        "go = pathlib.Path(sys.argv[2])\n"
        "while not go.exists(): time.sleep(0.005)\n"
        "try:\n"
        "    ProfileStore(pathlib.Path(sys.argv[1])).save(\n"
        "        Profile(name='Shared', model=ModelRef('catalog', 'gpt2'), notes=sys.argv[3]))\n"
        "    print('saved')\n"
        "except ProfileError as exc:\n"
        "    print('refused:', exc)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(store.directory), str(go), f"writer {i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    time.sleep(0.5)  # let the interpreters start and wait on the signal
    go.touch()
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(o.split(":")[0] for o in outputs) == ["refused", "refused", "saved"]
    assert all("exists" in o for o in outputs if o.startswith("refused"))
    [listing] = store.list()
    winner = outputs.index("saved")
    assert listing.profile.notes == f"writer {winner}"


def test_a_profile_saved_before_the_loop_setting_reads_as_trainer(store):
    doc = make(workload=Workload(mode="training", loop="custom")).to_dict()
    assert doc["workload"]["loop"] == "custom"
    assert Profile.from_dict(doc).workload.loop == "custom"
    del doc["workload"]["loop"]
    assert Profile.from_dict(doc).workload.loop == "trainer"


def test_a_serving_profile_keeps_no_setting_of_an_earlier_training_setup(store):
    leftovers = {"method": "qlora", "optimizer": "sgd", "lora_rank": 64, "grad_accum": 4}
    serving = make(workload=Workload(batch=2, **leftovers))
    assert serving.workload == Workload(batch=2)  # the training settings are not this setup's
    written = serving.to_dict()["workload"]
    assert "batch" in written and "engine" in written
    assert not {"method", "optimizer", "lora-rank", "grad-accum"} & set(written)
    # A profile saved before (every setting in its file) still opens, without the leftovers.
    older = serving.to_dict()
    older["workload"].update({"method": "qlora", "optimizer": "sgd", "lora-rank": 64})
    assert Profile.from_dict(older).workload == Workload(batch=2)
    training = make(workload=Workload(mode="training", method="lora", engine="vllm", lora_rank=8))
    assert training.workload.engine == "transformers" and training.workload.lora_rank == 8


_WINDOWS_DEVICES = {"con", "prn", "aux", "nul"} | {
    f"{p}{n}" for p in ("com", "lpt") for n in range(10)
}


def test_names_windows_reserves_for_devices_are_saved_under_other_file_names(store):
    """On Windows a file named con.json or nul.txt is the device, not a file: such a profile was
    lost there. Every one of these is saved, listed and read back, each in a file of its own."""
    names = [
        "CON", "nul", "Aux.txt", "PRN.json", "COM1", "com9.log", "LPT1", "lpt9 . .", "NUL.",
        "con ", "COM¹", "LPT²", "con-profile", "Con Profile", "profile",
    ]  # fmt: skip
    saved = []
    for name in names:
        if store.find(name) is None:
            store.save(make(name))
            saved.append(name.strip())
    stems = [p.name.split(".")[0] for p in store.directory.glob("*.json")]
    assert not {stem.rstrip(" .").casefold() for stem in stems} & _WINDOWS_DEVICES
    assert len(stems) == len(saved)
    assert sorted(store.names(), key=str.casefold) == sorted(saved, key=str.casefold)
    assert all(store.get(name).name == name for name in saved)
