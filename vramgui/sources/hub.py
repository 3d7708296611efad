"""The Hugging Face Hub: model search, the entry points that read a repo's facts, and the HTTP
client both use.

Requests go through the standard library's HTTP client (``open_url``), not huggingface_hub's:
searches and loads run on worker threads while the window stays live, and importing
huggingface_hub and its HTTP stack there costs a few hundred milliseconds of interpreter time
(and sets off garbage collections) that the GUI thread would wait for. A search asks
``{endpoint}/api/models`` as huggingface_hub's ``list_models`` does; the token sent is the one
huggingface_hub would send (``HF_TOKEN``, or the file ``hf auth login`` wrote), and huggingface_hub
itself is asked only to refresh a stored token the Hub refused. Reading a repo (config.json and
weight headers) is in ``vramgui.sources.hub_repo``, imported on the first load.

Every call has one ``timeout_s`` deadline shared by all its requests, with at most one quick retry
on a refused connection or a 502/503/504 (huggingface_hub's own helpers retry 429 / 5xx for ~23 s;
a window cannot wait that long). Every answer is cached on disk with the commit it came from;
when the Hub cannot answer (offline, HF_HUB_OFFLINE=1, timeout, 429, 5xx) the cached answer is
used with a notice.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from vramgui import __version__
from vramgui.files import write_atomic
from vramgui.paths import user_dir
from vramgui.sources.errors import HubUnavailable, ModelNotFound

if TYPE_CHECKING:
    import ssl

    from vramgui.sources.resolve import LoadedModel

DEFAULT_ENDPOINT = "https://huggingface.co"
CACHE_FORMAT_VERSION = 1
SEARCH_FRESH_S = 3600.0
# A search answer of `limit` rows is a few KB; anything near this is not a search answer.
MAX_SEARCH_BYTES = 8 * 1024 * 1024
RETRY_STATUSES = (502, 503, 504)
RETRY_PAUSE_S = 0.2
_READ_CHUNK_BYTES = 64 * 1024
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_TRUE = ("1", "ON", "YES", "TRUE")
_USER_AGENT = f"vramgui/{__version__}; python/{sys.version_info.major}.{sys.version_info.minor}"


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
        answer = fetch(
            f"{self.endpoint}/api/models?{urlencode(params)}",
            limit_bytes=MAX_SEARCH_BYTES,
            what="search",
            deadline=CallDeadline(self.timeout_s),
            endpoint=self.endpoint,
            token=self._token,
        )
        if answer.status >= 400:  # no search error is the user's: fall back, say why
            raise unavailable(answer.status)
        if len(answer.body) > MAX_SEARCH_BYTES:
            raise HubUnavailable(f"the Hub sent a search answer of over {MAX_SEARCH_BYTES} bytes")
        try:
            rows = json.loads(answer.body)
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
        from vramgui.sources import hub_repo

        rev = revision or "main"
        try:
            fetch = hub_repo.Fetch(self)
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
        return hub_repo.loaded(payload, notices)

    def list_gguf_files(self, repo_id: str, revision: str | None = None) -> list[tuple[str, int]]:
        """The .gguf files of a repo with their sizes in bytes, by name.

        When the Hub cannot answer, the listing stored with an earlier load of the repo is used.

        Raises:
            HubUnavailable: the Hub could not answer and the repo was never loaded before.
        """
        from vramgui.sources import hub_repo

        rev = revision or "main"
        try:
            return hub_repo.gguf_files(hub_repo.Fetch(self).model_info(repo_id, rev))
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
            data = json.dumps(doc).encode("utf-8")
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data, durable=False)
        except (OSError, TypeError, ValueError):
            return


class CallDeadline:
    """The time left to one public call (search, load, list): all its requests share it.

    Args:
        timeout_s: the call's whole budget, from now.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._end = time.monotonic() + timeout_s

    def remaining(self, what: str) -> float:
        """Seconds left; raises HubUnavailable (timed out) when none are."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise self.timed_out(what)
        return left

    def timed_out(self, what: str) -> HubUnavailable:
        return HubUnavailable(f"the Hub did not answer within {self.timeout_s:g} s ({what})")

    def may_retry(self, attempt: int) -> bool:
        """One quick retry, when the deadline leaves room for it (after a short pause)."""
        if attempt > 0 or self._end - time.monotonic() < 2 * RETRY_PAUSE_S:
            return False
        time.sleep(RETRY_PAUSE_S)
        return True


def check_online() -> None:
    """Raise HubUnavailable when huggingface_hub's offline mode (HF_HUB_OFFLINE) is on."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE:
        raise HubUnavailable("offline mode is on (HF_HUB_OFFLINE)")


# ---------------------------------------------------------------------- HTTP


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole HTTP answer: status, headers (``.get`` ignores case) and body."""

    status: int
    headers: Any
    body: bytes


@contextlib.contextmanager
def open_url(
    url: str,
    *,
    what: str,
    deadline: CallDeadline,
    endpoint: str,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> Iterator[Any]:
    """GET ``url`` through the standard library; yields the open answer (``status``,
    ``headers``, ``read(n)``), whatever its status.

    Proxies come from the environment, as httpx takes them. The token is ``token``, else the
    one huggingface_hub would send; it never follows a redirect to another host. At most one
    retry: after a refused connection or a 502-504, or, when the Hub refuses a stored token
    (401, an expired login), with huggingface_hub's refreshed token or without one.

    Raises:
        HubUnavailable: offline mode, no connection, or the deadline passed.
    """
    import http.client
    import urllib.error
    import urllib.request

    check_online()
    send = token or stored_token()
    attempt = 0
    while True:
        request = urllib.request.Request(
            url, headers={"User-Agent": _USER_AGENT, **(headers or {})}
        )
        if send:
            request.add_unredirected_header("Authorization", f"Bearer {send}")
        try:
            opener = _opener(https=url.startswith("https:"))
            response = opener.open(request, timeout=deadline.remaining(what))
        except urllib.error.HTTPError as error:  # 4xx / 5xx: an answer like any other
            response = error
        except (OSError, http.client.HTTPException, ValueError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(reason, TimeoutError):
                raise deadline.timed_out(what) from None
            if isinstance(reason, ConnectionRefusedError) and deadline.may_retry(attempt):
                attempt += 1
                continue
            raise HubUnavailable(
                f"cannot reach the Hub at {endpoint} ({type(reason).__name__})"
            ) from None
        if response.status in RETRY_STATUSES and deadline.may_retry(attempt):
            response.close()
            attempt += 1
            continue
        if response.status == 401 and send and not token and attempt == 0:
            response.close()
            send = _refreshed_token(send)
            attempt += 1
            continue
        with response:
            yield response
        return


def fetch(url: str, *, limit_bytes: int, **how: Any) -> Answer:
    """An answer read whole, up to ``limit_bytes`` + 1 bytes: a body longer than
    ``limit_bytes`` is cut one byte past it, for the caller to refuse (``open_url``'s arguments).

    Raises:
        HubUnavailable: as ``open_url``; also when the answer stops coming.
    """
    import http.client

    deadline: CallDeadline = how["deadline"]
    with open_url(url, **how) as response:
        chunks: list[bytes] = []
        received = 0
        try:
            while received <= limit_bytes and (
                chunk := response.read(min(_READ_CHUNK_BYTES, limit_bytes + 1 - received))
            ):
                chunks.append(chunk)
                received += len(chunk)
                deadline.remaining(how["what"])
        except TimeoutError:
            raise deadline.timed_out(how["what"]) from None
        except (OSError, http.client.HTTPException):
            raise HubUnavailable(f"the Hub stopped sending {how['what']}") from None
        return Answer(response.status, response.headers, b"".join(chunks))


@functools.cache
def _opener(*, https: bool) -> Any:
    """One urllib opener per scheme for every call (urllib's openers serve many threads).

    Only https builds a TLS context: loading the trust store takes 30-120 ms of CPU.
    """
    import urllib.parse
    import urllib.request

    class SameHostAuth(urllib.request.HTTPRedirectHandler):
        """Keeps the token on a redirect within the Hub (a renamed repo), drops it elsewhere."""

        def redirect_request(  # noqa: PLR0917 - urllib's signature
            self,
            req: urllib.request.Request,
            fp: Any,
            code: int,
            msg: str,
            headers: Any,
            newurl: str,
        ) -> urllib.request.Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            auth = req.unredirected_hdrs.get("Authorization")
            same = (
                urllib.parse.urlsplit(newurl).netloc == urllib.parse.urlsplit(req.full_url).netloc
            )
            if new is not None and auth and same:
                new.add_unredirected_header("Authorization", auth)
            return new

    tls = [urllib.request.HTTPSHandler(context=_tls_context())] if https else []
    return urllib.request.build_opener(*tls, SameHostAuth())


def _refreshed_token(refused: str) -> str | None:
    """After the Hub refused a stored token: huggingface_hub's own lookup, which refreshes an
    expiring browser login (imported only here), or None to go on without a token."""
    try:
        from huggingface_hub import get_token

        token = get_token()
    except Exception:  # a broken login is no reason to fail a public request
        return None
    return token if token and token != refused else None


def _tls_context() -> ssl.SSLContext:
    """The system's trust store, as huggingface_hub's HTTP client uses it: truststore on
    Windows and macOS; elsewhere OpenSSL's paths, or SSL_CERT_FILE / SSL_CERT_DIR."""
    import platform
    import ssl

    if platform.system() in ("Windows", "Darwin"):
        with contextlib.suppress(ImportError):
            import truststore

            return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return ssl.create_default_context()


def stored_token() -> str | None:
    """The token huggingface_hub sends when none is given, read without importing it.

    ``HF_TOKEN`` (or the older ``HUGGING_FACE_HUB_TOKEN``), else the file ``hf auth login``
    writes (``HF_TOKEN_PATH``, by default ``$HF_HOME/token``); none under
    ``HF_HUB_DISABLE_IMPLICIT_TOKEN``. Logins that expire are refreshed only when the Hub
    refuses one (``open_url``).
    """
    if os.environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN", "").strip().upper() in _TRUE:
        return None
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token is None:
        cache = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        home = os.environ.get("HF_HOME", os.path.join(cache, "huggingface"))
        path = os.environ.get("HF_TOKEN_PATH", os.path.join(home, "token"))
        try:
            token = Path(os.path.expandvars(os.path.expanduser(path))).read_text(encoding="utf-8")
        except (OSError, ValueError):
            return None
    return token.replace("\r", "").replace("\n", "").strip() or None


# ---------------------------------------------------------------------- helpers


def unavailable(status: int) -> HubUnavailable:
    """The error for an HTTP error status from the Hub that no user input caused."""
    if status == 429:
        return HubUnavailable("the Hub is rate-limiting requests (429); try again in a minute")
    if status >= 500:
        return HubUnavailable(f"the Hub failed with {status}")
    return HubUnavailable(f"the Hub refused the request ({status})")


def _safe(text: str) -> str:
    return re.sub(r"[^\w.-]", "_", text)


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
