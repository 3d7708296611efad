"""What a new user meets first: engines that cannot run a setting, a file opened as stored, stale
messages, how an estimate was built, the wheel over the side panel, the docs offline, a laptop
screen."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, write_gguf, write_safetensors
from tests.ui.waiting import settled
from vramgui.core.model import Inventory
from vramgui.ui import palette, report
from vramgui.ui.help import docs_folder
from vramgui.ui.model_panel import count_text, parameters_text

GiB = 1024**3


def loaded(qtbot, window, name: str) -> None:
    qtbot.waitUntil(
        lambda: (
            window.controller.analysis is not None
            and window.controller.analysis.estimate.model_name == name
        ),
        timeout=10000,
    )


def test_a_quantization_the_engine_cannot_run_switches_the_engine_with_a_notice(make_window, qtbot):
    window = make_window()
    combo = window.precision_panel.quant
    combo.setCurrentIndex(combo.findData("Q4_K_M"))
    settled(qtbot, window, quant="Q4_K_M", engine="llamacpp")
    qtbot.waitUntil(lambda: window.banner_kind == "notice", timeout=2000)
    text = window.banner.text()
    assert "Engine is now llama.cpp" in text and "--" not in text
    assert window.banner.styleSheet() == palette.WARNING_STYLE
    assert window.workload_panel.engine.value() == "llamacpp"
    # A new engine resets what it does not run: bitsandbytes on llama.cpp.
    combo.setCurrentIndex(combo.findData("nf4"))
    settled(qtbot, window, quant="nf4", engine="transformers")
    window.workload_panel.engine.setCurrentIndex(window.workload_panel.engine.findData("llamacpp"))
    settled(qtbot, window, quant="none", engine="llamacpp")
    qtbot.waitUntil(lambda: "Quantization reset" in window.banner.text(), timeout=2000)
    assert "GGUF type such as Q4_K_M" in window.banner.text()


def test_kv_caches_an_engine_lacks_are_offered_disabled_with_the_reason(make_window):
    window = make_window()
    model = window.precision_panel.kv_dtype.model()
    kv = window.precision_panel.kv_dtype
    for value in ("fp8", "q8_0", "q4_0"):
        item = model.item(kv.findData(value))
        assert not item.isEnabled() and "Transformers has no" in item.toolTip()


def test_qlora_starts_from_its_recipe_and_offers_mixed_or_pure_precision(make_window, qtbot):
    window = make_window()
    window.controller.update(mode="training")
    settled(qtbot, window, mode="training")
    assert not window.precision_panel.quant.isEnabled()  # a full fine-tune trains a 16-bit base
    window.controller.update(method="qlora")
    settled(qtbot, window, method="qlora", quant="nf4", grad_checkpointing=True)
    panel = window.workload_panel
    assert panel.grad_checkpointing.isChecked()
    # Mixed is the recipe (prepare_model_for_kbit_training), Pure a script that skips it; fp32
    # does not apply to 4-bit layers.
    assert panel.precision.isEnabled() and panel.precision.value() == "mixed"
    fp32 = panel.precision.model().item(panel.precision.findData("fp32"))
    assert not fp32.isEnabled() and "compute in the Weights dtype" in fp32.toolTip()
    assert panel.precision.model().item(panel.precision.findData("pure")).isEnabled()
    panel.precision.setCurrentIndex(panel.precision.findData("pure"))
    settled(qtbot, window, method="qlora", precision="pure")
    quant_model = window.precision_panel.quant.model()
    q4 = quant_model.item(window.precision_panel.quant.findData("Q4_K_M"))
    assert not q4.isEnabled() and "4-bit bitsandbytes base" in q4.toolTip()
    qtbot.waitUntil(lambda: "usual recipe" in window.banner.text(), timeout=2000)
    window.controller.update(method="lora")
    settled(qtbot, window, method="lora", quant="none", precision="pure")
    assert panel.precision.isEnabled()


def test_a_failed_load_leaves_nothing_behind_once_a_model_loads(make_window, qtbot):
    window = make_window()
    window.controller.load_source("/no/such/model.gguf")
    qtbot.waitUntil(lambda: window.banner_kind == "error", timeout=10000)
    info = window.model_panel.info
    assert "Reading the model" not in info.text()
    assert "meta-llama/Llama-3.1-8B" in info.text()  # the model still estimated
    window.controller.load_source("qwen2.5-7b")
    loaded(qtbot, window, "Qwen/Qwen2.5-7B")
    assert window.banner_kind == "" and not window.banner.isVisibleTo(window)
    assert "Reading the model" not in info.text()


def test_a_file_opened_is_estimated_as_stored(make_window, qtbot, tmp_path):
    window = make_window()
    window.controller.update(quant="Q4_K_M")
    settled(qtbot, window, quant="Q4_K_M")
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    path = write_safetensors(folder / "model.safetensors", llama_tensors(TINY_LLAMA_CONFIG, "F16"))
    window.controller.load_source(str(path))
    loaded(qtbot, window, "tiny-llama/model.safetensors")  # not "model"
    settled(qtbot, window, quant="none", dtype="fp16")
    qtbot.waitUntil(lambda: "as it is stored" in window.banner.text(), timeout=2000)
    # A GGUF file goes to an engine that runs it as it is.
    gguf = tmp_path / "tiny.Q4_K_M.gguf"
    write_gguf(gguf)
    window.controller.load_source(str(gguf))
    loaded(qtbot, window, "tiny.Q4_K_M")
    settled(qtbot, window, engine="llamacpp")
    # Picking transformers for it is refused with what would serve it.
    window.controller.update(engine="transformers")
    qtbot.waitUntil(lambda: window.banner_kind == "error", timeout=2000)
    assert "Serve it with llama.cpp or vLLM" in window.banner.text()
    assert window.controller.workload.engine == "llamacpp"


def test_a_config_file_is_named_after_itself(make_window, qtbot, tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    path = folder / "my-llama.json"
    path.write_text(json.dumps(TINY_LLAMA_CONFIG))
    window = make_window()
    window.controller.load_source(str(path))
    loaded(qtbot, window, "my-llama")


def test_the_badge_says_how_the_estimate_was_built(make_window, qtbot, tmp_path):
    window = make_window()
    assert window.badge.isVisibleTo(window) and window.badge.text() == "Exact model"
    assert window.badge.styleSheet() == palette.BADGE_STYLES["exact"]
    unknown = dict(TINY_LLAMA_CONFIG, model_type="brand_new_arch", architectures=["NewForCausalLM"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(unknown))
    window.controller.load_source(str(path))
    qtbot.waitUntil(
        lambda: (
            window.controller.analysis is not None
            and window.controller.analysis.spec.inventory is Inventory.APPROXIMATE
        ),
        timeout=10000,
    )
    assert window.badge.text() == "APPROXIMATE"
    assert window.badge.styleSheet() == palette.BADGE_STYLES["approximate"]
    spec = window.controller.spec
    assert all(warning in window.badge.toolTip() for warning in spec.warnings)
    assert window.headline.text().startswith("≈ ")
    assert "(approximate)" in window.model_panel.info.text()
    assert "about" in parameters_text(spec)
    copied = report.as_text(window.controller.analysis, "GiB")
    assert "Peak per GPU: about " in copied and "Model inventory: approximate" in copied


def test_parameter_counts_never_read_as_exponents():
    assert count_text(999_885_952) == "1B"  # gemma-3-1b: not "1e+03M"
    assert count_text(8_030_261_248) == "8.03B"
    assert count_text(124_439_808) == "124M"
    assert count_text(70_553_706_496, 2) == "71B"


def test_the_wheel_scrolls_the_side_panel_instead_of_turning_a_combo(make_window, qtbot):
    window = make_window()
    combo = window.workload_panel.attention
    before = combo.currentIndex()

    def wheel() -> QWheelEvent:
        at = QPointF(combo.width() / 2, combo.height() / 2)
        event = QWheelEvent(
            at,
            QPointF(combo.mapToGlobal(at.toPoint())),
            QPoint(0, 0),
            QPoint(0, -120),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        QApplication.sendEvent(combo, event)
        return event

    # Over a control the user has not clicked into, the wheel is left to the scrolling panel.
    passed_on = wheel()
    assert combo.currentIndex() == before and not passed_on.isAccepted()
    # Clicked into, the control takes the wheel.
    combo.setFocus()
    qtbot.waitUntil(combo.hasFocus, timeout=2000)
    wheel()
    assert combo.currentIndex() != before


def test_help_opens_the_bundled_docs_without_a_network(make_window, qtbot):
    window = make_window()
    assert docs_folder() is not None and (docs_folder() / "accuracy.md").is_file()
    window.action_method.trigger()
    help_window = window._help
    assert help_window is not None and help_window.isVisible()
    assert help_window.browser.source().fileName() == "estimates.md"
    help_window.close()


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768)])
@pytest.mark.parametrize("mode", ["training", "inference"])
def test_the_window_fits_a_laptop_screen(make_window, qtbot, size, mode):
    window = make_window()
    window.resize(*size)
    if mode == "training":
        window.controller.update(mode="training")
        settled(qtbot, window, mode="training")
    qtbot.wait(50)
    # No tab is wider than its place (each shown, so that the lazily built ones are built), and
    # the breakdown shows every row, every figure whole.
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        holder = window.tabs.widget(index)
        qtbot.waitUntil(lambda h=holder: h.widget() is not None and h.widget().layout() is not None)
        qtbot.wait(50)
        assert holder.horizontalScrollBar().maximum() == 0, window.tabs.tabText(index)
    window.tabs.setCurrentIndex(0)
    qtbot.wait(50)
    table = window.breakdown_table
    rows = window.breakdown_model.rowCount()
    assert table.viewport().height() >= table.rowViewportPosition(rows - 1) + table.rowHeight(0)
    header = table.horizontalHeader()
    assert sum(header.sectionSize(c) for c in range(3)) <= table.viewport().width()
    assert window.width() <= size[0]


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768), (1920, 1080)])
def test_a_laptop_screen_shows_the_total_and_the_table_s_total_row(make_window, qtbot, size):
    window = make_window()
    window.resize(*size)
    window.change({"mode": "training"})
    window.change({"method": "qlora"})
    settled(qtbot, window, method="qlora")
    qtbot.wait(100)
    # The headline's figure always shows whole; a narrow window drops the organisation first.
    total = window.headline.text().split(" · ")[0]
    shown = window.headline.shown_text()
    assert shown.startswith(total + " · ") and "…" not in shown
    assert shown.endswith("Llama-3.1-8B")
    metrics = window.headline.fontMetrics()
    assert metrics.horizontalAdvance(shown) <= window.headline.contentsRect().width()
    # The breakdown's total row is in view without scrolling the tab.
    table = window.breakdown_table
    last = window.breakdown_model.rowCount() - 1
    bottom = table.viewport().mapTo(
        window, QPoint(0, table.rowViewportPosition(last) + table.rowHeight(last))
    )
    viewport = window.tabs.widget(0).viewport()
    assert bottom.y() <= viewport.mapTo(window, QPoint(0, viewport.height())).y()
    assert window.tabs.widget(0).verticalScrollBar().value() == 0


def test_back_to_training_the_quantization_follows_the_method(make_window, qtbot):
    window = make_window()
    window.controller.update(mode="training", method="qlora")
    settled(qtbot, window, method="qlora", quant="nf4")
    window.controller.update(mode="inference", quant="Q4_K_M")
    settled(qtbot, window, mode="inference", quant="Q4_K_M", engine="llamacpp")
    window.controller.update(mode="training")
    settled(qtbot, window, mode="training", quant="nf4")
    qtbot.waitUntil(lambda: "4-bit bitsandbytes base" in window.banner.text(), timeout=2000)
    assert window.banner_kind == "notice"


def test_whole_model_figures_are_labelled_beside_per_gpu_ones(make_window, qtbot):
    window = make_window()
    qtbot.waitUntil(lambda: window.rules.text().startswith("Rules of thumb: "), timeout=5000)
    window.change({"gpus": 2, "tp": 2})
    settled(qtbot, window, gpus=2, tp=2)
    qtbot.waitUntil(
        lambda: window.rules.text().startswith("Rules of thumb (whole model, not per GPU of 2): "),
        timeout=5000,
    )


def test_fsdp_mixed_precision_is_explained_in_the_window(make_window, qtbot):
    window = make_window()
    window.change({"mode": "training"})
    window.change({"gpus": 8, "fsdp": True})
    settled(qtbot, window, mode="training", gpus=8, fsdp=True, precision="mixed")
    est = window.controller.analysis.estimate
    assert "autocast_weight_copies" not in est.components
    assert "torch.autocast alone keeps" in window.notes.text()
