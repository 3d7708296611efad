"""One entry point from what the user typed to a ModelSpec, and model search with an offline fallback.

A source is, in this order of precedence: a config.json path, a model folder, a .safetensors or
.gguf file, a Hub repo id whose weights a tool downloaded whole into the Hugging Face cache, a
name in the bundled catalog, an Ollama model (``ollama:NAME``), or any other Hub repo id
(``org/name``, optionally ``org/name@revision`` or ``org/name:file.gguf``). The Hub is contacted
for the last kind only.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import time
from pathlib import Path

from vramgui.core import storage
from vramgui.core.errors import Command, Message
from vramgui.core.model import ModelRef, ModelSpec
from vramgui.sources import catalog, local
from vramgui.sources.checkpoint import describe_os_error, local_ref, open_regular, regular_size
from vramgui.sources.errors import BadModelFile, HubUnavailable, ModelNotFound, SourceError
from vramgui.sources.gguf_reader import GGUF_MAGIC, load_gguf
from vramgui.sources.hub import SEARCH_FRESH_S, HubClient
from vramgui.sources.results import OLLAMA_PREFIX, HubModel, ResolvedModel, SearchResult

_HUB_SOURCE = re.compile(
    r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?:@(?P<rev>[\w./-]+?))?(?::(?P<file>[\w./-]+\.gguf))?$"
)
_PATH_SUFFIXES = (".json", ".safetensors", ".gguf")
_SHOWN_CHARS = 120


def load_model(source: str, *, hub: HubClient | None = None) -> ResolvedModel:
    """The ModelSpec of a path, catalog name, Ollama model or Hub repo id, with a notice where
    its config.json and its files disagree on the dtype (``dtype_notice``).

    Raises:
        ModelNotFound: nothing matches; the message lists what was tried.
        SourceError / ConfigError: the model was found but cannot be read (the message says why).
    """
    return _with_dtype_notice(_load_model(source, hub))


def _with_dtype_notice(loaded: ResolvedModel) -> ResolvedModel:
    notice = dtype_notice(loaded.spec)
    if not notice:
        return loaded
    return ResolvedModel(spec=loaded.spec, ref=loaded.ref, notices=(*loaded.notices, notice))


def dtype_notice(spec: ModelSpec) -> str:
    """What to say where config.json's ``torch_dtype`` and the stored tensors' headers name
    different dtypes (a bf16 config over fp16 files: the files are what an engine loads), else
    ""."""
    if storage.from_gguf(spec):
        return ""
    config, headers = storage.config_dtype(spec), storage.header_dtype(spec)
    if config is None or headers is None or config == headers:
        return ""
    return (
        f"its config.json says {config} (torch_dtype) but its safetensors headers store "
        f"{headers}: the files are what an engine loads"
    )


def _load_model(source: str, hub: HubClient | None) -> ResolvedModel:
    text = source.strip()
    if not text:
        raise ModelNotFound("no model given: pass a path, a catalog name or a Hub repo id")
    path = _user_path(text)
    if _exists(path):
        return _load_path(path)
    if _looks_like_path(text):
        raise ModelNotFound(f"no such file or folder: {_shown(str(path))}")
    match = _HUB_SOURCE.match(text)
    if match is not None:  # the checkpoint on disk before the catalog's synthesized inventory
        cached = _from_hf_cache(match["repo"], match["rev"], match["file"])
        if cached is not None:
            return cached
    entry = _catalog_entry(text)
    if entry is not None:
        return ResolvedModel(spec=entry.spec(), ref=entry.ref())
    if text.startswith(OLLAMA_PREFIX):
        from vramgui.sources import on_disk  # the stores' readers: imported when first needed

        return on_disk.open_ollama(text.removeprefix(OLLAMA_PREFIX))
    if match is None:
        raise ModelNotFound(
            Message(
                "{text!r} is not a file or folder, not in the bundled catalog, and not a Hub repo "
                "id (org/name); {search} lists matching models",
                text=_shown(text),
                search=Command("search", shlex.quote(_shown(text))),
            )
        )
    try:
        return load_repo(match["repo"], match["rev"], match["file"], hub=hub)
    except HubUnavailable as exc:
        raise HubUnavailable(
            f"{exc}; {match['repo']} is neither in the Hugging Face cache, nor cached from an "
            "earlier visit, nor in the bundled catalog"
        ) from None


def is_bundled(source: str) -> bool:
    """Whether ``load_model(source)`` takes the model from the bundled catalog, vramgui's own
    data: not a file or folder, not a Hub repo id (whose download may be in the Hugging Face
    cache), not an Ollama model. The window reads these at once and anything else in a child
    process."""
    text = source.strip()
    if not text or _looks_like_path(text) or text.startswith(OLLAMA_PREFIX):
        return False
    if _HUB_SOURCE.match(text) and "/" in text:
        return False
    try:
        if _exists(_user_path(text)):
            return False
    except SourceError:
        return False
    return _catalog_entry(text) is not None


def load_repo(
    repo_id: str,
    revision: str | None = None,
    filename: str | None = None,
    *,
    hub: HubClient | None = None,
) -> ResolvedModel:
    """A Hub repo: from the Hugging Face cache when all its weights are there, else the Hub."""
    cached = _from_hf_cache(repo_id, revision, filename)
    if cached is not None:
        return cached
    return (hub or HubClient()).load(repo_id, revision, filename)


def _from_hf_cache(
    repo_id: str, revision: str | None, filename: str | None
) -> ResolvedModel | None:
    # Imported when first needed: the window imports this module on the GUI thread at start.
    from vramgui.sources import hf_cache

    shot = hf_cache.snapshot(repo_id, revision)
    return hf_cache.load_snapshot(shot, filename) if shot is not None else None


def load_ref(ref: ModelRef, *, hub: HubClient | None = None) -> ResolvedModel:
    """Load a model again from the reference a profile stored.

    A Hub model is read at the commit it was read at before (from the Hugging Face cache or
    vramgui's own when possible); a local file that changed since is read as it is now, with a
    notice; a dtype its config.json and its files disagree on, with another.

    Raises:
        ModelNotFound: the catalog entry, file or repo is gone.
        SourceError / ConfigError: it is there but cannot be read.
    """
    return _with_dtype_notice(_load_ref(ref, hub))


def _load_ref(ref: ModelRef, hub: HubClient | None) -> ResolvedModel:
    if ref.kind == "catalog":
        entry = _catalog_entry(ref.id)
        if entry is None:
            raise ModelNotFound(f"{ref.id!r} is no longer in the bundled catalog")
        return ResolvedModel(spec=entry.spec(), ref=entry.ref())
    if ref.kind == "hub":
        return load_repo(ref.id, ref.revision, ref.file, hub=hub)
    if ref.kind == "ollama":
        from vramgui.sources import on_disk

        loaded = on_disk.open_ollama(ref.id)
        what = f"Ollama's {ref.id}"
    else:
        path = Path(ref.id)
        if not _exists(path):
            raise ModelNotFound(f"no such file or folder: {path} (it was there when saved)")
        loaded = _load_path(path)
        what = str(path)
    changed = (ref.size_bytes is not None and ref.size_bytes != loaded.ref.size_bytes) or (
        ref.mtime is not None and ref.mtime != loaded.ref.mtime
    )
    if not changed:
        return loaded
    notice = f"{what} changed since the profile was saved; read as it is now"
    return ResolvedModel(spec=loaded.spec, ref=loaded.ref, notices=(*loaded.notices, notice))


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


def _load_path(path: Path) -> ResolvedModel:
    try:
        resolved = path.resolve()
        is_dir = resolved.is_dir()
    except OSError as exc:
        raise BadModelFile(f"cannot read {_shown(str(path))}: {describe_os_error(exc)}") from None
    except RuntimeError:  # a loop of symbolic links
        raise BadModelFile(f"{_shown(str(path))} is a loop of symbolic links") from None
    if is_dir:
        spec = local.load_folder(resolved)
        names = local.folder_names(resolved)
        files = [resolved / n for n in sorted(names) if n.endswith(_PATH_SUFFIXES)]
        return ResolvedModel(spec=spec, ref=local_ref("local", resolved, files))
    regular_size(resolved)  # a pipe, a device or a socket is refused here, whatever its name
    # What the file is, by the name it was given: in the Hugging Face cache, config.json and
    # model.safetensors are links to blobs named by their hash, with no suffix.
    named = path if path.suffix in _PATH_SUFFIXES else resolved
    # Found again by that name too (a blob's name says nothing of what it is).
    where = named.absolute()
    if named.name == local.SAFETENSORS_INDEX:
        spec = local.load_folder(path.parent)
        return ResolvedModel(spec=spec, ref=local_ref("local", resolved.parent, [resolved]))
    if named.suffix == ".json":
        return ResolvedModel(
            spec=local.load_config_file(path), ref=local_ref("config", where, [resolved])
        )
    if named.suffix == ".safetensors":
        spec = local.load_safetensors_file(path)
    elif named.suffix == ".gguf" or _starts_with(resolved, GGUF_MAGIC):
        spec = load_gguf(resolved)
    else:
        raise BadModelFile(
            f"{_shown(str(path))} is not a model vramgui reads: expected a folder, config.json, "
            ".safetensors or .gguf"
        )
    return ResolvedModel(spec=spec, ref=local_ref("local", where, [resolved]))


def _user_path(text: str) -> Path:
    """``text`` as a path, ``~`` and ``~user`` expanded.

    Raises:
        ModelNotFound: ``~user`` names no user of this system.
    """
    path = Path(text)
    try:
        return path.expanduser()
    except RuntimeError:  # ~user of a user this system does not know
        user = text[1:].split("/", 1)[0].split(os.sep, 1)[0]
        raise ModelNotFound(f"{_shown(text)}: there is no user {user!r} on this system") from None


def _exists(path: Path) -> bool:
    """Whether something is at ``path``; False for names no file could have.

    Raises:
        BadModelFile: it may be there, but this user may not look (permission denied).
    """
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise BadModelFile(f"cannot read {_shown(str(path))}: permission denied") from None
        return False  # too long a name, a loop of links, a file where a folder should be
    except ValueError:  # a NUL character
        return False
    return True


def _starts_with(path: Path, magic: bytes) -> bool:
    """Whether a file begins with ``magic`` (a GGUF file without its suffix: Ollama's blobs)."""
    try:
        with open_regular(path) as fh:
            return fh.read(len(magic)) == magic
    except (OSError, SourceError):
        return False


def _shown(text: str) -> str:
    """``text`` cut for a message: a 3,000-character paste is no help repeated in full. The
    middle goes, so that a long path keeps its file name."""
    if len(text) <= _SHOWN_CHARS:
        return text
    head = _SHOWN_CHARS // 3
    return text[:head] + "…" + text[len(text) - (_SHOWN_CHARS - head - 1) :]


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
