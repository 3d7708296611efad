"""Storage types, quantization schemes and per-tensor storage, checked against published sizes."""

import json
import math
from dataclasses import replace
from pathlib import Path

import gguf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vramgui.core import dtypes, storage
from vramgui.core.dtypes import SCHEMES, get_scheme, kv_bytes_per_element, storage_bytes
from vramgui.core.errors import ConfigError, WorkloadError
from vramgui.core.families import spec_from_config
from vramgui.core.model import Role, Tensor
from vramgui.core.storage import assign_storage, bits_by_scheme, bits_per_weight, weight_bytes

# Published figures with their sources (benchmarks/data/validation.md describes them).
PUBLISHED = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "published.json"
MiB = 1024**2


def _published(case_id: str) -> dict:
    cases = json.loads(PUBLISHED.read_text(encoding="utf-8"))["cases"]
    return next(c for c in cases if c["id"] == case_id)


def _llama(hidden, inter, layers, heads, kv_heads, vocab, *, tied=False, **extra):
    config = {
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        **extra,
    }
    return spec_from_config(config)


LLAMA3_8B = _llama(4096, 14336, 32, 32, 8, 128256)
LLAMA2_7B = _llama(4096, 11008, 32, 32, 32, 32000)


def _types(stored, needle):
    return {s.tensor.name: s.storage for s in stored if needle in s.tensor.name}


def _type_of(stored, name):
    return next(s.storage for s in stored if s.tensor.name == name)


# --- storage types ---------------------------------------------------------------------------


def test_ggml_table_is_the_gguf_packages():
    assert {t.name: sizes for t, sizes in gguf.GGML_QUANT_SIZES.items()} == dtypes.GGML_TYPE_SIZES


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((4096, 4096), "Q4_0", 4096 * 128 * 18),
        ((4096, 4096), "Q4_K", 4096 * 16 * 144),
        ((4096, 4096), "Q6_K", 4096 * 16 * 210),
        ((32000, 4096), "q8_0", 32000 * 128 * 34),
        ((8, 2880, 2880), "MXFP4", 8 * 2880 * 90 * 17),
        ((3, 5), "BF16", 30),
        ((3, 5), "bf16", 30),
        ((3, 5), "fp32", 60),
        ((3, 5), "F8_E4M3", 15),
        ((3, 5), "fp8", 15),
        ((3, 5), "I64", 120),
        ((3, 5), "BOOL", 15),
        ((), "F32", 4),
        (4096, "Q4_K", 16 * 144),
        (10, "F4", 5),
    ],
)
def test_storage_bytes(shape, dtype, expected):
    assert storage_bytes(shape, dtype) == expected


def test_storage_bytes_rejects_partial_blocks_and_unknown_types():
    with pytest.raises(ConfigError, match="blocks of 256"):
        storage_bytes((4096, 4000), "Q4_K")  # rows of 4000: not whole blocks, though 16M values are
    with pytest.raises(ConfigError, match="unknown tensor dtype"):
        storage_bytes((4,), "Q9_Z")


def test_kv_bytes_per_element():
    assert kv_bytes_per_element("auto", "bf16") == 2
    assert kv_bytes_per_element("auto", "fp32") == 4
    assert kv_bytes_per_element("fp8", "bf16") == 1
    assert kv_bytes_per_element("q8_0", "fp16") == 34 / 32
    assert kv_bytes_per_element("q4_0", "fp16") == 18 / 32
    with pytest.raises(WorkloadError, match="q8_0"):
        kv_bytes_per_element("int3", "fp16")


# --- schemes ---------------------------------------------------------------------------------


def test_scheme_names_are_found_in_any_case():
    assert next(iter(SCHEMES)) == "none"
    families = [s.family for s in SCHEMES.values()]
    runs = [f for i, f in enumerate(families) if i == 0 or families[i - 1] != f]
    assert len(runs) == len(set(runs))  # each family in one run, as the UI lists them
    for name, scheme in SCHEMES.items():
        assert scheme.name == name
        assert get_scheme(name) is scheme
    assert get_scheme("q4_k_m").name == "Q4_K_M"
    assert get_scheme("NF4").name == "nf4"
    gguf_names = {s.name for s in SCHEMES.values() if s.family == "gguf"}
    wanted = "F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q2_K_S Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M"
    wanted += " Q5_K_S Q5_K_M Q6_K IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M IQ4_NL"
    wanted += " IQ4_XS IQ1_S IQ1_M"
    assert set(wanted.split()) <= gguf_names


def test_unknown_scheme_lists_the_known_ones():
    with pytest.raises(WorkloadError) as err:
        get_scheme("int3")
    message = str(err.value)
    assert "'int3'" in message
    for name in ("none", "nf4", "gptq-int4", "awq-int4", "fp8", "Q4_K_M", "IQ2_XXS"):
        assert name in message


def test_unknown_dtype_is_a_workload_error():
    with pytest.raises(WorkloadError, match="bf16"):
        assign_storage(LLAMA2_7B, "fp64", "none")


# --- GGUF against published figures ------------------------------------------------------------


@pytest.mark.parametrize(
    "quant",
    [
        "Q2_K",
        "Q3_K_S",
        "Q3_K_L",
        "Q4_K_S",
        "Q4_K_M",
        "Q5_K_S",
        "Q5_K_M",
        "Q6_K",
        "Q8_0",
        "F16",
        "IQ4_XS",
        "IQ3_M",
        "IQ2_M",
    ],
)
def test_llama3_8b_gguf_bits_per_weight_match_llamacpp(quant):
    # The published figures are tensor bytes over parameters: F16 16.0005 and Q8_0 8.5008 are
    # reproduced by the tensors alone (the .0005 / .0008 are the F32 norms), so the file's header
    # (metadata and the 128k-token vocabulary, a few MB = about 0.005 bpw) is not in them.
    published = _published("gguf-sizes-llama31-8b")["measured"]["bits_per_weight"][quant]
    assert LLAMA3_8B.parameters == 8_030_261_248
    got = bits_per_weight(LLAMA3_8B, "bf16", quant)
    assert got == pytest.approx(published, rel=0.01)
    assert got == pytest.approx(published, abs=0.0005)  # in fact to the last published digit


def test_llama2_7b_q4_k_m_weights_match_llamacpp_log():
    case = _published("llamacpp-llama2-7b-q4km")
    assert case["measured"]["as_reported"].startswith("CUDA0 weights 3820.94 MiB")
    stored = assign_storage(LLAMA2_7B, "fp16", "Q4_K_M")
    embedding = sum(s.bytes for s in stored if s.tensor.role == Role.EMBEDDING)
    on_gpu = sum(s.bytes for s in stored) - embedding
    assert on_gpu / MiB == pytest.approx(3820.94, rel=0.01)
    assert embedding / MiB == pytest.approx(70.31, rel=0.01)
    assert on_gpu == pytest.approx(case["measured"]["bytes"], rel=0.01)  # the CUDA0 figure


def test_q4_k_m_gives_half_of_attn_v_and_ffn_down_q6_k():
    stored = assign_storage(LLAMA3_8B, "bf16", "Q4_K_M")
    attn_v = [_type_of(stored, f"model.layers.{i}.self_attn.v_proj.weight") for i in range(32)]
    down = [_type_of(stored, f"model.layers.{i}.mlp.down_proj.weight") for i in range(32)]
    # use_more_bits: the first and last eighth, and every third layer in between
    more = [i < 4 or i >= 28 or (i - 4) % 3 == 2 for i in range(32)]
    assert attn_v == ["Q6_K" if m else "Q4_K" for m in more]
    assert down == attn_v
    assert sum(more) == 16
    assert _type_of(stored, "lm_head.weight") == "Q6_K"
    assert _type_of(stored, "model.embed_tokens.weight") == "Q4_K"
    assert set(_types(stored, "layernorm").values()) == {"F32"}
    assert set(_types(stored, "q_proj").values()) == {"Q4_K"}


def test_gqa_decides_attn_v_of_q2_k():
    assert set(_types(assign_storage(LLAMA3_8B, "bf16", "Q2_K"), "v_proj").values()) == {"Q4_K"}
    assert set(_types(assign_storage(LLAMA2_7B, "bf16", "Q2_K"), "v_proj").values()) == {"Q3_K"}


def test_tied_embeddings_get_the_output_type():
    tied = _llama(2048, 8192, 4, 32, 8, 128256, tied=True)
    stored = assign_storage(tied, "bf16", "Q4_K_M")
    assert _type_of(stored, "model.embed_tokens.weight") == "Q6_K"
    iq = assign_storage(tied, "bf16", "IQ2_XXS")
    assert _type_of(iq, "model.embed_tokens.weight") == "Q5_K"


def test_llama_70b_gets_more_bits_for_attn_v():
    llama70 = _llama(8192, 28672, 80, 64, 8, 128256)
    stored = assign_storage(llama70, "bf16", "Q3_K_S")
    assert set(_types(stored, "v_proj").values()) == {"Q5_K"}
    assert set(_types(stored, "k_proj").values()) == {"Q3_K"}


def test_mixtral_rules_for_eight_experts():
    mixtral = spec_from_config(
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        }
    )
    stored = assign_storage(mixtral, "bf16", "Q4_K_M")
    assert set(_types(stored, "v_proj").values()) == {"Q8_0"}
    assert set(_types(stored, "k_proj").values()) == {"Q8_0"}
    assert set(_types(stored, "o_proj").values()) == {"Q5_K"}
    assert set(_types(stored, "mlp.gate.weight").values()) == {"F32"}  # the router
    down = _types(stored, "experts.down_proj")
    assert down["model.layers.0.mlp.experts.down_proj"] == "Q6_K"
    assert down["model.layers.4.mlp.experts.down_proj"] == "Q4_K"


def test_qwen_moe_shared_expert_gate_is_a_router():
    moe = spec_from_config(
        {
            "model_type": "qwen2_moe",
            "hidden_size": 256,
            "intermediate_size": 512,
            "moe_intermediate_size": 256,
            "shared_expert_intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "vocab_size": 1000,
            "num_experts": 4,
            "num_experts_per_tok": 2,
        }
    )
    gates = [t for t in moe.tensors if t.module == "shared_expert_gate"]
    assert gates
    for quant, kept in (("Q4_K_M", "F32"), ("nf4", "BF16"), ("gptq-int4", "BF16")):
        stored = assign_storage(moe, "bf16", quant)
        assert {s.storage for s in stored if s.tensor.module == "shared_expert_gate"} == {kept}


def test_bert_mlp_dense_layers_are_up_and_down():
    bert = spec_from_config(
        {
            "model_type": "bert",
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_hidden_layers": 8,
            "num_attention_heads": 12,
            "vocab_size": 30522,
        }
    )
    stored = assign_storage(bert, "fp32", "Q4_K_M")
    down = _types(stored, "layer.0.output.dense.weight")
    up = _types(stored, "layer.0.intermediate.dense.weight")
    assert set(down.values()) == {"Q6_K"}  # ffn_down of the first eighth: more bits
    assert set(up.values()) == {"Q4_K"}
    position = _types(stored, "position_embeddings")
    assert set(position.values()) == {"F32"}


def test_mxfp4_moe_puts_experts_in_mxfp4_and_the_rest_in_q8_0():
    moe = spec_from_config(
        {
            "model_type": "qwen3_moe",
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_hidden_layers": 2,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "vocab_size": 151936,
            "num_experts": 128,
            "num_experts_per_tok": 8,
        }
    )
    stored = assign_storage(moe, "bf16", "MXFP4_MOE")
    by_role = {}
    for s in stored:
        by_role.setdefault(s.tensor.role, set()).add(s.storage)
    assert by_role[Role.EXPERT] == {"MXFP4"}
    assert by_role[Role.ATTENTION] == {"Q8_0"}
    assert by_role[Role.HEAD] == {"Q8_0"}
    assert by_role[Role.ROUTER] == {"F32"}


def test_k_quant_fallback_for_rows_not_divisible_by_256():
    # hidden 2880 (gpt-oss-like): 2880 = 11.25 x 256 = 90 x 32
    odd = _llama(2880, 5760, 2, 64, 8, 1000, head_dim=64)
    stored = assign_storage(odd, "bf16", "Q4_K_M")
    assert _type_of(stored, "model.layers.0.self_attn.q_proj.weight") == "Q5_0"  # Q4_K -> Q5_0
    assert _type_of(stored, "model.layers.0.self_attn.v_proj.weight") == "Q5_0"
    assert _type_of(stored, "model.layers.1.self_attn.v_proj.weight") == "Q8_0"  # Q6_K -> Q8_0
    assert _type_of(stored, "model.layers.1.self_attn.o_proj.weight") == "Q4_K"  # rows of 4096
    assert _type_of(stored, "model.layers.1.mlp.down_proj.weight") == "Q8_0"  # rows of 5760
    assert _type_of(stored, "lm_head.weight") == "Q8_0"  # output: rows not of whole Q6_K blocks
    iq = assign_storage(odd, "bf16", "IQ2_XXS")
    assert _type_of(iq, "model.layers.0.mlp.gate_proj.weight") == "IQ4_NL"
    # rows that are not even whole blocks of 32 (an MLP width of 272) fall back to F16 ...
    narrow = _llama(256, 272, 2, 2, 2, 100)
    stored = assign_storage(narrow, "bf16", "Q4_K_M")
    assert set(_types(stored, "down_proj").values()) == {"F16"}
    assert set(_types(stored, "up_proj").values()) == {"Q4_K"}
    # ... and llama.cpp refuses the legacy types for them
    with pytest.raises(WorkloadError, match="not a multiple of 32"):
        assign_storage(narrow, "bf16", "Q4_0")


def test_mixer_convolutions_are_never_quantized_as_in_llama_cpp():
    # tensor_allows_quantization (src/llama-quant.cpp) skips "ssm_conv1d" and
    # "shortconv.conv.weight": rows of 4 (Gated DeltaNet) or 3 (LFM2) values would otherwise
    # stop a Q4_0 file, as llama-quantize has no fallback for Q4_0.
    from vramgui.sources.catalog import find

    for name, conv in (
        ("qwen3.5-9b", "linear_attn.conv1d.weight"),
        ("lfm2.5-vl-1.6b", "conv.conv.weight"),
    ):
        stored = assign_storage(find(name).spec(), "bf16", "Q4_0")
        assert set(_types(stored, conv).values()) == {"F32"}, name


def test_imatrix_changes_the_first_ffn_down_of_q4_0_and_iq4_xs():
    plain = assign_storage(LLAMA3_8B, "bf16", "Q4_0")
    with_imatrix = assign_storage(LLAMA3_8B, "bf16", "Q4_0", imatrix=True)
    name = "model.layers.0.mlp.down_proj.weight"
    assert (_type_of(plain, name), _type_of(with_imatrix, name)) == ("Q4_0", "Q4_1")
    iq4 = assign_storage(LLAMA3_8B, "bf16", "IQ4_XS")
    iq4_imatrix = assign_storage(LLAMA3_8B, "bf16", "IQ4_XS", imatrix=True)
    assert (_type_of(iq4, name), _type_of(iq4_imatrix, name)) == ("Q5_K", "IQ4_XS")


def test_gpt2_conv1d_rows_are_its_input_features():
    gpt2 = spec_from_config(
        {"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "vocab_size": 50257}
    )
    stored = assign_storage(gpt2, "fp16", "int8")
    c_attn = next(s for s in stored if s.tensor.name == "transformer.h.0.attn.c_attn.weight")
    assert c_attn.tensor.shape == (768, 2304)  # Conv1D: (in, out)
    assert c_attn.bytes == 768 * 2304 + 4 * 2304  # one fp32 scale per output row
    q4 = assign_storage(gpt2, "fp16", "Q4_K_M")
    assert _type_of(q4, "transformer.wte.weight") == "Q6_K"  # tied: the output's type


# --- bitsandbytes, GPTQ / AWQ, FP8 ---------------------------------------------------------------


def _quantized_bits(spec, quant):
    stored = [s for s in assign_storage(spec, "bf16", quant) if s.storage == quant]
    return sum(s.bytes for s in stored) * 8 / sum(s.tensor.numel for s in stored), stored


def test_nf4_double_quant_is_about_4_127_bits():
    bits, stored = _quantized_bits(LLAMA3_8B, "nf4")
    assert bits == pytest.approx(4.127, abs=0.001)
    assert len(stored) == 7 * 32  # every linear layer of the blocks, not embeddings or head
    assert _quantized_bits(LLAMA3_8B, "nf4-nodq")[0] == pytest.approx(4.5, abs=0.001)
    assert _quantized_bits(LLAMA3_8B, "fp4")[0] == _quantized_bits(LLAMA3_8B, "nf4")[0]


def test_nf4_layout_of_one_matrix():
    stored = assign_storage(LLAMA2_7B, "bf16", "nf4")
    q = next(s for s in stored if s.tensor.name == "model.layers.0.self_attn.q_proj.weight")
    blocks = 4096 * 4096 // 64
    # packed codes + uint8 absmax + offset + fp32 absmax per 256 blocks + the 16-entry fp32 code
    assert q.bytes == 4096 * 4096 // 2 + blocks + 4 + 4 * (blocks // 256) + 64
    nodq = assign_storage(LLAMA2_7B, "bf16", "nf4-nodq")
    q = next(s for s in nodq if s.tensor.name == "model.layers.0.self_attn.q_proj.weight")
    assert q.bytes == 4096 * 4096 // 2 + 4 * blocks + 64


def test_int8_is_8_bits_plus_row_scales():
    bits, stored = _quantized_bits(LLAMA2_7B, "int8")
    assert all(s.bytes == s.tensor.numel + 4 * s.tensor.shape[0] for s in stored)
    assert 8.0 < bits < 8.01
    head = next(s for s in assign_storage(LLAMA2_7B, "fp16", "int8") if s.tensor.role == Role.HEAD)
    assert (head.storage, head.bytes) == ("F16", 32000 * 4096 * 2)


def test_gptq_and_awq_group_128_layout():
    stored = {s.tensor.name: s for s in assign_storage(LLAMA2_7B, "fp16", "gptq-int4")}
    down = stored["model.layers.0.mlp.down_proj.weight"]  # (out 4096, in 11008)
    out, inp, groups = 4096, 11008, 11008 // 128
    qweight = (inp // 8) * out * 4  # int32 (in/8, out)
    qzeros = groups * (out // 8) * 4  # int32 (in/g, out/8)
    scales = groups * out * 2  # fp16 (in/g, out)
    g_idx = inp * 4  # int32 (in,)
    assert down.bytes == qweight + qzeros + scales + g_idx
    awq = {s.tensor.name: s for s in assign_storage(LLAMA2_7B, "fp16", "awq-int4")}
    # AWQ: qweight int32 (in, out/8), same zeros and scales, no g_idx
    assert (
        awq["model.layers.0.mlp.down_proj.weight"].bytes == inp * (out // 8) * 4 + qzeros + scales
    )
    g32 = {s.tensor.name: s for s in assign_storage(LLAMA2_7B, "fp16", "gptq-int4-g32")}
    groups32 = math.ceil(inp / 32)
    assert g32["model.layers.0.mlp.down_proj.weight"].bytes == (
        qweight + groups32 * (out // 8) * 4 + groups32 * out * 2 + g_idx
    )
    int8 = {s.tensor.name: s for s in assign_storage(LLAMA2_7B, "fp16", "gptq-int8")}
    assert int8["model.layers.0.mlp.down_proj.weight"].bytes == (
        inp * out + groups * (out // 4) * 4 + scales + g_idx
    )
    assert stored["lm_head.weight"].storage == "F16"


def test_fp8_has_a_scale_per_output_channel():
    stored = {s.tensor.name: s for s in assign_storage(LLAMA3_8B, "bf16", "fp8")}
    assert stored["model.layers.0.self_attn.k_proj.weight"].bytes == 1024 * 4096 + 4 * 1024
    assert stored["lm_head.weight"].storage == "BF16"


def test_moe_router_stays_16_bit_under_bitsandbytes_and_gptq():
    moe = spec_from_config(
        {
            "model_type": "mixtral",
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 1000,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
        }
    )
    for quant in ("nf4", "int8", "gptq-int4", "fp8"):
        stored = assign_storage(moe, "bf16", quant)
        assert {s.storage for s in stored if s.tensor.role == Role.ROUTER} == {"BF16"}
        assert {s.storage for s in stored if s.tensor.role == Role.EXPERT} == {quant}


# --- unquantized and pre-quantized checkpoints ---------------------------------------------------


def test_none_takes_the_workload_dtype():
    assert weight_bytes(LLAMA2_7B, "fp32", "none") == 4 * 6_738_415_616
    assert weight_bytes(LLAMA2_7B, "bf16", "none") == 2 * 6_738_415_616
    assert bits_per_weight(LLAMA2_7B, "fp16", "none") == 16


def test_integer_buffers_keep_their_type():
    spec = replace(
        LLAMA2_7B,
        tensors=(*LLAMA2_7B.tensors, Tensor("model.ids", (10,), Role.OTHER, dtype="I64")),
    )
    stored = assign_storage(spec, "bf16", "none")
    assert (stored[-1].storage, stored[-1].bytes) == ("I64", 80)


def _as_gguf_file(spec, quant):
    stored = assign_storage(spec, "bf16", quant)
    tensors = tuple(replace(s.tensor, dtype=s.storage) for s in stored)
    return replace(spec, tensors=tensors, quantization=quant)


def test_a_gguf_checkpoint_keeps_its_types_and_can_be_retyped():
    q4 = _as_gguf_file(LLAMA2_7B, "Q4_K_M")
    assert weight_bytes(q4, "fp16", "none") == weight_bytes(LLAMA2_7B, "fp16", "Q4_K_M")
    assert weight_bytes(q4, "fp16", "q4_k_m") == weight_bytes(LLAMA2_7B, "fp16", "Q4_K_M")
    assert weight_bytes(q4, "fp16", "Q8_0") == weight_bytes(LLAMA2_7B, "fp16", "Q8_0")
    # a GGUF without a file type is known by its most common ggml type
    untyped = replace(q4, quantization="Q4_K")
    assert weight_bytes(untyped, "fp16", "Q5_K_M") == weight_bytes(LLAMA2_7B, "fp16", "Q5_K_M")


def test_stored_tensors_of_a_quantized_checkpoint_keep_their_dtypes():
    packed = Tensor("model.layers.0.mlp.down_proj.qweight", (1376, 4096), Role.MLP, 0, dtype="I32")
    scales = Tensor("model.layers.0.mlp.down_proj.scales", (86, 4096), Role.MLP, 0, dtype="F16")
    checkpoint = replace(LLAMA2_7B, tensors=(packed, scales), quantization="gptq-int4")
    for quant in ("none", "gptq-int4"):
        stored = assign_storage(checkpoint, "bf16", quant)
        assert [(s.storage, s.bytes) for s in stored] == [
            ("I32", 1376 * 4096 * 4),
            ("F16", 86 * 4096 * 2),
        ]


def test_a_quantized_config_without_stored_tensors_takes_its_own_scheme():
    gptq = replace(LLAMA2_7B, quantization="gptq-int4")  # tensors synthesized: no stored dtypes
    assert weight_bytes(gptq, "fp16", "none") == weight_bytes(LLAMA2_7B, "fp16", "gptq-int4")
    assert weight_bytes(gptq, "fp16", "gptq-int4") == weight_bytes(LLAMA2_7B, "fp16", "gptq-int4")


def test_another_scheme_replaces_a_quantized_checkpoints_own():
    # synthesized from config.json: the scheme applies to the model's unquantized tensors
    gptq = replace(LLAMA2_7B, quantization="gptq-int4")
    assert weight_bytes(gptq, "fp16", "nf4") == weight_bytes(LLAMA2_7B, "fp16", "nf4")
    # stored tensors only (headers, no config to build the unquantized ones from): refused
    packed = Tensor("model.layers.0.mlp.down_proj.qweight", (1376, 4096), Role.MLP, 0, dtype="I32")
    headers = replace(LLAMA2_7B, tensors=(packed,), quantization="gptq-int4")
    with pytest.raises(WorkloadError, match="already quantized as gptq-int4"):
        assign_storage(headers, "fp16", "nf4")
    # ... unless the config built them: then they take the scheme
    known = replace(headers, logical_tensors=LLAMA2_7B.tensors)
    assert weight_bytes(known, "fp16", "nf4") == weight_bytes(LLAMA2_7B, "fp16", "nf4")
    assert known.parameters == LLAMA2_7B.parameters
    # a GGUF file takes another GGUF type only
    with pytest.raises(WorkloadError, match="GGUF file"):
        assign_storage(_as_gguf_file(LLAMA2_7B, "Q4_K_M"), "fp16", "nf4")


# --- properties ----------------------------------------------------------------------------------

# GGUF F16 / BF16 keep norms in F32, so they may exceed a 16-bit model by those few bytes.
_SMALLER_SCHEMES = [name for name, s in SCHEMES.items() if s.nominal_bits_per_weight < 16]


@st.composite
def _small_llamas(draw):
    heads = draw(st.sampled_from([1, 2, 4, 8]))
    hidden = heads * draw(st.sampled_from([64, 128]))
    return _llama(
        hidden,
        draw(st.integers(1, 16)) * 64,
        draw(st.integers(1, 3)),
        heads,
        draw(st.sampled_from([k for k in (1, 2, 4, 8) if heads % k == 0])),
        draw(st.integers(64, 4000)),
        tied=draw(st.booleans()),
    )


@settings(max_examples=15, deadline=None)
@given(spec=_small_llamas())
def test_quantized_weights_never_outgrow_the_16_bit_model(spec):
    original = weight_bytes(spec, "bf16", "none")
    for quant in _SMALLER_SCHEMES:
        assert weight_bytes(spec, "bf16", quant) <= original, quant


def test_load_in_4bit_alone_is_the_scheme_named_its_default():
    """transformers' BitsAndBytesConfig(load_in_4bit=True): FP4, no double quantization, float32
    compute, uint8 storage; the scheme and the QLoRA notes say so."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BitsAndBytesConfig(load_in_4bit=True)
    scheme = dtypes.SCHEMES[dtypes.BNB_LOAD_IN_4BIT_DEFAULT]
    assert config.bnb_4bit_quant_type == scheme.name.removesuffix("-nodq")
    assert config.bnb_4bit_use_double_quant is scheme.double_quant is False
    assert config.bnb_4bit_compute_dtype == torch.float32
    assert config.bnb_4bit_quant_storage == torch.uint8
    assert "load_in_4bit=True" in scheme.description


def test_four_bit_codes_are_half_a_byte_per_weight_without_the_quant_state():
    stored = [s for s in storage.assign_storage(LLAMA2_7B, "bf16", "nf4") if s.storage == "nf4"]
    assert stored
    for s in stored:
        numel = math.prod(s.tensor.shape)
        codes = storage.bnb_4bit_packed_bytes(s.tensor.shape)
        assert codes == numel // 2
        blocks = numel // 64
        # uint8 absmax per block, its fp32 offset, fp32 absmax per 256 blocks, the 16-entry code
        assert s.bytes - codes == blocks + 4 + 4 * math.ceil(blocks / 256) + 64


def test_bits_by_scheme_leaves_out_the_schemes_a_checkpoint_refuses():
    gguf = replace(LLAMA3_8B, quantization="Q4_K_M", name="llama.Q4_K_M.gguf")
    bits = bits_by_scheme(LLAMA3_8B, "bf16")
    assert set(bits) == set(SCHEMES)  # an unquantized model takes every scheme
    assert bits["Q4_K_M"] == bits_per_weight(LLAMA3_8B, "bf16", "Q4_K_M")
    refused = bits_by_scheme(gguf, "bf16")
    assert "nf4" not in refused and "Q4_K_S" in refused


def test_header_dtype_is_the_stored_tensors_not_a_few_of_a_synthesized_inventory():
    norm = next(t for t in LLAMA3_8B.tensors if t.role is Role.NORM)
    one_f32 = tuple(replace(t, dtype="F32") if t is norm else t for t in LLAMA3_8B.tensors)
    # A config's inventory states no dtype, save a tensor or two (a router's float32 bias).
    assert storage.header_dtype(replace(LLAMA3_8B, tensors=one_f32)) is None
    stored = tuple(replace(t, dtype="F32" if t is norm else "F16") for t in LLAMA3_8B.tensors)
    assert storage.header_dtype(replace(LLAMA3_8B, tensors=stored)) == "fp16"
