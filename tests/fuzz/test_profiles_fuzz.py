"""Profile files from anywhere: garbage bytes, broken JSON and mutated real profiles.

Listing a folder of such files never raises (each bad file is listed as unreadable, with why);
opening one raises only ``ProfileError``; importing a bundle raises only vramgui errors.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, corpus, parse_safely
from vramgui.profiles.model import Profile, ProfileError
from vramgui.profiles.store import ProfileStore

SEED = corpus("profile.json")
KEYS = sorted({*SEED, *SEED["workload"], *SEED["model"]})

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
where = st.sampled_from(("top", "workload", "model"))


def mutated(changes: list[tuple[str, str, object]], dropped: list[tuple[str, str]]) -> dict:
    doc = json.loads(json.dumps(SEED))

    def part(place: str) -> dict:
        inner = doc if place == "top" else doc.get(place)
        return inner if isinstance(inner, dict) else {}

    for place, key, value in changes:
        part(place)[key] = value
    for place, key in dropped:
        part(place).pop(key, None)
    return doc


def check_folder(folder: Path) -> None:
    store = ProfileStore(folder)
    listings = store.list()  # never raises on bad files
    for listing in listings:
        assert listing.readable or listing.error
    for name in store.names():
        store.get(name)


@FUZZ
@given(
    changes=st.lists(st.tuples(where, st.sampled_from(KEYS), json_values), max_size=4),
    dropped=st.lists(st.tuples(where, st.sampled_from(KEYS)), max_size=3),
)
@example(changes=[("top", "format_version", 10**30)], dropped=[])
@example(changes=[("top", "created", "9" * 5000)], dropped=[])
@example(changes=[("workload", "gpu-memory-utilization", float("nan"))], dropped=[])
@example(changes=[("workload", "seq", 10**30)], dropped=[])
@example(changes=[("top", "workload", [])], dropped=[])
def test_mutated_profiles(tmp_path_factory, changes, dropped) -> None:
    doc = mutated(changes, dropped)
    with contextlib.suppress(ProfileError):
        Profile.from_dict(doc)
    folder = tmp_path_factory.mktemp("profiles")
    (folder / "fuzzed.json").write_text(json.dumps(doc), encoding="utf-8")
    parse_safely(lambda: check_folder(folder))


@FUZZ
@given(raw=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
@example(raw=b"")
@example(raw=b"[" * 200_000)
@example(raw=b'{"format": "vramgui.profile", "format_version": 1, "name": ' + b"[" * 100_000)
@example(raw=b"\xff\xfe\x00")
def test_garbage_files(tmp_path_factory, raw: bytes) -> None:
    folder = tmp_path_factory.mktemp("profiles")
    (folder / "garbage.json").write_bytes(raw)
    parse_safely(lambda: check_folder(folder))
    parse_safely(
        lambda: ProfileStore(tmp_path_factory.mktemp("into")).import_(folder / "garbage.json")
    )
