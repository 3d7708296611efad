"""The bundled files are found installed and in a source checkout run without installing."""

import tomllib
from importlib import resources
from pathlib import Path

from vramgui import paths

ROOT = Path(__file__).resolve().parents[1]


def test_the_checkout_folder_is_the_one_pyproject_installs():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapped = pyproject["tool"]["setuptools"]["package-dir"]["vramgui.resources"]
    assert mapped == paths.CHECKOUT_RESOURCES


def test_installed_the_files_are_the_package():
    assert (paths.bundled() / "gpus.json").is_file()


def test_in_a_checkout_without_vramgui_resources_the_files_are_its_own(monkeypatch):
    """``python -m vramgui`` in the repository imports its vramgui/, which has no resources/."""

    def not_installed(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(resources, "files", not_installed)
    assert paths.bundled() == ROOT / "resources"
    assert (paths.bundled() / "catalog.json").is_file()
