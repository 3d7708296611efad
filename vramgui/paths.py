"""User directories (data, cache, config, logs), behind one function tests can redirect, and
the bundled files (catalogs, icons, documents), behind another.

``VRAMGUI_HOME`` puts everything under one folder (tests, portable installs). Directories are
created when first needed, never at import.
"""

from __future__ import annotations

import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal

from vramgui.core.errors import VramguiError

Kind = Literal["data", "cache", "config", "log"]
APP_NAME = "vramgui"


class UserDirError(VramguiError):
    """vramgui's own folder cannot be made (``VRAMGUI_HOME`` names a file, a read-only place)."""


def user_dir(kind: Kind, create: bool = True) -> Path:
    """The directory for ``kind``, created unless ``create`` is False.

    Raises:
        UserDirError: it cannot be created; the message names the folder and the setting.
    """
    home = os.environ.get("VRAMGUI_HOME")
    if home:
        path = Path(home) / kind
    else:
        import platformdirs

        getter = {
            "data": platformdirs.user_data_dir,
            "cache": platformdirs.user_cache_dir,
            "config": platformdirs.user_config_dir,
            "log": platformdirs.user_log_dir,
        }[kind]
        path = Path(getter(APP_NAME, appauthor=False))
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            where = "VRAMGUI_HOME" if home else "the user's folders"
            raise UserDirError(
                f"cannot make vramgui's {kind} folder {path} ({exc.strerror or exc}); check {where}"
            ) from None
    return path


# Where the bundled files lie in a source checkout: pyproject.toml's package-dir installs this
# folder of the repository as the vramgui.resources package (tests/test_paths.py checks that
# the two agree).
CHECKOUT_RESOURCES = "resources"


def bundled() -> Traversable:
    """The bundled files: the ``vramgui.resources`` package (catalogs, icons, desktop files).

    Installed (a wheel, an editable install, the bundle), importlib.resources finds them. Run
    from a source checkout without installing (``python -m vramgui`` in the repository imports
    the checkout's ``vramgui/`` before any installed copy), they are the repository's own
    resources/: the files of the code that runs, never another copy's.
    """
    try:
        return resources.files("vramgui.resources")
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parents[1] / CHECKOUT_RESOURCES
        if not folder.is_dir():
            raise
        return folder
