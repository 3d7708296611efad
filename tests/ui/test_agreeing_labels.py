"""What the window says of a model agrees with itself: the notice and the quantization box name
the same stored format, each quantization choice shows the bits per weight its mix averages on
the model picked, and a config.json that disagrees with its files is named beside them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, write_gguf, write_model_folder
from tests.ui.waiting import settled
from vramgui.cli import main
from vramgui.sources import catalog
from vramgui.ui.widgets import SHORT_TEXT_ROLE

PUBLISHED = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "published.json"


def _published_bits() -> dict[str, float]:
    cases = json.loads(PUBLISHED.read_text(encoding="utf-8"))["cases"]
    case = next(c for c in cases if c["id"] == "gguf-sizes-llama31-8b")
    return case["measured"]["bits_per_weight"]


def _item(combo, value: str) -> str:
    return combo.itemText(combo.findData(value))


def test_a_q8_0_file_is_said_to_be_estimated_as_stored_q8_0(make_window, qtbot, tmp_path):
    window = make_window()
    window.controller.update(quant="Q4_K_M")
    settled(qtbot, window, quant="Q4_K_M")
    gguf = tmp_path / "tiny.Q8_0.gguf"
    write_gguf(gguf, file_type=7)  # LLAMA_FTYPE_MOSTLY_Q8_0
    window.controller.load_source(str(gguf))
    settled(qtbot, window, quant="none", engine="llamacpp")
    qtbot.waitUntil(lambda: "as it is stored" in window.banner.text(), timeout=5000)
    text = window.banner.text()
    said = "as it is stored: Quantization “As stored · Q8_0” (was Quantization GGUF Q4_K_M)"
    assert said in text
    assert "None (16/32-bit)" not in text
    combo = window.precision_panel.quant
    assert combo.itemData(combo.currentIndex(), SHORT_TEXT_ROLE) == "As stored · Q8_0"


def test_quantization_choices_show_the_bits_their_mix_averages_on_this_model(make_window, qtbot):
    window = make_window()  # Llama-3.1-8B, whose GGUF sizes llama.cpp publishes
    assert window.controller.spec.name == "meta-llama/Llama-3.1-8B"
    combo = window.precision_panel.quant
    # Q4_K_M and Q4_K_S share their default type (4.5 bits a Q4_K weight), not their mixes.
    qtbot.waitUntil(lambda: "4.5 bits" not in _item(combo, "Q4_K_M"), timeout=10000)
    for quant, bits in _published_bits().items():
        if combo.findData(quant) >= 0:
            assert f"{round(bits, 2):g} bits/weight" in _item(combo, quant), quant
            shown = combo.itemData(combo.findData(quant), SHORT_TEXT_ROLE)
            assert shown == f"{quant} · {round(bits, 2):g} bits", quant
    labels = {_item(combo, q) for q in ("Q3_K_S", "Q3_K_M", "Q3_K_L")}
    assert len(labels) == 3  # once all "3.4375"
    assert "16 bits/weight" in _item(combo, "none")


def test_a_config_that_disagrees_with_its_files_is_named_beside_them(make_window, qtbot, tmp_path):
    window = make_window()
    config = dict(TINY_LLAMA_CONFIG, torch_dtype="bfloat16")
    folder = write_model_folder(tmp_path / "tiny", config, llama_tensors(config, "F16"))
    window.controller.load_source(str(folder))
    settled(qtbot, window, dtype="fp16")
    qtbot.waitUntil(lambda: "torch_dtype" in window.banner.text(), timeout=5000)
    text = window.banner.text()
    assert (
        "Its config.json says bf16 (torch_dtype) but its safetensors headers store fp16: the files "
        "are what an engine loads. "
    ) in text  # a sentence of its own among the notices
    assert "as it is stored: Weights dtype fp16 (was Weights dtype bf16" in text


def test_the_command_line_names_the_disagreement_too(tmp_path, capsys):
    config = dict(TINY_LLAMA_CONFIG, torch_dtype="bfloat16")
    folder = write_model_folder(tmp_path / "tiny", config, llama_tensors(config, "F16"))
    assert main(["estimate", str(folder), "--json"]) == 0
    notices = json.loads(capsys.readouterr().out)["notices"]
    assert any(
        "config.json says bf16 (torch_dtype) but its safetensors headers" in n for n in notices
    )
    agreeing = write_model_folder(tmp_path / "agreeing", config, llama_tensors(config, "BF16"))
    assert main(["estimate", str(agreeing), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notices"] == []


def test_a_config_json_with_a_float32_router_bias_is_estimated_in_its_own_dtype(
    make_window, qtbot, tmp_path
):
    """GLM-4.5-Air's config.json opened alone: the one float32 tensor its inventory states (the
    router's score-correction bias) once made the whole model fp32, its weights twice their size."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(catalog.find("glm-4.5-air").config))
    window = make_window()
    window.controller.update(dtype="fp16")
    settled(qtbot, window, dtype="fp16")
    window.controller.load_source(str(path))
    qtbot.waitUntil(lambda: window.controller.source == str(path), timeout=10000)
    settled(qtbot, window, dtype="bf16")  # its torch_dtype
