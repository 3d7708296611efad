"""What an import cannot read back is refused at import, with the reason.

A bundle whose one profile held 10,000 GPU names of 1,000 characters was imported ("imported"),
saved as a 10 MB file past the 1 MiB a profile file may hold, and then listed as unreadable
forever; each import added another copy. A value nested hundreds deep was quoted whole in the
message.
"""

from __future__ import annotations

import json

import pytest

from tests.bounded import command, run_bounded
from tests.profiles.test_hardening import make
from vramgui.profiles import MAX_PROFILE_BYTES, ProfileError, ProfileStore
from vramgui.profiles import store as store_module

MANY_GPUS = tuple(f"GPU {i:05d} " + "x" * 990 for i in range(10_000))


@pytest.fixture
def store(tmp_path):
    return ProfileStore(tmp_path / "profiles")


def _bundle(*profiles) -> bytes:
    return json.dumps(
        {
            "format": "vramgui.profiles",
            "format_version": 1,
            "profiles": [p.to_dict() for p in profiles],
        }
    ).encode()


def test_a_profile_too_large_to_read_back_is_not_imported(store):
    store.save(make("mine"))
    before = {p.name for p in store.list()}
    raw = _bundle(make("fine"), make("huge", gpus=MANY_GPUS))
    for _ in range(2):  # each attempt once added another unreadable copy
        with pytest.raises(ProfileError) as refused:
            store.import_bytes(raw, "bundle.json")
        message = str(refused.value)
        assert message.startswith("bundle.json: profile 2: 'huge' would take ")
        assert f"more than the {MAX_PROFILE_BYTES // 2**20} MiB a profile file may hold" in message
        assert message.endswith("; nothing was imported")
        assert {p.name for p in store.list()} == before
    assert all(p.readable for p in store.list())


def test_a_profile_too_large_to_read_back_is_not_saved(store):
    with pytest.raises(ProfileError, match="a profile file may hold"):
        store.save(make("huge", gpus=MANY_GPUS))
    assert store.list() == []


def test_an_export_too_large_to_import_is_refused(store, monkeypatch):
    store.save(make("a"))
    store.save(make("b"))
    monkeypatch.setattr(store_module, "MAX_BUNDLE_BYTES", 2000)
    with pytest.raises(ProfileError, match="more than the 0 MiB an import reads; export fewer"):
        store.bundle([])


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("model", "size_bytes"), "'model.size_bytes' is not a size"),
        (("workload", "batch"), "batch must be an integer"),
        (("created",), "'created' must be a JSON str"),
    ],
)
def test_a_value_nested_hundreds_deep_is_a_short_message(store, path, field):
    """The workload's message once quoted the whole value: 1,970 characters of brackets."""
    document = make("deep").to_dict()
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = json.loads("[" * 900 + "]" * 900)
    raw = json.dumps(document).encode()
    with pytest.raises(ProfileError, match=field) as refused:
        store.import_bytes(raw, "deep.json")
    assert len(str(refused.value)) < 200


def test_the_command_refuses_the_import_in_one_line(tmp_path):
    bundle = tmp_path / "bundle.json"
    bundle.write_bytes(_bundle(make("huge", gpus=MANY_GPUS)))
    env = {"VRAMGUI_HOME": str(tmp_path / "home")}
    done = run_bounded(command("profile", "import", bundle), env=env, codes=(2,))
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "would take 9.6 MiB on disk" in line and "nothing was imported" in line
    listed = run_bounded(command("profile", "list"), env=env)
    assert "unreadable" not in listed.stdout + listed.stderr
