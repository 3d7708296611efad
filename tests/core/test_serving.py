"""What each engine does with a checkpoint's format on the GPU picked, and MTP layers."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from vramgui.core import dtypes, launch, serving, storage
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.model import Inventory, Role
from vramgui.core.units import GiB
from vramgui.core.workload import Workload, engine_conflicts
from vramgui.sources.catalog import find
from vramgui.sources.checkpoint import as_shipped

GPT_OSS_120B = find("gpt-oss-120b").spec()
PUBLISHED = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "published.json"
STORED_120B = 65_248_815_744  # its model.safetensors.index.json total_size


def _weights(spec, **settings) -> int:
    return estimate(spec, Workload(**settings)).components["weights"]


def _notes(spec, **settings) -> str:
    return " ".join(estimate(spec, Workload(**settings)).notes)


# gpt-oss-120b's experts: 36 layers of 128, hidden and intermediate sizes 2880.
EXPERTS_120B = 36 * 128


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _hopper_triton_extra(swizzle: bool) -> int:
    """What vLLM's Triton MXFP4 backend holds on Hopper besides gpt-oss-120b's stored experts:
    the biases (2 x 2880 + 2880 per expert) in float32 instead of bf16 and, where it swizzles,
    a second copy of every scale in triton_kernels' HopperMXScaleLayout (rows padded to
    2 x num_warps x 2 x 8 = 256 with num_warps 8, columns to 2): w13's 5760 rows of 2880 / 32
    scales, w2's 2880 rows of 2880 / 32."""
    biases = EXPERTS_120B * (5760 + 2880) * (4 - 2)
    scales = _round_up(5760, 256) * _round_up(90, 2) + _round_up(2880, 256) * _round_up(90, 2)
    return biases + (EXPERTS_120B * scales if swizzle else 0)


def test_gpt_oss_120b_fits_one_h100_in_vllm_at_8k():
    w = Workload(engine="vllm", seq=8192, gpu_arch="hopper")
    est = estimate(GPT_OSS_120B, w, 80 * GiB)
    assert est.components["weights"] == STORED_120B + _hopper_triton_extra(swizzle=True)
    assert est.total_bytes <= 80 * GiB
    assert est.details["kv_pool_tokens"] >= 8192


def test_vllm_triton_backend_keeps_the_mxfp4_scales_twice_on_hopper():
    # vLLM deletes the loaded expert weights once triton_kernels has swizzled them, not the
    # loaded scales: from 0.11 (torch 2.8.1 and later) every scale is held twice, and the
    # biases in float32; 0.10 keeps the strided layout (a view: nothing copied).
    swizzled = _weights(GPT_OSS_120B, engine="vllm", gpu_arch="hopper", vllm_version="0.11")
    assert swizzled == STORED_120B + _hopper_triton_extra(swizzle=True)
    assert swizzled == _weights(GPT_OSS_120B, engine="vllm", gpu_arch="hopper")
    strided = _weights(GPT_OSS_120B, engine="vllm", gpu_arch="hopper", vllm_version="0.10")
    assert strided == STORED_120B + _hopper_triton_extra(swizzle=False)
    notes = _notes(GPT_OSS_120B, engine="vllm", gpu_arch="hopper")
    assert "keeps each expert scale twice" in notes and "float32" in notes
    old = _notes(GPT_OSS_120B, engine="vllm", gpu_arch="hopper", vllm_version="0.10")
    assert "twice" not in old and "float32" in old
    # Other GPUs run other kernels (Marlin, FlashInfer): nothing of the kind.
    assert "Triton" not in _notes(GPT_OSS_120B, engine="vllm", gpu_arch="ampere")


def test_vllm_pads_mxfp4_experts_to_its_kernels_tile():
    ampere = _weights(GPT_OSS_120B, engine="vllm", gpu_arch="ampere")
    blackwell = _weights(GPT_OSS_120B, engine="vllm", gpu_arch="blackwell")
    # Marlin: intermediate 2880 -> 2944, hidden 2880 -> 3072; FlashInfer: both to 3072. The
    # expert weights and scales grow by the product, their biases by one factor.
    experts = [
        s
        for s in serving.served_storage(GPT_OSS_120B, Workload(engine="vllm")).storage
        if s.tensor.role is Role.EXPERT
    ]
    weights = sum(s.bytes for s in experts if not s.tensor.is_bias)
    up = sum(s.bytes for s in experts if s.tensor.is_bias and s.tensor.module == "gate_up_proj")
    down = sum(s.bytes for s in experts if s.tensor.is_bias and s.tensor.module == "down_proj")
    marlin = weights * (2944 * 3072) / (2880 * 2880) + up * 2944 / 2880 + down * 3072 / 2880
    assert ampere - STORED_120B == pytest.approx(marlin - weights - up - down, abs=2000)
    flashinfer = (weights * 3072**2 / 2880**2) + (up + down) * 3072 / 2880
    assert blackwell - STORED_120B == pytest.approx(flashinfer - weights - up - down, abs=2000)
    assert "2944 x 3072" in _notes(GPT_OSS_120B, engine="vllm", gpu_arch="ampere")
    assert "3072 x 3072" in _notes(GPT_OSS_120B, engine="vllm", gpu_arch="blackwell")


def test_transformers_keeps_mxfp4_for_gpt_oss_and_says_what_it_needs():
    kept = _weights(GPT_OSS_120B, engine="transformers", gpu_arch="hopper")
    assert kept - STORED_120B < 0.001 * STORED_120B  # + transformers' buffers only
    notes = _notes(GPT_OSS_120B, engine="transformers", gpu_arch="auto")
    assert "triton >= 3.4" in notes and "dequantizes them to bf16" in notes
    # before compute capability 7.5 it dequantizes
    volta = _weights(GPT_OSS_120B, engine="transformers", gpu_arch="volta")
    assert volta > 3 * kept
    assert "7.5" in _notes(GPT_OSS_120B, engine="transformers", gpu_arch="volta")


def _deepseek_fp8():
    entry = find("deepseek-v3")
    config = copy.deepcopy(entry.config)
    config["quantization_config"] = {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "weight_block_size": [128, 128],
    }
    return as_shipped(spec_from_config(config), config)


DEEPSEEK = _deepseek_fp8()


@pytest.mark.parametrize(
    ("arch", "kept"),
    [("ampere", False), ("ada", True), ("hopper", True), ("blackwell", True), ("auto", True)],
)
def test_transformers_keeps_fp8_from_compute_capability_8_9(arch, kept):
    weights = _weights(DEEPSEEK, engine="transformers", gpu_arch=arch)
    stored = storage.weight_bytes(DEEPSEEK, "bf16", "none")
    assert (weights < 1.01 * stored) is kept
    notes = _notes(DEEPSEEK, engine="transformers", gpu_arch=arch)
    assert "8.9" in notes or arch != "ampere"


def test_vllm_keeps_fp8_everywhere_from_ampere_with_marlin_before_ada():
    stored = storage.weight_bytes(DEEPSEEK, "bf16", "none")
    for arch in ("ampere", "ada", "hopper"):
        assert _weights(DEEPSEEK, engine="vllm", gpu_arch=arch) == stored
    assert "Marlin" in _notes(DEEPSEEK, engine="vllm", gpu_arch="ampere")
    assert "Marlin" not in _notes(DEEPSEEK, engine="vllm", gpu_arch="hopper")
    with pytest.raises(WorkloadError, match=r"compute capability 8\.0"):
        estimate(DEEPSEEK, Workload(engine="vllm", gpu_arch="turing"))


def test_nvfp4_checkpoints_are_vllms():
    qwen = find("qwen3.6-27b-nvfp4").spec()
    assert qwen.quantization == "nvfp4"
    conflicts = engine_conflicts("inference", "transformers", "none", "auto", qwen.quantization)
    assert conflicts and conflicts[0].engines == ("vllm",)
    assert "Marlin" in _notes(qwen, engine="vllm", gpu_arch="hopper")
    assert "Marlin" not in _notes(qwen, engine="vllm", gpu_arch="blackwell")


def test_compressed_tensors_weights_are_decompressed_by_transformers():
    config = copy.deepcopy(find("llama-3.1-8b").config)
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "g": {
                "weights": {"num_bits": 4, "type": "int", "group_size": 128},
                "targets": ["Linear"],
            }
        },
        "ignore": ["lm_head"],
    }
    spec = as_shipped(spec_from_config(config), config)
    vllm = _weights(spec, engine="vllm")
    transformers = _weights(spec, engine="transformers")
    assert vllm == storage.weight_bytes(spec, "bf16", "none")
    assert transformers > 2.5 * vllm
    assert "first forward" in _notes(spec, engine="transformers")


def test_another_quant_replaces_the_stored_format_with_a_note():
    nvfp4 = estimate(GPT_OSS_120B, Workload(engine="vllm", quant="nvfp4", gpu_arch="hopper"))
    assert nvfp4.components["weights"] != STORED_120B
    assert any("not as the checkpoint is stored (MXFP4 experts" in n for n in nvfp4.notes)
    same = estimate(GPT_OSS_120B, Workload(engine="vllm", quant="mxfp4", gpu_arch="hopper"))
    assert same.components["weights"] == _weights(GPT_OSS_120B, engine="vllm", gpu_arch="hopper")
    assert not any("not as the checkpoint is stored" in n for n in same.notes)


@pytest.mark.parametrize("quant", ["mxfp4", "nvfp4", "fp8-block", "w4a16", "w8a8", "fp8-tensor"])
def test_the_new_schemes_quantize_a_16_bit_model(quant):
    llama = find("llama-3.1-8b").spec()
    quantized = [s for s in storage.assign_storage(llama, "bf16", quant) if s.storage == quant]
    bits = 8 * sum(s.bytes for s in quantized) / sum(s.tensor.numel for s in quantized)
    assert bits == pytest.approx(dtypes.get_scheme(quant).nominal_bits_per_weight, rel=0.01)
    assert {s.tensor.role for s in quantized} == {Role.ATTENTION, Role.MLP}
    est = estimate(llama, Workload(engine="vllm", quant=quant))
    assert est.components["weights"] < 0.6 * _weights(llama, engine="vllm")


def test_mtp_layers_are_counted_only_when_vllm_loads_them():
    spec = find("deepseek-v3.2").spec()
    assert spec.quantization == "fp8-block"
    layers = {t.layer for t in spec.mtp_tensors}
    assert layers == {61}
    assert not any(t.layer == 61 for t in spec.tensors)
    plain = _weights(spec, engine="vllm", gpu_arch="hopper")
    loaded = _weights(spec, engine="vllm", gpu_arch="hopper", mtp=True)
    # one MoE block of DeepSeek-V3, about 11.5B parameters, in FP8
    assert 10.5e9 < loaded - plain < 12.5e9
    assert "not counted" in _notes(spec, engine="vllm", gpu_arch="hopper")
    assert "are loaded for MTP" in _notes(spec, engine="vllm", gpu_arch="hopper", mtp=True)
    assert "does not load" in _notes(spec, engine="transformers", mtp=True)
    assert _weights(spec, engine="transformers", mtp=True) == _weights(spec, engine="transformers")


def test_a_nested_text_config_quantization_is_read():
    config = {"model_type": "x", "text_config": {**find("llama-3.1-8b").config}}
    config["text_config"]["quantization_config"] = {"quant_method": "fp8"}
    from vramgui.core.formats import read_format

    found = read_format(config)
    assert found is not None and found.name == "fp8-block"


def test_an_unknown_method_is_counted_in_16_bits_and_said_approximate():
    config = copy.deepcopy(find("llama-3.1-8b").config)
    config["quantization_config"] = {"quant_method": "hqq", "nbits": 4}
    spec = as_shipped(spec_from_config(config), config)
    assert spec.inventory is Inventory.APPROXIMATE
    assert any("'hqq' is not modelled" in w for w in spec.warnings)
    assert storage.weight_bytes(spec, "bf16", "none") == storage.weight_bytes(
        find("llama-3.1-8b").spec(), "bf16", "none"
    )


def test_served_storage_keeps_roles_and_routers_unquantized():
    served = serving.served_storage(DEEPSEEK, Workload(engine="vllm", gpu_arch="hopper"))
    routers = [s for s in served.storage if s.tensor.role is Role.ROUTER]
    assert routers and all(s.storage in ("F32", "BF16") for s in routers)
    experts = [s for s in served.storage if s.tensor.role is Role.EXPERT]
    assert experts and {s.storage for s in experts} == {"fp8-block"}


def test_transformers_bitsandbytes_leaves_stacked_experts_in_16_bits():
    # replace_with_bnb_linear swaps nn.Linear modules; transformers 5 holds a MoE's experts as
    # stacked parameters (MixtralExperts.gate_up_proj), which it does not touch. vLLM quantizes
    # its fused MoE layers.
    mixtral = find("mixtral-8x7b").spec()
    experts = sum(t.numel for t in mixtral.tensors if t.role is Role.EXPERT)
    vllm = _weights(mixtral, engine="vllm", quant="nf4")
    transformers = _weights(mixtral, engine="transformers", quant="nf4")
    stored = storage.weight_bytes(mixtral, "bf16", "nf4")
    assert vllm == stored
    expert_nf4 = sum(
        s.bytes
        for s in storage.assign_storage(mixtral, "bf16", "nf4")
        if s.tensor.role is Role.EXPERT
    )
    assert transformers - stored == pytest.approx(2 * experts - expert_nf4, rel=0.01)
    assert "stacked parameters" in _notes(mixtral, engine="transformers", quant="nf4")
    # a dense model is quantized whole
    llama = find("llama-3.1-8b").spec()
    assert _weights(llama, engine="transformers", quant="nf4") < 0.4 * _weights(llama)


def test_gpt_oss_120b_as_mxfp4_moe_is_the_ggml_org_gguf():
    # llama-bench of ggml-org/gpt-oss-120b-GGUF prints "gpt-oss ?B MXFP4 MoE | 59.02 GiB"
    # (benchmarks/data/published.json): every tensor of the file, the host's embeddings included.
    case = next(
        c
        for c in json.loads(PUBLISHED.read_text(encoding="utf-8"))["cases"]
        if c["id"] == "gguf-size-gpt-oss-120b-mxfp4-moe"
    )
    stored = storage.assign_storage(GPT_OSS_120B, "bf16", "MXFP4_MOE")
    assert sum(s.bytes for s in stored) / GiB == pytest.approx(59.02, abs=0.005)
    assert sum(s.bytes for s in stored) == pytest.approx(case["measured"]["bytes"], rel=1e-4)
    # About 63 GB; the checkpoint as published is 65.2 GB (bf16 outside the experts).
    assert round(sum(s.bytes for s in stored) / 1e9) == 63
    types: dict[Role, set[str]] = {}
    for s in stored:
        if s.tensor.role is not Role.NORM and not s.tensor.is_bias and len(s.tensor.shape) > 1:
            types.setdefault(s.tensor.role, set()).add(s.storage)
    assert types[Role.EXPERT] == {"MXFP4"} and types[Role.ATTENTION] == {"Q8_0"}
    assert types[Role.EMBEDDING] == types[Role.HEAD] == {"Q8_0"}
    est = estimate(GPT_OSS_120B, Workload(engine="llamacpp", quant="MXFP4"))
    assert est.workload.quant == "MXFP4_MOE"
    # llama.cpp keeps the token embeddings on the host: the rest is on the GPU.
    assert est.components["weights"] + est.host_bytes == sum(s.bytes for s in stored)
    assert "converts to it with its MXFP4 weights as they are" in " ".join(est.notes)
    assert "59.02 GiB (63.37 GB) of tensors" in " ".join(est.notes)
    assert "quantizing the original" not in " ".join(est.notes)


def test_gpt_oss_20b_as_mxfp4_moe_is_the_size_of_its_published_gguf():
    # gpt-oss-coder-20B's MXFP4_MOE file, of gpt-oss-20b's shapes: "Size of remote file: 12.1 GB"
    # (huggingface.co/benhaotang/gpt-oss-coder-20B-GGUF, gpt-oss-coder-MXFP4_MOE.gguf), its
    # header of a few MB included.
    tensors = storage.weight_bytes(find("gpt-oss-20b").spec(), "bf16", "MXFP4_MOE")
    assert round(tensors / 1e9, 1) == 12.1


def test_mxfp4_moe_on_a_model_without_experts_says_it_is_all_q8_0():
    dense = spec_from_config({"model_type": "llama", "num_hidden_layers": 2})
    notes = _notes(dense, engine="llamacpp", quant="MXFP4")
    assert "no experts, so it is all Q8_0" in notes
    assert storage.weight_bytes(dense, "bf16", "MXFP4_MOE") == storage.weight_bytes(
        dense, "bf16", "Q8_0"
    )


def _kv_per_token(spec, **settings) -> float:
    return estimate(spec, Workload(**settings)).details["kv_bytes_per_token"]


def test_a_modelopt_fp8_kv_scheme_sets_auto_for_vllm_and_sglang():
    """nvidia/Gemma-4-31B-IT-NVFP4 ships kv_cache_scheme {num_bits 8, type float, static} under
    quant_method modelopt: vLLM's resolve_kv_cache_dtype_string (engine/arg_utils.py) and
    SGLang's configure_kv_cache_dtype turn --kv-cache-dtype auto into fp8."""
    gemma = find("gemma-4-31b-it-nvfp4").spec()
    auto = estimate(gemma, Workload(engine="vllm", seq=8192))
    forced = estimate(gemma, Workload(engine="vllm", seq=8192, kv_dtype="fp8"))
    sixteen = estimate(gemma, Workload(engine="vllm", seq=8192, kv_dtype="bf16"))
    assert auto.details["kv_bytes_per_token"] == forced.details["kv_bytes_per_token"]
    assert 2 * auto.details["kv_bytes_per_token"] == sixteen.details["kv_bytes_per_token"]
    assert auto.details["kv_cache_dtype"] == "fp8"
    assert any("KV-cache scheme" in n and "fp8" in n for n in auto.notes)
    assert "kv_cache_dtype" not in forced.details
    # vLLM 0.11 kept auto at the model dtype (its attention layer's TODO).
    old = Workload(engine="vllm", seq=8192, vllm_version="0.11")
    assert serving.checkpoint_kv_dtype(gemma, old) is None
    sglang = _kv_per_token(gemma, engine="sglang", seq=8192)
    assert sglang == _kv_per_token(gemma, engine="sglang", seq=8192, kv_dtype="fp8")


def test_a_compressed_tensors_fp8_kv_scheme_is_vllms_alone():
    """llm-compressor's kv_cache_scheme: vLLM's attention layers cache in fp8 (pull request
    30141); SGLang reads kv_cache_quant_algo only; transformers caches in the compute dtype."""
    config = copy.deepcopy(find("llama-3.1-8b").config)
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {
            "g": {
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                "targets": ["Linear"],
            }
        },
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
        "ignore": ["lm_head"],
    }
    spec = as_shipped(spec_from_config(config), config)
    plain = find("llama-3.1-8b").spec()
    assert _kv_per_token(spec, engine="vllm") == _kv_per_token(plain, engine="vllm") / 2
    assert _kv_per_token(spec, engine="sglang") == _kv_per_token(plain, engine="sglang")
    served = estimate(spec, Workload(engine="transformers", seq=4096))
    assert (
        served.components["kv_cache"] == estimate(plain, Workload(seq=4096)).components["kv_cache"]
    )
    # vLLM's compressed-tensors attention layers cache in fp8 whatever is asked.
    asked = estimate(spec, Workload(engine="vllm", kv_dtype="bf16"))
    assert asked.details["kv_bytes_per_token"] == _kv_per_token(spec, engine="vllm")
    assert any("not bf16" in n for n in asked.notes)
    # An int8 KV scheme is not an fp8 cache.
    config["quantization_config"]["kv_cache_scheme"]["type"] = "int"
    int8 = as_shipped(spec_from_config(config), config)
    assert _kv_per_token(int8, engine="vllm") == _kv_per_token(plain, engine="vllm")


def test_a_16_bit_cache_asked_of_a_modelopt_fp8_kv_checkpoint_is_said_to_vllm():
    """vLLM would take the checkpoint's FP8 scheme under auto: the line asks for bfloat16."""
    gemma = find("gemma-4-31b-it-nvfp4").spec()
    asked = launch.vllm_settings(gemma, Workload(engine="vllm", kv_dtype="bf16")).args
    assert asked[asked.index("--kv-cache-dtype") + 1] == "bfloat16"
    assert "--kv-cache-dtype" not in launch.vllm_settings(gemma, Workload(engine="vllm")).args


def _llamacpp_q4_k_m(spec):
    """llama.cpp's Q4_K_M GGUF of ``spec``: what it serves, its tensors by type, its GiB."""
    served = serving.served_storage(spec, Workload(engine="llamacpp", quant="Q4_K_M"))
    counts = Counter(s.storage for s in served.storage)
    return served, counts, sum(s.bytes for s in served.storage) / GiB


def test_llama_cpp_loads_gemma_3_27b_as_the_published_q4_k_m_gguf_without_its_towers():
    # bartowski/google_gemma-3-27b-it-qat-GGUF, Q4_K_M (tests/data/logs/
    # llamacpp-ik-discussion334-5.log): 808 tensors, f32 373, q4_K 374, q6_K 61,
    # "model size = 15.404 GiB". The vision tower is its mmproj file, not in these.
    gemma = find("gemma-3-27b").spec()
    served, counts, gib = _llamacpp_q4_k_m(gemma)
    assert counts == {"F32": 373, "Q4_K": 374, "Q6_K": 61}
    assert gib == pytest.approx(15.404, abs=0.0005)
    assert "separate mmproj GGUF" in " ".join(served.notes)
    # vLLM loads the towers with the model.
    vllm = serving.served_storage(gemma, Workload(engine="vllm"))
    assert any(s.tensor.role is Role.ENCODER for s in vllm.storage)


def test_llama_cpp_loads_gemma_3_4b_as_a_published_q4_k_m_gguf():
    # The Gemma 3 4B Q4_K_M log of https://github.com/ggml-org/llama.cpp/pull/12907: f32 205,
    # q4_K 204, q6_K 35 tensors, "file size = 2.31 GiB".
    _, counts, gib = _llamacpp_q4_k_m(find("gemma-3-4b").spec())
    assert counts == {"F32": 205, "Q4_K": 204, "Q6_K": 35}
    assert round(gib, 2) == 2.31


@pytest.mark.parametrize("quant", ["Q4_0", "Q4_K_M", "Q8_0"])
def test_llama_cpp_estimates_every_catalog_model_with_towers(quant):
    # Gemma 3's SigLIP patch embedding has rows of 14 values, which llama.cpp could not quantize
    # to Q4_0, but the mmproj file holds it (in F16), not the main GGUF. Qwen 3.5's Gated
    # DeltaNet and LFM2's short convolutions (rows of 4 and 3) are never quantized by llama.cpp.
    from vramgui.sources.catalog import load_catalog

    towered = [e.spec() for e in load_catalog() if e.parameters_text < e.parameters]
    assert len(towered) >= 20
    for spec in towered:
        est = estimate(spec, Workload(engine="llamacpp", quant=quant, seq=512))
        assert "separate mmproj GGUF" in " ".join(est.notes), spec.name
