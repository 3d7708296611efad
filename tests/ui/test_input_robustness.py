"""Every input field of the window, typed into and pasted into with garbage, huge numbers and
nothing at all: the field keeps a valid value, the window keeps a valid workload, and no exception
reaches Qt (pytest-qt fails a test on any exception raised in a slot or event handler).
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QThreadPool
from PySide6.QtGui import QGuiApplication, QInputMethodEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QDoubleSpinBox,
    QLineEdit,
    QSpinBox,
)

from vramgui.core.workload import Workload
from vramgui.ui import extra_views

GARBAGE = (
    "abc",
    "-5",
    "1e9999",
    "99999999999999999999999",
    "0",
    "",
    "12abc34",
    "\u0661\u0662",  # Arabic-Indic digits
    "💥💥",
    " 7 ",
    "0x10",
    "NaN",
)
INT_FIELDS = ("batch", "seq", "lora_rank", "grad_accum", "gpus", "tp", "pp")


def spin_of(window, name: str) -> QAbstractSpinBox:
    widget = getattr(window.workload_panel, name)
    return widget.spin if hasattr(widget, "spin") else widget


def type_into(qtbot, field: QAbstractSpinBox | QLineEdit, text: str) -> None:
    """Replace the field's text the way a person does: select all, type, press Return."""
    field.setFocus()
    field.selectAll()
    qtbot.keyClick(field, Qt.Key.Key_Backspace)
    if text.isascii():
        qtbot.keyClicks(field, text)
    else:  # QTest types ASCII only; other text arrives as an input method commits it
        event = QInputMethodEvent()
        event.setCommitString(text)
        QApplication.sendEvent(field, event)
    qtbot.keyClick(field, Qt.Key.Key_Return)


def paste_into(qtbot, field: QAbstractSpinBox | QLineEdit, text: str) -> None:
    QGuiApplication.clipboard().setText(text)
    field.setFocus()
    field.selectAll()
    qtbot.keySequence(field, QKeySequence.StandardKey.Paste)
    qtbot.keyClick(field, Qt.Key.Key_Return)
    field.clearFocus()  # editing ends as when the user moves on


def wait_idle(qtbot, window) -> None:
    """Let scheduled estimates and background work run and be drawn."""
    qtbot.wait(30)
    QThreadPool.globalInstance().waitForDone(5000)
    qtbot.wait(30)


def assert_valid(window) -> None:
    w = window.controller.workload
    assert isinstance(w, Workload)
    Workload(**{f: getattr(w, f) for f in Workload.__dataclass_fields__})  # still validates
    panel = window.workload_panel
    for name in INT_FIELDS:
        spin = spin_of(window, name)
        assert spin.minimum() <= spin.value() <= spin.maximum(), name
    assert 0.0 < panel.gpu_memory_utilization.value() <= 1.0


def test_integer_fields_take_only_integers_in_range(make_window, qtbot) -> None:
    window = make_window()
    window.workload_panel.mode.set_value("training")  # shows every field
    wait_idle(qtbot, window)
    for name in INT_FIELDS:
        spin = spin_of(window, name)
        assert isinstance(spin, QSpinBox)
        for text in GARBAGE:
            type_into(qtbot, spin, text)
            assert spin.minimum() <= spin.value() <= spin.maximum(), (name, text)
            paste_into(qtbot, spin, text)
            assert spin.minimum() <= spin.value() <= spin.maximum(), (name, text)
        type_into(qtbot, spin, "99999999999999999999")
        assert spin.value() <= spin.maximum()
        wait_idle(qtbot, window)
        assert_valid(window)


def test_typed_values_reach_the_estimate(make_window, qtbot) -> None:
    window = make_window()
    type_into(qtbot, spin_of(window, "seq"), "4096")
    type_into(qtbot, spin_of(window, "batch"), "3")
    qtbot.waitUntil(
        lambda: (
            window.controller.analysis is not None
            and window.controller.analysis.estimate.workload.seq == 4096
            and window.controller.analysis.estimate.workload.batch == 3
        ),
        timeout=10000,
    )
    assert_valid(window)


def test_parallelism_that_does_not_add_up_is_refused_with_a_message(make_window, qtbot) -> None:
    window = make_window()
    panel = window.workload_panel
    panel.mode.set_value("training")
    type_into(qtbot, panel.gpus, "2")
    type_into(qtbot, panel.tp, "1024")  # tp x pp beyond the GPUs
    type_into(qtbot, panel.pp, "3")
    wait_idle(qtbot, window)
    assert_valid(window)
    w = window.controller.workload
    assert w.tp * w.pp <= w.gpus


def test_vllm_memory_share_is_a_fraction(make_window, qtbot) -> None:
    window = make_window()
    spin = window.workload_panel.gpu_memory_utilization
    assert isinstance(spin, QDoubleSpinBox)
    for text in (*GARBAGE, "0.00001", "1.5", "-0.5", "0,5"):
        type_into(qtbot, spin, text)
        paste_into(qtbot, spin, text)
        assert 0.0 < spin.value() <= 1.0
    wait_idle(qtbot, window)
    assert_valid(window)


def test_lora_targets_accept_anything_without_breaking(make_window, qtbot) -> None:
    window = make_window()
    panel = window.workload_panel
    panel.mode.set_value("training")
    panel.method.set_value("lora")
    wait_idle(qtbot, window)
    for text in (",,,", "", " ", "💥", "q_proj,,", "x" * 300, "all-linear", "no_such_module"):
        type_into(qtbot, panel.lora_targets, text)
        panel.lora_targets.clearFocus()
        paste_into(qtbot, panel.lora_targets, text * 30)
        wait_idle(qtbot, window)
        assert_valid(window)
        assert window.controller.workload.lora_targets  # never emptied


def test_model_search_field_takes_any_text(make_window, qtbot) -> None:
    window = make_window()
    panel = window.model_panel
    for text in ("💥", "x" * 300, "../../etc/passwd", "a/b/c/d", " ", "\\\\"):
        type_into(qtbot, panel.query, text)
        paste_into(qtbot, panel.query, text * 10)
        # The search starts once typing pauses; each one ends with results or a message.
        qtbot.wait(400)
        qtbot.waitUntil(lambda: not panel.searching, timeout=15000)
        wait_idle(qtbot, window)
        assert_valid(window)


def test_offload_speed_fields(make_window, qtbot) -> None:
    window = make_window()
    window.tabs.setCurrentIndex(
        next(i for i in range(window.tabs.count()) if window.tabs.tabText(i) == "Offloading")
    )
    view = extra_views.view_of(window.extra_tabs["Offloading"])
    spins = getattr(view, "spins", None)
    if not spins:
        pytest.skip("the Offloading view is not part of this build")
    for spin in spins.values():
        for text in ("abc", "", "1e99", "0", "-3", "99999999999"):
            type_into(qtbot, spin, text)
            assert spin.minimum() <= spin.value() <= spin.maximum()
    wait_idle(qtbot, window)
    assert_valid(window)


def test_profile_search_field_takes_any_text(make_window, qtbot) -> None:
    window = make_window()
    view = extra_views.view_of(window.extra_tabs["Profiles"])
    field = getattr(view, "search", None)
    if not isinstance(field, QLineEdit):
        pytest.skip("the Profiles view is not part of this build")
    for text in ("[", "(*", "\\", "💥", "x" * 300, ""):
        type_into(qtbot, field, text)
        paste_into(qtbot, field, text)
    wait_idle(qtbot, window)
