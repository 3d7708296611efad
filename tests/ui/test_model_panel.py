"""The model panel on its own: results and loading move nothing else in the window."""

import threading

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QLabel, QStyleOptionViewItem, QVBoxLayout, QWidget

from vramgui.sources.catalog import popular_default
from vramgui.sources.hub import HubModel
from vramgui.sources.resolve import SearchResult
from vramgui.ui.model_panel import ModelPanel

HITS = (
    HubModel("org/gated", parameters=7_000_000_000, downloads=1234, gated=True),
    HubModel("qwen2.5-7b", parameters=7_600_000_000, source="catalog"),
)


@pytest.fixture
def column(qtbot):
    """A model panel above another panel, as in the window's side column."""
    answered = threading.Event()

    def search(query: str) -> SearchResult:
        answered.wait(5)
        return SearchResult(HITS if query != "nothing" else ())

    holder = QWidget()
    layout = QVBoxLayout(holder)
    panel = ModelPanel(search)
    below = QLabel("the precision panel")
    layout.addWidget(panel)
    layout.addWidget(below)
    layout.addStretch(1)
    qtbot.addWidget(holder)
    holder.resize(360, 700)
    holder.show()
    qtbot.waitExposed(holder)
    yield panel, below, answered
    answered.set()
    holder.close()


def test_arriving_results_move_nothing_below(column, qtbot):
    panel, below, answered = column
    place = below.geometry()
    qtbot.keyClicks(panel.query, "qwen")
    qtbot.waitUntil(lambda: panel.searching, timeout=2000)
    answered.set()
    qtbot.waitUntil(lambda: panel.results_model.rowCount() == 2, timeout=5000)
    qtbot.wait(20)
    assert below.geometry() == place
    model = panel.results_model
    assert [model.index(r, 0).data() for r in range(2)] == ["org/gated", "qwen2.5-7b"]
    assert model.index(0, 2).data() == "1.23K"
    assert model.index(0, 3).data() == "gated"
    assert model.index(1, 3).data() == "catalog"
    assert "bundled catalog" in model.index(1, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert "Gated" in model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert model.index(0, 1).data(Qt.ItemDataRole.TextAlignmentRole) & int(
        Qt.AlignmentFlag.AlignRight.value
    )

    panel.query.clear()
    qtbot.keyClicks(panel.query, "nothing")
    qtbot.waitUntil(lambda: panel.results_model.rowCount() == 0, timeout=5000)
    assert "No models match" in panel.status.text()


def test_reading_a_model_keeps_the_description_height(column, qtbot):
    panel, below, _ = column
    entry = popular_default()
    panel.show_model(entry.spec(), "bundled catalog", ("a notice",))
    qtbot.wait(20)
    place = below.geometry()
    panel.show_loading(True)
    qtbot.wait(20)
    assert panel.info.text() == "Reading the model…"
    assert below.geometry() == place
    assert not panel.open_file.isEnabled()
    panel.show_loading(False)
    assert panel.open_file.isEnabled()


def painted_id(panel: ModelPanel, row: int, width: int) -> str:
    """The repo id the results view paints in a cell ``width`` pixels wide."""
    option = QStyleOptionViewItem()
    option.rect = QRect(0, 0, width, 20)
    option.fontMetrics = panel.results.fontMetrics()
    panel.results.itemDelegateForColumn(0).initStyleOption(
        option, panel.results_model.index(row, 0)
    )
    return option.text


def test_results_of_one_search_stay_told_apart_in_a_narrow_panel(qtbot):
    same = "Meta-Llama-3.1-8B-Instruct-GGUF"
    hits = tuple(HubModel(f"{org}/{same}", downloads=9) for org in ("bartowski", "unsloth"))
    panel = ModelPanel(lambda _query: SearchResult(hits))
    qtbot.addWidget(panel)
    panel.resize(260, 400)
    panel.show()
    qtbot.keyClicks(panel.query, "llama")
    qtbot.waitUntil(lambda: panel.results_model.rowCount() == 2, timeout=5000)
    # What the view paints: the organisation, which alone tells them apart.
    shown = [painted_id(panel, r, panel.results.columnWidth(0)) for r in range(2)]
    assert shown[0] != shown[1]
    assert shown[0].startswith("bartowski/") and shown[1].startswith("unsloth/")
    assert all(text.endswith("…") for text in shown)
