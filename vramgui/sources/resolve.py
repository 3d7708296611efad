"""One entry point from what the user typed to a ModelSpec, and model search with an offline fallback.

A source is, in this order of precedence: a config.json path, a model folder, a .safetensors or
.gguf file, a name in the bundled catalog, or a Hub repo id (``org/name``, optionally
``org/name@revision`` or ``org/name:file.gguf``). The Hub is only contacted for the last kind.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from vramgui.core.model import ModelRef, ModelSpec
from vramgui.sources import catalog, local
from vramgui.sources.errors import BadModelFile, HubUnavailable, ModelNotFound, SourceError
from vramgui.sources.hub import SEARCH_FRESH_S, HubClient, HubModel

_HUB_SOURCE = re.compile(
    r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?:@(?P<rev>[\w./-]+?))?(?::(?P<file>[\w./-]+\.gguf))?$"
)
_PATH_SUFFIXES = (".json", ".safetensors", ".gguf")


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model spec with where it came from and what the user should know about how it was read.

    Attributes:
        spec: the model.
        ref: enough to find it again (stored in profiles).
        notices: how the source was obtained, to show the user (an offline fallback to cached
            facts, which GGUF file of a repo was read); facts about the model itself are in
            ``spec.warnings``.
    """

    spec: ModelSpec
    ref: ModelRef
    notices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Search results and, when they did not come from the Hub just now, why.

    Attributes:
        results: best first.
        offline_notice: a line to show when the results come from the cache or the catalog
            because the Hub could not answer; None when they are live or fresh from the cache.
    """

    results: tuple[HubModel, ...]
    offline_notice: str | None = None


def load_model(source: str, *, hub: HubClient | None = None) -> LoadedModel:
    """The ModelSpec of a path, catalog name or Hub repo id.

    Raises:
        ModelNotFound: nothing matches; the message lists what was tried.
        SourceError / ConfigError: the model was found but cannot be read (the message says why).
    """
    text = source.strip()
    if not text:
        raise ModelNotFound("no model given: pass a path, a catalog name or a Hub repo id")
    path = Path(text).expanduser()
    if path.exists():
        return _load_path(path)
    if _looks_like_path(text):
        raise ModelNotFound(f"no such file or folder: {path}")
    entry = _catalog_entry(text)
    if entry is not None:
        return LoadedModel(spec=entry.spec(), ref=entry.ref())
    match = _HUB_SOURCE.match(text)
    if match is None:
        raise ModelNotFound(
            f"{text!r} is not a file or folder, not in the bundled catalog, and not a Hub repo id "
            f"(org/name); `vramgui search {text}` lists matching models"
        )
    if hub is None:
        hub = HubClient()
    try:
        return hub.load(match["repo"], match["rev"], match["file"])
    except HubUnavailable as exc:
        raise HubUnavailable(
            f"{exc}; {match['repo']} is neither cached from an earlier visit nor in the bundled "
            "catalog"
        ) from None


def load_ref(ref: ModelRef, *, hub: HubClient | None = None) -> LoadedModel:
    """Load a model again from the reference a profile stored.

    A Hub model is read at the commit it was read at before (from the cache when possible); a
    local file that changed since is read as it is now, with a notice.

    Raises:
        ModelNotFound: the catalog entry, file or repo is gone.
        SourceError / ConfigError: it is there but cannot be read.
    """
    if ref.kind == "catalog":
        entry = _catalog_entry(ref.id)
        if entry is None:
            raise ModelNotFound(f"{ref.id!r} is no longer in the bundled catalog")
        return LoadedModel(spec=entry.spec(), ref=entry.ref())
    if ref.kind == "hub":
        if hub is None:
            hub = HubClient()
        return hub.load(ref.id, ref.revision, ref.file)
    path = Path(ref.id)
    if not path.exists():
        raise ModelNotFound(f"no such file or folder: {path} (it was there when saved)")
    loaded = _load_path(path)
    changed = (ref.size_bytes is not None and ref.size_bytes != loaded.ref.size_bytes) or (
        ref.mtime is not None and ref.mtime != loaded.ref.mtime
    )
    if not changed:
        return loaded
    notice = f"{path} changed since the profile was saved; read as it is now"
    return LoadedModel(spec=loaded.spec, ref=loaded.ref, notices=(*loaded.notices, notice))


def search_models(
    query: str, *, hub: HubClient | None = None, limit: int = 20, max_age_s: float | None = None
) -> SearchResult:
    """Hub models matching ``query``; a recent cached answer is used as is, and when the Hub cannot
    answer, an older cached answer or else the bundled catalog, with a notice saying so.

    Args:
        query: words to search for.
        hub: the client (tests hand in one pointed at a fake Hub).
        limit: most results.
        max_age_s: how old a cached answer may be to be used without asking the Hub; default
            one hour.
    """
    hub = hub or HubClient()
    fresh_for = SEARCH_FRESH_S if max_age_s is None else max_age_s
    cached = hub.cached_search(query, limit)
    if cached is not None and time.time() - cached.fetched_at <= fresh_for:
        return SearchResult(tuple(cached.results))
    try:
        return SearchResult(tuple(hub.search(query, limit)))
    except HubUnavailable as exc:
        reason = str(exc)
    if cached is not None:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(cached.fetched_at))
        return SearchResult(tuple(cached.results), f"{reason}; showing Hub results saved on {when}")
    return SearchResult(
        tuple(_catalog_results(query, limit)),
        f"{reason}; showing models from the bundled catalog",
    )


def _load_path(path: Path) -> LoadedModel:
    resolved = path.resolve()
    if resolved.is_dir():
        spec = local.load_folder(resolved)
        files = [p for p in resolved.iterdir() if p.suffix in (".safetensors", ".gguf", ".json")]
        ref = _local_ref("local", resolved, files)
    elif resolved.name == local.SAFETENSORS_INDEX:
        spec = local.load_folder(resolved.parent)
        ref = _local_ref("local", resolved.parent, [resolved])
    elif resolved.suffix == ".json":
        spec = local.load_config_file(resolved)
        ref = _local_ref("config", resolved, [resolved])
    elif resolved.suffix == ".safetensors":
        spec = local.load_safetensors_file(resolved)
        ref = _local_ref("local", resolved, [resolved])
    elif resolved.suffix == ".gguf":
        spec = local.load_gguf(resolved)
        ref = _local_ref("local", resolved, [resolved])
    else:
        raise BadModelFile(
            f"{path} is not a model vramgui reads: expected a folder, config.json, "
            ".safetensors or .gguf"
        )
    return LoadedModel(spec=spec, ref=ref)


def _local_ref(kind: str, path: Path, files: list[Path]) -> ModelRef:
    try:
        stats = [f.stat() for f in files]
    except OSError:
        return ModelRef(kind=kind, id=str(path))
    return ModelRef(
        kind=kind,
        id=str(path),
        size_bytes=sum(s.st_size for s in stats),
        mtime=max((s.st_mtime for s in stats), default=None),
    )


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~", os.sep)) or (
        text.endswith(_PATH_SUFFIXES) and ":" not in text
    )


def _catalog_entry(name: str) -> catalog.CatalogEntry | None:
    """The catalog entry for ``name``, or None; a broken catalog never blocks other sources."""
    try:
        return catalog.find(name)
    except SourceError:
        return None


def _catalog_results(query: str, limit: int) -> list[HubModel]:
    try:
        entries = catalog.search(query, limit)
    except SourceError:
        return []
    return [
        HubModel(
            id=e.hub_id or e.name,
            parameters=e.parameters,
            gated=e.gated,
            library="transformers",
            pipeline_tag="text-generation",
            source="catalog",
        )
        for e in entries
    ]
