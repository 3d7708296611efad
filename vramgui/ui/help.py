"""The documentation, shipped with the application and read offline in a window of its own."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from vramgui.paths import bundled

ONLINE_DOCS = "https://github.com/vramgui/vramgui/tree/main/docs"


def docs_folder() -> Path | None:
    """The folder of the bundled documents (docs/), or None where this build has none.

    An installed package and the bundle carry them as ``vramgui.resources/docs``; a checkout (an
    editable install) reads the repository's own docs/.
    """
    installed = Path(str(bundled())) / "docs"
    checkout = Path(__file__).resolve().parents[2] / "docs"
    for folder in (installed, checkout):
        if (folder / "accuracy.md").is_file():
            return folder
    return None


class HelpWindow(QDialog):
    """A Markdown document of docs/, its links to the other documents followed in place."""

    def __init__(self, folder: Path, document: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("vramgui documentation")
        self.browser = QTextBrowser()
        # Web links open in the browser; links between the documents open here.
        self.browser.setOpenExternalLinks(True)
        self.browser.setSearchPaths([str(folder)])
        self.browser.setSource(
            QUrl.fromLocalFile(str(folder / document)),
            QTextDocument.ResourceType.MarkdownResource,
        )
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser)
        layout.addWidget(buttons)
        self.resize(900, 700)
