"""The Hugging Face Hub: model search, config.json and exact tensor inventories from file headers.

Weights are never downloaded: safetensors headers come from HTTP Range requests on the files (the
8-byte length, then the JSON header), GGUF headers likewise. Requests go through huggingface_hub's
shared HTTP client and its token handling (``hf auth login`` or ``HF_TOKEN``), but not through its
retrying helpers, which wait up to ~23 s on 429 / 5xx: here all the requests of one call (search,
load, list) share one ``timeout_s`` deadline, with at most one quick retry on a refused connection
or a 502/503/504, so a UI waiting on a call waits no longer than that. Every answer is cached on disk with the commit it came from; when the Hub cannot answer
(offline, HF_HUB_OFFLINE=1, timeout, 429, 5xx) the cached answer is used with a notice.

huggingface_hub is imported inside functions: importing this module stays cheap.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vramgui import __version__
from vramgui.core.model import ModelRef
from vramgui.paths import user_dir
from vramgui.sources import local
from vramgui.sources.errors import (
    BadModelFile,
    GatedModel,
    HubUnavailable,
    IncompleteModel,
    ModelNotFound,
)
from vramgui.sources.resolve import LoadedModel

DEFAULT_ENDPOINT = "https://huggingface.co"
CACHE_FORMAT_VERSION = 1
SEARCH_FRESH_S = 3600.0
# The first Range request: most safetensors headers fit (huggingface_hub uses the same size).
FIRST_RANGE_BYTES = 100_000
# GGUF headers hold the tokenizer (a few MB for 150k-token vocabularies): read growing prefixes.
GGUF_FIRST_RANGE_BYTES = 2 * 1024 * 1024
GGUF_MAX_HEADER_BYTES = 64 * 1024 * 1024
SHARD_WORKERS = 16
_RETRY_STATUSES = (502, 503, 504)
_RETRY_PAUSE_S = 0.2
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_PREFERRED_GGUF = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q8_0")


@dataclass(frozen=True, slots=True)
class HubModel:
    """One search result.

    Attributes:
        id: repo id (``org/name``), or a catalog name for catalog results without a repo.
        parameters: total parameters as the Hub states them (safetensors metadata), if known.
        downloads: downloads in the last 30 days.
        likes: likes.
        gated: the repo asks for a license agreement and a login.
        library: library tag (``transformers``, ``gguf``...).
        pipeline_tag: task tag (``text-generation``...).
        source: ``hub``, ``cache`` (a stored Hub answer) or ``catalog``.
    """

    id: str
    parameters: int | None = None
    downloads: int = 0
    likes: int = 0
    gated: bool = False
    library: str = ""
    pipeline_tag: str = ""
    source: str = "hub"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class CachedSearch:
    """Search results stored earlier, and when (seconds since the epoch)."""

    results: list[HubModel]
    fetched_at: float


class HubClient:
    """A thin client of the Hub with timeouts, its own short retry policy and a disk cache.

    Args:
        endpoint: Hub URL; defaults to ``HF_ENDPOINT`` or huggingface.co.
        timeout_s: the longest one call (search, load, list_gguf_files) waits on the network;
            its requests share it.
        token: an access token; by default huggingface_hub's own (``hf auth login`` /
            ``HF_TOKEN``). It is sent to the endpoint only, never stored or logged here.
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
        return f"HubClient(endpoint={self.endpoint!r}, timeout_s={self.timeout_s})"

    # ------------------------------------------------------------------ search

    def search(self, query: str, limit: int = 20) -> list[HubModel]:
        """Models matching ``query``, most downloaded first; the answer is cached.

        Raises:
            HubUnavailable: the Hub could not answer (the caller decides on a fallback).
        """
        params: list[tuple[str, str | int]] = [
            ("search", query),
            ("sort", "downloads"),
            ("direction", -1),
            ("limit", limit),
        ]
        params += [
            ("expand[]", field)
            for field in ("downloads", "likes", "gated", "library_name", "pipeline_tag")
        ]
        params.append(("expand[]", "safetensors"))
        fetch = _Fetch(self)
        response = fetch.get(f"{self.endpoint}/api/models", what="search", params=params)
        if response.status_code >= 400:  # no search error is the user's: fall back, say why
            raise _unavailable(response.status_code)
        try:
            rows = response.json()
            results = [_hub_model(row) for row in rows if isinstance(row, dict) and row.get("id")]
        # RecursionError: absurdly deep JSON; OverflowError: an infinite count (1e999)
        except (ValueError, TypeError, RecursionError, OverflowError) as exc:
            raise HubUnavailable(f"the Hub sent an unreadable search answer ({exc})") from None
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
    ) -> LoadedModel:
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
        rev = revision or "main"
        try:
            fetch = _Fetch(self)
            info = fetch.model_info(repo_id, rev)
            sha = str(info.get("sha") or rev)
            payload = self._read_cache(self._model_path(repo_id, sha, filename))
            if payload is None:
                payload = fetch.payload(repo_id, sha, info, filename, on_main=rev == "main")
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
        return _loaded(payload, notices)

    def list_gguf_files(self, repo_id: str, revision: str | None = None) -> list[tuple[str, int]]:
        """The .gguf files of a repo with their sizes in bytes, by name.

        When the Hub cannot answer, the listing stored with an earlier load of the repo is used.

        Raises:
            HubUnavailable: the Hub could not answer and the repo was never loaded before.
        """
        rev = revision or "main"
        try:
            return _gguf_files(_Fetch(self).model_info(repo_id, rev))
        except HubUnavailable:
            payload = self._cached_payload(repo_id, rev, None)
            if payload is None:
                raise
            return [(str(name), int(size)) for name, size in payload.get("gguf_files", [])]

    # ------------------------------------------------------------------ cache

    def _root(self) -> Path:
        return self._cache_dir or user_dir("cache") / "hub"

    def _search_path(self, query: str, limit: int) -> Path:
        key = hashlib.sha256(f"{self.endpoint}\n{query.strip().lower()}\n{limit}".encode())
        return self._root() / "search" / f"{key.hexdigest()[:32]}.json"

    def _repo_dir(self, repo_id: str) -> Path:
        host = re.sub(r"[^\w.-]", "_", self.endpoint.split("://", 1)[-1])
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
            text = json.dumps(doc)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        except (OSError, TypeError, ValueError):
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


class _Fetch:
    """The network side of one public call: every request it makes shares one deadline.

    Each request's timeout is what is left of the call's ``timeout_s``, so a call returns (or
    fails) within about ``timeout_s`` however many requests it needs.
    """

    def __init__(self, client: HubClient) -> None:
        self.endpoint = client.endpoint
        self.timeout_s = client.timeout_s
        self._token = client._token
        self._deadline = time.monotonic() + client.timeout_s

    def _remaining(self, what: str) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out(what)
        return left

    def _timed_out(self, what: str) -> HubUnavailable:
        return HubUnavailable(f"the Hub did not answer within {self.timeout_s:g} s ({what})")

    def _may_retry(self, attempt: int) -> bool:
        """One quick retry, when the deadline leaves room for it."""
        if attempt > 0 or self._deadline - time.monotonic() < 2 * _RETRY_PAUSE_S:
            return False
        time.sleep(_RETRY_PAUSE_S)
        return True

    def model_info(self, repo_id: str, revision: str) -> dict[str, Any]:
        url = f"{self.endpoint}/api/models/{repo_id}/revision/{quote(revision, safe='')}"
        response = self.get(url, what=f"information on {repo_id}", params={"blobs": "true"})
        self.raise_for_status(response, repo_id, None)
        try:
            info = response.json()
        except (ValueError, RecursionError):
            raise HubUnavailable(f"the Hub sent an unreadable answer about {repo_id}") from None
        if not isinstance(info, dict):
            raise HubUnavailable(f"the Hub sent an unreadable answer about {repo_id}")
        return info

    def payload(
        self, repo_id: str, sha: str, info: dict[str, Any], filename: str | None, *, on_main: bool
    ) -> dict[str, Any]:
        """What vramgui keeps of a repo at commit ``sha``: config and tensor table (or GGUF)."""
        siblings = {str(s.get("rfilename")): s for s in _siblings(info)}
        base = {
            "repo_id": repo_id,
            "revision": sha,
            "gated": bool(info.get("gated")),
            "gguf_files": _gguf_files(info),
        }
        only_gguf = base["gguf_files"] and not any(f.endswith(".safetensors") for f in siblings)
        if (filename or "").endswith(".gguf") or only_gguf:
            return {**base, **self._gguf_payload(repo_id, sha, base["gguf_files"], filename)}
        config = local.parse_config(
            self._text(repo_id, sha, "config.json"), f"config.json of {repo_id}"
        )
        notices: list[str] = []
        sharded = local.SAFETENSORS_INDEX in siblings and local.SAFETENSORS_SINGLE not in siblings
        if sharded:
            index = local.parse_config(
                self._text(repo_id, sha, local.SAFETENSORS_INDEX),
                f"{local.SAFETENSORS_INDEX} of {repo_id}",
            )
            files = local.index_shards(index, f"{local.SAFETENSORS_INDEX} of {repo_id}")
        else:
            files = local.weight_files(f for f in siblings if "/" not in f)
        if not files:
            notices.append(
                f"{repo_id} has no safetensors weights: tensors synthesized from config.json"
            )
        sizes = {f: _sibling_size(siblings.get(f)) for f in files}
        stored = self._sharded_headers(repo_id, files, sizes) if sharded and on_main else None
        if stored is None:
            stored = self._headers(repo_id, sha, files, sizes)
        return {
            **base,
            "kind": "safetensors",
            "config": config,
            "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in stored],
            "notices": notices,
        }

    def _headers(
        self, repo_id: str, sha: str, files: list[str], sizes: dict[str, int | None]
    ) -> list[local.StoredTensor]:
        """Every tensor of the given safetensors files, shards read in parallel."""
        if not files:
            return []
        with concurrent.futures.ThreadPoolExecutor(min(SHARD_WORKERS, len(files))) as pool:
            parts = list(
                pool.map(lambda f: self._safetensors_header(repo_id, sha, f, sizes[f]), files)
            )
        return _unique(parts)

    def _sharded_headers(
        self, repo_id: str, files: list[str], sizes: dict[str, int | None]
    ) -> list[local.StoredTensor] | None:
        """Every shard header in one request, from the Hub's safetensors-metadata endpoint.

        The endpoint serves ``main`` only and only on huggingface.co; None wherever it does not
        answer with all the shards, and the shards are then read one by one.
        """
        url = f"{self.endpoint}/api/models/{repo_id}/safetensors-metadata/{local.SAFETENSORS_INDEX}"
        response = self.get(url, what=f"safetensors metadata of {repo_id}")
        if response.status_code != 200:
            return None
        try:
            headers = response.json()["headers"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        if not isinstance(headers, dict) or set(headers) != set(files):
            return None
        # The endpoint hands out decoded headers: the offsets can only be held to the file size.
        parts = [
            local.parse_safetensors_header(
                json.dumps(headers[f]).encode(), sizes[f], f"{repo_id}/{f}"
            )
            for f in files
        ]
        return _unique(parts)

    def _safetensors_header(
        self, repo_id: str, sha: str, filename: str, size: int | None
    ) -> list[local.StoredTensor]:
        url = self._file_url(repo_id, sha, filename)
        origin = f"{repo_id}/{filename}"
        prefix, total = self._range(url, 0, FIRST_RANGE_BYTES, repo_id, filename)
        total = total or size
        length = local.header_length(prefix, total, origin)
        if 8 + length <= len(prefix):
            header = prefix[8 : 8 + length]
        else:
            header, _ = self._range(url, 8, length, repo_id, filename)
            if len(header) < length:
                raise BadModelFile(f"{origin}: the Hub sent a truncated header")
        return local.parse_safetensors_header(header, total - 8 - length if total else None, origin)

    def _gguf_payload(
        self, repo_id: str, sha: str, gguf_files: list[tuple[str, int]], filename: str | None
    ) -> dict[str, Any]:
        names = [name for name, _ in gguf_files]
        if filename is None:
            filename = _default_gguf(names)
        elif filename not in names:
            listing = ", ".join(names) or "none"
            raise ModelNotFound(f"{repo_id} has no file {filename!r}; its GGUF files: {listing}")
        size = dict(gguf_files)[filename]
        contents = self._gguf_header(repo_id, sha, filename, size)
        notices = []
        if len(names) > 1:
            notices.append(
                f"{repo_id} holds {len(names)} GGUF files; read {filename} "
                f"(others: {', '.join(n for n in names if n != filename)})"
            )
        return {
            "kind": "gguf",
            "file": filename,
            "metadata": contents.metadata,
            "token_count": contents.token_count,
            "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in contents.tensors],
            "notices": notices,
        }

    def _gguf_header(self, repo_id: str, sha: str, filename: str, size: int) -> local.GgufContents:
        """The GGUF header from growing Range prefixes, read by the gguf package.

        The prefix is written into a sparse file of the real size, so the reader sees offsets
        as in the real file while no tensor data is downloaded.
        """
        url = self._file_url(repo_id, sha, filename)
        want = GGUF_FIRST_RANGE_BYTES
        while True:
            prefix, total = self._range(url, 0, want, repo_id, filename)
            total = total or size
            end = local.gguf_header_end(prefix, f"{repo_id}/{filename}")
            if end is not None:
                break
            if len(prefix) < want:
                raise BadModelFile(f"{repo_id}/{filename}: the GGUF header is truncated")
            if want >= GGUF_MAX_HEADER_BYTES:
                raise BadModelFile(
                    f"{repo_id}/{filename}: the GGUF header is larger than "
                    f"{GGUF_MAX_HEADER_BYTES // 2**20} MiB; download the file and open it locally"
                )
            want = min(want * 4, GGUF_MAX_HEADER_BYTES)
        with tempfile.TemporaryDirectory(prefix="vramgui-gguf-") as tmp:
            path = Path(tmp) / filename.replace("/", "_")
            with path.open("wb") as fh:
                fh.write(prefix[:end])
                fh.truncate(max(total or 0, end))
            return local.read_gguf(path)

    # ------------------------------------------------------------------ HTTP

    def _file_url(self, repo_id: str, revision: str, filename: str) -> str:
        return f"{self.endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"

    def _text(self, repo_id: str, revision: str, filename: str) -> str:
        url = self._file_url(repo_id, revision, filename)
        response = self.get(url, what=f"{filename} of {repo_id}")
        self.raise_for_status(response, repo_id, filename)
        if len(response.content) > local.MAX_CONFIG_BYTES:
            raise BadModelFile(f"{filename} of {repo_id} is too large to be what it claims")
        return response.content.decode("utf-8", errors="replace")

    def _headers_for_hub(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        try:
            headers = build_hf_headers(
                token=self._token, library_name="vramgui", library_version=__version__
            )
        except Exception:  # an unreadable stored token must not block anonymous access
            headers = build_hf_headers(
                token=False, library_name="vramgui", library_version=__version__
            )
        headers.update(extra or {})
        return headers

    def _check_online(self) -> None:
        from huggingface_hub import constants

        flag = os.environ.get("HF_HUB_OFFLINE", "").strip().upper()
        if flag in ("1", "ON", "YES", "TRUE") or constants.is_offline_mode():
            raise HubUnavailable("offline mode is on (HF_HUB_OFFLINE)")

    @contextlib.contextmanager
    def _send(
        self, method: str, url: str, *, what: str, stream: bool, **kwargs: Any
    ) -> Iterator[Any]:
        """One request with our timeout and at most one retry on a refused connection or 502-504."""
        import httpx2
        from huggingface_hub.errors import OfflineModeIsEnabled
        from huggingface_hub.utils import get_session

        self._check_online()
        headers = self._headers_for_hub(kwargs.pop("headers", None))
        for attempt in (0, 1):
            try:
                with get_session().stream(
                    method,
                    url,
                    headers=headers,
                    timeout=self._remaining(what),
                    follow_redirects=True,
                    **kwargs,
                ) as response:
                    if response.status_code in _RETRY_STATUSES and self._may_retry(attempt):
                        continue
                    if not stream:
                        response.read()
                    yield response
                    return
            except httpx2.TimeoutException:
                raise self._timed_out(what) from None
            except OfflineModeIsEnabled:
                raise HubUnavailable("offline mode is on (HF_HUB_OFFLINE)") from None
            except (httpx2.TransportError, httpx2.InvalidURL, httpx2.UnsupportedProtocol) as exc:
                if isinstance(exc, httpx2.ConnectError) and self._may_retry(attempt):
                    continue
                raise HubUnavailable(
                    f"cannot reach the Hub at {self.endpoint} ({type(exc).__name__})"
                ) from None

    def get(self, url: str, *, what: str, **kwargs: Any) -> Any:
        with self._send("GET", url, what=what, stream=False, **kwargs) as response:
            return response

    def _range(
        self, url: str, start: int, length: int, repo_id: str, filename: str
    ) -> tuple[bytes, int | None]:
        """Up to ``length`` bytes from ``start``, and the file size when the server states it.

        Read as a stream and cut at ``length``, so a server that ignores Range cannot make us
        download a whole weights file.
        """
        rng = {"Range": f"bytes={start}-{start + length - 1}"}
        with self._send("GET", url, what=f"{filename} of {repo_id}", stream=True, headers=rng) as r:
            if r.status_code >= 400:
                r.read()
                self.raise_for_status(r, repo_id, filename)
            chunks: list[bytes] = []
            received = 0
            skip = start if r.status_code == 200 else 0  # the server ignored Range
            try:
                for chunk in r.iter_bytes():
                    chunks.append(chunk)
                    received += len(chunk)
                    if received >= skip + length:
                        break
            except Exception as exc:  # a dropped stream is the Hub failing, not a bad file
                raise HubUnavailable(f"the Hub stopped sending {filename} of {repo_id}") from exc
            data = b"".join(chunks)[skip : skip + length]
            return data, _total_size(r.headers)

    def raise_for_status(self, response: Any, repo_id: str, filename: str | None) -> None:
        """Map an HTTP error about a repo (or one of its files) to our hierarchy.

        Args:
            response: the answer.
            repo_id: the repo asked about.
            filename: the file asked for, or None when asking about the repo itself.
        """
        status = response.status_code
        if status < 400:
            return
        code = response.headers.get("X-Error-Code", "")
        if code == "GatedRepo" or (status in (401, 403) and code != "RepoNotFound"):
            raise GatedModel(self._gated_message(repo_id))
        if code == "RevisionNotFound":
            raise ModelNotFound(f"{repo_id} has no such revision")
        if filename is not None and (code == "EntryNotFound" or (status == 404 and not code)):
            if filename == "config.json":
                raise IncompleteModel(
                    f"{repo_id} has no config.json, which vramgui needs for the architecture"
                )
            raise IncompleteModel(f"{repo_id} has no file {filename}")
        if status in (401, 404):
            raise ModelNotFound(
                f"{repo_id} is not on the Hub at {self.endpoint} (if it is private, log in with "
                "`hf auth login` or set HF_TOKEN)"
            )
        raise _unavailable(status)

    def _gated_message(self, repo_id: str) -> str:
        who = (
            "the token in use has no access to it" if self._has_token() else "you are not logged in"
        )
        return (
            f"{repo_id} is gated and {who}: accept its terms at {self.endpoint}/{repo_id}, "
            "then log in with `hf auth login` or set the HF_TOKEN environment variable"
        )

    def _has_token(self) -> bool:
        if self._token:
            return True
        from huggingface_hub.utils import get_token

        try:
            return get_token() is not None
        except Exception:
            return False


# ---------------------------------------------------------------------- helpers


def _unavailable(status: int) -> HubUnavailable:
    if status == 429:
        return HubUnavailable("the Hub is rate-limiting requests (429); try again in a minute")
    if status >= 500:
        return HubUnavailable(f"the Hub failed with {status}")
    return HubUnavailable(f"the Hub refused the request ({status})")


def _unique(parts: list[list[local.StoredTensor]]) -> list[local.StoredTensor]:
    """Tensors of all parts, each name once (the first shard that holds it wins)."""
    seen: set[str] = set()
    stored = []
    for part in parts:
        for t in part:
            if t.name not in seen:
                seen.add(t.name)
                stored.append(t)
    return stored


def _safe(text: str) -> str:
    return re.sub(r"[^\w.-]", "_", text)


def _siblings(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The repo's file entries; a damaged answer (not a list of objects) lists fewer or none."""
    siblings = info.get("siblings")
    return [s for s in siblings if isinstance(s, dict)] if isinstance(siblings, list) else []


def _sibling_size(sibling: dict[str, Any] | None) -> int | None:
    if not sibling:
        return None
    lfs = sibling.get("lfs")
    size = (lfs if isinstance(lfs, dict) else {}).get("size", sibling.get("size"))
    return size if isinstance(size, int) else None


def _gguf_files(info: dict[str, Any]) -> list[tuple[str, int]]:
    files = []
    for s in _siblings(info):
        name = str(s.get("rfilename", ""))
        if name.endswith(".gguf"):
            files.append((name, _sibling_size(s) or 0))
    return sorted(files)


def _default_gguf(names: list[str]) -> str:
    for quant in _PREFERRED_GGUF:
        for name in names:
            if quant.lower() in name.lower():
                return name
    return names[0]


def _total_size(headers: Any) -> int | None:
    content_range = headers.get("Content-Range", "")
    if "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    length = headers.get("Content-Length", "")
    return int(length) if length.isdigit() and "Content-Range" not in headers else None


def _hub_model(row: dict[str, Any]) -> HubModel:
    safetensors = row.get("safetensors")
    total = safetensors.get("total") if isinstance(safetensors, dict) else None
    return HubModel(
        id=str(row["id"]),
        parameters=total if isinstance(total, int) else None,
        downloads=int(row.get("downloads") or 0),
        likes=int(row.get("likes") or 0),
        gated=bool(row.get("gated")),
        library=str(row.get("library_name") or ""),
        pipeline_tag=str(row.get("pipeline_tag") or ""),
    )


def _loaded(payload: dict[str, Any], notices: tuple[str, ...]) -> LoadedModel:
    """A LoadedModel from a cached or fresh payload."""
    repo_id, sha = str(payload["repo_id"]), str(payload["revision"])
    try:
        stored = [local.StoredTensor(n, d, tuple(s), b) for n, d, s, b in payload["tensors"]]
        source = f"Hub {repo_id}@{sha[:12]}"
        if payload.get("kind") == "gguf":
            contents = local.GgufContents(payload["metadata"], stored, payload.get("token_count"))
            spec = local.spec_from_gguf(contents, repo_id, f"{source} {payload['file']}")
        else:
            spec = local.spec_from_checkpoint(payload["config"], stored, repo_id, source)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadModelFile(f"the stored facts of {repo_id} are damaged ({exc})") from None
    ref = ModelRef(kind="hub", id=repo_id, revision=sha, file=payload.get("file"))
    return LoadedModel(spec=spec, ref=ref, notices=notices)
