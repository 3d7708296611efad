"""Model stores of other tools, laid out in a temporary folder as each tool lays out its own:
the Hugging Face cache (refs, snapshots of links into blobs), Ollama (manifests naming blobs)
and LM Studio (publisher/repo folders of files)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, repo_files, write_gguf
from vramgui.sources.on_disk import OLLAMA_MODEL_LAYER, Stores


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
    gguf: bytes | Path,
    namespace: str = "library",
    host: str = "registry.ollama.ai",
) -> Path:
    """A model pulled by Ollama: its GGUF blob (the bytes, or a link to a large file) and the
    manifest naming it; returns the blob."""
    linked = isinstance(gguf, Path)
    digest = hashlib.sha256(str(gguf).encode() if linked else gguf).hexdigest()
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(gguf, Path):
        blob.symlink_to(gguf)
    else:
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
                "size": blob.stat().st_size,
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


def sample_stores(root: Path) -> Stores:
    """One store of each kind under ``root``, with a model or two in each, a download cut short
    and a repo holding only the config.json an estimate fetched."""
    root.mkdir(parents=True, exist_ok=True)
    write_gguf(root / "tiny.gguf")
    gguf = (root / "tiny.gguf").read_bytes()
    files = repo_files(TINY_LLAMA_CONFIG, llama_tensors(TINY_LLAMA_CONFIG))
    hf = root / "hf"
    hf_cache_repo(hf, "org/tiny", files)
    hf_cache_repo(hf, "org/tiny-GGUF", {"tiny-Q4_K_M.gguf": gguf})
    partial = repo_files(TINY_LLAMA_CONFIG, llama_tensors(TINY_LLAMA_CONFIG), shards=2)
    del partial["model-00001-of-00002.safetensors"]
    hf_cache_repo(hf, "org/partial", partial)
    hf_cache_repo(hf, "org/config-only", {"config.json": files["config.json"]})
    ollama = root / "ollama"
    ollama_model(ollama, "llama3.2", "3b", gguf)
    ollama_model(ollama, "tiny", "latest", gguf, namespace="someone")
    studio = root / "lmstudio"
    lm_studio_model(
        studio,
        "lmstudio-community",
        "Tiny-GGUF",
        {"Tiny-Q4_K_M.gguf": gguf, "mmproj-f16.gguf": gguf},
    )
    lm_studio_model(studio, "mlx-community", "Tiny-4bit", files)
    return Stores(hf, (ollama,), (studio,))


# The probe's local stores: each a home folder whose Ollama store (OLLAMA_MODELS) or LM Studio
# folder (~/.lmstudio) holds one hostile entry beside a good model.
HOSTILE_STORES = (
    "ollama-40-links-to-itself",
    "ollama-60-links-to-itself",
    "ollama-manifests-link-to-root",
    "ollama-manifest-nested-200k-deep",
    "ollama-digest-with-nul",
    "ollama-names-with-escapes",
    "lm-studio-400-links-to-itself",
    "lm-studio-repo-link-out-of-the-store",
    "lm-studio-settings-nested-200k-deep",
)
ESCAPES = "\x1b[2J\x1b[31mred\nsecond line\x07"


def hostile_store(home: Path, case: str) -> dict[str, str]:
    """Build ``case`` of ``HOSTILE_STORES`` under ``home``; the environment that points vramgui's
    stores at it (HOME, OLLAMA_MODELS, an empty Hugging Face cache)."""
    write_gguf(home / "tiny.gguf")
    gguf = (home / "tiny.gguf").read_bytes()
    ollama = home / "ollama"
    ollama_model(ollama, "good", "latest", gguf)
    studio = home / ".lmstudio" / "models"
    lm_studio_model(studio, "someone", "Good-GGUF", {"Good-Q4_K_M.gguf": gguf})
    manifests = ollama / "manifests"
    deep = "[" * 200_000 + "]" * 200_000
    if case.startswith("ollama-") and "links-to-itself" in case:
        count = int(case.split("-")[1])
        for i in range(count):
            (manifests / f"loop{i:02d}").symlink_to(".")
    elif case == "ollama-manifests-link-to-root":
        (manifests / "registry.ollama.ai").rename(home / "elsewhere")
        manifests.rmdir()
        manifests.symlink_to("/")
    elif case == "ollama-manifest-nested-200k-deep":
        path = manifests / "registry.ollama.ai" / "library" / "deep" / "latest"
        path.parent.mkdir(parents=True)
        path.write_text(deep)
    elif case == "ollama-digest-with-nul":
        path = manifests / "registry.ollama.ai" / "library" / "nul" / "latest"
        path.parent.mkdir(parents=True)
        layer = {"mediaType": OLLAMA_MODEL_LAYER, "digest": "sha256:ab\x00cd", "size": 1}
        path.write_text(json.dumps({"layers": [layer]}))
    elif case == "ollama-names-with-escapes":
        ollama_model(ollama, f"evil{ESCAPES}", f"tag{ESCAPES}", gguf)
    elif case == "lm-studio-400-links-to-itself":
        for i in range(400):
            (studio / f"loop{i:03d}").symlink_to(".")
    elif case == "lm-studio-repo-link-out-of-the-store":
        outside = lm_studio_model(home / "elsewhere", "other", "Outside-GGUF", {"O.gguf": gguf})
        (studio / "someone" / "Outside-GGUF").symlink_to(outside)
    elif case == "lm-studio-settings-nested-200k-deep":
        (home / ".lmstudio" / "settings.json").write_text(deep)
    else:
        raise ValueError(case)
    cache = home / "hf"
    cache.mkdir()
    return {"HOME": str(home), "OLLAMA_MODELS": str(ollama), "HF_HUB_CACHE": str(cache)}
