"""Model stores of other tools, laid out in a temporary folder as each tool lays out its own:
the Hugging Face cache (refs, snapshots of links into blobs), Ollama (manifests naming blobs)
and LM Studio (publisher/repo folders of files)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def hf_cache_repo(
    cache: Path, repo_id: str, files: dict[str, bytes], commit: str | None = None, ref: str = "main"
) -> Path:
    """A repo in a Hugging Face hub cache, as ``hf download`` leaves it; returns its snapshot."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    commit = commit or hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = folder / "snapshots" / commit
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / ref).write_text(commit)
    return snapshot


def ollama_model(
    root: Path,
    model: str,
    tag: str,
    gguf: bytes,
    namespace: str = "library",
    host: str = "registry.ollama.ai",
) -> Path:
    """A model pulled by Ollama: its GGUF blob and the manifest naming it; returns the blob."""
    digest = hashlib.sha256(gguf).hexdigest()
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(gguf)
    params = b'{"stop": ["<|eot_id|>"]}'
    params_digest = hashlib.sha256(params).hexdigest()
    (root / "blobs" / f"sha256-{params_digest}").write_bytes(params)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2},
        "layers": [
            {
                "mediaType": "application/vnd.ollama.image.model",
                "digest": f"sha256:{digest}",
                "size": len(gguf),
            },
            {
                "mediaType": "application/vnd.ollama.image.params",
                "digest": f"sha256:{params_digest}",
                "size": len(params),
            },
        ],
    }
    path = root / "manifests" / host / namespace / model / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    return blob


def lm_studio_model(root: Path, publisher: str, repo: str, files: dict[str, bytes]) -> Path:
    """A model downloaded by LM Studio: ``{publisher}/{repo}/`` and its files; returns the folder."""
    folder = root / publisher / repo
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def tree_state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``root``: (mode, mtime in ns, contents or link target), to show that
    reading a store changed nothing in it."""
    state = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            content = os.readlink(path).encode()
        elif path.is_file():
            content = hashlib.sha256(path.read_bytes()).digest()
        else:
            content = b""
        state[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns, content)
    return state
