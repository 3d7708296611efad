"""Packaging: launchers, bundle decisions, desktop entry, AppStream metadata and icons.

These are the fast checks; packaging/check_bundle.sh and packaging/check_fresh_install.sh build and
start the real thing.
"""

import ast
import configparser
import fnmatch
import importlib
import importlib.metadata
import importlib.util
import re
import shutil
import struct
import subprocess
import sys
import tomllib
import types
import xml.etree.ElementTree as ET
import zipfile
from importlib import resources
from pathlib import Path

import pytest

import vramgui
from tests.packaging.wheel import build_wheel

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
APP_ID = "io.github.vramgui.vramgui"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The entries a desktop file may carry (freedesktop Desktop Entry Specification 1.4, application).
DESKTOP_KEYS = {
    "Type", "Version", "Name", "GenericName", "NoDisplay", "Comment", "Icon", "Hidden", "OnlyShowIn",
    "NotShowIn", "DBusActivatable", "TryExec", "Exec", "Path", "Terminal", "Actions", "MimeType",
    "Categories", "Implements", "Keywords", "StartupNotify", "StartupWMClass", "PrefersNonDefaultGPU",
}  # fmt: skip
MAIN_CATEGORIES = {
    "AudioVideo", "Audio", "Video", "Development", "Education", "Game", "Graphics", "Network",
    "Office", "Science", "Settings", "System", "Utility",
}  # fmt: skip


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "packaging" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bundle_config():
    return _load("bundle_config")


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _desktop_entry() -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # keys are case-sensitive
    parser.read(ROOT / "resources" / f"{APP_ID}.desktop", encoding="utf-8")
    return dict(parser["Desktop Entry"])


def _ui_constant(name: str) -> str:
    """A string constant of vramgui/ui/app.py, read without importing Qt."""
    tree = ast.parse((ROOT / "vramgui" / "ui" / "app.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} is not defined in vramgui/ui/app.py")


# Launchers


def test_gui_script_opens_the_window_without_a_console():
    assert PROJECT["gui-scripts"] == {"vramgui-gui": "vramgui.ui.app:main"}
    module, _, function = PROJECT["gui-scripts"]["vramgui-gui"].partition(":")
    tree = ast.parse((ROOT / Path(*module.split("."))).with_suffix(".py").read_text("utf-8"))
    assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_console_script_and_module_run_the_cli():
    assert PROJECT["scripts"]["vramgui"] == "vramgui.cli:main"
    main_module = (ROOT / "vramgui" / "__main__.py").read_text(encoding="utf-8")
    assert "from vramgui.cli import main" in main_module


def test_build_tools_are_an_extra_apart_from_the_runtime_and_the_tests():
    extras = PROJECT["optional-dependencies"]
    assert any(req.startswith("pyinstaller") for req in extras["build"])
    runtime_and_test = [*PROJECT["dependencies"], *extras["test"]]
    assert not any(req.lower().startswith("pyinstaller") for req in runtime_and_test)


# The bundle's decisions (packaging/bundle_config.py, used by packaging/vramgui.spec)


def test_bundle_takes_name_and_version_from_pyproject(bundle_config):
    assert bundle_config.project_metadata() == (PROJECT["name"], PROJECT["version"])
    assert vramgui.__version__ == PROJECT["version"]


def test_spec_uses_the_shared_decisions():
    spec = (ROOT / "packaging" / "vramgui.spec").read_text(encoding="utf-8")
    for use in (
        "config.project_metadata()",
        "config.icon_path(sys.platform)",
        "config.EXCLUDES",
        "config.is_driver_library",
        'collect_data_files("vramgui.resources")',
        'collect_submodules("vramgui")',
        "console=False",
    ):
        assert use in spec


# What an install and the bundle carry


def _data_files() -> dict[str, Path]:
    """Each file the app reads through importlib.resources, by its path in an install."""
    found = {}
    docs = ROOT / "docs"
    for path in (ROOT / "resources").rglob("*"):
        if path.is_file() and path.suffix not in {".py", ".pyc"}:
            found[f"vramgui/resources/{path.relative_to(ROOT / 'resources').as_posix()}"] = path
    for path in [*docs.glob("*.md"), *(docs / "screenshots").glob("*.png")]:
        found[f"vramgui/resources/docs/{path.relative_to(docs).as_posix()}"] = path
    for path in (ROOT / "vramgui").rglob("*"):
        if path.is_file() and path.suffix not in {".py", ".pyc"} and path.name != "README.md":
            found[path.relative_to(ROOT).as_posix()] = path
    return found


def test_a_wheel_holds_every_module_and_every_data_file(tmp_path):
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "vramgui").rglob("*.py")}
    assert sorted(modules - names) == []
    assert sorted(set(_data_files()) - names) == []


def test_the_bundle_collects_the_data_of_every_package_that_has_some():
    spec = ast.parse((ROOT / "packaging" / "vramgui.spec").read_text(encoding="utf-8"))
    collected = {
        node.args[0].value
        for node in ast.walk(spec)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "collect_data_files"
    }
    for path in _data_files():
        folder = path.rsplit("/", 1)[0].replace("/", ".")
        assert any(folder == c or folder.startswith(f"{c}.") for c in collected), path


@pytest.mark.parametrize(
    ("platform", "suffix"), [("win32", ".ico"), ("darwin", ".icns"), ("linux", None)]
)
def test_icon_per_os(bundle_config, platform, suffix):
    icon = bundle_config.icon_path(platform)
    if suffix is None:
        assert icon is None
    else:
        assert icon.suffix == suffix
        assert icon.is_file()


def test_entry_script_exists(bundle_config):
    assert bundle_config.ENTRY_SCRIPT.is_file()


@pytest.mark.parametrize(
    "path",
    [
        "libnvidia-ml.so.1",
        "libnvidia-ml.so",
        "_internal/libnvidia-ml.so.535.104.05",
        "nvml.dll",
        "NVML.DLL",
        "libcuda.so.1",
        "lib/libnvidia-ml.dylib",
    ],
)
def test_driver_libraries_are_never_bundled(bundle_config, path):
    assert bundle_config.is_driver_library(path)


@pytest.mark.parametrize(
    "path",
    [
        "pynvml.py",
        "nvidia_ml_py-13.615.71.dist-info/METADATA",
        "libcudart.so.12",
        "PySide6/Qt/lib/libQt6Core.so.6",
        "libpython3.11.so.1.0",
    ],
)
def test_other_libraries_are_kept(bundle_config, path):
    assert not bundle_config.is_driver_library(path)


def test_excludes_tools_but_no_runtime_dependency(bundle_config):
    assert {"torch", "transformers", "peft", "pytest", "tkinter"} <= set(bundle_config.EXCLUDES)
    runtime = {"PySide6", "shiboken6", "pyqtgraph", "huggingface_hub", "platformdirs", "pynvml"}
    runtime |= {"gguf", "numpy", "vramgui"}
    for excluded in bundle_config.EXCLUDES:
        if "." not in excluded:  # an optional part of a runtime package may go
            assert excluded not in runtime, excluded


# The bundle's entry point


def test_entry_runs_the_smoke_check_when_asked(monkeypatch):
    entry = _load("entry")
    seen = []
    fake_smoke = types.SimpleNamespace(main=lambda argv: seen.append(argv) or 7)
    monkeypatch.setitem(sys.modules, "smoke", fake_smoke)
    monkeypatch.setattr(sys, "argv", ["vramgui", "--smoke-test", "--screenshot", "a.png"])
    assert entry.main() == 7
    assert seen == [["--screenshot", "a.png"]]


def test_entry_is_the_vramgui_command_otherwise(monkeypatch, capsys):
    entry = _load("entry")
    monkeypatch.setattr(sys, "argv", ["vramgui", "--version"])
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"vramgui {PROJECT['version']}"


def test_smoke_counts_time_from_the_process_start():
    smoke = _load("smoke")
    age = smoke.process_age_s()
    if sys.platform.startswith("linux"):
        assert 0 < age < 24 * 3600
    else:
        assert age == 0.0


# Desktop entry and AppStream metadata


def test_one_application_id_everywhere():
    assert _ui_constant("DESKTOP_FILE") == APP_ID
    assert _desktop_entry()["Icon"] == APP_ID
    assert (ROOT / "resources" / f"{APP_ID}.desktop").is_file()
    assert (ROOT / "resources" / f"{APP_ID}.metainfo.xml").is_file()


def test_desktop_entry_is_valid():
    entry = _desktop_entry()
    assert set(entry) <= DESKTOP_KEYS
    assert {"Type", "Name", "Exec", "Icon", "Categories"} <= set(entry)
    assert entry["Type"] == "Application"
    assert entry["Terminal"] == "false"
    assert entry["Exec"].split()[0] in {*PROJECT["gui-scripts"], *PROJECT["scripts"]}
    for key in ("Categories", "Keywords"):
        assert entry[key].endswith(";")
    assert len(set(entry["Categories"].split(";")) & MAIN_CATEGORIES) == 1
    assert not re.search(r"%[^fFuUick%]", entry["Exec"])


def test_metainfo_describes_this_application():
    root = ET.parse(ROOT / "resources" / f"{APP_ID}.metainfo.xml").getroot()
    assert root.tag == "component"
    assert root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == f"{APP_ID}.desktop"
    assert root.findtext("project_license") == PROJECT["license"]
    assert root.findtext("name") == _desktop_entry()["Name"]
    assert root.findtext("summary")
    assert root.find("description/p") is not None
    releases = [r.get("version") for r in root.iter("release")]
    assert PROJECT["version"] in releases
    assert {b.text for b in root.iter("binary")} <= {*PROJECT["scripts"], *PROJECT["gui-scripts"]}


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None, reason="desktop-file-utils")
def test_desktop_file_validate_accepts_the_entry():
    path = ROOT / "resources" / f"{APP_ID}.desktop"
    result = subprocess.run(
        ["desktop-file-validate", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstream")
def test_appstreamcli_accepts_the_metainfo():
    path = ROOT / "resources" / f"{APP_ID}.metainfo.xml"
    result = subprocess.run(
        ["appstreamcli", "validate", "--no-net", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# Icons


def test_icons_are_package_data():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["vramgui.resources"]
    files = [
        p.relative_to(ROOT / "resources").as_posix()
        for p in (ROOT / "resources").rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"}
    ]
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_icons_are_found_through_importlib_resources():
    icons = resources.files("vramgui.resources") / "icons"
    svg = ET.fromstring((icons / "vramgui.svg").read_bytes())
    view_box = [float(v) for v in svg.get("viewBox").split()]
    assert view_box[2] == view_box[3], "the icon is square"
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        assert _png_size((icons / f"vramgui-{size}.png").read_bytes()) == (size, size)


def test_ico_holds_a_png_per_windows_size():
    data = (resources.files("vramgui.resources") / "icons" / "vramgui.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", data[:6])
    assert (reserved, kind) == (0, 1)
    sizes = []
    for index in range(count):
        width, height, _, _, _, _, length, offset = struct.unpack(
            "<BBBBHHII", data[6 + 16 * index : 22 + 16 * index]
        )
        png = data[offset : offset + length]
        side = width or 256  # 0 stands for 256
        assert width == height
        assert _png_size(png) == (side, side)
        sizes.append(side)
    assert {16, 32, 48, 256} <= set(sizes)


def test_icns_holds_pngs_up_to_1024():
    data = (resources.files("vramgui.resources") / "icons" / "vramgui.icns").read_bytes()
    assert data[:4] == b"icns"
    assert struct.unpack(">I", data[4:8])[0] == len(data)
    elements, offset = {}, 8
    while offset < len(data):
        kind, length = (
            data[offset : offset + 4],
            struct.unpack(">I", data[offset + 4 : offset + 8])[0],
        )
        elements[kind] = _png_size(data[offset + 8 : offset + length])[0]
        offset += length
    assert offset == len(data)
    assert elements[b"ic07"] == 128
    assert elements[b"ic10"] == 1024
    assert elements[b"icp4"] == 16
