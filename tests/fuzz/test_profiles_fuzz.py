"""Profile files from anywhere: garbage bytes, broken JSON and mutated real profiles.

Listing a folder of such files never raises (each bad file is listed as unreadable, with why);
opening one raises only ``ProfileError``; importing a bundle raises only vramgui errors; and a
profile that reads back is shown by the command line and the comparison without an error, so
one bad file cannot break the commands on the others.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ, corpus, parse_safely
from vramgui.cli import profile as profile_cli
from vramgui.profiles.model import Profile, ProfileError
from vramgui.profiles.reopen import Reestimate
from vramgui.profiles.store import ProfileStore
from vramgui.ui.compare_view import comparison_rows

SEED = corpus("profile.json")
ESTIMATE = SEED["saved_estimate"]
KEYS = sorted(
    {*SEED, *SEED["workload"], *SEED["model"], *ESTIMATE, *ESTIMATE["per_gpu"], *ESTIMATE["fit"][0]}
)

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
where = st.sampled_from(("top", "workload", "model", "saved_estimate", "per_gpu", "fit"))


def mutated(changes: list[tuple[str, str, object]], dropped: list[tuple[str, str]]) -> dict:
    doc = json.loads(json.dumps(SEED))

    def part(place: str) -> dict:
        if place == "top":
            return doc
        inner = doc.get("saved_estimate") if place in ("per_gpu", "fit") else doc.get(place)
        if place == "per_gpu" and isinstance(inner, dict):
            inner = inner.get("per_gpu")
        if place == "fit" and isinstance(inner, dict):
            rows = inner.get("fit")
            inner = rows[0] if isinstance(rows, list) and rows else None
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
        show(store.get(name))


def show(profile: Profile) -> None:
    """What list, show and compare do with a profile's saved figures (no model is loaded)."""
    profile_cli._profile_summary(profile)
    profile_cli._saved_total(profile)
    profile_cli._changes(profile.saved_estimate, profile.saved_estimate)
    comparison_rows([Reestimate(profile), Reestimate(profile)])


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
@example(changes=[("workload", "gpu-memory-utilization", 10**400)], dropped=[])
@example(changes=[("model", "mtime", 10**400)], dropped=[])
@example(changes=[("saved_estimate", "per_gpu", "x")], dropped=[])
@example(changes=[("saved_estimate", "fit", 5)], dropped=[])
@example(changes=[("per_gpu", "components", [])], dropped=[])
@example(changes=[("per_gpu", "total_bytes", 10**400)], dropped=[])
@example(changes=[("fit", "gpu", None)], dropped=[])
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
