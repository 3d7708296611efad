"""The window's log view: paste or drop a log, read its explanation, a bad text says why."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QThreadPool, QUrl
from PySide6.QtGui import QDropEvent

from tests.logs_fixtures import LOGS, text
from vramgui.answers.explain import explain_text
from vramgui.ui.log_view import FLAGGED, FLAGGED_ROW, LogView, continued


def _real(text_: str, model: str, gpu: str, quant: str, unit: str = "GiB"):
    return explain_text(text_, model_name=model, gpu=gpu, quant=quant, unit=unit)


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
    accuracy = [view.table.item(i, LogView.ACCURACY).text() for i in range(view.table.rowCount())]
    assert any("beyond" in cell for cell in accuracy)


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
    assert "MiB free" in view.why.text() and "GiB is reserved" in view.why.text()
    view.set_unit("GB")
    assert view.table.item(0, 2).text().endswith("GB")
    _explained(qtbot, view)  # the sentences are written again in the new unit
    why = view.why.text()
    assert "MB free" in why and "GB is reserved" in why and "iB" not in why


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


def _cells(view: LogView, column: int) -> list[str]:
    return [view.table.item(i, column).text() for i in range(view.table.rowCount())]


def test_before_any_log_the_view_says_what_it_reads(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.show()
    intro = view.intro.text()
    for engine in ("llama.cpp", "Ollama", "vLLM", "SGLang", "PyTorch", "drop a log file"):
        assert engine in intro
    assert view.intro.isVisible() and not view.table.isVisible()
    assert not view.why.isVisible()


def test_components_read_as_labels_and_blank_cells_say_something(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.show()
    view.set_text(text("pytorch-oom-cads-fragmented.log"))
    view.run()
    _explained(qtbot, view)
    assert not view.intro.isVisible()
    assert _cells(view, 0) == [
        "Allocated by PyTorch",
        "Reserved by PyTorch, unallocated",
        "CUDA context and libraries",
        "Other processes",
    ]
    notes = _cells(view, len(LogView.COLUMNS) - 1)
    assert all(notes) and notes[0].startswith("Not estimated")
    estimate = view.table.item(0, 3)
    assert estimate.text() == "—" and estimate.toolTip() == "Not estimated"
    difference_tip = view.table.horizontalHeaderItem(LogView.DIFFERENCE).toolTip()
    assert "(estimate - logged) / logged" in difference_tip


def test_a_row_beyond_its_accuracy_stands_out(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(text("vllm-refusal-gpt-oss-120b-h100.log"))
    view.model.setText("gpt-oss-120b")
    view.gpu.setText("H100 SXM")
    view.run()
    _explained(qtbot, view)
    rows = view.explanation.components
    flagged = next(i for i, r in enumerate(rows) if r.flagged)
    item = view.table.item(flagged, LogView.ACCURACY)
    assert item.text() == f"beyond ±{rows[flagged].accuracy:.0%}"
    assert item.foreground().color() == FLAGGED and item.font().bold()
    assert view.table.item(flagged, 0).background().color() == FLAGGED_ROW
    assert "beyond" in item.toolTip() and "±" in item.toolTip()


def test_a_row_within_its_accuracy_says_so_plainly(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(text("pytorch-oom-cads-fragmented.log"))
    view.run()
    _explained(qtbot, view)
    row = next(i for i, r in enumerate(view.explanation.components) if r.name == "non_torch")
    assert view.explanation.components[row].flagged is False
    assert view.table.item(row, LogView.ACCURACY).text().startswith("within ±")
    assert view.table.item(row, 0).background().color() != FLAGGED_ROW


def test_the_lines_the_figures_came_from_are_marked(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    log = text("llamacpp-glm-z1-32b-3090ti-32k.log")
    view.set_text(log)
    view.run()
    _explained(qtbot, view)
    marked = view.log.extraSelections()
    assert marked
    lines = {m.cursor.selectedText() for m in marked}
    assert any("KV buffer size" in line for line in lines)
    rows = view.explanation.components
    source = {(c.name, c.device): c.line for c in view.explanation.setup.components}
    last = max(i for i, r in enumerate(rows) if source.get((r.name, r.device)))
    view.table.setCurrentCell(last, 0)
    line = source[(rows[last].name, rows[last].device)].strip()
    assert line[:40] in view.log.textCursor().block().text()


def test_a_log_from_a_terminal_shows_without_its_colour_codes(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text("\x1b[32mI\x1b[0m print_info: n_vocab = 129280\n")
    assert view.log.toPlainText() == "I print_info: n_vocab = 129280\n"
    view.log.clear()
    pasted = QMimeData()
    pasted.setText("\x1b[34mllama_context: n_ctx = 4096\x1b[0m")
    view.log.insertFromMimeData(pasted)
    assert view.log.toPlainText() == "llama_context: n_ctx = 4096"


def test_a_file_dropped_in_the_box_is_opened_not_its_path_pasted(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(str(LOGS / "pytorch-oom-cads-fragmented.log"))])
    assert view.log.canInsertFromMimeData(dropped)
    view.log.insertFromMimeData(dropped)
    _explained(qtbot, view)
    assert view.log.toPlainText().startswith("torch.OutOfMemoryError")
    assert view.headline.text().startswith("PyTorch")


def test_a_log_without_figures_shows_no_empty_table(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.show()
    view.set_text(text("llamacpp-dsv4-ansi.log"))
    view.run()
    _explained(qtbot, view)
    assert view.explanation is not None and not view.explanation.components
    assert not view.table.isVisible() and view.notes.isVisible()


def test_the_line_with_the_engines_decision_is_marked(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(text("pytorch-oom-cads-fragmented.log"))
    view.run()
    _explained(qtbot, view)
    marked = [m.cursor.selectedText() for m in view.log.extraSelections()]
    assert any(line.startswith("torch.OutOfMemoryError: CUDA out of memory") for line in marked)


def test_lines_that_start_alike_are_each_marked_whole(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.set_text(text("ollama-new-mistral3-2gpu.log"))
    view.run()
    _explained(qtbot, view)
    marked = [m.cursor.selectedText() for m in view.log.extraSelections()]
    weights = [line for line in marked if 'msg="model weights"' in line]
    assert len(weights) == 3
    assert {line.split("buffer=")[1].split()[0] for line in weights} == {"CUDA0", "CUDA1", "CPU"}
    assert all(line.startswith("time=") for line in weights)


def test_a_long_launch_line_is_cut_before_its_options_and_stays_the_same_command():
    import shlex

    line = (
        'vllm serve openai/gpt-oss-120b --kv-transfer-config \'{"role": -1, "x": -2}\' '
        "--dtype bfloat16 --max-model-len 131072 --gpu-memory-utilization 0.95"
    )
    cut = continued(line, 40)
    assert cut.count("\n") >= 2 and all(len(x) <= 50 for x in cut.splitlines())
    assert all(x.endswith(" \\") for x in cut.splitlines()[:-1])
    # a shell drops each backslash-newline: the same words, the quoted JSON not cut inside
    assert shlex.split(cut.replace("\\\n", "")) == shlex.split(line)
    assert continued("# a comment " * 20, 40) == "# a comment " * 20


def test_ctrl_enter_explains_the_box(qtbot):
    view = LogView(_real)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    view.set_text(text("pytorch-oom-cads-fragmented.log"))
    before = view.log.toPlainText()
    view.log.setFocus()
    qtbot.keyClick(view.log, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    _explained(qtbot, view)
    assert view.headline.text().startswith("PyTorch")
    assert view.log.toPlainText() == before  # no new line typed into the log
