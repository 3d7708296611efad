"""The measurement harness: fake runs agree with real CPU runs on small models.

Skipped where torch is not installed (CI installs no torch).
"""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from benchmarks.harness.cases import INFERENCE_CASES, TRAINING_CASES, load_config  # noqa: E402
from vramgui.measure.autocast import CudaAutocastRules  # noqa: E402
from vramgui.measure.harness import (  # noqa: E402
    Settings,
    UnsupportedSettingError,
    build_model,
    measure,
)
from vramgui.measure.live_bytes import LiveBytes  # noqa: E402

TINY = json.loads(
    (Path(__file__).parents[1] / "data" / "families" / "tiny_configs.json").read_text()
)

pytestmark = [
    # peft asks transformers for the deprecated is_gradient_checkpointing
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
]


def test_views_count_once_and_freed_storage_is_subtracted():
    with LiveBytes() as counter:
        x = torch.empty(1000, dtype=torch.float32)
        view = x[10:]
        y = x + 1
        assert counter.current_bytes == 8000
        del x, view, y
    assert counter.current_bytes == 0
    assert counter.peak_bytes == 8000
    assert counter.peak_breakdown["other"] == 8000


def test_reclassified_storage_moves_between_categories():
    weight = torch.empty(256)
    with LiveBytes() as counter:
        counter.classify([weight], "parameters")
        grad = weight * 2
        counter.classify([grad], "gradients")
        assert counter.category_bytes("gradients") == 1024
        assert counter.category_bytes("other") == 0
        assert counter.current_bytes == 2048


@pytest.mark.parametrize(
    ("tiny", "settings"),
    [
        ("llama-gqa", {"batch": 2, "seq": 24, "dtype": "bf16", "attention": "sdpa"}),
        ("mistral-sliding", {"batch": 2, "seq": 24, "dtype": "fp32", "attention": "eager"}),
        ("bert-mlm", {"batch": 3, "seq": 16, "dtype": "fp16", "attention": "sdpa"}),
        ("llama-gqa", {"mode": "training", "batch": 2, "seq": 24, "dtype": "bf16"}),
        (
            "gpt2-tied",
            {
                "mode": "training",
                "batch": 2,
                "seq": 16,
                "attention": "eager",
                "precision": "fp32",
                "dtype": "fp32",
                "optimizer": "sgd",
                "grad-checkpointing": True,
            },
        ),
        (
            "llama-gqa",
            {
                "mode": "training",
                "batch": 2,
                "seq": 16,
                "dtype": "bf16",
                "precision": "pure",
                "method": "lora",
                "lora-targets": "q_proj,v_proj",
                "optimizer": "adamw-fused",
            },
        ),
        ("qwen2_moe-shared", {"batch": 2, "seq": 16, "dtype": "bf16"}),
        (
            "llama-gqa",
            {"mode": "training", "batch": 2, "seq": 24, "dtype": "fp16", "loop": "custom"},
        ),
    ],
)
def test_fake_run_matches_real_cpu_run_to_the_byte(tiny, settings):
    fake = measure(TINY[tiny], {**settings, "fake": True})
    real = measure(TINY[tiny], {**settings, "fake": False})
    assert fake["peak_bytes"] == real["peak_bytes"]
    assert fake["phase"] == real["phase"]
    assert fake["weights_bytes"] == real["weights_bytes"]
    assert fake["breakdown_at_peak"] == real["breakdown_at_peak"]


def test_generate_steps_peak_equals_model_generate():
    """The harness's prefill + decode is what model.generate(max_new_tokens=2) allocates."""
    config = TINY["llama-gqa"]
    settings = Settings(batch=2, seq=24, dtype="fp32", attention="sdpa", fake=False)
    model = build_model(config, settings).eval()
    # no early stop: one prefill and exactly one decode step
    model.generation_config.eos_token_id = None
    counter = LiveBytes()
    counter.classify(model.parameters(), "parameters")
    counter.classify(model.buffers(), "parameters")
    with counter:
        input_ids = torch.zeros((2, 24), dtype=torch.long)
        attention_mask = torch.ones_like(input_ids)
        model.generate(
            input_ids,
            attention_mask=attention_mask,
            max_new_tokens=2,
            do_sample=False,
            pad_token_id=0,
        )
    harness = measure(config, {"batch": 2, "seq": 24, "dtype": "fp32", "fake": False})
    # generate also holds two 8-byte scalars of its own bookkeeping at the peak
    assert 0 <= counter.peak_bytes - harness["peak_bytes"] <= 16


def test_breakdown_sums_to_peak_and_names_the_phase():
    result = measure(
        TINY["llama-gqa"], {"mode": "training", "batch": 2, "seq": 16, "dtype": "fp16"}
    )
    assert sum(result["breakdown_at_peak"].values()) == result["peak_bytes"]
    assert result["phase"] in {"forward", "backward", "optimizer step"}
    # AdamW keeps two fp32 states per trainable parameter
    params = result["trainable_parameters"]
    assert result["phase_peaks"]["optimizer step"]["breakdown"]["optimizer_states"] >= 8 * params


@pytest.mark.parametrize(
    ("settings", "bytes_per_logit"),
    [
        ({"dtype": "bf16"}, 4),  # accelerate converts mixed precision's outputs to fp32
        ({"dtype": "bf16", "precision": "pure"}, 2),
    ],
)
def test_the_custom_loop_keeps_the_logits_in_every_phase(settings, bytes_per_logit):
    config = TINY["llama-gqa"]
    run = {"mode": "training", "batch": 2, "seq": 24, "fake": False, **settings}
    trainer = measure(config, run)
    custom = measure(config, {**run, "loop": "custom"})
    logits = 2 * 24 * config["vocab_size"] * bytes_per_logit
    for phase, peak in trainer["phase_peaks"].items():
        extra = custom["phase_peaks"][phase]["peak_bytes"] - peak["peak_bytes"]
        # the loop's `loss` variable (a 4-byte scalar) lives on beside the outputs
        assert logits <= extra <= logits + 4, phase


def test_unknown_loops_are_refused():
    with pytest.raises(UnsupportedSettingError, match="loop"):
        measure(TINY["llama-gqa"], {"mode": "training", "loop": "keras"})


def test_tied_embeddings_count_once():
    tied = measure(TINY["llama-tied-bias-headdim"], {"dtype": "fp32", "seq": 8})
    assert tied["weights_bytes"] >= 4 * tied["parameters"]
    assert tied["weights_bytes"] < 4 * tied["parameters"] + 4096  # buffers only


def test_unsupported_settings_are_refused():
    with pytest.raises(UnsupportedSettingError):
        measure(TINY["llama-gqa"], {"optimizer": "lion"})
    with pytest.raises(UnsupportedSettingError):
        measure(TINY["llama-gqa"], {"attention": "flash"})


def test_every_case_has_a_config_and_valid_settings():
    for case in (*INFERENCE_CASES, *TRAINING_CASES):
        assert load_config(case.model)["model_type"]
        Settings.from_dict(case.settings)
    assert len(INFERENCE_CASES) >= 26
    assert len(TRAINING_CASES) >= 40
    assert len({case.id for case in (*INFERENCE_CASES, *TRAINING_CASES)}) == (
        len(INFERENCE_CASES) + len(TRAINING_CASES)
    )


def test_cuda_autocast_rules_upcast_what_cuda_autocast_upcasts():
    x = torch.ones(4, 8, dtype=torch.bfloat16)
    with CudaAutocastRules():
        assert torch.softmax(x, -1).dtype == torch.bfloat16  # autocast off: untouched
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.nn.functional.softmax(x, dim=-1).dtype == torch.float32
            assert x.softmax(-1, dtype=torch.bfloat16).dtype == torch.bfloat16
            assert torch.pow(x, 3.0).dtype == torch.float32
            assert (x**2).dtype == torch.float32
            assert torch.tanh(x).dtype == torch.bfloat16
            assert torch.nn.functional.linear(x.float(), torch.ones(2, 8)).dtype == torch.bfloat16
