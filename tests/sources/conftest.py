"""The fake Hub fixture for the source tests (other test packages import it the same way)."""

from tests.fakehub.fixtures import fake_hub  # noqa: F401 (a fixture, used by name)
