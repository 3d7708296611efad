"""Errors of the hardware layer that a user can act on."""

from vramgui.core.errors import VramguiError


class HardwareError(VramguiError):
    """A GPU name that matches no catalog entry (or several), or a malformed GPU catalog."""


class CardFigureError(HardwareError):
    """A figure of a card described by hand that is not a positive number within reason.

    Attributes:
        figure: which one: "memory" (GiB), "bandwidth" (GB/s) or "tflops".
        value: what was given.
    """

    def __init__(self, figure: str, value: float) -> None:
        super().__init__(
            f"a card's {figure} must be a positive number a card can have, got {value:g}"
        )
        self.figure = figure
        self.value = value
