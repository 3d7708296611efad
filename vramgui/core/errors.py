"""The errors a user can cause and act on. Anything else is a bug."""

import reprlib

# A value from a file in a message: bounded in length and depth, whatever the file holds (a
# list of millions of entries, or nested hundreds deep, would make the message the problem).
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = 6
_SHOWN.maxstring = 40
_SHOWN.maxother = 40
_SHOWN_CHARS = 100


def shown(value: object) -> str:
    """``repr(value)`` cut to about a hundred characters and three levels of nesting."""
    text = _SHOWN.repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 3]}..."


class VramguiError(Exception):
    """Base of every error that carries a message meant for the user."""


class ConfigError(VramguiError):
    """A model description (config.json, header, metadata) is missing, malformed or unsupported."""


class WorkloadError(VramguiError):
    """The chosen settings are invalid or do not apply to this model."""
