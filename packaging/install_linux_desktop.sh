#!/usr/bin/env bash
# Add vramgui to the Linux application menu: desktop entry, icons and AppStream metadata.
#
#   packaging/install_linux_desktop.sh [EXECUTABLE]
#
# EXECUTABLE: what the menu entry runs; default the built bundle (dist/vramgui/vramgui) if there is
# one, else the `vramgui-gui` launcher of a pip install. PREFIX (default ~/.local) chooses where:
# PREFIX=/usr/local for every user (as root). Remove with: UNINSTALL=1 packaging/install_linux_desktop.sh
set -euo pipefail
cd "$(dirname "$0")/.."

app_id=io.github.vramgui.vramgui
prefix=${PREFIX:-$HOME/.local}
share="$prefix/share"
sizes=(16 24 32 48 64 128 256 512)

if [ "${UNINSTALL:-0}" = 1 ]; then
    rm -f "$share/applications/$app_id.desktop" "$share/metainfo/$app_id.metainfo.xml" \
        "$share/icons/hicolor/scalable/apps/$app_id.svg"
    for size in "${sizes[@]}"; do rm -f "$share/icons/hicolor/${size}x${size}/apps/$app_id.png"; done
    echo "removed $app_id from $share"
    exit 0
fi

if [ $# -ge 1 ]; then
    exe=$(realpath "$1")
elif [ -x dist/vramgui/vramgui ]; then
    exe=$(realpath dist/vramgui/vramgui)
else
    exe=$(command -v vramgui-gui) || { echo "no bundle and no vramgui-gui on PATH" >&2; exit 1; }
fi

install -Dm644 resources/icons/vramgui.svg "$share/icons/hicolor/scalable/apps/$app_id.svg"
for size in "${sizes[@]}"; do
    install -Dm644 "resources/icons/vramgui-$size.png" "$share/icons/hicolor/${size}x${size}/apps/$app_id.png"
done
install -Dm644 "resources/$app_id.metainfo.xml" "$share/metainfo/$app_id.metainfo.xml"
mkdir -p "$share/applications"
# The entry names the launcher; point Exec and TryExec at the chosen executable (quoted: spaces).
sed -e "s|^Exec=.*|Exec=\"$exe\"|" -e "s|^TryExec=.*|TryExec=$exe|" \
    "resources/$app_id.desktop" >"$share/applications/$app_id.desktop"
command -v update-desktop-database >/dev/null && update-desktop-database -q "$share/applications" || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$share/icons/hicolor" || true
echo "installed $app_id in $share (runs $exe)"
