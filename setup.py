"""The package list, found rather than kept by hand; everything else is in pyproject.toml.

setuptools' ``packages.find`` does not follow ``package-dir`` mappings (pypa/setuptools#5145): it
finds the vramgui tree but not resources/ and docs/, which install as vramgui.resources and
vramgui.resources.docs. Those are the mapped packages pyproject.toml names, read from there.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

PYPROJECT = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text(encoding="utf-8"))
MAPPED = sorted(PYPROJECT["tool"]["setuptools"]["package-dir"])

setup(packages=[*find_packages(include=["vramgui", "vramgui.*"]), *MAPPED])
