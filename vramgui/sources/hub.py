"""The Hugging Face Hub: model search and the entry points that read a repo's facts.

huggingface_hub does the talking (``HfApi.list_models``, ``model_info``, ``hf_hub_download``,
its safetensors metadata readers), inside a :class:`~vramgui.sources.hub_http.HubSession` that
holds every call to one deadline, to the token rules and to vramgui's error hierarchy. The
library is imported on the first call (the window warms it on a worker after its first paint);
importing this module stays cheap. Reading a repo is in ``vramgui.sources.hub_repo``, imported
by the first load.

Every answer is also stored in vramgui's cache with the commit it came from: when the Hub cannot
answer (offline, HF_HUB_OFFLINE=1, timeout, 429, 5xx) the stored answer is used with a notice.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from vramgui.files import write_atomic
from vramgui.paths import user_dir
from vramgui.sources.errors import HubUnavailable, ModelNotFound, SourceError
from vramgui.sources.hub_http import DEFAULT_ENDPOINT, HubSession, redact
from vramgui.sources.results import CachedSearch, HubModel, ResolvedModel

CACHE_FORMAT_VERSION = 1
SEARCH_FRESH_S = 3600.0
# A search answer of `limit` rows is a few KB; anything near this is not a search answer.
MAX_SEARCH_BYTES = 8 * 1024 * 1024
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SEARCH_FIELDS = ["downloads", "likes", "gated", "library_name", "pipeline_tag", "safetensors"]


class HubClient:
    """The Hub's search and repo reading, each call held to one deadline, with a disk cache.

    Args:
        endpoint: Hub URL; defaults to ``HF_ENDPOINT`` or huggingface.co.
        timeout_s: the longest one call (search, load, list_gguf_files) waits on the network,
            connection to last byte; its requests share it.
        token: an access token; by default the one huggingface_hub would send (``HF_TOKEN``, or
            the login ``hf auth login`` stored). It goes to the endpoint only, never stored or
            logged here.
        cache_dir: where answers are cached; defaults to the user cache dir.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        timeout_s: float = 5.0,
        token: str | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.timeout_s = timeout_s
        self._token = token
        self._cache_dir = cache_dir

    def __repr__(self) -> str:
        return f"HubClient(endpoint={redact(self.endpoint)!r}, timeout_s={self.timeout_s})"

    def session(self) -> HubSession:
        """A session for one call: its deadline starts now."""
        return HubSession(self.endpoint, self.timeout_s, self._token)

    # ------------------------------------------------------------------ search

    def search(self, query: str, limit: int = 20) -> list[HubModel]:
        """Models matching ``query``, most downloaded first (``HfApi.list_models``); the answer
        is cached.

        Raises:
            HubUnavailable: the Hub could not answer (the caller decides on a fallback).
        """
        session = self.session()
        api = session.api()
        try:
            found = session.run(
                "search",
                lambda: list(
                    api.list_models(
                        search=query,
                        sort="downloads",
                        limit=limit,
                        expand=_SEARCH_FIELDS,  # type: ignore[arg-type]
                        token=session.auth,
                    )
                ),
                limit_bytes=MAX_SEARCH_BYTES,
            )
        except HubUnavailable:
            raise
        except SourceError as exc:  # no search error is the user's: fall back, say why
            raise HubUnavailable(str(exc)) from None
        results = [_hub_model(info) for info in found[:limit] if getattr(info, "id", None)]
        self._write_cache(
            self._search_path(query, limit),
            {"results": [r.to_dict() for r in results]},
        )
        return results

    def cached_search(self, query: str, limit: int = 20) -> CachedSearch | None:
        """The stored answer of an earlier identical search, however old, or None."""
        doc = self._read_cache(self._search_path(query, limit))
        if doc is None:
            return None
        try:
            results = [
                HubModel(**{**row, "source": "cache"}) for row in doc["results"] if "id" in row
            ]
            return CachedSearch(results, float(doc["fetched_at"]))
        except (KeyError, TypeError, ValueError):
            return None

    # ------------------------------------------------------------------ models

    def load(
        self, repo_id: str, revision: str | None = None, filename: str | None = None
    ) -> ResolvedModel:
        """The exact spec of a Hub model: config.json plus its safetensors or GGUF headers.

        Args:
            repo_id: ``org/name``.
            revision: branch, tag or commit; default ``main``.
            filename: for a GGUF repo, which .gguf file (default: a Q4_K_M one if any).

        Raises:
            ModelNotFound: no such repo or revision.
            GatedModel: the repo needs a license accepted and a login.
            IncompleteModel: the repo lacks config.json (or any weights description).
            HubUnavailable: the Hub could not answer and nothing is cached.
        """
        if not _REPO_ID.match(repo_id):
            raise ModelNotFound(f"{repo_id!r} is not a Hub repo id (expected org/name)")
        from vramgui.sources import hub_repo  # the loader's modules, imported by the first load

        rev = revision or "main"
        try:
            reader = hub_repo.RepoReader(self.session())
            info = reader.model_info(repo_id, rev)
            sha = str(info.sha or rev)
            payload = self._read_cache(self._model_path(repo_id, sha, filename))
            if payload is None:
                payload = reader.payload(repo_id, rev, info, filename)
                self._write_cache(self._model_path(repo_id, sha, filename), payload)
            self._write_cache(self._ref_path(repo_id, rev, filename), {"sha": sha})
            notices = tuple(payload.get("notices", ()))
        except HubUnavailable as exc:
            payload = self._cached_payload(repo_id, rev, filename)
            if payload is None:
                raise
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(payload["fetched_at"]))
            notices = (
                *payload.get("notices", ()),
                f"{exc}; showing what was read from the Hub on {when} "
                f"(revision {str(payload['revision'])[:12]})",
            )
        return hub_repo.resolved(payload, notices)

    def list_gguf_files(self, repo_id: str, revision: str | None = None) -> list[tuple[str, int]]:
        """The .gguf files of a repo with their sizes in bytes, by name.

        When the Hub cannot answer, the listing stored with an earlier load of the repo is used.

        Raises:
            HubUnavailable: the Hub could not answer and the repo was never loaded before.
        """
        from vramgui.sources import hub_repo

        rev = revision or "main"
        try:
            info = hub_repo.RepoReader(self.session()).model_info(repo_id, rev)
            return hub_repo.gguf_files(info)
        except HubUnavailable:
            payload = self._cached_payload(repo_id, rev, None)
            if payload is None:
                raise
            return [(str(name), int(size)) for name, size in payload.get("gguf_files", [])]

    # ------------------------------------------------------------------ cache

    def _root(self) -> Path:
        # Not created here: a cache that cannot be made only costs speed (_write_cache).
        return self._cache_dir or user_dir("cache", create=False) / "hub"

    def _search_path(self, query: str, limit: int) -> Path:
        key = hashlib.sha256(f"{self.endpoint}\n{query.strip().lower()}\n{limit}".encode())
        return self._root() / "search" / f"{key.hexdigest()[:32]}.json"

    def _repo_dir(self, repo_id: str) -> Path:
        host = re.sub(r"[^\w.-]", "_", redact(self.endpoint).split("://", 1)[-1])
        return self._root() / "models" / host / repo_id.replace("/", "--")

    def _model_path(self, repo_id: str, sha: str, filename: str | None) -> Path:
        suffix = f"@{filename.replace('/', '_')}" if filename else ""
        return self._repo_dir(repo_id) / f"{_safe(sha)}{suffix}.json"

    def _ref_path(self, repo_id: str, revision: str, filename: str | None) -> Path:
        suffix = f"@{filename.replace('/', '_')}" if filename else ""
        return self._repo_dir(repo_id) / "refs" / f"{_safe(revision)}{suffix}.json"

    def _cached_payload(
        self, repo_id: str, revision: str, filename: str | None
    ) -> dict[str, Any] | None:
        ref = self._read_cache(self._ref_path(repo_id, revision, filename))
        sha = ref.get("sha") if ref else revision
        return self._read_cache(self._model_path(repo_id, str(sha), filename))

    def _read_cache(self, path: Path) -> dict[str, Any] | None:
        """A cached document, or None when missing, unreadable or of another format."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("format_version") != CACHE_FORMAT_VERSION:
            return None
        return doc

    def _write_cache(self, path: Path, doc: dict[str, Any]) -> None:
        """Store atomically; a cache that cannot be written only costs speed later."""
        doc = {"format_version": CACHE_FORMAT_VERSION, "fetched_at": time.time(), **doc}
        try:
            data = json.dumps(doc).encode("utf-8")
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data, durable=False)
        except (OSError, TypeError, ValueError):
            return


def _safe(text: str) -> str:
    return re.sub(r"[^\w.-]", "_", text)


def _hub_model(info: Any) -> HubModel:
    """A search row from huggingface_hub's ``ModelInfo``; odd field types read as unknown."""
    safetensors = getattr(info, "safetensors", None)
    total = getattr(safetensors, "total", None)
    return HubModel(
        id=str(info.id),
        parameters=total if isinstance(total, int) else None,
        downloads=_count(getattr(info, "downloads", 0)),
        likes=_count(getattr(info, "likes", 0)),
        gated=bool(getattr(info, "gated", False)),
        library=str(getattr(info, "library_name", None) or ""),
        pipeline_tag=str(getattr(info, "pipeline_tag", None) or ""),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
