"""A model's own format is its own: the settings it forces go back when the next model loads; what
the window said of earlier settings goes when they change; Enter in the search box opens a result.
"""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from tests.fakehub.files import (
    TINY_LLAMA_CONFIG,
    llama_tensors,
    safetensors_bytes,
    write_gguf,
    write_safetensors,
)
from tests.ui.waiting import settled
from vramgui.cli import main
from vramgui.ui.main_window import _restored_workload

DEFAULT = "meta-llama/Llama-3.1-8B"


def loaded(qtbot, window, name: str) -> None:
    qtbot.waitUntil(
        lambda: (
            window.controller.analysis is not None
            and window.controller.analysis.estimate.model_name == name
        ),
        timeout=10000,
    )


def _cli_total(capsys, *argv: str) -> int:
    assert main(["estimate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["per_gpu"]["total_bytes"]


def test_a_gguf_file_s_format_applies_to_it_only(make_window, qtbot, tmp_path, settings, capsys):
    window = make_window()
    c = window.controller
    before = c.analysis.estimate.total_bytes
    assert (c.workload.dtype, c.workload.engine) == ("bf16", "transformers")
    gguf = tmp_path / "tiny.Q4_K_M.gguf"
    write_gguf(gguf)
    c.load_source(str(gguf))
    loaded(qtbot, window, "tiny.Q4_K_M")
    # Served by llama.cpp as stored; its F32 norms make no fp32 model of it.
    settled(qtbot, window, engine="llamacpp", dtype="bf16", quant="none")
    assert c.chosen_workload.engine == "transformers"
    # The window's figure is the command line's for the same file.
    assert c.analysis.estimate.total_bytes == _cli_total(capsys, str(gguf))
    window._save_workload()
    assert _restored_workload(settings).engine == "transformers"
    c.load_source("llama-3.1-8b")
    loaded(qtbot, window, DEFAULT)
    settled(qtbot, window, engine="transformers", dtype="bf16")
    assert c.analysis.estimate.total_bytes == before
    qtbot.waitUntil(lambda: "Back to your settings" in window.banner.text(), timeout=2000)
    assert "Engine Transformers" in window.banner.text()


def test_a_setting_the_user_changes_on_such_a_model_stays_theirs(make_window, qtbot, tmp_path):
    window = make_window()
    c = window.controller
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    write_safetensors(folder / "model.safetensors", llama_tensors(TINY_LLAMA_CONFIG, "F16"))
    c.update(quant="int8")
    settled(qtbot, window, quant="int8")
    c.load_source(str(folder))
    settled(qtbot, window, dtype="fp16", quant="none")
    window.change({"dtype": "fp32"})  # the user's own choice, on this model
    settled(qtbot, window, dtype="fp32")
    c.load_source("llama-3.1-8b")
    loaded(qtbot, window, DEFAULT)
    # fp32 was chosen, so it stays; int8 was put aside by the folder's format, so it is back.
    settled(qtbot, window, dtype="fp32", quant="int8")


def test_a_shorter_context_is_the_model_s_and_the_longer_one_comes_back(make_window, qtbot):
    window = make_window()
    c = window.controller
    c.update(seq=32768)
    settled(qtbot, window, seq=32768)
    c.load_source("llama-2-7b")  # a 4,096-token context
    settled(qtbot, window, seq=4096)
    c.load_source("llama-3.1-8b")
    loaded(qtbot, window, DEFAULT)
    settled(qtbot, window, seq=32768)


def test_back_from_qlora_inference_is_served_as_before(make_window, qtbot):
    window = make_window()
    before = window.controller.analysis.estimate.total_bytes
    window.change({"mode": "training"})
    window.change({"method": "qlora"})
    settled(qtbot, window, mode="training", method="qlora", quant="nf4")
    qtbot.waitUntil(lambda: "usual recipe" in window.banner.text(), timeout=2000)
    window.change({"mode": "inference"})
    settled(qtbot, window, mode="inference", quant="none")
    assert window.controller.analysis.estimate.total_bytes == before
    # The recipe's notice is gone with training; what replaced it says why the base went.
    qtbot.waitUntil(lambda: "4-bit base is for training" in window.banner.text(), timeout=2000)
    assert "usual recipe" not in window.banner.text()


def test_a_notice_goes_once_the_user_acts_on_it(make_window, qtbot):
    window = make_window()
    quant = window.precision_panel.quant
    quant.setCurrentIndex(quant.findData("nf4"))
    settled(qtbot, window, quant="nf4")
    engine = window.workload_panel.engine
    engine.setCurrentIndex(engine.findData("llamacpp"))
    settled(qtbot, window, quant="none", engine="llamacpp")
    qtbot.waitUntil(lambda: "GGUF type such as Q4_K_M" in window.banner.text(), timeout=2000)
    quant.setCurrentIndex(quant.findData("Q4_K_M"))
    settled(qtbot, window, quant="Q4_K_M", engine="llamacpp")
    qtbot.wait(50)
    assert window.banner_kind == "" and not window.banner.isVisibleTo(window)


def test_an_error_leaves_the_status_bar_once_a_model_loads(make_window, qtbot):
    window = make_window()
    window.controller.load_source("/no/such/model.gguf")
    qtbot.waitUntil(lambda: window.banner_kind == "error", timeout=10000)
    assert "no such file" in window.statusBar().currentMessage()
    window.controller.load_source("qwen2.5-7b")
    loaded(qtbot, window, "Qwen/Qwen2.5-7B")
    assert window.statusBar().currentMessage() == ""


def test_enter_opens_the_best_result_not_the_words_typed(make_window, fake_hub, qtbot):
    files = {
        "config.json": json.dumps(TINY_LLAMA_CONFIG).encode(),
        "model.safetensors": safetensors_bytes(llama_tensors(TINY_LLAMA_CONFIG)),
    }
    fake_hub.add("acme/tiny-llama", files, downloads=1234, parameters=300_000)
    window = make_window()
    panel = window.model_panel
    chosen: list[str] = []
    panel.source_chosen.connect(chosen.append)
    # Enter at once, before the search has even started.
    qtbot.keyClicks(panel.query, "tiny-llama")
    qtbot.keyClick(panel.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bool(chosen), timeout=10000)
    assert chosen == ["acme/tiny-llama"]
    loaded(qtbot, window, "acme/tiny-llama")
    assert window.banner_kind == ""


def test_enter_on_words_nothing_matches_says_so_and_loads_nothing(make_window, qtbot):
    window = make_window()
    panel = window.model_panel
    chosen: list[str] = []
    panel.source_chosen.connect(chosen.append)
    qtbot.keyClicks(panel.query, "zzqx no such words")
    qtbot.keyClick(panel.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "No models match" in panel.status.text(), timeout=10000)
    qtbot.wait(50)
    assert chosen == [] and window.banner_kind == ""


def test_enter_on_a_path_opens_it(make_window, qtbot, tmp_path):
    path = tmp_path / "my-llama.json"
    path.write_text(json.dumps(TINY_LLAMA_CONFIG))
    window = make_window()
    panel = window.model_panel
    panel.query.setText(str(path))
    qtbot.keyClick(panel.query, Qt.Key.Key_Return)
    loaded(qtbot, window, "my-llama")
