"""Messages that name vramgui's settings carry them as data, and each front end words them: the
command line as its options (``--tp 3``), the window as its controls (``Tensor parallel “3”``)."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields

import pytest
from PySide6.QtWidgets import QLabel

from tests.ui.test_main_window import settle
from vramgui.answers.estimate import estimate_setup
from vramgui.cli import build_parser
from vramgui.cli import main as cli_main
from vramgui.core.errors import Command, Message, Setting, WorkloadError, command_line, phrase
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.workload import Workload
from vramgui.profiles.model import Profile, ProfileError
from vramgui.sources.errors import ModelNotFound
from vramgui.sources.resolve import load_model
from vramgui.ui import wording

COMMANDS = ("estimate", "plan", "profile", "search", "gpus", "local", "explain", "measure")
_OPTION = re.compile(r"--[a-z][a-z0-9-]*")
# A command to type in a terminal, named as one (the window has no place for it).
_COMMAND_LINE = re.compile(r"`vramgui [^`]*`")


def cli_options() -> frozenset[str]:
    """Every ``--option`` of vramgui's command line, from its parsers."""
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            found.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    for command in COMMANDS:
        walk(build_parser([command]))
    return frozenset(found - {"--help", "--version"})


def options_named(text: str, options: frozenset[str]) -> list[str]:
    return [o for o in _OPTION.findall(_COMMAND_LINE.sub("", text)) if o in options]


def test_a_message_is_the_command_line_s_words_and_the_window_s_from_one_record():
    message = Message(
        "{seq:,} is longer than {limit:,} tokens: set {yarn} with {factor}; {search} lists models",
        seq=Setting("seq", 40000),
        limit=32768,
        yarn=Setting("rope_scaling", "yarn"),
        factor=Setting("rope_factor", 2),
        search=Command("search", "'llama 3'"),
    )
    assert message == (
        "--seq 40,000 is longer than 32,768 tokens: set --rope-scaling yarn with --rope-factor 2; "
        "`vramgui search 'llama 3'` lists models"
    )
    assert wording.in_window(WorkloadError(message)) == (
        "Context “40,000” is longer than 32,768 tokens: set RoPE scaling “YaRN” with "
        "RoPE factor “2”; the search box lists models"
    )
    # Text around the terms is taken as it is, braces included; a switch is named alone.
    odd = phrase("a {model} of ", Setting("fsdp"), " and ", Setting("quant", "nf4"))
    assert odd == "a {model} of --fsdp and --quant nf4"
    assert odd.words(wording.say) == "a {model} of FSDP and Quantization “bitsandbytes NF4”"
    assert command_line(Command("gpus", "--catalog"), "") == "`vramgui gpus --catalog`"


def test_the_same_error_names_the_option_in_the_terminal_and_the_control_in_the_window(
    make_window, qtbot, capsys
):
    # Tensor parallel over 3 GPUs cannot split Llama 3.1 8B's 32 attention heads.
    code = cli_main(["estimate", "llama-3.1-8b", "--gpus", "3", "--tp", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "--tp 3 does not divide the model's 32 attention heads" in err
    assert "Tensor parallel" not in err

    window = make_window()
    window.change({"gpus": 3, "tp": 3})
    qtbot.waitUntil(lambda: window.banner_kind in ("error", "estimate"), timeout=10000)
    text = window.banner.text()
    assert "Tensor parallel “3” does not divide the model's 32 attention heads" in text
    assert "--tp" not in text


# Settings the window's controls allow one at a time that the core refuses, or that bring notes
# naming settings: every message the window shows of them is in its own words.
BAD_SETUPS = [
    {"gpus": 3, "tp": 3},
    {"gpus": 3, "tp": 2},
    {"gpus": 64, "pp": 64},
    {"seq": 0},
    {"seq": 200_000},
    {"rope_factor": 2.0},
    {"rope_scaling": "yarn", "rope_factor": 1.0},
    {"gpu_memory_utilization": 2.0},
    {"cpu_offload_gb": -1.0},
    {"lora_targets": ()},
    {"mtp": True, "speculative": "draft", "draft_model": "x/y"},
    {"engine": "vllm", "max_num_seqs": 512, "max_num_batched_tokens": 256},
    {"engine": "vllm", "enable_lora": True, "max_lora_rank": 7},
    {"engine": "vllm", "mtp": True},
    {"engine": "vllm", "gpus": 64, "pp": 64},
    {"engine": "vllm", "batch": 2048},
    {"engine": "sglang", "gpus": 64, "pp": 64},
    {"engine": "sglang", "seq": 131072},
    {"engine": "transformers", "kv_dtype": "q8_0"},
    {"engine": "llamacpp", "quant": "awq-int4"},
    {"mode": "training", "zero": 3},
    {"mode": "training", "method": "qlora", "precision": "fp32"},
    {"mode": "training", "method": "full", "gpus": 8, "tp": 1, "pp": 2},
    {"mode": "training", "method": "lora", "quant": "Q4_K_M"},
]


@pytest.mark.parametrize(
    "changes", BAD_SETUPS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
)
def test_no_message_the_window_shows_names_a_command_line_option(make_window, qtbot, changes):
    options = cli_options()
    window = make_window()
    shown: list[str] = []
    window.statusBar().messageChanged.connect(lambda text: shown.append(text) if text else None)
    window.change(changes)

    def answered() -> bool:
        if window.banner_kind in ("error", "estimate"):
            return True
        analysis = window.controller.analysis
        return analysis is not None and all(
            getattr(analysis.estimate.workload, k) == v
            for k, v in changes.items()
            if hasattr(analysis.estimate.workload, k)
        )

    qtbot.waitUntil(answered, timeout=10000)
    if window.banner_kind not in ("error", "estimate"):
        settle(qtbot, window)
    qtbot.wait(50)  # notices of this turn
    texts = [*shown, window.banner.text(), window.notes.text(), window.badge.toolTip()]
    texts += [label.text() for label in window.advisor.findChildren(QLabel)]
    named = {text: options_named(text, options) for text in texts}
    assert not {t: o for t, o in named.items() if o}, named
    assert window.controller.workload is not None


def test_every_workload_refusal_is_worded_for_the_window():
    options = cli_options()
    refused = 0
    for changes in [*BAD_SETUPS, {"kv_dtype": "fp9"}]:
        try:
            Workload(**changes)
        except WorkloadError as exc:
            refused += 1
            assert options_named(str(exc), options), str(exc)  # the command line's words
            assert not options_named(wording.in_window(exc), options), wording.in_window(exc)
    assert refused >= 8


def test_a_model_not_found_points_to_the_search_box_in_the_window():
    with pytest.raises(ModelNotFound) as refused:
        load_model("llama 3 nowhere")
    assert "`vramgui search 'llama 3 nowhere'` lists matching models" in str(refused.value)
    assert wording.in_window(refused.value).endswith("; the search box lists matching models")


SETUPS_WITH_NOTES = {
    "qlora-4.57": Workload(
        mode="training", method="qlora", quant="nf4", transformers_version="4.57"
    ),
    "qlora-5.0": Workload(mode="training", method="qlora", quant="nf4", transformers_version="5.0"),
    "nf4-5.0": Workload(quant="nf4", transformers_version="5.0"),
    "sglang-lora": Workload(engine="sglang", enable_lora=True, cpu_offload_gb=2.0),
}


@pytest.mark.parametrize("workload", SETUPS_WITH_NOTES.values(), ids=SETUPS_WITH_NOTES.keys())
def test_the_notes_of_an_estimate_name_the_window_s_controls(workload):
    # A mixture of experts, whose notes name the transformers release its experts follow.
    spec = load_model("qwen3-30b-a3b").spec
    notes = estimate_setup(spec, workload, [("RTX 4090", 24 * 1024**3)]).estimate.notes
    options = cli_options()
    assert any(options_named(n, options) for n in notes)  # the command line's words
    for note in notes:
        assert not options_named(wording.in_window(note), options), wording.in_window(note)


def test_an_error_kept_in_another_keeps_its_settings_for_the_window():
    # A profile whose saved workload the core refuses: the profile's error quotes the core's.
    saved = {
        "format": "vramgui.profile",
        "format_version": 1,
        "name": "odd",
        "model": {"kind": "catalog", "id": "llama-3.1-8b"},
        "workload": {"batch": 0},
    }
    with pytest.raises(ProfileError) as refused:
        Profile.from_dict(saved)
    assert "'workload': --batch must be between 1 and" in str(refused.value)
    assert "'workload': Batch must be between 1 and" in wording.in_window(refused.value)


def test_every_setting_a_message_may_name_has_its_option_and_its_label():
    options = cli_options()
    settings = [f.name for f in (*fields(Workload), *fields(LlamaCppLayout))]
    # Set on the command line by another option (--mtp, --speculative-model) or in other
    # units (--overhead-gib).
    other_options = {"speculative", "overhead_bytes"}
    for name in settings:
        assert name in wording.SETTING_LABELS, name
        flag = command_line(Setting(name), "")
        assert flag in options or name in other_options, (name, flag)
    assert command_line(Setting("draft_model", "x/y"), "x/y") == "--speculative-model x/y"
