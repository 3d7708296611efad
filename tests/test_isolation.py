"""A test run leaves the home directory as it found it (tests/conftest.py redirects it)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Tests that write where a careless run would write into the home directory: huggingface_hub's
# own download (its cache folder is read once, at import), saved profiles, the window's settings
# and log, and the local models list.
WRITERS = (
    "tests/sources/test_hub_client.py::test_fake_hub_answers_huggingface_hub_itself",
    "tests/profiles/test_readme_profiles.py",
    "tests/ui/test_main_window.py::test_window_state_and_inputs_are_restored",
    "tests/ui/test_main_window.py::test_excepthook_logs_and_shows_a_dialog",
    "tests/ui/test_main_window.py::test_main_opens_the_window_and_exits",
    "tests/sources/test_on_disk.py",
)


def test_a_run_leaves_the_home_directory_untouched(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine", encoding="utf-8")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("HF_", "HUGGINGFACE_", "XDG_", "VRAMGUI_", "OLLAMA_"))
    }
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *WRITERS],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert left == ["notes.txt"]
    assert (home / "notes.txt").read_text(encoding="utf-8") == "mine"
