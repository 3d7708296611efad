"""Local stores that once cost minutes, a traceback or the terminal: links in loops and out of
the store, manifests and settings nested 200,000 deep, a digest holding a NUL byte, model names
holding escape sequences. Each is ``vramgui local`` in a child held to 1.5 GB
(tests/bounded.py) over a home built by ``tests.fakehub.stores.hostile_store``: the good models
beside the bad entry are listed, and the bad entry costs only itself, noted with why.
"""

from __future__ import annotations

import json
import unicodedata

import pytest

from tests.bounded import command, run_bounded
from tests.fakehub.stores import ESCAPES, hostile_store
from vramgui.cli import text
from vramgui.sources import local, on_disk
from vramgui.sources.errors import BadModelFile

GOOD = ("ollama:good:latest", "Good-Q4_K_M.gguf")


def _local(tmp_path, case: str, *options: str) -> tuple[str, list[str]]:
    env = hostile_store(tmp_path, case)
    done = run_bounded(command("local", *options), env=env)
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    return done.stdout, notes


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("ollama-40-links-to-itself", "a link to a folder already read: not followed"),
        ("ollama-60-links-to-itself", "a link to a folder already read: not followed"),
        ("lm-studio-400-links-to-itself", "a link to a folder already read: not followed"),
        ("ollama-manifest-nested-200k-deep", "nests too deeply"),
        ("ollama-digest-with-nul", "names a model blob that is not a sha256 digest"),
        ("lm-studio-repo-link-out-of-the-store", "a link out of the store (to "),
        ("lm-studio-settings-nested-200k-deep", "LM Studio's default folders were read"),
    ],
)
def test_a_bad_entry_costs_only_itself_and_says_why(tmp_path, case, why):
    table, notes = _local(tmp_path, case)
    assert all(good in table for good in GOOD), table
    assert notes and why in notes[0], notes
    assert len(notes) <= on_disk.MAX_PROBLEMS + 1
    assert "Outside-GGUF" not in table


def test_a_store_linked_to_the_root_folder_is_not_walked(tmp_path):
    table, notes = _local(tmp_path, "ollama-manifests-link-to-root")
    assert len(notes) == 1
    assert notes[0].endswith("/ollama/manifests: a link out of the store (to /): not followed")
    assert GOOD[1] in table


def test_names_are_printed_with_their_control_characters_escaped(tmp_path):
    table, _ = _local(tmp_path, "ollama-names-with-escapes")
    assert not any(unicodedata.category(c) == "Cc" for c in table.replace("\n", ""))
    assert f"ollama:evil{text.printable(ESCAPES)}:tag{text.printable(ESCAPES)}" in table
    assert len(table.strip().splitlines()) == 4  # the header and three models, one line each


def test_the_json_keeps_the_names_as_they_are(tmp_path):
    document, _ = _local(tmp_path, "ollama-names-with-escapes", "--json")
    names = {m["name"] for m in json.loads(document)["models"]}
    assert f"evil{ESCAPES}:tag{ESCAPES}" in names


def test_printable_escapes_control_and_format_characters_only():
    assert text.printable("llama3.2:3b — 8 B") == "llama3.2:3b — 8 B"
    assert text.printable("a\x1b[31mb\nc\u202ed\x00") == "a\\x1b[31mb\\nc\\u202ed\\x00"


def test_a_folder_of_too_many_entries_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "MAX_FOLDER_ENTRIES", 10)
    for i in range(11):
        (tmp_path / f"f{i}").touch()
    with pytest.raises(BadModelFile, match="over 10 entries"):
        local.folder_names(tmp_path)


def test_a_store_walk_stops_at_its_entry_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(on_disk, "MAX_ENTRIES", 50)
    hostile_store(tmp_path, "ollama-60-links-to-itself")
    found = on_disk.scan(on_disk.Stores(tmp_path / "hf", (tmp_path / "ollama",)))
    assert any("holds over 50 entries; the rest were not read" in p for p in found.problems)
