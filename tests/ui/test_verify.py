"""Verify on the Estimate tab, driven through the window with a scripted measuring process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QProcess, Qt
from PySide6.QtGui import QMouseEvent

from vramgui.cli import build_parser
from vramgui.cli.estimate import workload_from_args
from vramgui.core.model import ModelRef
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.measure import extra
from vramgui.ui import palette, verify
from vramgui.ui.breakdown_chart import BreakdownChart, MeasuredMark

FAKE = Path(__file__).with_name("fake_measure.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scripted(monkeypatch):
    """Make the window's Verify run ``fake_measure.py SCENARIO`` and record what it was asked."""
    asked: list[tuple[str, Workload, str]] = []

    def use(scenario: str) -> list:
        def command(source: str, workload: Workload, device: str) -> list[str]:
            asked.append((source, workload, device))
            return [sys.executable, str(FAKE), scenario, source, device]

        monkeypatch.setattr(verify, "measure_command", command)
        monkeypatch.setattr(extra, "missing_packages", lambda: ())
        return asked

    return use


def test_verify_runs_shows_progress_and_draws_the_measured_peak(make_window, scripted, qtbot):
    asked = scripted("ok")
    window = make_window()
    bar = window.verify_bar
    steps: list[str] = []
    bar.progress.valueChanged.connect(lambda _value: steps.append(bar.progress.format()))
    with qtbot.waitSignal(bar.finished, timeout=20000) as done:
        bar.fake_action.trigger()
        assert bar.running and bar.cancel_button.isVisible() and not bar.button.isEnabled()
    measured = done.args[0]
    assert measured["device"] == "fake"
    assert asked == [(window.controller.source, window.controller.workload, "fake")]
    assert steps[-2:] == ["load (2/3)", "prefill (3/3)"]
    assert not bar.running and not bar.progress.isVisible() and bar.button.isEnabled()
    assert [name for name, _ in window.breakdown_chart.measured_positions()] == ["Measured tensors"]
    assert "Measured tensors" in window.breakdown_chart.legend_text()
    # Told where the window's messages go, the figures first, the notes in the tooltip.
    assert window.banner_kind == "verify" and window.banner.isVisibleTo(window)
    assert window.banner.text().startswith("Verified by a fake run: estimate -4.8%: ")
    assert "tensors peak at 2.10 GiB (prefill), the estimate's 2.00 GiB" in window.banner.text()
    assert "a note" in window.banner.toolTip()
    assert window.banner.styleSheet() == palette.WARNING_STYLE  # further off than 3 %
    assert window.statusBar().currentMessage() == window.banner.text()


def test_a_change_of_settings_clears_the_measurement(make_window, scripted, qtbot):
    scripted("ok")
    window = make_window()
    bar = window.verify_bar
    with qtbot.waitSignal(bar.finished, timeout=20000):
        bar.fake_action.trigger()
    assert window.breakdown_chart.measured_positions()
    window.controller.update(seq=window.controller.workload.seq * 2)
    qtbot.waitUntil(lambda: not window.breakdown_chart.measured_positions(), timeout=10000)
    assert bar.measured is None


def test_cancel_stops_the_process(make_window, scripted, qtbot):
    scripted("slow")
    window = make_window()
    bar = window.verify_bar
    bar.fake_action.trigger()
    qtbot.waitUntil(lambda: bar.progress.format() == "load (2/3)", timeout=20000)
    process = bar.findChild(QProcess)
    with qtbot.waitSignal(bar.finished, timeout=10000) as done:
        bar.cancel_button.click()
    assert done.args == [None]
    assert process is None or process.state() == QProcess.ProcessState.NotRunning
    assert window.banner.text() == "Verification stopped."
    assert not window.breakdown_chart.measured_positions()
    assert bar.button.isEnabled()


def test_the_measuring_process_can_never_wait_for_an_answer(make_window, scripted, qtbot):
    """Its standard input is at its end from the start: a library asking "run this model's code?
    [y/N]" gets no answer, instead of holding the run until Cancel."""
    scripted("stdin")
    window = make_window()
    bar = window.verify_bar
    with qtbot.waitSignal(bar.finished, timeout=20000) as done:
        bar.fake_action.trigger()
    assert done.args[0] is not None and done.args[0]["device"] == "fake"


def test_a_model_too_deep_for_a_fake_run_says_why_before_it_starts(
    make_window, scripted, qtbot, tmp_path
):
    asked = scripted("ok")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4096,
                                  "num_attention_heads": 4, "intermediate_size": 128,
                                  "vocab_size": 100}))  # fmt: skip
    window = make_window()
    window.controller.load_source(str(config))
    qtbot.waitUntil(lambda: window.controller.analysis.spec.facts.num_layers == 4096, timeout=10000)
    window.verify_bar.fake_action.trigger()
    assert asked == [] and not window.verify_bar.running
    assert "4,096 layers x 2 forward passes" in window.banner.text()


def test_a_failed_run_shows_the_commands_message(make_window, scripted, qtbot):
    scripted("fail")
    window = make_window()
    bar = window.verify_bar
    with qtbot.waitSignal(bar.finished, timeout=20000):
        bar.fake_action.trigger()
    assert window.banner.text() == (
        "Verify failed: transformers could not run this model (load): ValueError: no"
    )
    assert window.banner.styleSheet() == palette.ERROR_STYLE


def test_without_the_extra_it_explains_how_to_get_it(make_window, monkeypatch):
    monkeypatch.setattr(extra, "missing_packages", lambda: ("torch is not installed",))
    window = make_window()
    bar = window.verify_bar
    bar.fake_action.trigger()
    assert not bar.running
    # Where the user looks, not in a corner: the message area under the total, and the status bar.
    assert window.banner_kind == "verify" and window.banner.isVisibleTo(window)
    assert window.banner.height() > 2 * window.banner.fontMetrics().height()
    assert 'pip install "vramgui[measure]"' in window.banner.text()
    assert "torch is not installed" in window.banner.toolTip()
    assert window.statusBar().currentMessage() != "Ready"
    # The commands for the Python this window runs on, in full, one click away.
    assert window.banner_details.isVisibleTo(window)
    assert f'"{sys.executable}" -m pip install "vramgui[measure]"' in window.banner.toolTip()


def test_a_setup_a_run_cannot_reproduce_says_why(make_window, scripted, qtbot):
    asked = scripted("ok")
    window = make_window()
    window.controller.update(quant="nf4")
    qtbot.waitUntil(lambda: window.controller.analysis.estimate.workload.quant == "nf4")
    window.verify_bar.fake_action.trigger()
    assert asked == [] and not window.verify_bar.running
    assert "quantized weights" in window.banner.text()


def test_an_approximate_estimate_offers_verify(make_window, scripted, qtbot, tmp_path):
    scripted("ok")
    window = make_window()
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"model_type": "no_such_type", "hidden_size": 64, "intermediate_size": 96,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})
    )  # fmt: skip
    window.controller.load_source(str(config))
    qtbot.waitUntil(lambda: "exact figure" in window.verify_bar.button.toolTip(), timeout=10000)
    assert "Verify runs the model's own code" in window.badge.toolTip()
    assert window.controller.spec.inventory == "approximate"


def test_the_command_line_gives_the_same_settings_back():
    workload = Workload(
        mode="training",
        batch=3,
        seq=300,
        dtype="fp16",
        method="lora",
        lora_rank=8,
        lora_targets=("q_proj", "v_proj"),
        grad_checkpointing=True,
        grad_accum=2,
        optimizer="sgd",
        overhead_bytes=GiB // 2,
    )
    argv = ["measure", "x", *verify.workload_arguments(workload)]
    assert workload_from_args(build_parser(argv).parse_args(argv)) == workload
    for caching in (True, False, None):
        served = Workload(engine="vllm", enforce_eager=True, enable_prefix_caching=caching)
        argv = ["measure", "x", *verify.workload_arguments(served)]
        assert workload_from_args(build_parser(argv).parse_args(argv)) == served
    command = verify.measure_command("org/name", Workload(), "cuda")
    assert command[:5] == [sys.executable, "-m", "vramgui", "measure", "org/name"]
    assert command[-4:] == ["--device", "cuda", "--json", "--progress"]


def test_a_profile_model_is_measured_by_its_reference():
    assert verify.source_text(None, ModelRef("hub", "org/name", revision="abc")) == "org/name@abc"
    assert verify.source_text(None, ModelRef("catalog", "llama-3-8b")) == "llama-3-8b"
    assert verify.source_text("typed", ModelRef("catalog", "llama-3-8b")) == "typed"


CHILD = """
import json, sys
from PySide6.QtCore import QSettings, QTimer
from vramgui.ui import app
from vramgui.ui.main_window import build_window

qapp = app.create_application(sys.argv[:1])
window = build_window(app.real_services(), QSettings(sys.argv[1], QSettings.Format.IniFormat))
window.show()
result = {}

def done(measured):
    result["measured"] = measured is not None
    result["status"] = window.verify_bar.message[0]
    result["torch"] = sorted(m for m in ("torch", "transformers", "peft") if m in sys.modules)
    qapp.quit()

def verify():
    if window.controller.analysis is None:
        QTimer.singleShot(100, verify)
        return
    window.verify_bar.finished.connect(done)
    window.verify_bar.fake_action.trigger()

window.controller.load_source("smollm-135m")
window.controller.update(seq=256)
QTimer.singleShot(500, verify)
QTimer.singleShot(120000, qapp.quit)
qapp.exec()
window.close()
print(json.dumps(result))
"""


def test_the_window_process_never_imports_torch(tmp_path):
    """Verify for real (the measure extra runs in the child's child); the window stays torch-free."""
    if extra.missing_packages():
        pytest.skip("the measure extra is not installed")
    env = {**os.environ, "VRAMGUI_HOME": str(tmp_path / "home"), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "window.ini")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["measured"], result["status"]
    assert result["status"].startswith("Verified by a fake run")
    assert result["torch"] == []


def test_the_chart_draws_measured_figures_until_they_are_cleared(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    chart.resize(600, 210)
    chart.show()
    chart.set_data({"weights": 10 * GiB, "activations": 2 * GiB}, [])
    chart.set_measured([MeasuredMark("Measured tensors", 30 * GiB, "measured tip")])
    assert chart.measured_positions() == [("Measured tensors", 30.0)]
    assert chart.right >= 30  # the axis reaches the measured figure
    assert chart.legend_text().endswith("Measured tensors: 30.00 GiB")
    chart.set_data({"weights": 11 * GiB}, [])  # a redraw keeps it
    assert chart.measured_positions() == [("Measured tensors", 30.0)]
    _metrics, bar_top, bar_height, plot = chart._rows()
    x = plot.left() + plot.width() * 30 / chart.right
    where = QPointF(x, bar_top + bar_height / 2)
    chart.mouseMoveEvent(
        QMouseEvent(QEvent.Type.MouseMove, where, chart.mapToGlobal(QPoint(int(x), 0)).toPointF(),
                    Qt.MouseButton.NoButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    )  # fmt: skip
    assert chart.hover_text == "measured tip"
    chart.set_measured(())
    assert chart.measured_positions() == []
    assert "Measured" not in chart.legend_text()
