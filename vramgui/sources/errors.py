"""Errors of the model sources, each with a message a person can act on.

Third-party exceptions (huggingface_hub, httpx, gguf, json) never leave ``vramgui.sources``; they are
mapped to these.
"""

from __future__ import annotations

from vramgui.core.errors import ConfigError, VramguiError


class SourceError(VramguiError):
    """A model could not be read from where the user pointed."""


class ModelNotFound(SourceError):
    """No model by that name or path: not a file, not in the catalog, not on the Hub."""


class GatedModel(SourceError):
    """The Hub repo exists but needs a license accepted and a login."""


class HubUnavailable(SourceError):
    """The Hub could not answer now (offline, timeout, rate limit, server error) and nothing is cached."""


class BadModelFile(SourceError, ConfigError):
    """A checkpoint file or header is corrupt, truncated or not what its name says."""


class IncompleteModel(SourceError, ConfigError):
    """A model lacks a file vramgui needs (config.json, weights headers)."""
