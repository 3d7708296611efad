"""Hub answers from anywhere: a server on 127.0.0.1 that answers search, repo information and
files with garbage, mutated real answers, odd statuses and lying headers.

``HubClient.search`` may only return results or raise ``HubUnavailable``; ``search_models``
never raises (it falls back to the catalog); ``HubClient.load`` raises only vramgui errors.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fakehub.files import llama_tensors, safetensors_bytes
from tests.fuzz.conftest import FUZZ, corpus, parse_safely
from vramgui.sources import resolve
from vramgui.sources.errors import HubUnavailable
from vramgui.sources.hub import HubClient

SEEDS = corpus("hub_answers.json")
WEIGHTS = safetensors_bytes(llama_tensors(SEEDS["config"]))


class GarbageHub:
    """Answers each kind of request with what the test sets: (status, headers, body)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, dict[str, str], bytes]] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/api/models":
                    kind = "search"
                elif path.startswith("/api/models/"):
                    kind = "metadata" if "/safetensors-metadata/" in path else "info"
                else:
                    kind = path.rsplit("/", 1)[-1]
                status, headers, body = hub.answers.get(kind, (404, {}, b"{}"))
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_HEAD = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def garbage_hub() -> Iterator[GarbageHub]:
    hub = GarbageHub()
    yield hub
    hub.stop()


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
SEARCH_KEYS = sorted({k for row in SEEDS["search"] for k in row})
INFO_KEYS = sorted(SEEDS["info"])
SIBLING_KEYS = ("rfilename", "size", "lfs")
statuses = st.sampled_from((200, 200, 200, 206, 301, 404, 429, 500, 503))


def body(doc: object) -> bytes:
    return json.dumps(doc).encode()


@settings(FUZZ, max_examples=40)
@given(
    status=statuses,
    rows=st.lists(
        st.dictionaries(st.sampled_from(SEARCH_KEYS), json_values, max_size=6), max_size=4
    ),
    raw=st.one_of(st.none(), st.binary(max_size=64)),
)
@example(status=200, rows=[{"id": "a/b", "downloads": 1e999}], raw=None)
@example(status=200, rows=[{"id": "a/b", "likes": "many"}], raw=None)
@example(status=200, rows=[], raw=b"[" * 100_000)
@example(status=200, rows=[], raw=b'{"not": "a list"}')
def test_search_answers(garbage_hub, tmp_path_factory, status, rows, raw) -> None:
    answer = raw if raw is not None else body([*SEEDS["search"], *rows])
    garbage_hub.answers["search"] = (status, {}, answer)
    client = HubClient(garbage_hub.url, timeout_s=2, cache_dir=tmp_path_factory.mktemp("cache"))

    def search() -> None:
        with contextlib.suppress(HubUnavailable):
            client.search("llama")
        found = resolve.search_models("llama", hub=client, max_age_s=0)
        assert isinstance(found.results, tuple)

    parse_safely(search)


@settings(FUZZ, max_examples=40)
@given(
    info_status=statuses,
    changes=st.dictionaries(st.sampled_from(INFO_KEYS), json_values, max_size=3),
    sibling=st.dictionaries(st.sampled_from(SIBLING_KEYS), json_values, max_size=3),
    config=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(sorted(SEEDS["config"])), json_values)
    ),
    weights_length=st.one_of(st.none(), st.sampled_from(("0", "8", "10000000000000000", "x"))),
)
@example(info_status=200, changes={"siblings": 5}, sibling={}, config=None, weights_length=None)
@example(
    info_status=200,
    changes={},
    sibling={"rfilename": "model.safetensors", "lfs": [1]},
    config=None,
    weights_length=None,
)
@example(info_status=200, changes={"sha": {"a": 1}}, sibling={}, config=None, weights_length=None)
@example(info_status=200, changes={}, sibling={}, config=None, weights_length="10000000000000000")
def test_load_answers(
    garbage_hub, tmp_path_factory, info_status, changes, sibling, config, weights_length
) -> None:
    info = {**SEEDS["info"], **changes}
    if sibling and isinstance(info.get("siblings"), list):
        info["siblings"] = [*info["siblings"], sibling]
    garbage_hub.answers["info"] = (info_status, {}, body(info))
    garbage_hub.answers["config.json"] = (200, {}, body({**SEEDS["config"], **(config or {})}))
    headers = {"Content-Length": weights_length} if weights_length else {}
    garbage_hub.answers["model.safetensors"] = (200, headers, WEIGHTS)
    client = HubClient(garbage_hub.url, timeout_s=2, cache_dir=tmp_path_factory.mktemp("cache"))
    parse_safely(lambda: client.load("org/llama-7b"))
