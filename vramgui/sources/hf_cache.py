"""The shared Hugging Face cache, read as huggingface_hub lays it out; never written here.

``{cache}/models--{org}--{name}/refs/{revision}`` holds a commit hash and
``snapshots/{commit}/`` the repo's files, as links into ``blobs/``: transformers, vLLM and
``hf download`` all fill it, and a file appears in a snapshot only once it is whole. Reading it
takes a few directory listings and no import of huggingface_hub, so that ``vramgui estimate
org/name`` of a downloaded model answers offline in the time of a local file.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from vramgui.core.model import ModelRef
from vramgui.sources import local
from vramgui.sources.checkpoint import read_regular
from vramgui.sources.errors import SourceError
from vramgui.sources.gguf_reader import is_projector, load_gguf, preferred_gguf
from vramgui.sources.hub_http import hub_cache_dir
from vramgui.sources.results import ResolvedModel

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REF_BYTES = 256


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One repo at one commit in the cache.

    Attributes:
        repo_id: ``org/name``.
        commit: the commit hash.
        folder: the snapshot folder (its files are links into the cache's blobs).
        names: the files in it (top level).
    """

    repo_id: str
    commit: str
    folder: Path
    names: frozenset[str]

    def weights(self) -> tuple[list[str], str] | None:
        """The files that hold the model and their format, when all of them are here.

        None for a snapshot that holds no weights or only some shards (a download cut short, or
        only the config.json an estimate fetched).
        """
        if "config.json" in self.names and any(n.endswith(".safetensors") for n in self.names):
            if local.SAFETENSORS_SINGLE in self.names or local.SAFETENSORS_INDEX not in self.names:
                return local.weight_files(self.names), "safetensors"
            try:
                index = local.read_config(
                    self.folder / local.SAFETENSORS_INDEX, local.MAX_INDEX_BYTES
                )
                shards = local.index_shards(index, local.SAFETENSORS_INDEX)
            except SourceError:
                return None
            return (shards, "safetensors") if all(s in self.names for s in shards) else None
        ggufs = sorted(n for n in self.names if n.endswith(".gguf") and not is_projector(n))
        return (ggufs, "gguf") if ggufs else None


def repo_folder(repo_id: str, cache: Path | None = None) -> Path:
    """Where the cache keeps a model repo."""
    return (cache or hub_cache_dir()) / ("models--" + repo_id.replace("/", "--"))


def snapshot(
    repo_id: str, revision: str | None = None, cache: Path | None = None
) -> Snapshot | None:
    """The repo's snapshot at ``revision`` (a branch, tag or commit; default ``main``), or None."""
    folder = repo_folder(repo_id, cache)
    rev = revision or "main"
    commit = rev if _COMMIT.match(rev) else _ref(folder, rev)
    if commit is None:
        return None
    return _snapshot(repo_id, commit, folder / "snapshots" / commit)


def snapshot_at(repo_id: str, folder: Path) -> Snapshot | None:
    """The snapshot in ``folder`` (``.../snapshots/{commit}``) of ``repo_id``, if it is one."""
    return _snapshot(repo_id, folder.name, folder) if _COMMIT.match(folder.name) else None


def cached_snapshots(cache: Path | None = None) -> list[Snapshot]:
    """Every model repo in the cache at the commit ``refs/main`` names (else its newest)."""
    root = cache or hub_cache_dir()
    found = []
    for folder in sorted(_subfolders(root)):
        repo_id = local.hf_cache_repo_id(folder.name)
        if repo_id is None:
            continue
        commit = _ref(folder, "main") or _newest(folder / "snapshots")
        if commit is None:
            continue
        shot = _snapshot(repo_id, commit, folder / "snapshots" / commit)
        if shot is not None:
            found.append(shot)
    return found


def load_snapshot(shot: Snapshot, filename: str | None = None) -> ResolvedModel | None:
    """The model of a complete snapshot, read from its headers; None when it is not complete.

    Its ``spec.source`` names the cache and the commit: the Hub was not asked.

    Args:
        shot: the snapshot.
        filename: for a GGUF repo, which .gguf file (default: as the Hub loader chooses).

    Raises:
        SourceError / ConfigError: the files are there but cannot be read.
    """
    if filename is not None:
        if filename not in shot.names:
            return None
        return _gguf(shot, filename, ())
    weights = shot.weights()
    if weights is None:
        return None
    files, kind = weights
    if kind == "gguf":
        chosen = preferred_gguf(files)
        others = [f for f in files if f != chosen]
        notices: tuple[str, ...] = ()
        if others:
            notices = (
                f"{shot.repo_id} holds {len(files)} GGUF files here; read {chosen} "
                f"(others: {', '.join(others)})",
            )
        return _gguf(shot, chosen, notices)
    spec = local.load_folder(shot.folder, name=shot.repo_id)
    spec = dataclasses.replace(spec, source=f"{_where(shot)} (safetensors headers)")
    ref = ModelRef(kind="hub", id=shot.repo_id, revision=shot.commit)
    return ResolvedModel(spec=spec, ref=ref)


def _gguf(shot: Snapshot, filename: str, notices: tuple[str, ...]) -> ResolvedModel:
    spec = load_gguf(shot.folder / filename, name=shot.repo_id)
    return ResolvedModel(
        spec=dataclasses.replace(spec, source=f"{_where(shot)} {filename}"),
        ref=ModelRef(kind="hub", id=shot.repo_id, revision=shot.commit, file=filename),
        notices=notices,
    )


def _where(shot: Snapshot) -> str:
    """Where a model was read, for the line under its name: the Hub was not asked."""
    return f"Hugging Face cache, {shot.repo_id}@{shot.commit[:12]}"


def _snapshot(repo_id: str, commit: str, folder: Path) -> Snapshot | None:
    try:
        names = frozenset(local.folder_names(folder))
    except SourceError:
        return None
    return Snapshot(repo_id, commit, folder, names)


def _ref(folder: Path, revision: str) -> str | None:
    """The commit a ref file names; None when absent, unreadable or not a commit hash."""
    if "/" in revision or revision in ("", ".", ".."):
        return None
    try:
        text = read_regular(folder / "refs" / revision, _REF_BYTES, "ref").decode("ascii").strip()
    except (SourceError, UnicodeDecodeError):
        return None
    return text if _COMMIT.match(text) else None


def _newest(snapshots: Path) -> str | None:
    newest: tuple[float, str] | None = None
    for folder in _subfolders(snapshots):
        try:
            when = folder.stat().st_mtime
        except OSError:
            continue
        if _COMMIT.match(folder.name) and (newest is None or when > newest[0]):
            newest = (when, folder.name)
    return newest[1] if newest else None


def _subfolders(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as entries:
            return [Path(e.path) for e in entries if e.is_dir()]
    except OSError:
        return []
