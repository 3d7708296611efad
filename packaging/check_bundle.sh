#!/usr/bin/env bash
# Check a built bundle (slower than the unit tests; run after packaging/build.sh):
# it holds no driver library and no test or validation tool, its CLI answers from the bundled data,
# and the executable starts offscreen and under Xvfb, shows the main window and exits with 0.
#
#   packaging/check_bundle.sh [EXECUTABLE]     default dist/vramgui/vramgui
#   CHECK_OUT=dir packaging/check_bundle.sh    where the screenshots go (default build/check)
set -euo pipefail
cd "$(dirname "$0")/.."

exe=${1:-dist/vramgui/vramgui}
out=${CHECK_OUT:-build/check}
bundle=$(dirname "$exe")
[ -x "$exe" ] || { echo "no bundle at $exe: run packaging/build.sh first" >&2; exit 1; }
mkdir -p "$out"
home=$(mktemp -d)
xvfb_pid=""
cleanup() {
    [ -z "$xvfb_pid" ] || kill "$xvfb_pid" 2>/dev/null || true
    rm -rf "$home"
}
trap cleanup EXIT
# A first run: no settings, profiles or cache from earlier runs.
export VRAMGUI_HOME="$home/vramgui" HF_HOME="$home/hf" HF_HUB_OFFLINE=1
fail() { echo "check_bundle: FAILED: $*" >&2; exit 1; }

echo "bundle $bundle: $(du -sh "$bundle" | cut -f1)"

found=$(find "$bundle" \( -iname '*nvidia-ml*' -o -iname 'nvml*' -o -iname 'libcuda.*' \) -print)
[ -z "$found" ] || fail "driver libraries bundled: $found"
for module in torch transformers peft pytest hypothesis tkinter; do
    [ ! -e "$bundle/_internal/$module" ] || fail "$module is bundled"
done
echo "no driver library, no torch/transformers/peft/pytest/hypothesis/tkinter"

version=$(python3 -c 'import sys, tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
[ "$("$exe" --version)" = "vramgui $version" ] || fail "--version is not 'vramgui $version'"
"$exe" estimate llama-3-8b --json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
assert doc["schema"] == "vramgui.estimate/1", doc["schema"]
assert doc["per_gpu"]["total_bytes"] > 0
print("estimate from the bundled catalog:", doc["model"]["name"], doc["per_gpu"]["total_bytes"], "bytes")
'
"$exe" estimate llama-3-8b --gpu "RTX 4090" --json >/dev/null || fail "no fit check against the bundled GPU list"
"$exe" gpus --json >/dev/null || fail "'gpus' failed"
echo "CLI: --version, estimate, fit against the GPU catalog, gpus: ok"

smoke() {  # platform, screenshot
    local start end
    start=$(date +%s%N)
    QT_QPA_PLATFORM=$1 "$exe" --smoke-test --screenshot "$2" || fail "smoke test on $1 exited with $?"
    end=$(date +%s%N)
    echo "$1: exit 0 after $(((end - start) / 1000000)) ms (process start to exit)"
}

smoke offscreen "$out/offscreen.png"

if command -v Xvfb >/dev/null; then
    display=99
    while [ -e "/tmp/.X11-unix/X$display" ] || [ -e "/tmp/.X$display-lock" ]; do display=$((display + 1)); done
    Xvfb ":$display" -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 &
    xvfb_pid=$!
    for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X$display" ] && break; sleep 0.1; done
    rm -rf "$VRAMGUI_HOME"
    DISPLAY=":$display" smoke xcb "$out/xcb.png"
else
    echo "Xvfb not installed: skipped the X11 start (apt-get install xvfb)"
fi
echo "check_bundle: all checks passed; screenshots in $out"
