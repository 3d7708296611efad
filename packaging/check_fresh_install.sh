#!/usr/bin/env bash
# A fresh virtual environment with only `pip install .` (no extras) gives a working vramgui:
# no test or validation dependency is needed at run time, none is installed, none is missing.
#
#   packaging/check_fresh_install.sh            a temporary venv, removed afterwards
#   PYTHON=python3.12 packaging/check_fresh_install.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check_fresh_install: FAILED: $*" >&2; exit 1; }

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$repo"
bin="$work/venv/bin"
cd "$work"  # away from the checkout, so that only the installed package can be imported
export VRAMGUI_HOME="$work/home" HF_HOME="$work/hf" HF_HUB_OFFLINE=1

for tool in pytest pytest_qt hypothesis ruff torch transformers peft PyInstaller; do
    if "$bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$tool') is None)"; then
        fail "$tool is installed by 'pip install .'"
    fi
done
echo "installed: $("$bin/python" -m pip list --format=freeze 2>/dev/null | cut -d= -f1 | tr '\n' ' ')"
where=$("$bin/python" -c 'import vramgui; print(vramgui.__file__)')
case "$where" in "$work"/venv/*) ;; *) fail "vramgui imported from $where, not the venv" ;; esac

"$bin/vramgui" --version
"$bin/python" -m vramgui --version
[ -x "$bin/vramgui-gui" ] || fail "no vramgui-gui launcher"
"$bin/vramgui" estimate llama-3-8b --json | "$bin/python" -c '
import json, sys
doc = json.load(sys.stdin)
assert doc["schema"] == "vramgui.estimate/1"
print("vramgui estimate llama-3-8b --json:", doc["model"]["name"], doc["per_gpu"]["total_bytes"], "bytes")
'
"$bin/vramgui" gpus
QT_QPA_PLATFORM=offscreen "$bin/python" "$repo/packaging/smoke.py" || fail "the window did not start"
echo "check_fresh_install: all checks passed"
