"""HTTP to the Hub, one public call at a time: huggingface_hub's own client, held to vramgui's rules.

huggingface_hub does the talking: URLs, headers and auth, answers parsed into its records,
errors classified (gated, missing repo or file), files downloaded into the shared Hugging Face
cache. What a window needs and the library does not offer is added underneath, in the HTTP client
it is given (``set_client_factory``), and applies only inside a :meth:`HubSession.run`:

- **one deadline per call**, connection to last byte: every socket connect, read and write waits
  at most what is left of it (:class:`_DeadlineBackend`), so a server that drips an answer one
  byte at a time is cut off on time. The library's backoff (up to ~23 s on 429 / 5xx, and on
  network errors) never starts: those end the call here, except a refused connection or a
  502-504, which get one quick retry of the call when the deadline leaves room;
- **a byte budget per request**, so an answer far larger than what was asked for (a server that
  ignores a Range request, a lying size) is refused instead of read;
- **the token goes only to the endpoint's own scheme, host and port**, only http(s) redirects
  are followed, and a stored token the Hub refuses (401: an expired login) is dropped for one
  retry;
- **no Xet**: a file the Hub keeps in Xet storage is fetched over plain HTTP through this client
  (``HF_HUB_DISABLE_XET``, set for the whole process): huggingface_hub would otherwise hand the
  download, with the caller's headers and so the token, to hf_xet, whose own HTTP client sends
  them to whatever host the answer names and keeps to no deadline of ours. vramgui downloads
  small files only (config.json, an index), where Xet saves nothing;
- **credentials in ``HF_ENDPOINT``** (``https://user:password@mirror``) never appear in a message
  or a log line (:func:`redact`).

huggingface_hub reads its settings (cache folder, token file, offline mode) once at import; the
process's environment may change after that (tests do), so the token, the cache folder and the
offline switches are read here at each call and handed to the library explicitly.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from vramgui import __version__
from vramgui.files import read_regular
from vramgui.sources.errors import (
    BadModelFile,
    GatedModel,
    HubUnavailable,
    IncompleteModel,
    ModelNotFound,
    SourceError,
)

if TYPE_CHECKING:
    import ssl

    import httpx2
    from huggingface_hub import HfApi

DEFAULT_ENDPOINT = "https://huggingface.co"
RETRY_STATUSES = (502, 503, 504)
RETRY_PAUSE_S = 0.2
# What a request may read beyond what it asked for: status line and headers.
HEADER_SLACK_BYTES = 64 * 1024
# Repo information lists every file; a few MB for the largest repos.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
_TRUE = ("1", "ON", "YES", "TRUE")
# A token is about 40 characters; a token file is never near this.
MAX_TOKEN_BYTES = 64 * 1024
# Settings huggingface_hub reads as whole numbers when it is imported (a ValueError there).
_LIBRARY_WHOLE_NUMBERS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")
_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LIBRARY_LOGGERS = ("httpx2", "httpcore2", "huggingface_hub")

T = TypeVar("T")


def redact(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``***@``."""
    return _CREDENTIALS.sub("***@", text)


def check_settings(endpoint: str) -> None:
    """Raise SourceError, naming the setting, where the endpoint is no http(s) URL (an unclosed
    ``[``, a port past 65535) or a setting huggingface_hub parses at import is not a number."""
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 (parsed here: out of range or not a number raises)
    except ValueError as exc:
        raise SourceError(f"HF_ENDPOINT {redact(endpoint)!r} is not a usable URL ({exc})") from None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        raise SourceError(
            f"HF_ENDPOINT {redact(endpoint)!r} is not a usable URL (expected http(s)://host)"
        )
    for name in _LIBRARY_WHOLE_NUMBERS:
        value = os.environ.get(name, "").strip()
        if value and not value.isdigit():
            raise SourceError(
                f"{name}={value[:40]!r} is not a whole number of seconds; huggingface_hub cannot "
                "start with it (unset it or give a number)"
            )


def check_online() -> None:
    """Raise HubUnavailable when offline mode is on (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``,
    as huggingface_hub and transformers read them)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in _TRUE:
            raise HubUnavailable(f"offline mode is on ({name})")


def stored_token() -> tuple[str, str] | None:
    """The token huggingface_hub sends when none is given, and where it came from.

    ``HF_TOKEN`` (or the older ``HUGGING_FACE_HUB_TOKEN``), else the file ``hf auth login``
    writes (``HF_TOKEN_PATH``, by default ``$HF_HOME/token``); none under
    ``HF_HUB_DISABLE_IMPLICIT_TOKEN``.
    """
    if os.environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN", "").strip().upper() in _TRUE:
        return None
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        token = _clean_token(os.environ.get(name))
        if token:
            return token, name
    path = Path(os.path.expandvars(os.path.expanduser(_token_path())))
    try:
        # A regular file of a token's size only: a named pipe would block, /dev/zero never end.
        token = _clean_token(read_regular(path, MAX_TOKEN_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return (token, f"the login `hf auth login` stored in {path}") if token else None


def _token_path() -> str:
    return os.environ.get("HF_TOKEN_PATH") or os.path.join(hf_home(), "token")


def _clean_token(text: str | None) -> str | None:
    return (text or "").replace("\r", "").replace("\n", "").strip() or None


def hf_home() -> str:
    """``HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.expanduser(os.environ.get("HF_HOME") or os.path.join(cache, "huggingface"))


def hub_cache_dir() -> Path:
    """The shared Hugging Face cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``."""
    folder = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(os.path.expanduser(folder or os.path.join(hf_home(), "hub")))


def unavailable(status: int) -> HubUnavailable:
    """The error for an HTTP error status from the Hub that no user input caused."""
    if status == 429:
        return HubUnavailable("the Hub is rate-limiting requests (429); try again in a minute")
    if status >= 500:
        return HubUnavailable(f"the Hub failed with {status}")
    return HubUnavailable(f"the Hub refused the request ({status})")


def origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, the port filled in from the scheme."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: nothing it could match
        port = -1
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme, 0)


class _Retry(HubUnavailable):
    """A failure worth one quick retry of the whole call: a refused connection, a 502-504."""


class _TokenRefused(HubUnavailable):
    """The Hub refused the stored token (401)."""


class RangesIgnored(HubUnavailable):
    """The server answered a byte-range request with the whole file."""


@dataclass
class _Activity:
    """One request (or a library call's few) of a session: its name and its byte budget."""

    session: HubSession
    what: str
    limit_bytes: int
    received: int = 0

    def count(self, size: int) -> None:
        self.received += size
        if self.received > self.limit_bytes:
            raise HubUnavailable(
                f"the Hub at {self.session.where} sent more than {self.limit_bytes:,} bytes for "
                f"{self.what}; vramgui reads no further"
            )

    def left(self, timeout: float | None) -> float:
        """The timeout for one socket operation: the library's, cut to what the call has left."""
        left = self.session.remaining(self.what)
        return left if timeout is None else min(timeout, left)


_ACTIVITY: ContextVar[_Activity | None] = ContextVar("vramgui_hub_activity", default=None)


class HubSession:
    """One public call (a search, a load, a listing): its endpoint, token and deadline.

    Args:
        endpoint: the Hub URL (``HF_ENDPOINT`` or huggingface.co).
        timeout_s: the whole call's budget, from now; every request shares it.
        token: a token handed in; by default the stored one (``stored_token``).

    Raises:
        SourceError: the endpoint or a huggingface_hub setting is unusable (``check_settings``).
    """

    def __init__(self, endpoint: str, timeout_s: float, token: str | None = None) -> None:
        check_settings(endpoint)
        self.endpoint = endpoint.rstrip("/")
        self.timeout_s = timeout_s
        found = (token, "the token given") if token else stored_token()
        self.token: str | None = found[0] if found else None
        self.token_source: str | None = found[1] if found else None
        self._token_given = token is not None
        self._end = time.monotonic() + timeout_s
        self._origin = origin(self.endpoint)

    @property
    def where(self) -> str:
        """The endpoint as messages show it: without credentials."""
        return redact(self.endpoint)

    def remaining(self, what: str) -> float:
        """Seconds left; raises HubUnavailable (timed out) when none are."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise self.timed_out(what)
        return left

    def timed_out(self, what: str) -> HubUnavailable:
        return HubUnavailable(f"the Hub did not answer within {self.timeout_s:g} s ({what})")

    def api(self) -> HfApi:
        """huggingface_hub's client for this endpoint (send ``token=self.auth`` with each call)."""
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, library_name="vramgui", library_version=__version__)

    @property
    def auth(self) -> str | bool:
        """The ``token`` argument of a library call: ours, or False for none (never its own)."""
        return self.token or False

    def run(
        self,
        what: str,
        call: Callable[[], T],
        *,
        limit_bytes: int = MAX_ANSWER_BYTES,
        repo_id: str | None = None,
        filename: str | None = None,
    ) -> T:
        """Run one library call under the session's rules and map what it raises to ours.

        Args:
            what: what is asked, for messages (``config.json of org/name``).
            call: the library call.
            limit_bytes: the most bytes one request of it may read.
            repo_id: the repo asked about, for messages.
            filename: the file asked for, or None when asking about the repo itself.

        Raises:
            HubUnavailable, ModelNotFound, GatedModel, IncompleteModel, BadModelFile.
        """
        check_online()
        _install_client()
        for attempt in (0, 1):
            reset = _ACTIVITY.set(_Activity(self, what, limit_bytes))
            try:
                return call()
            except _TokenRefused:
                if attempt:
                    raise
                self.token, self.token_source = None, None
            except _Retry as exc:
                if attempt or self._end - time.monotonic() < 2 * RETRY_PAUSE_S:
                    raise HubUnavailable(str(exc)) from None
                time.sleep(RETRY_PAUSE_S)
            except SourceError:
                raise
            except Exception as exc:
                raise self._mapped(exc, what, repo_id, filename) from None
            finally:
                _ACTIVITY.reset(reset)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def read_range(self, url: str, start: int, length: int, what: str) -> bytes:
        """Up to ``length`` bytes of ``url`` from ``start`` (fewer at the end of the file).

        Raises:
            RangesIgnored: the server sent the whole file instead.
            HubUnavailable and the rest: as :meth:`run`.
        """

        def call() -> bytes:
            from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

            headers = build_hf_headers(
                token=self.auth, library_name="vramgui", library_version=__version__
            )
            headers["Range"] = f"bytes={start}-{start + length - 1}"
            with get_session().stream("GET", url, headers=headers) as response:
                if response.status_code >= 400:
                    response.read()
                    hf_raise_for_status(response)
                chunks = []
                received = 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    received += len(chunk)
                    if received >= length:
                        break
                return b"".join(chunks)[:length]

        return self.run(what, call, limit_bytes=length + HEADER_SLACK_BYTES)

    def gated_message(self, repo_id: str) -> str:
        """Why a gated repo cannot be read, whether a token was sent, and what to do."""
        page = f"{self.where}/{repo_id}"
        if self.token:
            sent = f"a token was sent (from {self.token_source}) but its account has no access yet"
        else:
            sent = (
                "no token was sent (you are not logged in): log in with `hf auth login` or set "
                "the HF_TOKEN environment variable"
            )
        return f"{repo_id} is gated: its terms must be accepted on its page, {page}; {sent}"

    # ------------------------------------------------------------------ inside the client

    def check_request(self, activity: _Activity, request: httpx2.Request) -> None:
        """Before each request (redirects included): scheme, time left, where the token goes."""
        scheme = request.url.scheme
        if scheme not in ("http", "https"):
            raise HubUnavailable(
                f"the Hub at {self.where} redirected {activity.what} to a {scheme}: address; "
                "vramgui follows http(s) redirects only"
            )
        left = self.remaining(activity.what)
        request.extensions["timeout"] = {"connect": left, "read": left, "write": left, "pool": left}
        if origin(str(request.url)) != self._origin:
            request.headers.pop("Authorization", None)

    def check_response(self, activity: _Activity, response: httpx2.Response) -> None:
        """After each answer's headers: statuses that end (or retry) the call at once."""
        status = response.status_code
        sent_token = "Authorization" in response.request.headers
        if status == 401 and sent_token and not self._token_given and self.token:
            response.close()
            raise _TokenRefused(f"the Hub refused the token from {self.token_source} (401)")
        if status in RETRY_STATUSES:
            response.close()
            raise _Retry(str(unavailable(status)))
        if status == 429 or status >= 500:
            response.close()
            raise unavailable(status)
        if status == 200 and "Range" in response.request.headers:
            response.close()
            raise RangesIgnored(
                f"the Hub at {self.where} answered a byte-range request for {activity.what} with "
                "the whole file (it does not serve ranges)"
            )

    # ------------------------------------------------------------------ errors

    def _mapped(
        self, exc: Exception, what: str, repo_id: str | None, filename: str | None
    ) -> SourceError:
        """Our error for what a library call raised; every message without credentials."""
        from huggingface_hub import errors

        repo = repo_id or "the repo"
        if isinstance(exc, errors.OfflineModeIsEnabled):
            return HubUnavailable("offline mode is on (HF_HUB_OFFLINE)")
        if isinstance(exc, errors.GatedRepoError):
            return GatedModel(self.gated_message(repo))
        if isinstance(exc, errors.RevisionNotFoundError):
            return ModelNotFound(f"{repo} has no such revision")
        if isinstance(exc, errors.EntryNotFoundError) and filename is not None:
            if filename == "config.json":
                return IncompleteModel(
                    f"{repo} has no config.json, which vramgui needs for the architecture"
                )
            return IncompleteModel(f"{repo} has no file {filename}")
        if isinstance(exc, errors.RepositoryNotFoundError):
            return self._not_found(repo)
        if isinstance(exc, errors.HfHubHTTPError):
            response = exc.response
            status = response.status_code if response is not None else 0
            if status in (401, 403) and repo_id is not None:
                return GatedModel(self.gated_message(repo))
            if status in (401, 404) and repo_id is not None:
                return self._not_found(repo)
            return unavailable(status)
        if isinstance(exc, errors.SafetensorsParsingError):
            return BadModelFile(f"{what}: {redact(str(exc))}")
        if isinstance(exc, OSError) and exc.filename:
            return SourceError(
                f"cannot keep {what} in the Hugging Face cache ({redact(str(exc))}); "
                "check that HF_HOME (or HF_HUB_CACHE) is a writable folder"
            )
        return HubUnavailable(
            f"the Hub at {self.where} sent an answer about {what} that cannot be read "
            f"({type(exc).__name__}: {redact(str(exc))[:200]})"
        )

    def _not_found(self, repo: str) -> ModelNotFound:
        return ModelNotFound(
            f"{repo} is not on the Hub at {self.where} (if it is private, log in with "
            "`hf auth login` or set HF_TOKEN)"
        )


# ---------------------------------------------------------------------- the client underneath

_INSTALL_LOCK = threading.Lock()
_INSTALLED = threading.Event()


def _install_client() -> None:
    """Hand huggingface_hub the client below, once per process."""
    if _INSTALLED.is_set():
        return
    with _INSTALL_LOCK:
        if not _INSTALLED.is_set():
            from huggingface_hub import constants
            from huggingface_hub.utils import set_client_factory

            # Read by the library at each download (is_xet_available), once at import from the
            # environment: too late for an environment variable here.
            constants.HF_HUB_DISABLE_XET = True

            for name in _LIBRARY_LOGGERS:
                logging.getLogger(name).addFilter(_REDACTING)
            set_client_factory(_build_client)
            _INSTALLED.set()


def reset_client() -> None:
    """Close the shared client so that the next call builds a new one (a new trust store)."""
    if _INSTALLED.is_set():
        from huggingface_hub.utils import close_session

        close_session()


def warm() -> None:
    """Import huggingface_hub and build its client ahead of the first search or load.

    Run on a worker after the window's first paint: the imports (~150 ms) and the trust store
    (30-120 ms) then cost the first search nothing.
    """
    _install_client()
    from huggingface_hub import HfApi  # noqa: F401 (imported for its cost)
    from huggingface_hub.utils import get_session

    get_session()


def _build_client() -> httpx2.Client:
    """huggingface_hub's client with the session's rules: hooks, network backend, proxies."""
    import httpx2

    tls = _tls_context()
    mounts: dict[str, httpx2.BaseTransport | None] = {}
    for pattern, proxy in _environment_proxies():
        mounts[pattern] = None if proxy is None else _transport(tls, proxy)
    return httpx2.Client(
        transport=_transport(tls, None),
        mounts=mounts,
        event_hooks={"request": [_on_request], "response": [_on_response]},
        follow_redirects=True,
        timeout=None,
    )


def _transport(tls: ssl.SSLContext, proxy: str | None) -> httpx2.HTTPTransport:
    import httpx2

    transport = httpx2.HTTPTransport(verify=tls, proxy=proxy)
    # httpx builds its connection pool without a way to pass a network backend; the pool reads
    # this attribute whenever it opens a connection (tests/sources/test_hub_http.py's dripping
    # server fails if a new httpx2 stops doing so).
    transport._pool._network_backend = _DeadlineBackend()  # type: ignore[assignment] # same calls
    return transport


def _environment_proxies() -> Iterable[tuple[str, str | None]]:
    """``(mount pattern, proxy URL or None for none)`` from the environment, as httpx reads it."""
    import urllib.request

    proxies = urllib.request.getproxies()
    bypass = [h.strip() for h in proxies.get("no", "").split(",") if h.strip()]
    if "*" in bypass:
        return []
    found: list[tuple[str, str | None]] = [
        (f"{scheme}://", proxies[scheme]) for scheme in ("http", "https") if proxies.get(scheme)
    ]
    if found:
        found += [(f"all://*{host.lstrip('.')}", None) for host in bypass]
    return found


def _tls_context() -> ssl.SSLContext:
    """The system's trust store: truststore on Windows and macOS; elsewhere OpenSSL's paths, or
    SSL_CERT_FILE / SSL_CERT_DIR."""
    import platform
    import ssl

    if platform.system() in ("Windows", "Darwin"):
        with contextlib.suppress(ImportError):
            import truststore

            return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return ssl.create_default_context()


def _on_request(request: httpx2.Request) -> None:
    activity = _ACTIVITY.get()
    if activity is not None:
        activity.session.check_request(activity, request)


def _on_response(response: httpx2.Response) -> None:
    activity = _ACTIVITY.get()
    if activity is not None:
        activity.session.check_response(activity, response)


class _RedactingFilter(logging.Filter):
    """Takes credentials out of the library's log lines (httpx logs every request's URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_REDACTING = _RedactingFilter()


class _DeadlineBackend:
    """httpcore's socket backend with every operation held to the calling session's deadline,
    and network failures turned into our errors (so that the library never retries them)."""

    def __init__(self) -> None:
        import httpcore2

        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        activity = _ACTIVITY.get()
        if activity is None:
            return self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        with _mapped_network_errors(activity, "connect"):
            stream = self._inner.connect_tcp(
                host, port, activity.left(timeout), local_address, socket_options
            )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> Any:
        return self._inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _DeadlineStream:
    """A connection whose reads and writes wait at most what the calling session has left."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        activity = _ACTIVITY.get()
        if activity is None:
            return self._inner.read(max_bytes, timeout)
        with _mapped_network_errors(activity, "read"):
            data = self._inner.read(max_bytes, activity.left(timeout))
        activity.count(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        activity = _ACTIVITY.get()
        if activity is None:
            self._inner.write(buffer, timeout)
            return
        with _mapped_network_errors(activity, "write"):
            self._inner.write(buffer, activity.left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        activity = _ACTIVITY.get()
        if activity is None:
            return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))
        with _mapped_network_errors(activity, "connect"):
            stream = self._inner.start_tls(ssl_context, server_hostname, activity.left(timeout))
        return _DeadlineStream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


@contextlib.contextmanager
def _mapped_network_errors(activity: _Activity, step: str) -> Any:
    """httpcore's network errors as ours: the library retries its own, with pauses."""
    import httpcore2

    session = activity.session
    try:
        yield
    except httpcore2.TimeoutException:
        raise session.timed_out(activity.what) from None
    except httpcore2.NetworkError as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, TimeoutError):
            raise session.timed_out(activity.what) from None
        if step == "read":
            raise HubUnavailable(f"the Hub stopped sending {activity.what}") from None
        reason = network_reason(cause)
        if isinstance(cause, ConnectionRefusedError):
            raise _Retry(f"cannot reach the Hub at {session.where}: {reason}") from None
        raise HubUnavailable(f"cannot reach the Hub at {session.where}: {reason}") from None


# What the network errors mean to a person (the errno of an OSError without its own class).
_NETWORK_ERRNOS = {
    errno.ENETUNREACH: "the network is unreachable (is this computer online?)",
    errno.EHOSTUNREACH: "the server is unreachable from this network",
    errno.ENETDOWN: "the network is down",
}


def network_reason(exc: BaseException) -> str:
    """Why a connection failed, in words ("its name cannot be looked up: no network, or no
    DNS server answers"), never an exception's class name alone."""
    import socket
    import ssl

    if isinstance(exc, socket.gaierror):
        return "its name cannot be looked up (no network, or no DNS server answers)"
    if isinstance(exc, ConnectionRefusedError):
        return "the connection was refused (nothing listens at that address)"
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError):
        return "the connection was cut (a proxy or firewall in the way?)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "its certificate cannot be verified (SSL_CERT_FILE names the trusted ones)"
    if isinstance(exc, ssl.SSLError):
        return "the secure connection failed"
    if isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS:
        return _NETWORK_ERRNOS[exc.errno]
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"a network error ({detail})" if detail else "a network error"
