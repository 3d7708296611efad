"""The errors a user can cause and act on. Anything else is a bug."""


class VramguiError(Exception):
    """Base of every error that carries a message meant for the user."""


class ConfigError(VramguiError):
    """A model description (config.json, header, metadata) is missing, malformed or unsupported."""


class WorkloadError(VramguiError):
    """The chosen settings are invalid or do not apply to this model."""
