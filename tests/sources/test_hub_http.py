"""The Hub's HTTP side: huggingface_hub does the talking, held to vramgui's rules. What a search
and a load import, which token they send and where, one deadline per call against a server
that drips its answer, the retry policy, answers too large to be what they claim, and
credentials in HF_ENDPOINT kept out of every message and log line."""

import errno
import json
import logging
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakehub.dripping import DrippingServer
from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, safetensors_bytes, write_gguf
from tests.fakehub.server import FakeHub
from vramgui.sources import hub as hub_module
from vramgui.sources import hub_http
from vramgui.sources.errors import HubUnavailable, ModelNotFound
from vramgui.sources.hub import HubClient

CONFIG = json.dumps(TINY_LLAMA_CONFIG).encode()
FILES = {
    "config.json": CONFIG,
    "model.safetensors": safetensors_bytes(llama_tensors(TINY_LLAMA_CONFIG)),
}


@pytest.fixture(autouse=True)
def no_stored_login(monkeypatch, tmp_path):
    """No token from the machine running the tests: each test sets the one it means."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))


def test_the_library_is_imported_by_a_call_not_by_the_modules(fake_hub, tmp_path):
    fake_hub.add("org/tiny", FILES, downloads=3)
    script = (
        "import sys\n"
        "from vramgui.sources import resolve\n"
        "from vramgui.sources.hub import HubClient\n"
        "print('huggingface_hub' in sys.modules)\n"
        f"client = HubClient({fake_hub.url!r}, cache_dir=__import__('pathlib').Path({str(tmp_path)!r}))\n"
        "assert [m.id for m in client.search('tiny')] == ['org/tiny']\n"
        "print('huggingface_hub' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "True"]


def test_files_read_for_an_estimate_land_in_the_shared_cache(fake_hub, tmp_path, monkeypatch):
    """config.json goes where every Hugging Face tool looks: HF_HUB_CACHE's snapshot."""
    repo = fake_hub.add("org/tiny", FILES)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    HubClient(timeout_s=2, cache_dir=tmp_path / "vramgui").load("org/tiny")
    stored = tmp_path / "hf" / "models--org--tiny" / "snapshots" / repo.sha / "config.json"
    assert json.loads(stored.read_text(encoding="utf-8")) == TINY_LLAMA_CONFIG
    assert (tmp_path / "hf" / "models--org--tiny" / "refs" / "main").read_text() == repo.sha
    assert not (stored.parent / "model.safetensors").exists()  # weights are never downloaded


def _search_was_authorized(hub: FakeHub) -> list[bool]:
    return [r.authorized for r in hub.requests if r.path == "/api/models"]


def test_search_sends_the_token_huggingface_hub_would(fake_hub, monkeypatch, tmp_path):
    fake_hub.add("org/tiny", FILES)
    HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    monkeypatch.setenv("HF_TOKEN", "good-token")
    HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    monkeypatch.delenv("HF_TOKEN")
    token_file = tmp_path / "token"
    token_file.write_text("good-from-login\n", encoding="utf-8")
    monkeypatch.setenv("HF_TOKEN_PATH", str(token_file))
    HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    HubClient(timeout_s=2, token="good-explicit", cache_dir=tmp_path).search("tiny")
    assert _search_was_authorized(fake_hub) == [False, True, True, False, True]


def test_a_refused_stored_token_is_dropped_for_the_retry(fake_hub, monkeypatch, tmp_path):
    fake_hub.add("org/tiny", FILES)
    fake_hub.revoked.add("expired-token")
    monkeypatch.setenv("HF_TOKEN", "expired-token")
    client = HubClient(timeout_s=2, cache_dir=tmp_path)
    assert [m.id for m in client.search("tiny")] == ["org/tiny"]
    assert _search_was_authorized(fake_hub) == [True, False]
    assert client.load("org/tiny").spec.parameters > 0
    # A token handed in by the caller is not second-guessed.
    with pytest.raises(HubUnavailable, match="401"):
        HubClient(timeout_s=2, token="expired-token", cache_dir=tmp_path).search("llama")


def test_the_token_stays_on_the_hub_across_redirects(fake_hub, monkeypatch, tmp_path):
    fake_hub.add("org/new-name", FILES, gated=True)
    fake_hub.renamed["org/old-name"] = "org/new-name"
    monkeypatch.setenv("HF_TOKEN", "good-token")
    client = HubClient(timeout_s=2, cache_dir=tmp_path)
    assert client.load("org/old-name").spec.parameters > 0  # same host: the token follows

    with FakeHub() as elsewhere:
        elsewhere.add("org/tiny", FILES)
        fake_hub.moved_to = elsewhere.url
        assert [m.id for m in client.search("tiny")] == ["org/tiny"]
        assert fake_hub.requests[-1].authorized
        assert elsewhere.requests and not any(r.authorized for r in elsewhere.requests)


@pytest.mark.parametrize(
    ("endpoint", "target", "keeps"),
    [
        ("https://hub.example:8443", "https://hub.example:8443/org/tiny", True),
        ("https://hub.example:8443", "http://hub.example:8443/org/tiny", False),  # downgrade
        ("http://hub.example", "https://hub.example/org/tiny", False),  # another scheme too
        ("https://hub.example", "https://hub.example:444/org/tiny", False),
        ("https://hub.example", "https://cdn.example/org/tiny", False),
        ("https://HUB.example", "https://hub.example:443/x", True),
    ],
)
def test_the_token_goes_only_to_the_endpoints_scheme_host_and_port(endpoint, target, keeps):
    """Every request, first or redirected, passes this check before it is sent."""
    import httpx2

    session = hub_http.HubSession(endpoint, 5.0, token="hf_secret")
    request = httpx2.Request("GET", target, headers={"Authorization": "Bearer hf_secret"})
    session.check_request(hub_http._Activity(session, "test", 1000), request)
    assert ("Authorization" in request.headers) is keeps


def test_redirects_to_other_schemes_are_not_followed(fake_hub, tmp_path):
    fake_hub.add("org/tiny", FILES)
    fake_hub.moved_to = "ftp://127.0.0.1:21"
    with pytest.raises(HubUnavailable, match="ftp: address; vramgui follows http"):
        HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    with pytest.raises(HubUnavailable, match="ftp"):
        HubClient(timeout_s=2, cache_dir=tmp_path).load("org/tiny")


@pytest.mark.parametrize(("status", "tries"), [(502, 2), (503, 2), (429, 1), (500, 1)])
def test_search_retries_once_on_a_gateway_error_only(fake_hub, tmp_path, status, tries):
    fake_hub.fail["search"] = status
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match=str(status)):
        HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    assert len(_search_was_authorized(fake_hub)) == tries
    assert time.perf_counter() - started < 1.5  # not the library's backoff of 1, 2, 4... s


def test_a_slow_search_ends_at_the_deadline(fake_hub, tmp_path):
    fake_hub.delay_s["search"] = 5.0
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match=r"did not answer within 0\.3 s \(search\)"):
        HubClient(timeout_s=0.3, cache_dir=tmp_path).search("tiny")
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize("drip_headers", [True, False], ids=["headers", "body"])
def test_one_deadline_bounds_a_call_against_a_dripping_server(tmp_path, drip_headers):
    """Each byte arrives well within any per-read timeout; the whole answer takes seconds."""
    with DrippingServer(drip_headers=drip_headers) as server:
        calls = {
            "search": lambda c: c.search("tiny"),
            "load": lambda c: c.load("org/tiny"),
            "gguf listing": lambda c: c.list_gguf_files("org/tiny"),
        }
        for name, call in calls.items():
            client = HubClient(server.url, timeout_s=0.6, cache_dir=tmp_path / name)
            started = time.perf_counter()
            with pytest.raises(HubUnavailable, match=r"did not answer within 0\.6 s"):
                call(client)
            assert time.perf_counter() - started < 1.5, name


@pytest.mark.parametrize(
    "key",
    ["org/tiny", "org/tiny/config.json", "org/tiny/model.safetensors", "org/tiny-GGUF/a.gguf"],
)
def test_one_deadline_bounds_every_hub_path_against_a_dripping_answer(fake_hub, tmp_path, key):
    """Repo information, config.json into the cache, a safetensors header, a GGUF header: each
    answer sent one byte every 20 ms, which takes seconds whole."""
    write_gguf(tmp_path / "a.gguf")
    fake_hub.add("org/tiny", FILES)
    fake_hub.add("org/tiny-GGUF", {"a.gguf": (tmp_path / "a.gguf").read_bytes()})
    fake_hub.drip_s[key] = 0.02
    repo = "/".join(key.split("/")[:2])
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match=r"did not answer within 1 s"):
        HubClient(timeout_s=1, cache_dir=tmp_path / "cache").load(repo)
    assert time.perf_counter() - started < 2.5


def test_no_hub_at_the_endpoint(tmp_path):
    with FakeHub() as gone:
        url = gone.url
    with pytest.raises(HubUnavailable, match="cannot reach the Hub") as info:
        HubClient(url, timeout_s=1, cache_dir=tmp_path).search("tiny")
    assert str(info.value).endswith(
        ": the connection was refused (nothing listens at that address)"
    )
    assert "Error)" not in str(info.value)  # once "(ConnectionRefusedError)"


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (socket.gaierror(-2, "Name or service not known"), "its name cannot be looked up"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "the network is unreachable"),
        (ConnectionResetError(104, "Connection reset by peer"), "the connection was cut"),
        (OSError(errno.EIO, "Input/output error"), "a network error (Input/output error)"),
    ],
)
def test_network_errors_are_worded_for_people(error, words):
    """Offline, a search once said "cannot reach the Hub at ... (gaierror)"."""
    reason = hub_http.network_reason(error)
    assert reason.startswith(words)
    assert type(error).__name__ not in reason


def test_an_answer_too_large_for_a_search_is_refused(fake_hub, monkeypatch, tmp_path):
    for i in range(5):
        fake_hub.add(f"org/tiny-{i}", FILES)
    monkeypatch.setattr(hub_module, "MAX_SEARCH_BYTES", 300)
    with pytest.raises(HubUnavailable, match="more than 300 bytes for search"):
        HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")


def test_a_server_that_ignores_ranges_never_sends_weights(fake_hub, tmp_path):
    fake_hub.ignore_range = True
    fake_hub.add("org/tiny", FILES)
    loaded = HubClient(timeout_s=2, cache_dir=tmp_path).load("org/tiny")
    assert any("does not serve ranges" in n and "synthesized" in n for n in loaded.notices)
    assert loaded.spec.parameters > 0  # from config.json
    weights = [r for r in fake_hub.requests if r.path.endswith(".safetensors")]
    assert weights and all(r.range for r in weights)


def test_offline_switches_of_huggingface_hub_and_transformers(fake_hub, monkeypatch, tmp_path):
    fake_hub.add("org/tiny", FILES)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        with monkeypatch.context() as env:
            env.setenv(name, "1")
            with pytest.raises(HubUnavailable, match=f"offline mode is on \\({name}\\)"):
                HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    assert fake_hub.requests == []


def test_credentials_in_hf_endpoint_never_reach_a_message_or_the_log(fake_hub, tmp_path, caplog):
    fake_hub.add("org/tiny", FILES)
    with FakeHub() as gone:
        dead = gone.url
    secret = dead.replace("http://", "http://mirror-user:s3cret-pass@")
    messages = []
    client = HubClient(secret, timeout_s=1, cache_dir=tmp_path)
    for call in (lambda: client.search("tiny"), lambda: client.load("org/tiny")):
        with pytest.raises(HubUnavailable) as info:
            call()
        messages.append(str(info.value))
    live = fake_hub.url.replace("http://", "http://mirror-user:s3cret-pass@")
    with caplog.at_level(logging.DEBUG):
        HubClient(live, timeout_s=2, cache_dir=tmp_path).load("org/tiny")
        with pytest.raises(ModelNotFound) as missing:
            HubClient(live, timeout_s=2, cache_dir=tmp_path).load("org/nothing")
    messages.append(str(missing.value))
    assert all("cannot reach the Hub at http://***@127.0.0.1" in m for m in messages[:2])
    assert "http://***@127.0.0.1" in messages[2]
    assert caplog.records  # httpx logs each request
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "s3cret" not in "\n".join(messages) + logged + repr(client)
    assert not list(tmp_path.rglob("*s3cret*"))  # nor a folder of the cache


@pytest.fixture
def tls_hub(tmp_path):
    """A fake Hub over https with a self-signed certificate for 127.0.0.1, and that certificate."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with FakeHub(tls=context) as hub:
        yield hub, cert
    hub_http.reset_client()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_checks_the_certificate_against_the_trust_store(tls_hub, monkeypatch, tmp_path):
    hub, cert = tls_hub
    hub.add("org/tiny", FILES)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
    hub_http.reset_client()
    with pytest.raises(HubUnavailable, match="cannot reach the Hub"):
        HubClient(hub.url, timeout_s=5, cache_dir=tmp_path).search("tiny")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    hub_http.reset_client()
    assert [m.id for m in HubClient(hub.url, timeout_s=5, cache_dir=tmp_path).search("tiny")] == [
        "org/tiny"
    ]


def test_the_token_never_reaches_a_xet_host(fake_hub, monkeypatch, tmp_path):
    """A Hub that keeps its files in Xet storage elsewhere: huggingface_hub would hand the token
    to hf_xet, which sends it to that host. Every path that reads a repo keeps to vramgui's client,
    and the token goes to the Hub's own host only."""
    from vramgui.cli import main
    from vramgui.core.model import ModelRef
    from vramgui.sources.configs import config_of
    from vramgui.sources.resolve import load_model

    fake_hub.add("org/tiny", FILES)
    monkeypatch.setenv("HF_TOKEN", "good-token")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("VRAMGUI_HOME", str(tmp_path / "vramgui"))
    with FakeHub() as elsewhere:
        fake_hub.xet_auth = elsewhere.url
        assert HubClient(timeout_s=5, cache_dir=tmp_path / "a").load("org/tiny").spec.parameters
        assert load_model("org/tiny").spec.parameters  # the window's and the CLI's reader
        assert main(["estimate", "org/tiny", "--json"]) == 0
        assert config_of(ModelRef("hub", "org/tiny")) == TINY_LLAMA_CONFIG  # measure's
        assert [r for r in elsewhere.requests if r.token == "good-token"] == []
    assert any(r.token == "good-token" and "/resolve/" in r.path for r in fake_hub.requests)


_CLI = """
import sys
from vramgui.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize("token_file", ["fifo", "/dev/zero"])
def test_a_token_path_that_is_no_file_is_not_read(fake_hub, tmp_path, token_file):
    """HF_TOKEN_PATH naming a named pipe blocked every search forever (in the window, a pool
    thread each); /dev/zero read until MemoryError. Neither is a token file: none is sent."""
    import os

    from tests.bounded import run_bounded

    fake_hub.add("org/tiny", FILES)
    if token_file == "fifo":
        token_file = str(tmp_path / "fifo")
        os.mkfifo(token_file)
    env = {
        **os.environ,
        "HF_ENDPOINT": fake_hub.url,
        "HF_TOKEN_PATH": token_file,
        "VRAMGUI_HOME": str(tmp_path / "home"),
    }
    done = run_bounded(_CLI.format(argv=["search", "tiny"]), env=env)
    assert "org/tiny" in done.stdout
    assert [r.authorized for r in fake_hub.requests] == [False]


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("HF_ENDPOINT", "http://[::1", "HF_ENDPOINT 'http://[::1' is not a usable URL"),
        ("HF_ENDPOINT", "http://127.0.0.1:99999", "Port out of range"),
        ("HF_ENDPOINT", "ftp://mirror", "expected http(s)://host"),
        ("HF_HUB_ETAG_TIMEOUT", "abc", "HF_HUB_ETAG_TIMEOUT='abc' is not a whole number"),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "1.5", "HF_HUB_DOWNLOAD_TIMEOUT='1.5' is not a whole number"),
        ("VRAMGUI_HOME", "a-file", "cannot make vramgui's data folder"),
    ],
)
def test_an_unusable_setting_is_named_in_one_line(tmp_path, setting, value, said):
    import os

    from tests.bounded import run_bounded

    if setting == "VRAMGUI_HOME":
        value = str(tmp_path / value)
        Path(value).write_text("not a folder")
    env = {
        **os.environ,
        "VRAMGUI_HOME": str(tmp_path / "home"),
        "HF_TOKEN_PATH": str(tmp_path / "no-token"),
        setting: value,
    }
    argv = ["profile", "list"] if setting == "VRAMGUI_HOME" else ["estimate", "org/tiny"]
    done = run_bounded(_CLI.format(argv=argv), env=env, codes=(2,))
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
