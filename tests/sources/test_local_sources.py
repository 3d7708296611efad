"""Local models: folders, lone safetensors files and GGUF files read from headers only; bad files
raise our errors with a message that says what is wrong."""

import contextlib
import json
import math
import struct

import gguf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakehub.files import (
    TINY_LLAMA_CONFIG,
    header_totals,
    llama_tensors,
    safetensors_bytes,
    write_gguf,
    write_model_folder,
    write_safetensors,
)
from vramgui.core.dtypes import storage_bytes
from vramgui.core.errors import VramguiError
from vramgui.core.model import Inventory, Role
from vramgui.core.storage import weight_bytes
from vramgui.sources import gguf_reader, local
from vramgui.sources.checkpoint import HeaderTensor, quantization_of
from vramgui.sources.errors import BadModelFile, IncompleteModel, SourceError
from vramgui.sources.resolve import load_model

TENSORS = llama_tensors(TINY_LLAMA_CONFIG)  # BF16 matrices, F32 norms


def _stored_bytes(spec):
    return sum(storage_bytes(t.shape, t.dtype) for t in spec.tensors)


@pytest.mark.parametrize("shards", [1, 3])
def test_folder_spec_is_exactly_its_headers(tmp_path, shards):
    folder = write_model_folder(tmp_path / "tiny", TINY_LLAMA_CONFIG, TENSORS, shards=shards)
    loaded = load_model(str(folder))
    params, data = header_totals(TENSORS)
    assert loaded.spec.parameters == params
    assert _stored_bytes(loaded.spec) == data
    by_name = {t.name: t for t in loaded.spec.tensors}
    assert set(by_name) == set(TENSORS)
    for name, (dtype, shape) in TENSORS.items():
        assert (by_name[name].dtype, by_name[name].shape) == (dtype, shape)
    assert by_name["model.layers.1.mlp.up_proj.weight"].layer == 1
    assert by_name["model.norm.weight"].role is Role.NORM
    assert loaded.spec.facts.num_layers == 2
    assert loaded.ref.kind == "local"
    assert loaded.ref.size_bytes == sum(p.stat().st_size for p in folder.iterdir())
    assert loaded.spec.inventory is Inventory.FROM_HEADERS


def test_uniform_bf16_folder_weighs_its_data_bytes(tmp_path):
    tensors = llama_tensors(TINY_LLAMA_CONFIG, norm_dtype="BF16")
    folder = write_model_folder(tmp_path / "tiny", TINY_LLAMA_CONFIG, tensors)
    spec = load_model(str(folder)).spec
    assert weight_bytes(spec, "bf16", "none") == header_totals(tensors)[1]


def test_duplicate_consolidated_checkpoint_is_not_counted(tmp_path):
    folder = write_model_folder(tmp_path / "m", TINY_LLAMA_CONFIG, TENSORS)
    write_safetensors(
        folder / "consolidated.safetensors", {"tok_embeddings.weight": ("BF16", (8, 8))}
    )
    assert load_model(str(folder)).spec.parameters == header_totals(TENSORS)[0]
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    assert load_model(str(folder)).spec.parameters == header_totals(TENSORS)[0]


def test_config_json_path_synthesizes_the_inventory(tmp_path):
    folder = write_model_folder(tmp_path / "tiny", TINY_LLAMA_CONFIG, TENSORS)
    loaded = load_model(str(folder / "config.json"))
    assert loaded.ref.kind == "config"
    assert loaded.spec.parameters == header_totals(TENSORS)[0]
    assert all(t.dtype is None for t in loaded.spec.tensors)
    assert loaded.spec.inventory is Inventory.EXACT


def test_lone_safetensors_infers_a_llama_and_says_so(tmp_path):
    path = write_safetensors(tmp_path / "model.safetensors", TENSORS)
    spec = load_model(str(path)).spec
    assert spec.parameters == header_totals(TENSORS)[0]
    assert _stored_bytes(spec) == header_totals(TENSORS)[1]
    assert spec.facts.num_layers == 2
    assert spec.facts.hidden_size == 64
    assert spec.facts.vocab_size == 256
    assert any("config.json" in w and "assumed" in w for w in spec.warnings)
    assert spec.inventory is Inventory.APPROXIMATE


def test_lone_safetensors_uses_a_config_beside_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    path = write_safetensors(tmp_path / "weights.safetensors", TENSORS)
    spec = load_model(str(path)).spec
    assert spec.facts.num_heads == 4 and spec.facts.head_dim == 16
    assert not spec.warnings


def test_lone_safetensors_of_unknown_layout_asks_for_a_config(tmp_path):
    path = write_safetensors(tmp_path / "x.safetensors", {"encoder.w": ("F32", (4, 4))})
    with pytest.raises(IncompleteModel, match=r"config\.json"):
        load_model(str(path))


def test_gptq_checkpoint_is_estimated_as_stored(tmp_path):
    config = {
        **TINY_LLAMA_CONFIG,
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32},
    }
    tensors = dict(TENSORS)
    del tensors["model.layers.0.self_attn.q_proj.weight"]
    tensors["model.layers.0.self_attn.q_proj.qweight"] = ("I32", (8, 64))
    tensors["model.layers.0.self_attn.q_proj.scales"] = ("F16", (2, 64))
    tensors["model.layers.0.self_attn.q_proj.qzeros"] = ("I32", (2, 8))
    folder = write_model_folder(tmp_path / "gptq", config, tensors)
    spec = load_model(str(folder)).spec
    assert spec.quantization == "gptq-int4-g32"
    qweight = next(t for t in spec.tensors if t.name.endswith("q_proj.qweight"))
    assert (qweight.dtype, qweight.module, qweight.role) == ("I32", "q_proj", Role.ATTENTION)
    assert _stored_bytes(spec) == header_totals(tensors)[1]


@pytest.mark.parametrize(
    ("qc", "expected"),
    [
        ({"quant_method": "awq", "bits": 4}, "awq-int4"),
        (  # bnb_4bit_use_double_quant defaults to False
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
            "nf4-nodq",
        ),
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            "nf4",
        ),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8"),
        ({"quant_method": "fp8"}, "fp8-block"),  # FineGrainedFP8Config's default blocks
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8-tensor",  # no strategy nor group size: QuantizationArgs infers "tensor"
        ),
    ],
)
def test_quantization_config_is_recognised(qc, expected):
    assert quantization_of({"quantization_config": qc}) == expected


def test_gguf_spec_is_its_tensor_table(tmp_path):
    path = tmp_path / "tiny-Q4_K_M.gguf"
    layout = write_gguf(path)
    loaded = load_model(str(path))
    spec = loaded.spec
    assert spec.parameters == sum(math.prod(shape) for _, shape, _ in layout.values())
    data_bytes = sum(nbytes for _, _, nbytes in layout.values())
    assert _stored_bytes(spec) == data_bytes
    assert weight_bytes(spec, "bf16", "none") == data_bytes
    assert spec.quantization == "Q4_K_M"
    by_name = {t.name: t for t in spec.tensors}
    q = by_name["blk.1.attn_q.weight"]
    assert (q.dtype, q.shape, q.module, q.layer) == ("Q4_K", (256, 256), "q_proj", 1)
    assert by_name["blk.0.ffn_down.weight"].shape == (256, 512)  # PyTorch (out, in) order
    facts = spec.facts
    assert (facts.num_layers, facts.hidden_size, facts.intermediate_size) == (2, 256, 512)
    assert (facts.num_heads, facts.num_kv_heads, facts.head_dim) == (4, 2, 64)
    assert (facts.vocab_size, facts.max_position_embeddings) == (320, 2048)
    assert not facts.tie_word_embeddings


def test_16_bit_gguf_weighs_its_data_bytes_too(tmp_path):
    path = tmp_path / "f16.gguf"
    write_gguf(path, file_type=1)  # MOSTLY_F16 (the tensors keep their mixed types here)
    spec = load_model(str(path)).spec
    assert spec.quantization == "F16"
    f32_norm = next(t for t in spec.tensors if t.name == "output_norm.weight")
    assert f32_norm.dtype == "F32"
    assert weight_bytes(spec, "bf16", "none") == _stored_bytes(spec)


def test_moe_gguf(tmp_path):
    path = tmp_path / "moe.gguf"
    layout = write_gguf(path, arch="qwen3moe", experts=4)
    spec = load_model(str(path)).spec
    assert spec.facts.model_type == "qwen3_moe"
    assert (spec.facts.num_experts, spec.facts.experts_per_token) == (4, 2)
    assert spec.facts.moe_intermediate_size == 512
    assert spec.parameters == sum(math.prod(shape) for _, shape, _ in layout.values())
    assert _stored_bytes(spec) == sum(nbytes for _, _, nbytes in layout.values())
    experts = next(t for t in spec.tensors if t.name == "blk.1.ffn_down_exps.weight")
    assert (experts.role, experts.module, experts.shape) == (
        Role.EXPERT,
        "down_proj",
        (4, 256, 512),
    )
    router = next(t for t in spec.tensors if t.name == "blk.1.ffn_gate_inp.weight")
    assert router.role is Role.ROUTER


def test_gguf_whose_metadata_its_family_rejects_reads_as_llama(tmp_path):
    path = tmp_path / "odd-moe.gguf"
    write_gguf(path, arch="qwen2moe", experts=1)  # top-2 routing over a single expert
    spec = load_model(str(path)).spec
    assert spec.facts.model_type == "llama"
    assert any("qwen2_moe" in w and "llama-like" in w for w in spec.warnings)


def test_gguf_of_an_unknown_architecture_reads_as_llama_with_a_warning(tmp_path):
    path = tmp_path / "odd.gguf"
    write_gguf(path, arch="someformer", file_type=None)
    spec = load_model(str(path)).spec
    assert spec.facts.num_layers == 2
    assert spec.quantization == "Q4_K"  # the most common matrix type
    assert any("someformer" in w for w in spec.warnings)


# ------------------------------------------------------------------------- bad input


def _assert_clear(exc_info, *words):
    message = str(exc_info.value)
    assert isinstance(exc_info.value, SourceError)
    for word in words:
        assert word in message, message


def test_truncated_safetensors_header(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(b"\x10\x00\x00")
    with pytest.raises(BadModelFile) as info:
        load_model(str(path))
    _assert_clear(info, "t.safetensors", "truncated")


def test_header_length_exceeding_the_file(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 5000) + b"{}")
    with pytest.raises(BadModelFile) as info:
        load_model(str(path))
    _assert_clear(info, "exceeds the file")


def test_absurd_header_length(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 60) + b"{}")
    with pytest.raises(BadModelFile, match="corrupt"):
        load_model(str(path))


def test_file_cut_inside_the_data(tmp_path):
    path = tmp_path / "t.safetensors"
    raw = safetensors_bytes(TENSORS)
    path.write_bytes(raw[: len(raw) - 100])
    with pytest.raises(BadModelFile, match="truncated"):
        load_model(str(path))


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"dtype": "Q9", "shape": [2], "data_offsets": [0, 4]}, "unknown dtype"),
        ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}, "invalid shape"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, "needs 8"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, "data_offsets"),
        ("nonsense", "no dtype"),
    ],
)
def test_impossible_header_entries(tmp_path, entry, words):
    header = json.dumps({"w": entry}).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(BadModelFile, match=words):
        load_model(str(path))


def test_header_that_is_not_json(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"{{{{" + bytes(8))
    with pytest.raises(BadModelFile, match="not valid JSON"):
        load_model(str(path))


def test_gguf_with_wrong_magic(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGML" + bytes(100))
    with pytest.raises(BadModelFile) as info:
        load_model(str(path))
    _assert_clear(info, "m.gguf", "wrong magic")


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_gguf_with_truncated_tensor_table(tmp_path, keep):
    good = tmp_path / "good.gguf"
    write_gguf(good)
    raw = good.read_bytes()
    reader = gguf.GGUFReader(good)
    table_end = reader.data_offset
    del reader
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(raw[: int(table_end * keep)])
    with pytest.raises(BadModelFile, match=r"cut\.gguf"):
        load_model(str(cut))


def test_gguf_whose_data_is_cut_off(tmp_path):
    good = tmp_path / "good.gguf"
    write_gguf(good)
    raw = good.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(raw[: len(raw) - 1000])
    with pytest.raises(BadModelFile, match=r"truncated or corrupt|past the end"):
        load_model(str(cut))


def test_gguf_announcing_absurd_counts(tmp_path):
    path = tmp_path / "huge.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 1 << 40) + bytes(64))
    with pytest.raises(BadModelFile, match="real model files hold far fewer"):
        load_model(str(path))


def test_config_that_is_not_json(tmp_path):
    (tmp_path / "config.json").write_text("{'model_type': 'llama',}")
    with pytest.raises(BadModelFile) as info:
        load_model(str(tmp_path / "config.json"))
    _assert_clear(info, "config.json", "not valid JSON", "line 1")


def test_folder_without_config(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", TENSORS)
    with pytest.raises(IncompleteModel, match=r"no config\.json"):
        load_model(str(tmp_path))


def test_index_naming_a_missing_shard(tmp_path):
    folder = write_model_folder(tmp_path / "m", TINY_LLAMA_CONFIG, TENSORS, shards=2)
    next(folder.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(IncompleteModel, match="lacks shards"):
        load_model(str(folder))


def test_unsupported_model_type_is_a_user_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "imaginary"}))
    with pytest.raises(VramguiError, match="imaginary"):
        load_model(str(tmp_path / "config.json"))


def test_gguf_metadata_of_the_wrong_type():
    metadata = {
        "general.architecture": "llama",
        "llama.block_count": "two",
        "llama.embedding_length": 64,
        "llama.attention.head_count": 4,
    }
    stored = [HeaderTensor("token_embd.weight", "F16", (10, 64), 1280)]
    with pytest.raises(BadModelFile, match="wrong type"):
        gguf_reader.spec_from_gguf(gguf_reader.GgufContents(metadata, stored, 10), "m", "test")


def test_gguf_metadata_without_the_architecture_facts():
    stored = [HeaderTensor("token_embd.weight", "F16", (10, 64), 1280)]
    contents = gguf_reader.GgufContents({"general.architecture": "llama"}, stored, None)
    with pytest.raises(IncompleteModel, match="block_count"):
        gguf_reader.spec_from_gguf(contents, "m", "test")


def test_lone_safetensors_with_odd_shapes_asks_for_a_config(tmp_path):
    tensors = dict(TENSORS)
    tensors["model.layers.0.self_attn.q_proj.weight"] = ("F32", ())
    path = write_safetensors(tmp_path / "odd.safetensors", tensors)
    with pytest.raises(IncompleteModel, match="not llama-like"):
        load_model(str(path))


# ------------------------------------------------------------------------- fuzzing

_GOOD_GGUF: dict = {}


def _good_gguf(tmp_path_factory) -> bytes:
    if not _GOOD_GGUF:
        path = tmp_path_factory.mktemp("gguf") / "good.gguf"
        write_gguf(path)
        _GOOD_GGUF["raw"] = path.read_bytes()
        _GOOD_GGUF["table_end"] = int(gguf.GGUFReader(path).data_offset)
    return _GOOD_GGUF["raw"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_gguf_never_crashes(tmp_path_factory, data):
    raw = bytearray(_good_gguf(tmp_path_factory))
    header_end = _GOOD_GGUF["table_end"]  # damage the metadata and tensor table
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(4, header_end))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path_factory.mktemp("bad") / "bad.gguf"
    path.write_bytes(bytes(raw))
    with contextlib.suppress(VramguiError):
        load_model(str(path))


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 1 << 70) | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
_ENTRY = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "BF16", "I32", "F4", "Q4_K", ""]) | _JSONISH,
        "shape": st.lists(st.integers(-2, 70) | _JSONISH, max_size=4) | _JSONISH,
        "data_offsets": st.lists(st.integers(-2, 600), min_size=2, max_size=2) | _JSONISH,
    }
)


@settings(max_examples=60, deadline=None)
@given(
    header=st.dictionaries(st.text(max_size=8), _ENTRY | _JSONISH, max_size=4),
    junk=st.none() | st.binary(max_size=40),
    claimed=st.integers(0, 400),
)
def test_damaged_safetensors_header_never_crashes(header, junk, claimed):
    raw = json.dumps(header).encode() if junk is None else junk
    with contextlib.suppress(BadModelFile):
        for tensor in local.parse_safetensors_header(raw, claimed, "x.safetensors"):
            assert tensor.nbytes >= 0 and all(d >= 0 for d in tensor.shape)


def test_the_files_of_a_hugging_face_cache_snapshot_open_by_their_own_names(tmp_path):
    from tests.fakehub.stores import hf_cache_repo
    from vramgui.sources.resolve import load_ref

    files = {
        "config.json": json.dumps(TINY_LLAMA_CONFIG).encode(),
        "model.safetensors": safetensors_bytes(llama_tensors(TINY_LLAMA_CONFIG)),
    }
    # Deep enough that the path is long, as copied from a file manager.
    snapshot = hf_cache_repo(tmp_path / ("deep-" * 30) / "hub", "acme/tiny-llama", files)
    config = load_model(str(snapshot / "config.json"))  # a link to a blob without a suffix
    assert config.spec.name == "acme/tiny-llama"  # the repo, not the commit naming the folder
    weights = load_model(str(snapshot / "model.safetensors"))
    assert weights.spec.name == "acme/tiny-llama/model.safetensors"
    assert weights.spec.parameters == header_totals(llama_tensors(TINY_LLAMA_CONFIG))[0]
    assert load_model(str(snapshot)).spec.name == "acme/tiny-llama"
    # Found again by the link's name (a profile), not by the blob's.
    assert load_ref(weights.ref).spec.parameters == weights.spec.parameters
    assert load_ref(config.ref).spec.name == "acme/tiny-llama"
    # A file that is no model says so with its whole name, however long its folder.
    other = snapshot / "notes.txt"
    other.write_text("hello")
    with pytest.raises(BadModelFile) as info:
        load_model(str(other))
    assert len(str(other)) > 200 and "notes.txt is not a model" in str(info.value)


def test_a_gguf_s_rope_scaling_is_the_config_s():
    # convert_hf_to_gguf writes a config's rope_scaling as <arch>.rope.scaling.* keys.
    metadata = {
        "general.architecture": "qwen3",
        "qwen3.block_count": 2,
        "qwen3.embedding_length": 64,
        "qwen3.attention.head_count": 4,
        "qwen3.context_length": 40960,
        "qwen3.rope.scaling.type": "yarn",
        "qwen3.rope.scaling.factor": 4.0,
        "qwen3.rope.scaling.original_context_length": 32768,
    }
    config, _ = gguf_reader.gguf_config(metadata, [], 10)
    assert config["rope_scaling"] == {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
    }
    metadata["qwen3.rope.scaling.type"] = "none"
    assert "rope_scaling" not in gguf_reader.gguf_config(metadata, [], 10)[0]
