"""RoPE scaling: the longest context as the engines derive it, the setting and its launch lines."""

from __future__ import annotations

import json
import shlex

import pytest

from vramgui.core import launch, rope
from vramgui.core.errors import ConfigError, WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.fit import largest_fitting
from vramgui.core.model import RopeScaling
from vramgui.core.offload import plan_llamacpp
from vramgui.core.units import GiB
from vramgui.core.vllm.startup import rotary_cache_bytes
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find

QWEN3_30B = find("qwen3-30b-a3b").spec()  # max_position_embeddings 40,960, no rope_scaling
# Qwen's model card (huggingface.co/Qwen/Qwen3-30B-A3B): 32,768 tokens natively, 131,072 with
# YaRN (factor 4 of 32,768).
QWEN_YARN = {"rope_scaling": "yarn", "rope_factor": 4.0, "rope_original_context": 32768}


def test_a_config_s_own_scaling_is_read_in_each_of_its_spellings():
    base = {"model_type": "llama", "num_hidden_layers": 2, "max_position_embeddings": 32768}
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert spec_from_config({**base, "rope_scaling": yarn}).facts.rope_scaling == RopeScaling(
        "yarn", 4.0, 32768
    )
    # transformers 5's rope_parameters, the legacy "type" key, a text_config's
    parameters = spec_from_config({**base, "rope_parameters": {"rope_type": "linear", "factor": 2}})
    assert parameters.facts.rope_scaling == RopeScaling("linear", 2.0, None)
    legacy = rope.config_scaling({"rope_scaling": {"type": "su", "factor": 1}})
    assert legacy is not None and legacy.kind == "longrope"
    assert rope.config_scaling({"text_config": {"rope_scaling": yarn}}) == RopeScaling(
        "yarn", 4.0, 32768
    )
    assert rope.config_scaling({"rope_parameters": {"rope_type": "default"}}) is None
    assert spec_from_config(base).facts.rope_scaling is None
    assert rope.config_theta({"rope_theta": 1e6}) == 1e6
    assert rope.config_theta({"rope_parameters": {"rope_theta": 5e5}}) == 5e5
    assert rope.config_theta({}) is None
    with pytest.raises(ConfigError, match="factor"):
        rope.config_scaling({"rope_scaling": {"rope_type": "yarn", "factor": "four"}})


@pytest.mark.parametrize(
    ("name", "limit"),
    [
        # vLLM 0.10.1.1 logs "Using max model len 131072" for gpt-oss-120b (its yarn: 32 x
        # 4,096; github.com/EuroEval/EuroEval/issues/1120)
        ("gpt-oss-120b", 131072),
        ("llama-3.1-8b", 131072),  # llama3 scaling: max_position_embeddings is the scaled one
        ("deepseek-v3", 163840),  # yarn 40 x 4,096
        ("qwen3-30b-a3b", 40960),  # none
    ],
)
def test_a_config_s_own_scaling_is_honoured_as_vllm_derives_the_length(name, limit):
    spec = find(name).spec()
    assert rope.context_limit(spec.facts, Workload()) == limit


def test_the_user_s_scaling_lifts_the_limit_as_vllm_derives_it():
    facts = QWEN3_30B.facts
    assert rope.context_limit(facts, Workload(**QWEN_YARN)) == 131072
    # The original context defaults to the config's: 4 x 40,960.
    assert rope.context_limit(facts, Workload(rope_scaling="yarn", rope_factor=4)) == 163840
    # Linear and dynamic NTK stretch max_position_embeddings.
    assert rope.context_limit(facts, Workload(rope_scaling="linear", rope_factor=2)) == 81920
    assert rope.context_limit(facts, Workload(rope_scaling="dynamic", rope_factor=1.5)) == 61440
    # The user's scaling replaces the config's, its original context kept unless set.
    gpt_oss = find("gpt-oss-120b").spec().facts
    assert rope.context_limit(gpt_oss, Workload(rope_scaling="yarn", rope_factor=64)) == 262144


def test_a_context_past_the_limit_is_refused_with_the_setting_named():
    with pytest.raises(rope.ContextTooLong) as refused:
        rope.check_context(QWEN3_30B.name, QWEN3_30B.facts, Workload(seq=65536))
    message = str(refused.value)
    assert "longer than Qwen/Qwen3-30B-A3B's context of 40,960 tokens" in message
    assert "--rope-scaling yarn with --rope-factor 2" in message
    assert (refused.value.limit, refused.value.factor) == (40960, 2)
    rope.check_context(QWEN3_30B.name, QWEN3_30B.facts, Workload(seq=131072, **QWEN_YARN))
    with pytest.raises(rope.ContextTooLong, match="context of 131,072 tokens"):
        rope.check_context(QWEN3_30B.name, QWEN3_30B.facts, Workload(seq=131073, **QWEN_YARN))


def test_rope_scaling_of_a_model_without_rotary_embeddings_is_refused():
    gpt2 = spec_from_config({"model_type": "gpt2", "n_layer": 2})
    scaled = Workload(rope_scaling="linear", rope_factor=2)
    with pytest.raises(WorkloadError, match="no rotary position embeddings"):
        rope.check_context(gpt2.name, gpt2.facts, scaled)
    assert rope.context_limit(gpt2.facts, scaled) == gpt2.facts.max_position_embeddings


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"rope_factor": 4.0}, "need --rope-scaling"),
        ({"rope_original_context": 32768}, "need --rope-scaling"),
        ({"rope_scaling": "yarn"}, "needs --rope-factor above 1"),
        ({"rope_scaling": "yarn", "rope_factor": 0.5}, "from 1 to"),
        ({"rope_scaling": "ntk"}, "--rope-scaling must be one of"),
    ],
)
def test_bad_rope_settings_are_refused(settings, needle):
    with pytest.raises(WorkloadError, match=needle):
        Workload(**settings)


def test_the_setting_is_kept_in_the_workload_s_document():
    w = Workload(seq=131072, **QWEN_YARN)
    doc = w.to_dict()
    assert (doc["rope-scaling"], doc["rope-factor"], doc["rope-original-context"]) == (
        "yarn",
        4.0,
        32768,
    )
    assert Workload.from_dict(doc) == w


def test_vllm_s_rotary_table_covers_the_scaled_length():
    # cos_sin_cache: positions x rotary dim (128) in bf16
    assert rotary_cache_bytes(QWEN3_30B, Workload()) == 40960 * 128 * 2
    assert rotary_cache_bytes(QWEN3_30B, Workload(**QWEN_YARN)) == 131072 * 128 * 2


def test_vllm_s_longest_length_goes_past_the_config_s_with_the_scaling():
    plain = Workload(engine="vllm", seq=8192)
    scaled = plain.with_(**QWEN_YARN)
    assert largest_fitting(QWEN3_30B, plain, 80 * GiB, "seq", gpu_name="H100 SXM") == 40960
    longest = largest_fitting(QWEN3_30B, scaled, 80 * GiB, "seq", gpu_name="H100 SXM")
    assert longest is not None and longest > 40960


def test_the_estimate_says_what_the_scaling_does():
    notes = " ".join(estimate(QWEN3_30B, Workload(seq=65536, **QWEN_YARN)).notes)
    assert "RoPE scaling yarn x4 of 32,768 tokens: contexts up to 131,072 tokens" in notes
    cpp = " ".join(
        estimate(
            QWEN3_30B, Workload(engine="llamacpp", quant="Q4_K_M", seq=65536, **QWEN_YARN)
        ).notes
    )
    assert "--override-kv <arch>.context_length=int:65536" in cpp
    assert "RoPE" not in " ".join(estimate(QWEN3_30B, Workload()).notes)


def test_each_engine_s_launch_line_carries_the_scaling():
    w = Workload(engine="llamacpp", quant="Q4_K_M", seq=131072, **QWEN_YARN)
    placement = plan_llamacpp(QWEN3_30B, w, [24 * GiB])
    lines = {s.engine: s for s in launch.launch_settings(QWEN3_30B, w, placement)}
    assert "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768" in lines["llama.cpp"].text
    overrides = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    # vLLM since transformers 5: rope_parameters, the rotary base repeated (docs.vllm.ai
    # features/context_extension); up to 0.11, transformers 4's rope_scaling.
    vllm = shlex.split(lines["vLLM"].text)
    assert json.loads(vllm[vllm.index("--hf-overrides") + 1]) == {
        "rope_parameters": {**overrides, "rope_theta": 1000000}
    }
    assert vllm[vllm.index("--max-model-len") + 1] == "131072"
    older = shlex.split(launch.vllm_settings(QWEN3_30B, w.with_(vllm_version="0.11")).text)
    assert json.loads(older[older.index("--hf-overrides") + 1]) == {"rope_scaling": overrides}
    assert any("set no RoPE scaling" in n for n in lines["Ollama"].notes)
    sglang = shlex.split(launch.sglang_settings(QWEN3_30B, w.with_(engine="sglang")).text)
    assert json.loads(sglang[sglang.index("--json-model-override-args") + 1]) == {
        "rope_scaling": overrides
    }
    linear = Workload(engine="llamacpp", quant="Q4_K_M", rope_scaling="linear", rope_factor=2)
    cpp = launch.llamacpp_settings(QWEN3_30B, plan_llamacpp(QWEN3_30B, linear, [24 * GiB]))
    assert "--rope-scaling linear --rope-scale 2" in cpp.text
    assert "--yarn-orig-ctx" not in cpp.text
    # Without a scaling set, no line names one (the config's own is the engines' to read).
    plain = launch.vllm_settings(QWEN3_30B, Workload(engine="vllm"))
    assert "--hf-overrides" not in plain.text


def test_transformers_takes_the_scaling_in_from_pretrained():
    from vramgui.core.offload import plan_accelerate

    w = Workload(seq=65536, **QWEN_YARN)
    settings = launch.accelerate_settings(QWEN3_30B, plan_accelerate(QWEN3_30B, w, 80 * GiB))
    call = next(n for n in settings.notes if "from_pretrained" in n)
    assert (
        "rope_parameters={'rope_type': 'yarn', 'factor': 4.0, "
        "'original_max_position_embeddings': 32768, 'rope_theta': 1000000}" in call
    )
