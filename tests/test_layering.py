"""The import rule of docs/architecture.md: {cli, ui} -> answers -> {sources, hardware, profiles}
-> core; core is pure."""

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vramgui"
STDLIB = sys.stdlib_module_names
SIBLINGS = ("sources", "hardware", "profiles")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(sub: str) -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("core"), ids=lambda p: p.name)
def test_core_imports_only_stdlib_and_itself(path):
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "vramgui":
            assert name.startswith("vramgui.core"), f"{path.name} imports {name}"
        else:
            assert top in STDLIB, f"{path.name} imports third-party {name}"


@pytest.mark.parametrize("sub", SIBLINGS)
def test_services_import_core_not_ui_or_siblings(sub):
    for path in _modules(sub):
        for name in _imports(path):
            assert not name.startswith("vramgui.ui"), f"{path} imports {name}"
            assert not name.startswith("vramgui.answers"), f"{path} imports {name}"
            for other in SIBLINGS:
                if other != sub:
                    assert not name.startswith(f"vramgui.{other}"), f"{path} imports {name}"
            assert name.split(".")[0] not in ("PySide6", "pyqtgraph"), f"{path} imports {name}"


def test_answers_sit_between_the_front_ends_and_the_services():
    # The questions the product answers, for every front end: they import the services and
    # core, never a front end, Qt or torch.
    allowed = ("answers", "core", "sources", "hardware", "profiles")
    for path in _modules("answers"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "vramgui":
                assert name.split(".")[1] in allowed, f"{path} imports {name}"
            else:
                assert top in STDLIB, f"{path} imports third-party {name}"


def test_core_does_not_import_the_answers():
    for path in _modules("core"):
        assert not any(n.startswith("vramgui.answers") for n in _imports(path)), path


# The core modules the window may name: types, units and choices. Whatever it computes (an
# estimate, a fit, a plan, a speed, a launch line) is an answer's (docs/architecture.md).
UI_CORE_VOCABULARY = {
    "vramgui.core.units": "bytes, rates and durations, and their formatting",
    "vramgui.core.errors": "the errors and messages the window words",
    "vramgui.core.model": "the model named: ModelSpec, Inventory, ModelRef",
    "vramgui.core.dtypes": "the quantization schemes and their labels",
    "vramgui.core.workload": "the settings (Workload), their choices and what an engine refuses",
    "vramgui.core.kv_cache_types": "the KV cache choices and the engines that take each",
    "vramgui.core.engines": "the engines, their names and labels",
}


def _core_modules_named(path: Path) -> set[str]:
    """The modules of vramgui.core a file imports, ``from vramgui.core import fit`` as
    ``vramgui.core.fit``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("vramgui.core"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "vramgui.core":
                names.update(f"vramgui.core.{a.name}" for a in node.names)
            elif node.module.startswith("vramgui.core."):
                names.add(node.module)
    return names


@pytest.mark.parametrize("path", _modules("ui"), ids=lambda p: p.name)
def test_the_window_imports_no_estimating_module_of_core(path):
    for name in _core_modules_named(path):
        assert any(name == m or name.startswith(f"{m}.") for m in UI_CORE_VOCABULARY), (
            f"{path.name} imports {name}: ask vramgui.answers instead"
        )


def test_ui_does_not_import_the_cli():
    # The window and the command line are peers over the same services.
    for path in _modules("ui"):
        for name in _imports(path):
            assert not name.startswith("vramgui.cli"), f"{path} imports {name}"


def test_only_ui_imports_qt():
    for path in PACKAGE.rglob("*.py"):
        if "ui" in path.relative_to(PACKAGE).parts:
            continue
        for name in _imports(path):
            assert name.split(".")[0] not in ("PySide6", "pyqtgraph"), f"{path} imports {name}"


TORCH = ("torch", "transformers", "peft")
# vramgui.measure's modules that never import torch: the window and the command line ask them
# whether and what a run can measure before anything heavy is imported.
TORCH_FREE_MEASURE = ("__init__.py", "extra.py", "request.py", "compare.py")


def _measure_module(name: str) -> str | None:
    """The module file of vramgui.measure that an import names, or None."""
    if not name.startswith("vramgui.measure"):
        return None
    parts = name.split(".")
    return "__init__.py" if len(parts) == 2 else f"{parts[2]}.py"


def test_only_measure_imports_torch():
    for path in PACKAGE.rglob("*.py"):
        if "measure" in path.relative_to(PACKAGE).parts:
            continue
        for name in _imports(path):
            assert name.split(".")[0] not in TORCH, f"{path}: {name}"


@pytest.mark.parametrize("name", TORCH_FREE_MEASURE)
def test_the_measure_modules_the_window_uses_import_no_torch(name):
    for imported in _imports(PACKAGE / "measure" / name):
        assert imported.split(".")[0] not in TORCH, f"{name}: {imported}"
        module = _measure_module(imported)
        assert module is None or module in TORCH_FREE_MEASURE, f"{name}: {imported}"


def test_the_window_uses_only_the_torch_free_measure_modules():
    # The window runs measurements in another process; its own never imports torch.
    for path in _modules("ui"):
        for name in _imports(path):
            module = _measure_module(name)
            assert module is None or module in TORCH_FREE_MEASURE, f"{path}: {name}"


def test_measure_imports_core_and_hardware_only():
    for path in _modules("measure"):
        for name in _imports(path):
            if name.startswith("vramgui."):
                layer = name.split(".")[1]
                assert layer in ("core", "hardware", "measure"), f"{path}: {name}"


def test_shared_file_helpers_sit_below_the_services():
    # vramgui/files.py serves sources and profiles alike, so it may import only the stdlib and core.
    for name in _imports(PACKAGE / "files.py"):
        top = name.split(".")[0]
        assert name.startswith("vramgui.core") if top == "vramgui" else top in STDLIB, name
