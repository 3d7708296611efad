"""A fake Hugging Face Hub: an HTTP server on 127.0.0.1 in a thread, with scenarios per repo.

It answers the requests vramgui makes, the way the Hub answers them:

- ``GET /api/models?search=..&limit=..``: search, most downloaded first;
- ``GET /api/models/{org}/{name}[/revision/{rev}]``: repo info (sha, gated, siblings with sizes);
- ``HEAD|GET /{org}/{name}/resolve/{rev}/{file}``: files with X-Repo-Commit, ETag, Content-Length,
  Range requests (206 + Content-Range), 404 + ``X-Error-Code: EntryNotFound`` for missing files;
- ``GET /api/models/{org}/{name}/safetensors-metadata/{index}``: every shard header of a sharded
  repo in one answer (set ``sharded_metadata = False`` to answer 404, as other endpoints do);
- gated repos: 401 without a token, 403 with one (``X-Error-Code: GatedRepo``); missing repos:
  404 ``RepoNotFound``.
A stored token the Hub no longer accepts is answered 401 everywhere (``hub.revoked.add(token)``);
a renamed repo answers every request with a same-host redirect to its new name
(``hub.renamed["org/old"] = "org/new"``); a moved Hub redirects every request to another server
(``hub.moved_to = other.url``).
A Hub whose files are kept in Xet storage (``hub.xet_auth = other.url``) answers every file with
``X-Xet-Hash`` and a ``Link: <other/api/models/.../xet-read-token/...>; rel="xet-auth"``, as the
Hub does; ``other`` (any FakeHub) answers that route with a Xet access token already expired, so a
Xet client comes back to refresh it.
Failures and delays are set per repo (``hub.fail[repo] = 500``, ``hub.delay_s[repo] = 3``), per
file (``hub.delay_s["org/name/config.json"]``) or for search (``hub.fail["search"]``); an answer
sent one body byte at a time, this many seconds apart, likewise (``hub.drip_s[key] = 0.02``).
Every request is logged in ``hub.requests``.

Use the ``fake_hub`` fixture (``from tests.fakehub.fixtures import fake_hub``): it starts a server,
points ``HF_ENDPOINT`` at it and stops it afterwards.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class FakeRepo:
    """A repo of the fake Hub: its files (name -> bytes) and what search shows about it."""

    repo_id: str
    files: dict[str, bytes]
    sha: str = ""
    gated: bool = False
    downloads: int = 0
    likes: int = 0
    library: str = "transformers"
    pipeline_tag: str = "text-generation"
    parameters: int | None = None

    def __post_init__(self) -> None:
        if not self.sha:
            self.sha = hashlib.sha1(self.repo_id.encode()).hexdigest()


@dataclass
class RequestLog:
    method: str
    path: str
    range: str | None
    authorized: bool
    token: str = ""  # what followed "Bearer " in the Authorization header


@dataclass
class FakeHub:
    """The server; ``start()`` / ``stop()`` or use it as a context manager."""

    repos: dict[str, FakeRepo] = field(default_factory=dict)
    fail: dict[str, int] = field(default_factory=dict)
    delay_s: dict[str, float] = field(default_factory=dict)
    drip_s: dict[str, float] = field(default_factory=dict)
    requests: list[RequestLog] = field(default_factory=list)
    ignore_range: bool = False
    content_range_total: int | None = None  # what Content-Range states as the file's size
    sharded_metadata: bool = True
    revoked: set[str] = field(default_factory=set)
    renamed: dict[str, str] = field(default_factory=dict)
    moved_to: str | None = None
    xet_auth: str | None = None  # the host that hands out Xet tokens for this Hub's files
    tls: ssl.SSLContext | None = None  # serve https with this server context

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()

    def add(self, repo_id: str, files: dict[str, bytes], **kwargs) -> FakeRepo:
        repo = FakeRepo(repo_id, files, **kwargs)
        self.repos[repo_id] = repo
        return repo

    @property
    def url(self) -> str:
        assert self._server is not None, "start the fake Hub first"
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        """Stop answering: later connections are refused, slow handlers give up at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SHARDED = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/safetensors-metadata/(?P<index>.+)$")
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_XET_TOKEN = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/xet-read-token/(?P<rev>[^/]+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub  # HTTP/1.0: one request per connection, so a stopped hub answers nothing more

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests read ``hub.requests`` instead."""

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def _route(self, head: bool) -> None:
        self._drip_s = 0.0
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        auth = self.headers.get("Authorization", "")
        self.fake.requests.append(
            RequestLog(
                self.command,
                path,
                self.headers.get("Range"),
                auth.startswith("Bearer "),
                auth.removeprefix("Bearer "),
            )
        )
        if self._redirected(path):
            return
        if auth.removeprefix("Bearer ") in self.fake.revoked:
            self._send(401, b'{"error": "Invalid credentials in Authorization header"}', head=head)
            return
        if path == "/api/models":
            self._search(parse_qs(parts.query))
            return
        if _XET_TOKEN.match(path):
            self._xet_token(head)
            return
        sharded = _SHARDED.match(path)
        if sharded is not None:
            self._sharded_metadata(sharded["repo"], sharded["index"])
            return
        match = _INFO.match(path) or _RESOLVE.match(path)
        if match is None:
            self._send(404, b"not found", head=head)
            return
        repo_id = match["repo"]
        if not self._scenario(repo_id, head):
            return
        if "file" in match.groupdict() and not self._scenario(f"{repo_id}/{match['file']}", head):
            return
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", head)
            return
        rev = match["rev"]
        if rev not in (None, "main", repo.sha):
            self._error(404, "RevisionNotFound", head)
            return
        if "file" in match.groupdict():
            self._file(repo, match["file"], auth, head)
        else:
            self._info(repo, parse_qs(parts.query), head)

    def _redirected(self, path: str) -> bool:
        """Answer a moved Hub or a renamed repo with a redirect, as the Hub does."""
        if self.fake.moved_to is not None:
            target = f"{self.fake.moved_to}{self.path}"
        else:
            old = next((o for o in self.fake.renamed if f"/{o}/" in f"{path}/"), None)
            if old is None:
                return False
            target = self.path.replace(f"/{old}", f"/{self.fake.renamed[old]}", 1)
        self._send(307, b"", headers={"Location": target})
        return True

    def _scenario(self, key: str, head: bool) -> bool:
        """Apply the delay and failure set for ``key``; False when a failure was sent."""
        delay = self.fake.delay_s.get(key)
        if delay and self.fake._stopping.wait(delay):
            return False
        self._drip_s = max(self._drip_s, self.fake.drip_s.get(key, 0.0))
        status = self.fake.fail.get(key)
        if status is not None:
            self._send(status, f"fake failure {status}".encode(), head=head)
            return False
        return True

    def _search(self, query: dict[str, list[str]]) -> None:
        if not self._scenario("search", head=False):
            return
        words = query.get("search", [""])[0].lower()
        limit = int(query.get("limit", ["20"])[0])
        hits = [r for r in self.fake.repos.values() if words in r.repo_id.lower()]
        hits.sort(key=lambda r: -r.downloads)
        rows = []
        for r in hits[:limit]:
            row = {
                "id": r.repo_id,
                "downloads": r.downloads,
                "likes": r.likes,
                "gated": "manual" if r.gated else False,
                "library_name": r.library,
                "pipeline_tag": r.pipeline_tag,
            }
            if r.parameters is not None:
                row["safetensors"] = {"parameters": {"BF16": r.parameters}, "total": r.parameters}
            rows.append(row)
        self._json(rows)

    def _sharded_metadata(self, repo_id: str, index_name: str) -> None:
        """All shard headers of a sharded repo in one answer, as the Hub's endpoint gives them."""
        if not self._scenario(repo_id, head=False):
            return
        repo = self.fake.repos.get(repo_id)
        if not self.fake.sharded_metadata or repo is None or index_name not in repo.files:
            self._error(404, "EntryNotFound", head=False)
            return
        index = json.loads(repo.files[index_name])
        headers = {}
        for shard in sorted(set(index["weight_map"].values())):
            data = repo.files[shard]
            length = int.from_bytes(data[:8], "little")
            headers[shard] = json.loads(data[8 : 8 + length])
        self._json({"index": {"metadata": index.get("metadata")}, "headers": headers})

    def _xet_token(self, head: bool) -> None:
        """A Xet access token for this server's storage, expired the moment it is sent."""
        url, expiry = self.fake.url, int(time.time())
        headers = {
            "X-Xet-Cas-Url": url,
            "X-Xet-Access-Token": "xet-access",
            "X-Xet-Token-Expiration": str(expiry),
            "Content-Type": "application/json",
        }
        body = json.dumps({"accessToken": "xet-access", "exp": expiry, "casUrl": url}).encode()
        self._send(200, body, headers=headers, head=head)

    def _info(self, repo: FakeRepo, query: dict[str, list[str]], head: bool) -> None:
        blobs = query.get("blobs", [""])[0] == "true"
        siblings = []
        for name, data in sorted(repo.files.items()):
            entry: dict = {"rfilename": name}
            if blobs:
                entry["size"] = len(data)
            siblings.append(entry)
        self._json(
            {
                "id": repo.repo_id,
                "sha": repo.sha,
                "gated": "manual" if repo.gated else False,
                "siblings": siblings,
                "downloads": repo.downloads,
                "likes": repo.likes,
                "library_name": repo.library,
            },
            head=head,
        )

    def _file(self, repo: FakeRepo, name: str, auth: str, head: bool) -> None:
        if repo.gated and not auth.startswith("Bearer good"):
            self._error(403 if auth else 401, "GatedRepo", head)
            return
        data = repo.files.get(name)
        if data is None:
            self._error(404, "EntryNotFound", head)
            return
        headers = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
            "Accept-Ranges": "bytes",
        }
        if self.fake.xet_auth is not None:
            headers["X-Xet-Hash"] = hashlib.sha256(data).hexdigest()
            route = f"{self.fake.xet_auth}/api/models/{repo.repo_id}/xet-read-token/{repo.sha}"
            headers["Link"] = f'<{route}>; rel="xet-auth"'
        match = _RANGE.match(self.headers.get("Range", ""))
        if match is None or self.fake.ignore_range:
            self._send(200, data, headers=headers, head=head)
            return
        start = int(match[1])
        end = min(int(match[2]) if match[2] else len(data) - 1, len(data) - 1)
        if start >= len(data):
            self._send(416, b"", headers={"Content-Range": f"bytes */{len(data)}"}, head=head)
            return
        total = self.fake.content_range_total or len(data)
        headers["Content-Range"] = f"bytes {start}-{end}/{total}"
        self._send(206, data[start : end + 1], headers=headers, head=head)

    def _error(self, status: int, code: str, head: bool) -> None:
        body = json.dumps({"error": code}).encode()
        self._send(status, body, headers={"X-Error-Code": code}, head=head)

    def _json(self, doc: object, head: bool = False) -> None:
        body = json.dumps(doc).encode()
        self._send(200, body, headers={"Content-Type": "application/json"}, head=head)

    def _send(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False
    ) -> None:
        try:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if head:
                return
            if not self._drip_s:
                self.wfile.write(body)
            for i in range(len(body)):
                if self.fake._stopping.wait(self._drip_s):
                    return
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to answer
