"""pytest fixtures over the fake Hub; import them into a test module or a conftest.py."""

from __future__ import annotations

import pytest

from tests.fakehub.server import FakeHub


@pytest.fixture
def fake_hub(monkeypatch):
    """A started FakeHub with ``HF_ENDPOINT`` pointing at it; stopped after the test."""
    hub = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    yield hub
    hub.stop()
