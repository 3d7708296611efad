"""Models other tools downloaded to this machine: the Hugging Face cache, Ollama, LM Studio.

Each store is read as its tool lays it out, and only read: nothing here creates, changes or
locks a file in them. Anyone can put anything in them, so a walk is bounded: no recursion, each
folder once, ``MAX_ENTRIES`` entries, and links followed only to places inside the store; an
entry that cannot be read (a link out of the store or in a loop, a manifest that is not JSON or
nests too deep, a digest that is not sha256) costs only itself and is listed, with why, among
the scan's problems.

- Hugging Face cache (``hf_cache``): every model repo whose snapshot holds all its weights.
- Ollama (``OLLAMA_MODELS``, else ``~/.ollama/models``, or the Linux service's
  ``/usr/share/ollama/.ollama/models``): ``manifests/{registry}/{namespace}/{model}/{tag}`` name
  the ``blobs/sha256-...`` that hold each model's GGUF file.
- LM Studio (``~/.lmstudio/models``, the older ``~/.cache/lm-studio/models``, or the
  ``downloadsFolder`` of ``~/.lmstudio/settings.json``): ``{publisher}/{repo}/`` folders of GGUF
  files (or an MLX model's config.json and safetensors).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vramgui.sources import hf_cache, local
from vramgui.sources.checkpoint import describe_os_error, local_ref, open_regular, read_regular
from vramgui.sources.errors import BadModelFile, ModelNotFound, SourceError
from vramgui.sources.gguf_reader import GGUF_MAGIC, is_projector, load_gguf
from vramgui.sources.hub_http import hub_cache_dir
from vramgui.sources.local import parse_json
from vramgui.sources.results import OLLAMA_PREFIX, LocalModel, ResolvedModel

HF_CACHE = "Hugging Face cache"
OLLAMA = "Ollama"
LM_STUDIO = "LM Studio"
OLLAMA_REGISTRY = "registry.ollama.ai"
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
_MANIFEST_BYTES = 1024 * 1024
_SETTINGS_BYTES = 1024 * 1024
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A store's walk reads at most this many entries (Ollama's manifests of thousands of models are
# far below), and lists at most this many of the entries it passed over, with why.
MAX_ENTRIES = 100_000
MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class Stores:
    """Where to look. ``default_stores()`` reads the environment; tests hand in folders.

    Attributes:
        hf_cache: the Hugging Face hub cache folder.
        ollama: Ollama model folders (each with ``manifests/`` and ``blobs/``).
        lm_studio: LM Studio models folders.
        problems: what could not be read while finding them (LM Studio's settings).
    """

    hf_cache: Path
    ollama: tuple[Path, ...] = ()
    lm_studio: tuple[Path, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Scan:
    """What a scan found, and the stores it could not read (with why)."""

    models: tuple[LocalModel, ...]
    problems: tuple[str, ...] = field(default=())


def default_stores() -> Stores:
    """The stores of this user, as each tool finds them."""
    home = Path.home()
    ollama = [Path(os.environ["OLLAMA_MODELS"])] if os.environ.get("OLLAMA_MODELS") else []
    ollama += [home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]
    studio = [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    problems: list[str] = []
    chosen = _lm_studio_setting(home / ".lmstudio" / "settings.json", problems)
    if chosen is not None:
        studio.insert(0, chosen)
    return Stores(hub_cache_dir(), _unique_dirs(ollama), _unique_dirs(studio), tuple(problems))


def scan(stores: Stores | None = None) -> Scan:
    """Every model found in the stores, largest first within each store."""
    stores = stores or default_stores()
    found: list[LocalModel] = []
    problems = list(stores.problems)
    found.extend(_collect(_hf_models(stores.hf_cache), problems))
    for root in stores.ollama:
        found.extend(_collect(_ollama_models(root, problems), problems))
    for folder in stores.lm_studio:
        found.extend(_collect(_lm_studio_models(folder, problems), problems))
    return Scan(tuple(found), tuple(_bounded(problems)))


def open_model(model: LocalModel) -> ResolvedModel:
    """The model of a scan entry, read from its files only (no network).

    Raises:
        ModelNotFound: it is gone, or no longer complete.
        SourceError / ConfigError: it cannot be read.
    """
    if model.where == HF_CACHE:
        repo = model.source.partition(":")[0].partition("@")[0]
        folder = model.path if model.format == "safetensors" else model.path.parent
        shot = hf_cache.snapshot_at(repo, folder)
        filename = model.path.name if model.format == "gguf" else None
        loaded = hf_cache.load_snapshot(shot, filename) if shot else None
        if loaded is None:
            raise ModelNotFound(f"{model.name} is no longer complete in the Hugging Face cache")
        return loaded
    if model.where == OLLAMA:
        return _ollama_model(model.name, model.path)
    return _opened_path(model.path, model.name)


def open_ollama(name: str, stores: Stores | None = None) -> ResolvedModel:
    """An Ollama model by the name ``ollama list`` shows (``llama3.2``, ``llama3.2:3b``).

    Raises:
        ModelNotFound: no such model in Ollama's stores.
    """
    stores = stores or default_stores()
    wanted = _ollama_key(name)
    for root in stores.ollama:
        for model in _collect(_ollama_models(root, []), []):
            if _ollama_key(model.name) == wanted:
                return _ollama_model(model.name, model.path)
    where = ", ".join(str(p) for p in stores.ollama) or "nowhere"
    raise ModelNotFound(f"no Ollama model {name!r} in {where} (`ollama list` shows the names)")


# ---------------------------------------------------------------------- Hugging Face cache


def _hf_models(cache: Path) -> Iterator[LocalModel]:
    for shot in hf_cache.cached_snapshots(cache):
        weights = shot.weights()
        if weights is None:
            continue
        files, kind = weights
        main = hf_cache.snapshot(shot.repo_id, None, cache)
        source = (
            shot.repo_id if main and main.commit == shot.commit else f"{shot.repo_id}@{shot.commit}"
        )
        if kind == "safetensors":
            yield LocalModel(
                shot.repo_id, HF_CACHE, source, shot.folder, _sizes(shot.folder, files), kind
            )
            continue
        for name in files:
            yield LocalModel(
                f"{shot.repo_id}:{name}",
                HF_CACHE,
                f"{source}:{name}",
                shot.folder / name,
                _sizes(shot.folder, [name]),
                kind,
            )


# ---------------------------------------------------------------------- Ollama


def _ollama_models(root: Path, problems: list[str]) -> Iterator[LocalModel]:
    """Each model a manifest names; a manifest that cannot be read costs only itself, and says
    why in ``problems``."""
    manifests = root / "manifests"
    for path in _entries_at_depth(manifests, 4, root, problems):
        host, namespace, model, tag = path.relative_to(manifests).parts
        try:
            manifest = parse_json(read_regular(path, _MANIFEST_BYTES, "Ollama manifest"), str(path))
            digest, size = _model_layer(manifest, path)
        except SourceError as exc:
            problems.append(str(exc))
            continue
        if not digest:
            continue  # no model layer: an adapter or a projector alone
        blob = root / "blobs" / digest.replace(":", "-")
        if not _is_gguf(blob):
            continue
        name = _ollama_name(host, namespace, model, tag)
        yield LocalModel(name, OLLAMA, f"{OLLAMA_PREFIX}{name}", blob, size, "gguf")


def _model_layer(manifest: object, path: Path) -> tuple[str, int]:
    """The digest and size of a manifest's model layer; ("", 0) when it has none.

    Raises:
        BadModelFile: the layer's digest is not a sha256 digest (the name of a file in blobs/).
    """
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    for layer in layers if isinstance(layers, list) else ():
        if not isinstance(layer, dict) or layer.get("mediaType") != OLLAMA_MODEL_LAYER:
            continue
        digest, size = layer.get("digest"), layer.get("size")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise BadModelFile(f"{path} names a model blob that is not a sha256 digest")
        return digest, size if isinstance(size, int) and size >= 0 else 0
    return "", 0


def _ollama_name(host: str, namespace: str, model: str, tag: str) -> str:
    """The name ``ollama list`` shows: the default registry and namespace left out."""
    if host != OLLAMA_REGISTRY:
        return f"{host}/{namespace}/{model}:{tag}"
    if namespace != "library":
        return f"{namespace}/{model}:{tag}"
    return f"{model}:{tag}"


def _ollama_key(name: str) -> str:
    name = name.strip().removeprefix(OLLAMA_PREFIX)
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def _ollama_model(name: str, blob: Path) -> ResolvedModel:
    loaded = _opened_path(blob, name)
    digest = blob.name.removeprefix("sha256-")[:12]
    spec = dataclasses.replace(loaded.spec, source=f"Ollama, {name} (GGUF blob {digest})")
    # Found again by its name (a new pull of the same tag is a new blob), the blob's size and
    # time kept to notice that it changed.
    ref = dataclasses.replace(loaded.ref, kind="ollama", id=name)
    return ResolvedModel(spec=spec, ref=ref)


# ---------------------------------------------------------------------- LM Studio


def _lm_studio_models(root: Path, problems: list[str]) -> Iterator[LocalModel]:
    for repo in _entries_at_depth(root, 2, root, problems, folders=True):
        publisher, name = repo.relative_to(root).parts
        try:
            names = local.folder_names(repo)
        except SourceError as exc:
            problems.append(str(exc))
            continue
        ggufs = sorted(n for n in names if n.endswith(".gguf") and not is_projector(n))
        for file in ggufs:
            path = repo / file
            yield LocalModel(
                f"{publisher}/{name}/{file}",
                LM_STUDIO,
                str(path),
                path,
                _sizes(repo, [file]),
                "gguf",
            )
        weights = local.weight_files(names)
        if not ggufs and weights and "config.json" in names:
            yield LocalModel(
                f"{publisher}/{name}",
                LM_STUDIO,
                str(repo),
                repo,
                _sizes(repo, weights),
                "safetensors",
            )


def _lm_studio_setting(path: Path, problems: list[str]) -> Path | None:
    """The models folder chosen in LM Studio's settings, if any; why they could not be read
    goes to ``problems`` (an absent file is no problem)."""
    try:
        settings = parse_json(read_regular(path, _SETTINGS_BYTES, "LM Studio settings"), str(path))
    except ModelNotFound:
        return None
    except SourceError as exc:
        problems.append(f"{exc}; LM Studio's default folders were read")
        return None
    folder = settings.get("downloadsFolder") if isinstance(settings, dict) else None
    if not isinstance(folder, str) or not folder or "\0" in folder:
        return None
    return Path(folder).expanduser()


# ---------------------------------------------------------------------- helpers


def _opened_path(path: Path, name: str) -> ResolvedModel:
    if path.is_dir():
        spec = local.load_folder(path, name=name)
        files = [path / f for f in local.weight_files(local.folder_names(path))]
    else:
        spec = load_gguf(path, name=name)
        files = [path]
    return ResolvedModel(spec=spec, ref=local_ref("local", path, files))


def _collect(models: Iterator[LocalModel], problems: list[str]) -> list[LocalModel]:
    """The models a finder yields; a store that fails midway keeps what it found."""
    found: list[LocalModel] = []
    try:
        found.extend(models)
    except (OSError, SourceError) as exc:
        problems.append(str(exc))
    return sorted(found, key=lambda m: (-m.size_bytes, m.name))


def _bounded(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [
        *problems[:MAX_PROBLEMS],
        f"and {len(problems) - MAX_PROBLEMS:,} more entries passed over",
    ]


def _entries_at_depth(
    root: Path, depth: int, store: Path, problems: list[str], *, folders: bool = False
) -> Iterator[Path]:
    """Entries exactly ``depth`` levels below ``root`` (folders, or files), in name order.

    Walked without recursion, each folder once, at most ``MAX_ENTRIES`` entries: a link is
    followed only to a place inside ``store`` that was not walked already, so that a link out
    of the store (``manifests -> /``) or back into it (40 links to ``.``) costs only itself and
    is listed in ``problems`` with why. Unreadable folders are passed over.
    """
    try:
        inside = store.resolve()
    except (OSError, RuntimeError):
        return
    walked: set[tuple[int, int]] = set()
    read = 0
    pending: list[tuple[Path, int]] = [(root, depth)]
    while pending:
        folder, left = pending.pop()
        if left == 0:
            yield folder
            continue
        why = _not_walked(folder, inside, walked)
        if why:
            if why != "walked":
                problems.append(f"{folder}: {why}")
            continue
        try:
            with os.scandir(folder) as listing:
                entries = []
                for entry in listing:
                    read += 1
                    if read > MAX_ENTRIES:
                        problems.append(
                            f"{store} holds over {MAX_ENTRIES:,} entries; the rest were not read"
                        )
                        return
                    entries.append(entry)
        except OSError:
            continue
        below: list[tuple[Path, int]] = []
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            last = left == 1
            try:
                wanted = entry.is_dir() if (not last or folders) else entry.is_file()
                if wanted and last and entry.is_symlink():
                    why = _outside(Path(entry.path), inside)
                    if why:
                        problems.append(f"{entry.path}: {why}")
                        continue
            except OSError:
                continue
            if wanted:
                below.append((Path(entry.path), left - 1))
        pending.extend(reversed(below))


def _not_walked(folder: Path, inside: Path, walked: set[tuple[int, int]]) -> str | None:
    """Why ``folder`` is not listed: outside the store, already walked ("walked"), or
    unreadable; None to list it (it is then marked as walked)."""
    try:
        if folder.is_symlink():
            why = _outside(folder, inside)
            if why:
                return why
        info = folder.stat()
    except OSError as exc:
        return describe_os_error(exc)
    key = (info.st_dev, info.st_ino)
    if key in walked:
        # A link back to a folder of the store already read (40 links to "."): once is enough.
        return "a link to a folder already read: not followed" if folder.is_symlink() else "walked"
    walked.add(key)
    return None


def _outside(link: Path, inside: Path) -> str | None:
    """Why the link ``link`` is not followed: it points out of the store, or in a loop."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return "a link that leads nowhere, or in a loop: not followed"
    if not target.is_relative_to(inside):
        return f"a link out of the store (to {target}): not followed"
    return None


def _sizes(folder: Path, files: list[str]) -> int:
    total = 0
    for name in files:
        try:
            total += (folder / name).stat().st_size
        except OSError:
            continue
    return total


def _is_gguf(path: Path) -> bool:
    try:
        with open_regular(path) as fh:
            return fh.read(4) == GGUF_MAGIC
    except (OSError, ValueError, SourceError):
        return False


def _unique_dirs(paths: list[Path]) -> tuple[Path, ...]:
    seen: dict[Path, None] = {}
    for path in paths:
        try:
            if path.is_dir():
                seen[path.resolve()] = None
        except (OSError, ValueError, RuntimeError):
            continue
    return tuple(seen)
