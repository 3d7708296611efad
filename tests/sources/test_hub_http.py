"""The Hub's HTTP side without huggingface_hub: what a search and a load import, which token they
send and where, the retry policy of a search, and answers too large to be what they claim."""

import json
import shutil
import ssl
import subprocess
import sys
import time

import pytest

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, safetensors_bytes
from tests.fakehub.server import FakeHub
from vramgui.sources import hub as hub_module
from vramgui.sources.errors import HubUnavailable
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


def test_search_and_load_import_neither_huggingface_hub_nor_httpx(fake_hub, tmp_path):
    fake_hub.add("org/tiny", FILES, downloads=3)
    script = (
        "import sys\n"
        "from vramgui.sources.hub import HubClient\n"
        f"client = HubClient({fake_hub.url!r}, cache_dir=__import__('pathlib').Path({str(tmp_path)!r}))\n"
        "assert [m.id for m in client.search('tiny')] == ['org/tiny']\n"
        "assert client.load('org/tiny').spec.parameters > 0\n"
        "print(sorted(m for m in ('huggingface_hub', 'httpx', 'httpx2') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


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


@pytest.mark.parametrize(("status", "tries"), [(502, 2), (503, 2), (429, 1), (500, 1)])
def test_search_retries_once_on_a_gateway_error_only(fake_hub, tmp_path, status, tries):
    fake_hub.fail["search"] = status
    with pytest.raises(HubUnavailable, match=str(status)):
        HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")
    assert len(_search_was_authorized(fake_hub)) == tries


def test_a_slow_search_ends_at_the_deadline(fake_hub, tmp_path):
    fake_hub.delay_s["search"] = 5.0
    started = time.perf_counter()
    with pytest.raises(HubUnavailable, match=r"did not answer within 0\.3 s \(search\)"):
        HubClient(timeout_s=0.3, cache_dir=tmp_path).search("tiny")
    assert time.perf_counter() - started < 2.0


def test_no_hub_at_the_endpoint(tmp_path):
    with FakeHub() as gone:
        url = gone.url
    with pytest.raises(HubUnavailable, match="cannot reach the Hub"):
        HubClient(url, timeout_s=1, cache_dir=tmp_path).search("tiny")


def test_an_answer_too_large_for_a_search_is_refused(fake_hub, monkeypatch, tmp_path):
    for i in range(5):
        fake_hub.add(f"org/tiny-{i}", FILES)
    monkeypatch.setattr(hub_module, "MAX_SEARCH_BYTES", 100)
    with pytest.raises(HubUnavailable, match="over 100 bytes"):
        HubClient(timeout_s=2, cache_dir=tmp_path).search("tiny")


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
        hub_module._opener.cache_clear()
        yield hub, cert
    hub_module._opener.cache_clear()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_checks_the_certificate_against_the_trust_store(tls_hub, monkeypatch, tmp_path):
    hub, cert = tls_hub
    hub.add("org/tiny", FILES)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
    with pytest.raises(HubUnavailable, match="cannot reach the Hub"):
        HubClient(hub.url, timeout_s=5, cache_dir=tmp_path).search("tiny")
    hub_module._opener.cache_clear()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert [m.id for m in HubClient(hub.url, timeout_s=5, cache_dir=tmp_path).search("tiny")] == [
        "org/tiny"
    ]
