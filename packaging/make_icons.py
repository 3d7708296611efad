"""Render the application icon from its one source SVG into every size and container the OSes want.

Writes, next to ``resources/icons/vramgui.svg``: ``vramgui-<size>.png`` (Linux hicolor sizes and the
window icon), ``vramgui.ico`` (Windows) and ``vramgui.icns`` (macOS). Both containers hold PNG images,
which every supported Windows (Vista and later) and macOS (10.7 and later) reads, so no image
library beyond Qt's SVG renderer is needed.

Run: ``python packaging/make_icons.py`` (uses the project's PySide6; renders offscreen).
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ICON_DIR = Path(__file__).resolve().parents[1] / "resources" / "icons"
SOURCE = ICON_DIR / "vramgui.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types that hold a PNG, by pixel size (Apple's "icns" format; @2x types share sizes).
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
)


def render_png(svg: Path, size: int) -> bytes:
    """The SVG rendered into a transparent ``size`` x ``size`` PNG (needs a QGuiApplication)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(0)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICO file whose entries are the given PNGs (size -> PNG bytes), smallest first."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries, images = b"", b""
    for size in sizes:
        png = pngs[size]
        # Width and height 0 mean 256 in an ICO directory entry.
        dimension = 0 if size >= 256 else size
        entries += struct.pack("<BBBBHHII", dimension, dimension, 0, 0, 1, 32, len(png), offset)
        images += png
        offset += len(png)
    return header + entries + images


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICNS file holding one PNG element per type in ``ICNS_TYPES`` (size -> PNG bytes)."""
    body = b"".join(
        kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    """Write every icon file from the source SVG; returns the exit status."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication([])  # image plugins need one
    sizes = sorted({*PNG_SIZES, *ICO_SIZES, *(size for _, size in ICNS_TYPES)})
    pngs = {size: render_png(SOURCE, size) for size in sizes}
    for size in PNG_SIZES:
        (ICON_DIR / f"vramgui-{size}.png").write_bytes(pngs[size])
    (ICON_DIR / "vramgui.ico").write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    (ICON_DIR / "vramgui.icns").write_bytes(icns_bytes(pngs))
    print(f"wrote {len(PNG_SIZES)} PNGs, vramgui.ico and vramgui.icns in {ICON_DIR}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
