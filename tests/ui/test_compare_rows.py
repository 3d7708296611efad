"""One comparison of profiles (profiles.compare) behind both front ends: ``vramgui profile compare
--json`` and the window's comparison table list the same settings, figures and fits, and neither
lists a training setting for two serving profiles."""

from __future__ import annotations

import json
from dataclasses import fields

from vramgui.cli import main
from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.units import MiB
from vramgui.core.workload import Workload
from vramgui.profiles import ProfileStore
from vramgui.sources.resolve import load_model
from vramgui.ui import palette, wording
from vramgui.ui.compare_view import comparison_rows, reestimate
from vramgui.ui.profiles_view import profile_from_setup
from vramgui.ui.wording import SETTING_LABELS, setting_label

GPU = ("RTX 4090", 24564 * MiB)
# What the window's workload still holds after a QLoRA setup when the user turns to serving.
LEFTOVERS = {"method": "qlora", "optimizer": "sgd", "lora_rank": 64, "grad_accum": 4}
TRAINING_LABELS = ("Method", "Optimizer", "LoRA rank", "Accumulation")


def _save(name: str, **workload) -> None:
    # GPT-2 has learned positions for 1,024 tokens.
    setup = Workload(seq=1024, **workload)
    ProfileStore().save(profile_from_setup(name, load_model("gpt2"), setup, [GPU]))


def _cli(capsys, *names: str) -> dict:
    assert main(["profile", "compare", *names, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _window(*names: str):
    store = ProfileStore()
    return comparison_rows([reestimate(store.get(n), load_model) for n in names], "GiB")


def test_two_serving_profiles_list_no_training_setting(qtbot, capsys):
    _save("serve one", batch=1, **LEFTOVERS)
    _save("serve eight", batch=8, **LEFTOVERS)
    doc = _cli(capsys, "serve one", "serve eight")
    assert doc["differences"] == ["batch"]
    settings = [s["setting"] for s in doc["comparison"]["settings"]]
    assert "batch" in settings and "engine" in settings
    assert not {"method", "optimizer", "lora-rank", "grad-accum", "precision"} & set(settings)
    labels = [r.label for r in _window("serve one", "serve eight")]
    assert "Batch" in labels and "Engine" in labels
    assert not set(TRAINING_LABELS) & set(labels)


def test_the_command_line_and_the_window_list_the_same_rows(qtbot, capsys):
    _save("serve", batch=4, **LEFTOVERS)
    _save(
        "tune",
        mode="training",
        method="lora",
        lora_rank=8,
        lora_targets=("all-linear",),
        engine="vllm",
    )
    cli = _cli(capsys, "serve", "tune")["comparison"]
    sections: dict[str, list] = {}
    for row in _window("serve", "tune"):
        if row.heading:
            heading = row.label
        else:
            sections.setdefault(heading, []).append(row)

    inputs = sections["Inputs"]
    assert [r.label for r in inputs] == [
        setting_label(s["setting"].replace("-", "_")) for s in cli["settings"]
    ]
    for row, setting in zip(inputs, cli["settings"], strict=True):
        assert row.differs == setting["differs"], setting
        assert [c == "-" for c in row.cells] == [not a for a in setting["applies"]], setting
    # A serving setting and a training one: each applies to one of the two profiles only.
    cells = {r.label: r.cells for r in inputs}
    lora = next(s for s in cli["settings"] if s["setting"] == "lora-rank")
    assert lora["applies"] == [False, True] and cells["LoRA rank"] == ("-", "8")
    engine = next(s for s in cli["settings"] if s["setting"] == "engine")
    assert engine["applies"] == [True, False] and cells["Engine"] == ("transformers", "-")

    figures = [r for r in sections["Estimate per GPU"] if r.tooltips and r.figures]
    assert len(cli["figures"]) > 2
    assert [r.label for r in figures] == [
        "Total per GPU" if f["figure"] == "total" else palette.component_label(f["figure"])
        for f in cli["figures"]
    ]
    for row, figure in zip(figures, cli["figures"], strict=True):
        assert row.tooltips == tuple(
            f"now {now:,} bytes; saved {saved:,} bytes" if now is not None else ""
            for now, saved in zip(figure["now_bytes"], figure["saved_bytes"], strict=True)
        ), figure
    fits = sections["Fit"]
    assert [r.label for r in fits] == [f["gpu"] for f in cli["fits"]]
    assert all(p is not None for f in cli["fits"] for p in f["profiles"])  # both estimated
    for row, fit in zip(fits, cli["fits"], strict=True):
        assert [c.split(",")[0] for c in row.cells] == [
            "-" if p is None else "fits" if p["fits"] else "does not fit" for p in fit["profiles"]
        ]


def test_another_engine_s_settings_are_left_out_or_shown_as_not_applying(qtbot, capsys):
    # What the window's workload still holds of vLLM and llama.cpp setups when the user turns to
    # transformers: none of it is a setting of a transformers profile.
    other_engines = {"gpu_memory_utilization": 0.7, "max_num_seqs": 8, "ubatch_size": 256}
    _save("hf one", batch=1, **other_engines)
    _save("hf two", batch=2, prompt=512, **other_engines)
    settings = {s["setting"]: s for s in _cli(capsys, "hf one", "hf two")["comparison"]["settings"]}
    assert not {"gpu-memory-utilization", "max-num-seqs", "ubatch-size", "batch-size"} & set(
        settings
    )
    assert not {"mem-fraction-static", "vllm-version", "sglang-version"} & set(settings)
    assert settings["prompt"]["values"] == [None, 512]
    labels = [r.label for r in _window("hf one", "hf two")]
    assert "vLLM share" not in labels and "Prompt" in labels

    # Beside a vLLM profile, the vLLM rows appear, "-" for the transformers one; llama.cpp's and
    # transformers' own settings go, or read "-" for the vLLM profile.
    _save("vllm", engine="vllm", batch=4, gpu_memory_utilization=0.8)
    settings = {s["setting"]: s for s in _cli(capsys, "hf one", "vllm")["comparison"]["settings"]}
    assert settings["gpu-memory-utilization"]["values"] == [None, 0.8]
    assert settings["gpu-memory-utilization"]["applies"] == [False, True]
    assert settings["transformers-version"]["applies"] == [True, False]
    assert "ubatch-size" not in settings and "mem-fraction-static" not in settings
    cells = {r.label: r.cells for r in _window("hf one", "vllm")}
    assert cells["vLLM share"] == ("-", "0.8")
    assert cells["Max sequences"] == ("-", "default")


def test_every_compared_setting_has_a_label_and_none_is_a_component_s():
    compared = {f.name for f in fields(Workload)} | {"model", "gpu"}
    assert compared <= set(SETTING_LABELS), sorted(compared - set(SETTING_LABELS))
    labels = [setting_label(name) for name in compared]
    # A setting's row and an estimate's component row never read the same.
    assert not set(palette.COMPONENT_LABELS.values()) & set(labels)
    assert len(set(labels)) == len(labels)


def test_a_setting_reads_the_same_in_a_message_and_in_the_comparison(qtbot):
    # One table of labels: a comparison's row is named as the window's messages name it.
    _save("kv auto", engine="vllm", kv_dtype="auto")
    _save("kv fp8", engine="vllm", kv_dtype="fp8")
    labels = [r.label for r in _window("kv auto", "kv fp8")]
    said = wording.in_window(WorkloadError(Message("{kv} is set", kv=Setting("kv_dtype", "fp8"))))
    assert said == "KV cache dtype “fp8” is set"
    assert "KV cache dtype" in labels
