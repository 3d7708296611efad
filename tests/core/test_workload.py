"""Which settings each inference engine runs, and how a change of engine carries the others over."""

from __future__ import annotations

from dataclasses import fields

import pytest

from vramgui.core import storage
from vramgui.core.errors import WorkloadError
from vramgui.core.scopes import SCOPES
from vramgui.core.training.weights import kbit_upcast
from vramgui.core.workload import (
    ENGINES,
    METHOD_RECIPES,
    METHODS,
    MODES,
    EngineConflictError,
    Workload,
    adjusted,
    default_engine,
    engine_conflicts,
    engine_quant,
)


@pytest.mark.parametrize(
    ("engine", "quant", "instead"),
    [
        ("llamacpp", "nf4", "--engine transformers"),
        ("llamacpp", "awq-int4", "Q4_K_M"),
        ("llamacpp", "gptq-int4", "--quant"),
        ("llamacpp", "fp8", "--engine vllm"),
        ("transformers", "Q4_K_M", "--engine llamacpp"),
    ],
)
def test_an_engine_refuses_what_it_cannot_run_and_names_what_to_pick(engine, quant, instead):
    with pytest.raises(EngineConflictError, match=instead) as refused:
        Workload(engine=engine, quant=quant)
    assert refused.value.conflict.value == quant


@pytest.mark.parametrize(
    ("engine", "kv_dtype"),
    [("transformers", "fp8"), ("transformers", "q8_0"), ("vllm", "q4_0"), ("llamacpp", "fp8")],
)
def test_kv_cache_types_belong_to_their_engines(engine, kv_dtype):
    with pytest.raises(EngineConflictError, match="KV cache"):
        Workload(engine=engine, kv_dtype=kv_dtype)


def test_every_engine_runs_what_it_is_known_for():
    for engine, quant, kv in (
        ("llamacpp", "Q4_K_M", "q8_0"),
        ("llamacpp", "none", "auto"),
        ("vllm", "Q4_K_M", "fp8"),
        ("vllm", "awq-int4", "auto"),
        ("transformers", "nf4", "bf16"),
        ("transformers", "gptq-int4", "auto"),
    ):
        assert engine_conflicts("inference", engine, quant, kv) == ()
    # Training runs no inference engine: the hidden engine choice does not matter.
    Workload(mode="training", method="qlora", quant="nf4", engine="llamacpp")


def test_a_gguf_checkpoint_is_refused_where_transformers_would_dequantize_it():
    conflicts = engine_conflicts("inference", "transformers", "none", "auto", stored="Q4_K_M")
    assert [c.setting for c in conflicts] == ["stored"]
    with pytest.raises(EngineConflictError, match="this GGUF file"):
        Workload().check_checkpoint("Q4_K_M")
    Workload(engine="llamacpp").check_checkpoint("Q4_K_M")
    with pytest.raises(EngineConflictError, match="convert the original"):
        Workload(engine="llamacpp").check_checkpoint("awq-int4")


@pytest.mark.parametrize("quant", ["mxfp4", "MXFP4", "MXFP4_MOE"])
def test_llama_cpp_runs_mxfp4_as_its_mxfp4_moe_gguf(quant):
    # ggml has an MXFP4 type; llama.cpp's MXFP4 files are the MXFP4_MOE mix, MXFP4 its alias.
    assert Workload(engine="llamacpp", quant=quant).quant == "MXFP4_MOE"
    assert engine_quant("llamacpp", quant) == "MXFP4_MOE"
    assert Workload(engine="vllm", quant="mxfp4").quant == "mxfp4"  # vLLM runs the format itself


def test_an_mxfp4_checkpoint_as_stored_is_the_mxfp4_moe_gguf_under_llama_cpp():
    assert engine_quant("llamacpp", "none", stored="mxfp4") == "MXFP4_MOE"
    assert engine_quant("transformers", "none", stored="mxfp4") == "none"
    assert engine_quant("llamacpp", "none", stored="awq-int4") == "none"  # refused, not mapped
    assert storage.keeps_stored("MXFP4_MOE", "mxfp4")
    assert not storage.keeps_stored("Q4_K_M", "mxfp4")
    assert not storage.keeps_stored("MXFP4_MOE", None)
    # The window's "As stored" with llama.cpp, and picking llama.cpp while "As stored".
    for before, changes in (
        (Workload(engine="llamacpp"), {"quant": "none"}),
        (Workload(), {"engine": "llamacpp"}),
    ):
        w, resets = adjusted(before, changes, stored="mxfp4")
        assert (w.engine, w.quant) == ("llamacpp", "MXFP4_MOE")
        assert [(r.setting, r.old, r.new, r.gguf) for r in resets] == [
            ("quant", "none", "MXFP4_MOE", True)
        ]
    # A bare "none" on llama.cpp is never refused as "llama.cpp does not run MXFP4".
    with pytest.raises(EngineConflictError) as refused:
        Workload(engine="llamacpp").check_checkpoint("mxfp4")
    assert "--quant MXFP4_MOE" in str(refused.value)
    assert "GGUF files only" not in str(refused.value)


def test_the_setting_just_picked_switches_the_engine():
    w, resets = adjusted(Workload(engine="llamacpp", kv_dtype="q8_0"), {"quant": "nf4"})
    assert (w.engine, w.quant, w.kv_dtype) == ("transformers", "nf4", "auto")
    assert [(r.setting, r.old, r.new) for r in resets] == [
        ("engine", "llamacpp", "transformers"),
        ("kv_dtype", "q8_0", "auto"),
    ]
    w, resets = adjusted(Workload(), {"quant": "Q4_K_M"})
    assert w.engine == "llamacpp" and [r.setting for r in resets] == ["engine"]


def test_a_new_engine_resets_what_does_not_carry_over():
    w, resets = adjusted(Workload(quant="nf4"), {"engine": "llamacpp"})
    assert (w.engine, w.quant) == ("llamacpp", "none")
    assert [(r.setting, r.old, r.new) for r in resets] == [("quant", "nf4", "none")]
    w, resets = adjusted(Workload(engine="llamacpp", kv_dtype="q4_0"), {"engine": "vllm"})
    assert w.kv_dtype == "auto" and resets[0].conflict.engines == ("llamacpp",)
    # Back to inference from QLoRA on llama.cpp: the 4-bit bitsandbytes base does not carry over.
    trained = Workload(mode="training", method="qlora", quant="nf4", engine="llamacpp")
    w, resets = adjusted(trained, {"mode": "inference"})
    assert w.quant == "none" and resets[0].setting == "quant"
    assert adjusted(Workload(), {"batch": 4}) == (Workload(batch=4), ())


def test_a_checkpoint_stored_as_gguf_moves_the_engine_or_refuses_the_users_own_choice():
    w, resets = adjusted(Workload(), {}, stored="Q4_K_M")
    assert w.engine == "llamacpp" and resets[0].conflict.setting == "stored"
    with pytest.raises(EngineConflictError):
        adjusted(Workload(engine="llamacpp"), {"engine": "transformers"}, stored="Q4_K_M")


def test_default_engine_runs_the_quantization_as_it_is():
    assert default_engine("none") == "transformers"
    assert default_engine("Q4_K_M") == "llamacpp"
    assert default_engine("none", stored="Q4_K_M") == "llamacpp"
    assert default_engine("nf4") == "transformers"
    assert default_engine("none", stored="some-new-scheme") == "transformers"


def test_qlora_precision_is_its_recipes():
    with pytest.raises(WorkloadError, match="QLoRA"):
        Workload(mode="training", method="qlora", quant="nf4", precision="fp32")
    # a script that never calls prepare_model_for_kbit_training keeps the rest in --dtype
    pure = Workload(mode="training", method="qlora", quant="nf4", precision="pure")
    assert not kbit_upcast(pure)
    assert kbit_upcast(pure.with_(precision="mixed"))
    assert not kbit_upcast(pure.with_(precision="mixed", gpus=2, fsdp=True))
    recipe = METHOD_RECIPES["qlora"]
    w = Workload(mode="training", method="qlora", **recipe)
    assert w.grad_checkpointing and w.quant == "nf4" and w.precision == "mixed"
    assert METHOD_RECIPES["lora"]["grad_checkpointing"]


def test_training_takes_the_base_its_method_trains_on():
    served = Workload(quant="Q4_K_M", engine="llamacpp", method="qlora")
    w, resets = adjusted(served, {"mode": "training"})
    assert w.quant == "nf4" and (resets[0].old, resets[0].new) == ("Q4_K_M", "nf4")
    assert resets[0].conflict is None
    w, resets = adjusted(served.with_(method="lora"), {"mode": "training"})
    assert w.quant == "none" and resets[0].new == "none"
    # A 4-bit choice QLoRA takes stays; so does a quantization the user has just picked.
    fp4 = Workload(mode="training", method="qlora", quant="fp4")
    assert adjusted(fp4, {"batch": 2})[0].quant == "fp4"


def test_every_setting_has_one_scope_of_known_modes_engines_and_methods():
    assert set(SCOPES) == {f.name for f in fields(Workload)}
    for name, scope in SCOPES.items():
        assert scope.modes is None or scope.modes <= set(MODES), name
        assert scope.engines is None or scope.engines <= set(ENGINES), name
        assert scope.methods is None or scope.methods <= set(METHODS), name


def test_another_engine_s_settings_do_not_apply():
    transformers = Workload().unused()
    assert {"gpu_memory_utilization", "max_num_seqs", "ubatch_size", "batch_size"} <= transformers
    assert {"mem_fraction_static", "sglang_version", "vllm_version"} <= transformers
    assert "prompt" not in transformers and "transformers_version" not in transformers
    llamacpp = Workload(engine="llamacpp", quant="Q4_K_M").unused()
    assert "ubatch_size" not in llamacpp and "rope_scaling" not in llamacpp
    assert {"prompt", "transformers_version", "gpu_memory_utilization"} <= llamacpp
    # A training step runs transformers' model code: its release applies, no engine's share.
    training = Workload(mode="training").unused()
    assert "transformers_version" not in training and "engine" in training
    assert "gpu_memory_utilization" in training
    left = Workload(engine="vllm", gpu_memory_utilization=0.5).with_(engine="transformers")
    assert left.applicable().gpu_memory_utilization == Workload().gpu_memory_utilization
