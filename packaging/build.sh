#!/usr/bin/env bash
# Build the one-folder vramgui bundle for this OS (Linux or macOS) with PyInstaller.
#
#   packaging/build.sh            build venv in build/venv (made once, reused), bundle in dist/
#   PYTHON=python3.12 packaging/build.sh               the Python that makes the build venv
#   VRAMGUI_BUILD_VENV=/path/to/venv packaging/build.sh   another build venv (made if missing)
#
# The package is installed into the build venv as a regular (non-editable) install, so that the
# bundle holds exactly what `pip install .` gives, resources included.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${VRAMGUI_BUILD_VENV:-build/venv}
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps .
"$venv/bin/python" -m pip install -q ".[build]"

"$venv/bin/pyinstaller" --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/vramgui.spec

name=$("$venv/bin/python" -c 'import sys; sys.path.insert(0, "packaging"); import bundle_config; print(bundle_config.project_metadata()[0])')
if [ "$(uname)" = "Darwin" ]; then
    out="dist/$name.app"
else
    out="dist/$name/$name"
fi
echo "built $out ($(du -sh "dist/$name" | cut -f1))"
