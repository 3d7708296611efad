"""Fixtures of the measure tests."""

from tests.fakehub.fixtures import fake_hub  # noqa: F401 - a fixture for the tests here
