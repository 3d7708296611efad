"""Errors of the hardware layer that a user can act on."""

from vramgui.core.errors import VramguiError


class HardwareError(VramguiError):
    """A GPU name that matches no catalog entry (or several), or a malformed GPU catalog."""
