"""`vramgui estimate`: the JSON contract, fit checks, and one clear line for bad input."""

import argparse
import json
import subprocess
import sys

import pytest

from tests.configs import LLAMA
from tests.nvml_fakes import one_gpu_probe
from vramgui.cli import build_parser, main
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.fit import TOKEN_BLOCK
from vramgui.core.units import GiB, MiB
from vramgui.core.workload import Workload


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    return path


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_document_follows_the_contract(capsys, config_path):
    code, out, _ = _run(capsys, "estimate", config_path, "--seq", 2048, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "vramgui.estimate/1"
    assert doc["model"]["parameters"] == 6_738_415_616
    assert doc["model"]["layers"] == 32
    assert doc["model"]["inventory"] == "exact"
    per_gpu = doc["per_gpu"]
    assert sum(per_gpu["components"].values()) == per_gpu["total_bytes"]
    for name in (
        "weights",
        "kv_cache",
        "activations",
        "gradients",
        "optimizer_states",
        "runtime_overhead",
    ):
        assert name in per_gpu["components"]
    assert doc["settings"]["seq"] == 2048 and doc["settings"]["mode"] == "inference"
    assert [u["name"] for u in doc["layers"]][:2] == ["embeddings", "block 0"]
    assert sum(u["bytes"] for u in doc["layers"]) == per_gpu["components"]["weights"]
    assert doc["fit"] == []
    assert doc["rules_of_thumb"]["params_x_bytes_x_1.2"] > 0


def test_table_for_people(capsys, config_path):
    code, out, _ = _run(capsys, "estimate", config_path)
    assert code == 0
    assert "total per GPU" in out and "Rules of thumb" in out


def test_the_table_says_an_approximate_estimate_is_one(capsys, tmp_path, config_path):
    unknown = tmp_path / "nova" / "config.json"
    unknown.parent.mkdir()
    unknown.write_text(
        json.dumps(dict(LLAMA, model_type="nova", architectures=["NovaForCausalLM"]))
    )
    code, out, _ = _run(capsys, "estimate", unknown)
    assert code == 0
    first, *rest = out.splitlines()
    assert first.endswith("parameters, approximate)") and "about 6,738,415,616" in first
    total = next(line for line in rest if "total per GPU" in line)
    assert "≈ " in total
    assert any(
        line.strip().startswith("approximate: part of this model was guessed") for line in rest
    )
    # An exact one claims no more than it is.
    code, out, _ = _run(capsys, "estimate", config_path)
    assert "approximate" not in out and "≈" not in out and "about" not in out.splitlines()[0]
    code, out, _ = _run(capsys, "plan", unknown, "--vram-gib", "8")
    assert code == 0 and "approximate: part of this model was guessed" in out


def test_a_plan_says_what_was_guessed_as_the_estimate_does(capsys, tmp_path):
    unknown = tmp_path / "nova" / "config.json"
    unknown.parent.mkdir()
    unknown.write_text(
        json.dumps(dict(LLAMA, model_type="nova", architectures=["NovaForCausalLM"]))
    )
    _, out, _ = _run(capsys, "estimate", unknown, "--json")
    guessed = json.loads(out)["model"]["uncertainties"]
    assert guessed
    for args in ((), ("--mode", "training")):
        code, out, _ = _run(capsys, "plan", unknown, "--vram-gib", "8", *args)
        assert code == 0 and "approximate: part of this model was guessed" in out
        for warning in guessed:
            assert f"note: {warning}" in out.splitlines()
        code, out, _ = _run(capsys, "plan", unknown, "--vram-gib", "8", *args, "--json")
        doc = json.loads(out)
        assert doc["model"]["uncertainties"] == guessed
        assert set(guessed) <= set(doc["notes"])


def test_vllm_without_a_gpu_says_its_pool_is_not_sized(capsys, config_path):
    code, out, _ = _run(capsys, "estimate", config_path, "--engine", "vllm")
    assert code == 0
    total = next(line for line in out.splitlines() if "total per GPU" in line)
    assert "pre-allocated" not in total and "no GPU to size the pool" in total
    assert "note: No GPU named, so vLLM's KV pool is not sized" in out
    code, out, _ = _run(capsys, "estimate", config_path, "--engine", "vllm", "--gpu", "H100")
    total = next(line for line in out.splitlines() if "total per GPU" in line)
    assert "(peak: serving (pre-allocated KV pool))" in total and "not sized" not in out


def test_sglang_gives_its_pool_concurrency_and_launch_fields(capsys, config_path):
    args = ("estimate", config_path, "--engine", "sglang", "--seq", 4096, "--gpu", "RTX 4090")
    code, out, _ = _run(capsys, *args, "--mem-fraction-static", 0.8, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["settings"]["engine"] == "sglang"
    assert doc["settings"]["mem-fraction-static"] == 0.8
    d = doc["details"]
    assert d["sglang_mem_fraction_static"] == 0.8 and d["sglang_starts"] and d["sglang_serves"]
    assert d["kv_pool_tokens"] > 4096
    assert d["max_concurrency"] == round(d["kv_pool_tokens"] / 4096, 2)
    assert doc["per_gpu"]["components"]["kv_cache"] == d["kv_pool_bytes"]
    (row,) = doc["fit"]
    assert row["fits"] and row["sglang"]["kv_pool_tokens"] == d["kv_pool_tokens"]
    assert "vllm" not in row
    # The table says what SGLang does at its own default fraction for the GPU.
    code, out, _ = _run(capsys, *args)
    assert "RTX 4090: SGLang starts; KV pool" in out and "--mem-fraction-static 0.847" in out
    code, out, _ = _run(capsys, *args, "--json")
    default = json.loads(out)["details"]["kv_pool_tokens"]
    assert default > d["kv_pool_tokens"]  # 0.847 of the free memory, not 0.8
    # --gpu-memory-utilization is vLLM's: SGLang's pool does not move with it.
    code, out, _ = _run(capsys, *args, "--gpu-memory-utilization", 0.5, "--json")
    assert json.loads(out)["details"]["kv_pool_tokens"] == default
    # On a 16 GB card the share does not hold the weights: SGLang's own refusal.
    code, out, _ = _run(capsys, *args[:-1], "RTX 4080", "--json")
    doc = json.loads(out)
    assert not doc["fit"][0]["fits"] and not doc["fit"][0]["sglang"]["starts"]
    assert "Not enough memory" in doc["details"]["sglang_error"]
    assert doc["per_gpu"]["total_bytes"] > 16 * GiB  # the GPU SGLang would need


def test_rules_of_thumb_say_they_are_whole_model_beside_per_gpu_figures(capsys, config_path):
    code, out, _ = _run(capsys, "estimate", config_path, "--gpus", 2, "--tp", 2)
    assert (
        code == 0 and "Rules of thumb (the whole model; the figures above are per GPU of 2):" in out
    )
    code, out, _ = _run(capsys, "estimate", config_path)
    assert "Rules of thumb:" in out


def test_fit_against_rtx_4090_and_largest_context(capsys, config_path):
    code, out, _ = _run(
        capsys, "estimate", config_path, "--gpu", "RTX 4090", "--batch", 8, "--json"
    )
    assert code == 0
    doc = json.loads(out)
    (row,) = doc["fit"]
    # what NVML reports for an RTX 4090 (24564 MiB), as a local one would be held against
    capacity = 24564 * MiB
    assert row["capacity_bytes"] == capacity
    assert row["fits"] == (doc["per_gpu"]["total_bytes"] <= capacity)
    assert row["headroom_bytes"] == capacity - doc["per_gpu"]["total_bytes"]
    best = doc["largest_fitting"]["RTX 4090"]["seq"]
    spec = spec_from_config(LLAMA)
    w = Workload(batch=8)
    assert estimate(spec, w.with_(seq=best)).total_bytes <= capacity
    assert estimate(spec, w.with_(seq=best + TOKEN_BLOCK)).total_bytes > capacity


def test_training_estimate_runs(capsys, config_path):
    code, out, _ = _run(
        capsys,
        "estimate",
        config_path,
        "--mode",
        "training",
        "--method",
        "lora",
        "--seq",
        1024,
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    assert 0 < doc["model"]["trainable_parameters"] < doc["model"]["parameters"]
    assert doc["per_gpu"]["components"]["optimizer_states"] > 0
    assert "hamel_lora" in doc["rules_of_thumb"]


def test_a_config_without_its_sizes_is_transformers_default_said_as_approximate(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama"}))
    code, out, _ = _run(capsys, "estimate", path, "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["model"]["parameters"] == 6_738_415_616  # LlamaConfig's defaults, as transformers
    assert doc["model"]["inventory"] == "approximate"
    assert any("no 'hidden_size'" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "JSON"),
        (json.dumps({**LLAMA, "hidden_size": "big"}), "hidden_size"),
        (json.dumps({**LLAMA, "num_hidden_layers": 0}), "num_hidden_layers"),
        (json.dumps({**LLAMA, "vocab_size": -5}), "vocab_size"),
        (json.dumps({**LLAMA, "hidden_size": 10**15}), "hidden_size"),
        (json.dumps([1, 2, 3]), "object"),
    ],
)
def test_bad_config_exits_2_with_one_line(capsys, tmp_path, content, needle):
    path = tmp_path / "config.json"
    path.write_text(content)
    code, out, err = _run(capsys, "estimate", path)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("vramgui: ")
    assert needle.lower() in err.lower()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--batch", "0"], "batch"),
        (["--seq", "-1"], "seq"),
        (["--seq", "99999999999"], "seq"),
        (["--quant", "q3_bogus"], "quant"),
        (["--kv-dtype", "fp8"], "kv-dtype"),
        (["--gpus", "3", "--tp", "3"], "heads"),
        (["--gpu", "Voodoo 5"], "voodoo"),
        (["--ubatch-size", "0"], "ubatch-size"),
        (["--batch-size", "-5"], "batch-size"),
        (["--seq", "1024", "--prompt", "4096"], "--prompt"),
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, config_path, args, needle):
    code, _, err = _run(capsys, "estimate", config_path, *args)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert needle.lower() in err.lower()


def test_folder_without_config_is_explained(capsys, tmp_path):
    code, _, err = _run(capsys, "estimate", tmp_path)
    assert code == 2
    assert "config.json" in err


def test_estimate_path_imports_no_qt_or_torch(config_path):
    code = (
        "import sys, vramgui.cli as c; c.main(['estimate', sys.argv[1], '--json']);"
        "bad = [m for m in ('PySide6', 'pyqtgraph', 'torch', 'transformers') if m in sys.modules];"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(config_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


# Stands in for NvmlProbe: one 24 GiB GPU with 10 GiB in use.
_FakeProbe = one_gpu_probe("NVIDIA GeForce RTX 4090", 24, 10)


def test_local_gpu_total_or_free_memory(capsys, config_path, monkeypatch):
    monkeypatch.setattr("vramgui.hardware.nvml.NvmlProbe", _FakeProbe)
    _, out, _ = _run(capsys, "estimate", config_path, "--gpu", "local", "--seq", 1024, "--json")
    total = json.loads(out)["fit"][0]
    _, out, _ = _run(
        capsys, "estimate", config_path, "--gpu", "local", "--seq", 1024, "--free-memory", "--json"
    )
    free = json.loads(out)["fit"][0]
    assert total["capacity_bytes"] == 24 * GiB and total["fits"]
    assert free["capacity_bytes"] == 14 * GiB and not free["fits"]


def test_local_gpus_missing_is_explained(capsys, config_path):
    # This machine has no NVIDIA driver: the probe's reason becomes the one-line error.
    code, _, err = _run(capsys, "estimate", config_path, "--gpu", "local")
    assert code == 2
    assert "driver" in err.lower()


def test_gpus_needed_and_cheapest(capsys, config_path):
    _, out, _ = _run(
        capsys,
        "estimate",
        config_path,
        "--gpu",
        "RTX 3060 12GB",
        "--seq",
        4096,
        "--cheapest",
        "--json",
    )
    doc = json.loads(out)
    count = doc["gpus_needed"]["RTX 3060 12GB"]
    assert count == 2
    offers = doc["cheapest"]
    assert offers and offers == sorted(offers, key=lambda o: o["total_price_usd"])


def test_a_context_past_the_models_is_refused_and_the_default_stops_at_it(capsys, config_path):
    code, _, err = _run(capsys, "estimate", config_path, "--seq", 200_000)
    assert code == 2 and "200,000 is longer than" in err and "4,096 tokens" in err
    short = dict(LLAMA, max_position_embeddings=1024)
    config_path.write_text(json.dumps(short))
    code, out, _ = _run(capsys, "estimate", config_path, "--json")
    assert code == 0 and json.loads(out)["settings"]["seq"] == 1024


def test_qwen3_past_its_config_s_context_takes_rope_scaling(capsys):
    args = ("estimate", "Qwen/Qwen3-30B-A3B", "--seq", 65536)
    code, out, err = _run(capsys, *args)
    assert code == 2 and not out
    assert "longer than Qwen/Qwen3-30B-A3B's context of 40,960 tokens" in err
    assert "--rope-scaling yarn with --rope-factor 2" in err
    # Qwen's YaRN: factor 4 of 32,768 tokens, 131,072 in all (--yarn-orig-ctx as llama.cpp).
    yarn = ("--rope-scaling", "yarn", "--rope-factor", 4, "--yarn-orig-ctx", 32768)
    code, out, err = _run(capsys, *args, *yarn, "--json")
    assert code == 0, err
    doc = json.loads(out)
    settings = doc["settings"]
    assert (settings["rope-scaling"], settings["rope-factor"]) == ("yarn", 4.0)
    assert settings["rope-original-context"] == 32768
    assert any("contexts up to 131,072 tokens" in n for n in doc["notes"])
    code, _, err = _run(capsys, "estimate", "Qwen/Qwen3-30B-A3B", "--seq", 131073, *yarn)
    assert code == 2 and "context of 131,072 tokens" in err
    code, _, err = _run(capsys, *args, "--rope-factor", 4)
    assert code == 2 and "need --rope-scaling" in err


def test_plan_puts_the_rope_scaling_on_each_launch_line(capsys):
    yarn = ("--rope-scaling", "yarn", "--rope-factor", 4, "--rope-original-context", 32768)
    code, out, err = _run(
        capsys,
        "plan",
        "Qwen/Qwen3-30B-A3B",
        "--seq",
        131072,
        *yarn,
        "--vram-gib",
        24,
        "--engine",
        "llamacpp",
        "--quant",
        "Q4_K_M",
    )
    assert code == 0, err
    assert "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768" in out
    assert '--hf-overrides \'{"rope_parameters":{"rope_type":"yarn","factor":4.0,' in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--engine", "llamacpp", "--quant", "nf4"], "GGUF type (e.g. Q4_K_M)"),
        (["--engine", "transformers", "--quant", "Q4_K_M"], "--engine llamacpp"),
        (["--engine", "vllm", "--kv-dtype", "q8_0"], "--engine llamacpp for q8_0"),
        (["--mode", "training", "--method", "qlora", "--precision", "fp32"], "QLoRA"),
    ],
)
def test_settings_no_engine_runs_are_refused_with_what_to_pick(capsys, config_path, args, needle):
    code, out, err = _run(capsys, "estimate", config_path, *args)
    assert code == 2 and not out
    assert needle in err and len(err.strip().splitlines()) == 1


def test_gguf_weights_default_to_llamacpp_and_methods_to_their_recipes(capsys, config_path):
    code, out, _ = _run(capsys, "estimate", config_path, "--quant", "Q4_K_M", "--json")
    assert code == 0 and json.loads(out)["settings"]["engine"] == "llamacpp"
    for method, precision in (("lora", "pure"), ("qlora", "mixed"), ("full", "mixed")):
        code, out, _ = _run(
            capsys, "estimate", config_path, "--mode", "training", "--method", method, "--json"
        )
        settings = json.loads(out)["settings"]
        assert settings["precision"] == precision
        assert settings["grad-checkpointing"] == (method != "full")
    code, out, _ = _run(
        capsys, "estimate", config_path, "--mode", "training", "--method", "lora",
        "--no-grad-checkpointing", "--json",
    )  # fmt: skip
    assert json.loads(out)["settings"]["grad-checkpointing"] is False


@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_every_option_says_what_it_does_and_its_default(command):
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen = sub.choices[command]
    text = " ".join(chosen.format_help().split())
    for action in chosen._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, action.dest
    assert "(default: 1)" in text  # --batch
    assert "(default: bf16)" in text  # --dtype


def test_loop_option_keeps_the_logits_and_defaults_to_trainer(capsys, config_path):
    args = ("estimate", config_path, "--mode", "training", "--seq", 1024, "--json")
    code, out, _ = _run(capsys, *args)
    assert code == 0
    trainer = json.loads(out)
    assert trainer["settings"]["loop"] == "trainer"
    code, out, _ = _run(capsys, *args, "--loop", "custom")
    assert code == 0
    custom = json.loads(out)
    assert custom["settings"]["loop"] == "custom"
    # mixed precision: accelerate's fp32 copy of batch x seq x vocab logits, kept through the step
    kept = 1 * 1024 * LLAMA["vocab_size"] * 4
    assert custom["per_gpu"]["tensor_bytes"] - trainer["per_gpu"]["tensor_bytes"] == kept
    assert custom["per_gpu"]["components"]["logits"] >= kept


def test_unknown_loop_exits_2_with_one_line(capsys, config_path):
    with pytest.raises(SystemExit) as exited:
        main(["estimate", str(config_path), "--mode", "training", "--loop", "keras"])
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert out == ""
    assert err.count("\n") == 1 and "--loop" in err and "trainer" in err


# --- checkpoints as they ship ---------------------------------------------------------------------


def test_gpt_oss_120b_is_read_as_stored_and_fits_one_h100_in_vllm(capsys):
    args = ("estimate", "openai/gpt-oss-120b", "--engine", "vllm", "--gpu", "H100 SXM")
    code, out, _ = _run(capsys, *args, "--seq", 8192, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["model"]["stored_format"] == "MXFP4 experts, bf16 elsewhere"
    assert doc["model"]["stored_quantization"] == "mxfp4"
    assert doc["settings"]["gpu-arch"] == "hopper"  # from the GPU named
    # The stored bytes, and what vLLM's Triton MXFP4 backend adds on Hopper: every expert scale
    # held twice (as loaded, and swizzled) and the expert biases in float32
    # (tests/core/test_serving.py derives it from the shapes).
    assert doc["per_gpu"]["components"]["weights"] == 65_248_815_744 + 3_795_517_440
    assert doc["fit"][0]["fits"]
    code, out, _ = _run(capsys, *args, "--seq", 8192)
    assert "stored as MXFP4 experts, bf16 elsewhere" in out
    assert "H100 SXM: vLLM starts" in out


@pytest.mark.parametrize("quant", [(), ("--quant", "MXFP4"), ("--quant", "MXFP4_MOE")])
def test_gpt_oss_with_llama_cpp_is_its_mxfp4_gguf(capsys, quant):
    args = ("estimate", "openai/gpt-oss-120b", "--engine", "llamacpp", *quant, "--json")
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["quant"] == "MXFP4_MOE"
    # The ggml-org GGUF's 59.02 GiB (tests/core/test_serving.py): on the GPU, and its
    # embeddings on the host.
    weights = doc["per_gpu"]["components"]["weights"] + doc["host_bytes"]
    assert weights / 1024**3 == pytest.approx(59.02, abs=0.005)
    assert not any("quantizing the original" in n for n in doc["notes"])
    assert "does not run" not in out and "GGUF files only" not in out


def test_llama_cpp_refuses_other_formats_but_never_says_it_cannot_run_mxfp4(capsys):
    code, _, err = _run(capsys, "estimate", "openai/gpt-oss-120b", "--engine", "llamacpp")
    assert code == 0, err
    code, _, err = _run(capsys, "estimate", "qwen3-32b-fp8", "--engine", "llamacpp")
    assert code == 2 and "GGUF files only, not this checkpoint, stored as fp8" in err


@pytest.mark.parametrize(("quant", "bits"), [("mxfp4", 4.25), ("nvfp4", 4.5), ("w4a16", 4.125)])
def test_new_quant_names_work_on_a_16_bit_model(capsys, config_path, quant, bits):
    code, out, _ = _run(
        capsys, "estimate", config_path, "--quant", quant, "--engine", "vllm", "--json"
    )
    assert code == 0, out
    doc = json.loads(out)
    assert doc["settings"]["quant"] == quant
    plain = json.loads(_run(capsys, "estimate", config_path, "--engine", "vllm", "--json")[1])
    ratio = doc["per_gpu"]["components"]["weights"] / plain["per_gpu"]["components"]["weights"]
    assert ratio < bits / 16 + 0.05


def test_nvfp4_goes_to_vllm_and_transformers_keeps_mxfp4_for_gpt_oss_only(capsys, config_path):
    doc = json.loads(_run(capsys, "estimate", config_path, "--quant", "nvfp4", "--json")[1])
    assert doc["settings"]["engine"] == "vllm"  # transformers loads no NVFP4 checkpoint
    args = ("estimate", config_path, "--quant", "mxfp4", "--json")
    doc = json.loads(_run(capsys, *args, "--engine", "transformers")[1])
    assert any("gpt-oss's experts only" in n for n in doc["notes"])


def test_quant_help_lists_every_scheme(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # no line wrapped inside a name
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    out = " ".join(capsys.readouterr()[0].split())
    for name in ("mxfp4", "nvfp4", "fp8-block", "fp8-tensor", "w4a16", "w8a8", "awq-int4"):
        assert name in out
    for name in ("gptq-int4", "nf4", "int8", "--gpu-arch", "--mtp"):
        assert name in out


def test_an_older_gpu_makes_transformers_dequantize_and_says_why(capsys):
    args = ("estimate", "deepseek-v3.2", "--engine", "transformers", "--json")
    hopper = json.loads(_run(capsys, *args, "--gpu", "H100 SXM")[1])
    ampere = json.loads(_run(capsys, *args, "--gpu", "A100 SXM 80GB")[1])
    w_h = hopper["per_gpu"]["components"]["weights"]
    w_a = ampere["per_gpu"]["components"]["weights"]
    assert w_a > 1.8 * w_h
    assert any("8.9" in n and "dequantizes" in n for n in ampere["notes"])


def test_mtp_layers_are_said_and_counted_on_request(capsys):
    args = ("estimate", "deepseek-v3.2", "--engine", "vllm", "--gpu-arch", "hopper", "--json")
    plain = json.loads(_run(capsys, *args)[1])
    loaded = json.loads(_run(capsys, *args, "--mtp")[1])
    assert any("not counted" in n for n in plain["notes"])
    assert loaded["settings"]["mtp"] is True
    grown = loaded["per_gpu"]["components"]["weights"] - plain["per_gpu"]["components"]["weights"]
    assert grown > 10e9


def test_a_vision_tower_left_out_of_vllms_profile_leaves_upper_bounds(capsys):
    # LFM2.5-VL's SigLIP2 tower: vLLM profiles it before the text, the estimate does not model it.
    code, out, _ = _run(
        capsys, "estimate", "lfm2.5-vl-1.6b", "--engine", "vllm", "--gpu", "H100", "--seq", 32768
    )
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("H100"))
    assert "vLLM starts unless the profile of its vision tower (not counted) needs more" in line
    assert "KV pool at most " in line and "largest --max-model-len at most" in line
    assert "note: This model has a vision tower." in out


def test_prompt_batch_sizes_and_release_are_settings_of_the_document(capsys, config_path):
    code, out, _ = _run(capsys, "estimate", config_path, "--seq", 4096, "--prompt", 256, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["settings"]["prompt"] == 256
    assert doc["settings"]["transformers-version"] == "5.0"
    assert doc["per_gpu"]["phase"].startswith("generation")
    code, out, _ = _run(
        capsys, "estimate", config_path, "--engine", "llamacpp", "--ubatch-size", 1024, "--json"
    )
    doc = json.loads(out)
    assert (doc["settings"]["ubatch-size"], doc["settings"]["batch-size"]) == (1024, 2048)


def test_the_table_names_the_software_it_follows(capsys, config_path):
    _, out, _ = _run(capsys, "estimate", config_path, "--seq", 4096, "--prompt", 512)
    assert "transformers 5.0, prompt 512" in out.splitlines()[1]
    _, out, _ = _run(capsys, "estimate", config_path, "--engine", "llamacpp", "--ubatch-size", 256)
    assert "llamacpp -ub 256 -b 2048" in out.splitlines()[1]
    args = ("--mode", "training", "--method", "lora", "--transformers-version", "4.46")
    _, out, _ = _run(capsys, "estimate", config_path, *args)
    assert out.splitlines()[1].endswith("transformers 4.46")


def test_a_vllm_refusal_line_says_how_more_gpus_shard_and_what_it_lacks(capsys):
    args = ("estimate", "openai/gpt-oss-120b", "--engine", "vllm", "--gpu", "H100 SXM")
    code, out, _ = _run(capsys, *args, "--seq", 131072)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("H100 SXM: vLLM would not start"))
    # Was "...; 2 of them fit (79.65 GiB, headroom -0.85 GiB)": which 2, and -0.85 of what?
    assert "of them fit" not in line and "headroom -" not in line
    assert "; 2 GPUs with --tensor-parallel-size 2 would start it" in line
    assert "short of vLLM's start-up check" in line
    shown = [x for x in out.splitlines() if x.startswith("advice: --max-num-seqs 64 (fits; ")]
    assert shown and "KV pool" in shown[0] and "tokens), " in shown[0]
    code, out, _ = _run(capsys, *args, "--seq", 131072, "--json")
    doc = json.loads(out)
    assert doc["gpus_needed"] == {"H100 SXM": 2} and doc["fit"][0]["headroom_bytes"] < 0
    # Each move by the pool vLLM starts with: no longer one figure for all of them.
    fitting = [a for a in doc["advice"] if a["fits"]]
    assert len(fitting) >= 3 and all(a["kv_pool_tokens"] for a in fitting)
    assert len({a["saves_bytes"] for a in fitting}) == len(fitting)


def test_the_serving_line_words_what_bounds_decoding(capsys):
    args = ("estimate", "meta-llama/Llama-3.1-70B", "--engine", "llamacpp", "--quant", "Q4_K_M")
    args += ("--gpu", "RTX 4090", "--seq", 8192)
    code, out, _ = _run(capsys, *args)
    assert code == 0
    serving = next(x for x in out.splitlines() if x.startswith("serving on"))
    assert "(host-memory-bound decode at full context" in serving  # was "cpu_memory-bound"
    code, out, _ = _run(capsys, *args, "--json")
    assert json.loads(out)["serving"]["bound"] == "cpu_memory"  # the JSON keeps the value


def test_a_context_too_long_for_the_gpu_names_the_largest_that_fits(capsys):
    """Llama 3.1 8B at 64k on an RTX 4090: no batch fits, the largest context still does."""
    code, out, _ = _run(capsys, "estimate", "llama-3.1-8b", "--seq", 65536, "--gpu", "RTX 4090")
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.startswith("RTX 4090:")]
    assert "does not fit; largest context " in line and "largest batch" not in line
