"""The window's log view: paste or drop a log, read its explanation, a bad text says why."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QThreadPool, QUrl
from PySide6.QtGui import QDropEvent

from tests.logs_fixtures import LOGS, text
from vramgui.answers.explain import explain_text
from vramgui.ui.log_view import LogView


def _real(text_: str, model: str, gpu: str, quant: str):
    return explain_text(text_, model_name=model, gpu=gpu, quant=quant)


def _explained(qtbot, view: LogView) -> None:
    qtbot.waitUntil(view.explain_button.isEnabled, timeout=30000)


def test_pasted_vllm_refusal_is_explained(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(text("vllm-refusal-gpt-oss-120b-h100.log"))
    view.model.setText("gpt-oss-120b")
    view.gpu.setText("H100 SXM")
    view.run()
    _explained(qtbot, view)
    assert view.explanation is not None
    assert view.headline.text().startswith("vLLM")
    assert view.table.rowCount() >= 2
    assert "refused" in view.why.text()
    flagged = [view.table.item(i, 4).text() for i in range(view.table.rowCount())]
    assert any("beyond" in cell for cell in flagged)


def test_text_that_is_no_log_says_why_and_keeps_the_box(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text("my shopping list\neggs\n")
    view.run()
    _explained(qtbot, view)
    assert "no line of llama.cpp" in view.status.text()
    assert view.log.toPlainText() == "my shopping list\neggs\n"
    assert view.table.rowCount() == 0


def test_log_text_is_never_markup(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(
        "print_info: general.name     = <b>bold</b><img src=x>\n"
        "llama_kv_cache_init:      CUDA0 KV buffer size =   512.00 MiB\n"
    )
    view.run()
    _explained(qtbot, view)
    assert view.headline.textFormat() == Qt.TextFormat.PlainText
    assert "<b>bold</b>" in view.headline.text()


def test_units_follow_the_window(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(text("pytorch-oom-24gib-22mib.log"))
    view.run()
    _explained(qtbot, view)
    view.set_unit("GB")
    assert view.table.item(0, 2).text().endswith("GB")


def test_window_menu_and_dropped_log_open_the_view(make_window, qtbot):
    window = make_window()
    assert window.action_paste_log.isEnabled()
    window.action_paste_log.trigger()
    assert window.log_view is not None and window.log_view.isVisible()
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(LOGS / "pytorch-oom-cads-fragmented.log"))])
    event = QDropEvent(
        QPointF(QPoint(10, 10)),
        Qt.DropAction.CopyAction,
        data,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    window.dropEvent(event)
    _explained(qtbot, window.log_view)
    assert window.log_view.headline.text().startswith("PyTorch")
    assert "expandable_segments" in window.log_view.advice.text()
    QThreadPool.globalInstance().waitForDone(5000)
