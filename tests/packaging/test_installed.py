"""The README's install, started where the README leaves a user: in the checkout folder.

``python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/vramgui``, run in the checkout,
once gave "No module named 'vramgui.resources'" for every model the window read (its readers'
process server, started with ``python -c``, imported the checkout's ``vramgui/`` instead of the
installed one), and so did ``python -m vramgui estimate``. Here the wheel ``pip install .``
builds is installed, not editable, into a new virtual environment (offline: the runtime
dependencies are this environment's, behind the install's own packages), and both paths read a
model from the checkout folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fakehub.files import TINY_LLAMA_CONFIG, header_totals, llama_tensors, write_model_folder
from tests.packaging.wheel import ROOT, build_wheel

SECONDS = 120


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A new virtual environment holding the built wheel, installed as ``pip install .`` does."""
    where = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(where)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    subprocess.run([*pip, "--no-index", "--no-deps", str(wheel)], check=True, timeout=SECONDS)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies: this environment's package folders, after the venv's own (a path line
    # of a .pth file is appended as it is; the .pth files in it are not run, so an editable
    # vramgui of this environment stays out).
    folders = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    (Path(site) / "test-dependencies.pth").write_text("\n".join(folders) + "\n")
    return venv


# A Hub model read offline (from the bundled catalog): the first a search offers.
LLAMA_8B = ("meta-llama/Llama-3.1-8B", 8_030_261_248)


@pytest.fixture(params=["folder", "hub"])
def model(request, tmp_path) -> tuple[str, int]:
    """A model the window or the command reads, and its parameter count: a model folder (as its
    header states) or a Hub id (as transformers counts it)."""
    if request.param == "hub":
        return LLAMA_8B
    tensors = llama_tensors(TINY_LLAMA_CONFIG)
    folder = write_model_folder(tmp_path / "tiny-llama", TINY_LLAMA_CONFIG, tensors)
    return str(folder), header_totals(tensors)[0]


def _run(argv: list[str]) -> str:
    done = subprocess.run(
        argv,
        cwd=ROOT,  # the checkout folder, with its own vramgui/ (which has no resources/)
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_the_windows_loader_reads_a_model_from_the_checkout_folder(venv, model, tmp_path):
    source, parameters = model
    # As the installed launcher runs: its own folder, not the current one, first on the path.
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        textwrap.dedent(
            """
            import json, pkgutil, sys
            import vramgui
            from vramgui.ui import app, workers

            if __name__ == "__main__":  # a child imports this script too
                loaded = app.real_services().load_model(sys.argv[1])  # the window's loader
                child = workers.run_in_process(pkgutil.resolve_name, "vramgui:__file__")
                print(json.dumps({
                    "here": vramgui.__file__,
                    "child": child,
                    "parameters": loaded.spec.parameters,
                }))
            """
        )
    )
    doc = json.loads(_run([str(venv / "bin" / "python"), str(launcher), source]))
    assert doc["here"].startswith(str(venv))
    assert doc["child"] == doc["here"]  # one vramgui: the installed one, in both processes
    assert doc["parameters"] == parameters


def test_python_m_vramgui_estimate_reads_a_model_from_the_checkout_folder(venv, model):
    source, parameters = model
    # `python -m` puts the current folder first: it runs the checkout's code, on the
    # checkout's own resources.
    python = str(venv / "bin" / "python")
    out = _run([python, "-m", "vramgui", "estimate", source, "--gpu", "RTX 4090", "--json"])
    assert json.loads(out)["model"]["parameters"] == parameters


def test_the_installed_command_estimates_from_the_checkout_folder(venv, model):
    source, parameters = model
    out = _run([str(venv / "bin" / "vramgui"), "estimate", source, "--gpu", "RTX 4090", "--json"])
    assert json.loads(out)["model"]["parameters"] == parameters
