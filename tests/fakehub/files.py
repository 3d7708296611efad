"""Small real checkpoint files written by the tests themselves: safetensors (zero data) and GGUF."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np

# Bytes per element of the safetensors dtypes the tests use.
SAFETENSORS_ITEMSIZE = {
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "I64": 8,
    "U64": 8,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
}

TINY_LLAMA_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def llama_tensors(config: dict, dtype: str = "BF16", norm_dtype: str = "F32") -> dict:
    """name -> (dtype, shape) of a llama checkpoint for ``config`` (norms stored in ``norm_dtype``)."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim", h // heads)
    out = {"model.embed_tokens.weight": (dtype, (v, h))}
    for n in range(config["num_hidden_layers"]):
        p = f"model.layers.{n}"
        out[f"{p}.input_layernorm.weight"] = (norm_dtype, (h,))
        out[f"{p}.self_attn.q_proj.weight"] = (dtype, (heads * hd, h))
        out[f"{p}.self_attn.k_proj.weight"] = (dtype, (kv * hd, h))
        out[f"{p}.self_attn.v_proj.weight"] = (dtype, (kv * hd, h))
        out[f"{p}.self_attn.o_proj.weight"] = (dtype, (h, heads * hd))
        out[f"{p}.post_attention_layernorm.weight"] = (norm_dtype, (h,))
        out[f"{p}.mlp.gate_proj.weight"] = (dtype, (i, h))
        out[f"{p}.mlp.up_proj.weight"] = (dtype, (i, h))
        out[f"{p}.mlp.down_proj.weight"] = (dtype, (h, i))
    out["model.norm.weight"] = (norm_dtype, (h,))
    if not config.get("tie_word_embeddings"):
        out["lm_head.weight"] = (dtype, (v, h))
    return out


def safetensors_header(tensors: dict, metadata: dict | None = None) -> tuple[bytes, int]:
    """The 8-byte length and JSON header of a safetensors file for name -> (dtype, shape), and
    the bytes of tensor data that follow it."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * SAFETENSORS_ITEMSIZE[dtype]
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw, offset


def safetensors_bytes(tensors: dict, metadata: dict | None = None) -> bytes:
    """A complete safetensors file (header + zero data) for name -> (dtype, shape)."""
    head, data = safetensors_header(tensors, metadata)
    return head + bytes(data)


def write_sparse_safetensors(path: Path, tensors: dict) -> int:
    """A safetensors file whose data is a hole of the tensors' size (real size, no disk space);
    returns the JSON header's length."""
    head, data = safetensors_header(tensors)
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + data)
    return len(head) - 8


def write_safetensors(path: Path, tensors: dict) -> Path:
    path.write_bytes(safetensors_bytes(tensors))
    return path


def header_totals(tensors: dict) -> tuple[int, int]:
    """(parameters, data bytes) that a header for name -> (dtype, shape) states."""
    params = sum(math.prod(shape) for _, shape in tensors.values())
    data = sum(math.prod(shape) * SAFETENSORS_ITEMSIZE[d] for d, shape in tensors.values())
    return params, data


def write_model_folder(folder: Path, config: dict, tensors: dict, shards: int = 1) -> Path:
    """config.json plus one safetensors file, or ``shards`` files and an index."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if shards == 1:
        write_safetensors(folder / "model.safetensors", tensors)
        return folder
    names = list(tensors)
    weight_map = {}
    for k in range(shards):
        part = {n: tensors[n] for n in names[k::shards]}
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(folder / file, part)
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {"total_size": header_totals(tensors)[1]}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def repo_files(config: dict, tensors: dict, shards: int = 1) -> dict[str, bytes]:
    """The files of a Hub repo (name -> bytes): config.json and one or ``shards`` safetensors."""
    files = {"config.json": json.dumps(config).encode()}
    if shards == 1:
        files["model.safetensors"] = safetensors_bytes(tensors)
        return files
    names = list(tensors)
    weight_map = {}
    for k in range(shards):
        part = {n: tensors[n] for n in names[k::shards]}
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        files[file] = safetensors_bytes(part)
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {"total_size": header_totals(tensors)[1]}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return files


# A tiny llama in GGUF: hidden 256 so that K-quant blocks (256 weights) fit the rows.
GGUF_LLAMA = {"hidden": 256, "ff": 512, "layers": 2, "heads": 4, "kv_heads": 2, "vocab": 320}


def write_gguf(
    path: Path,
    arch: str = "llama",
    file_type: int | None = 15,
    experts: int = 0,
    floats: dict[str, float] | None = None,
    **overrides,
) -> dict:
    """A tiny llama-like GGUF with mixed quant types, MoE when ``experts``; returns
    name -> (type name, torch shape, bytes). ``floats`` stores sizes (``block_count``...) as
    FLOAT32 values instead."""
    floats = floats or {}
    import gguf

    dims = {**GGUF_LLAMA, **overrides}
    h, ff, v = dims["hidden"], dims["ff"], dims["vocab"]
    hd = h // dims["heads"]
    q = gguf.GGMLQuantizationType
    layout = {"token_embd.weight": (q.Q4_K, (v, h)), "output_norm.weight": (q.F32, (h,))}
    layout["output.weight"] = (q.Q6_K, (v, h))
    for n in range(dims["layers"]):
        b = f"blk.{n}"
        layout[f"{b}.attn_norm.weight"] = (q.F32, (h,))
        layout[f"{b}.attn_q.weight"] = (q.Q4_K, (dims["heads"] * hd, h))
        layout[f"{b}.attn_k.weight"] = (q.Q4_K, (dims["kv_heads"] * hd, h))
        layout[f"{b}.attn_v.weight"] = (q.Q6_K, (dims["kv_heads"] * hd, h))
        layout[f"{b}.attn_output.weight"] = (q.Q4_K, (h, dims["heads"] * hd))
        layout[f"{b}.ffn_norm.weight"] = (q.F32, (h,))
        if experts:
            layout[f"{b}.ffn_gate_inp.weight"] = (q.F32, (experts, h))
            layout[f"{b}.ffn_gate_exps.weight"] = (q.Q4_K, (experts, ff, h))
            layout[f"{b}.ffn_up_exps.weight"] = (q.Q4_K, (experts, ff, h))
            layout[f"{b}.ffn_down_exps.weight"] = (q.Q8_0, (experts, h, ff))
            continue
        layout[f"{b}.ffn_gate.weight"] = (q.Q4_K, (ff, h))
        layout[f"{b}.ffn_up.weight"] = (q.Q4_K, (ff, h))
        layout[f"{b}.ffn_down.weight"] = (q.Q8_0, (h, ff))
    writer = gguf.GGUFWriter(str(path), arch)
    sizes = {
        "block_count": dims["layers"],
        "context_length": 2048,
        "embedding_length": h,
        "feed_forward_length": ff,
        "attention.head_count": dims["heads"],
        "attention.head_count_kv": dims["kv_heads"],
    }
    for key, value in sizes.items():
        if key in floats:  # a size stored as a FLOAT32, as a hostile file may
            writer.add_float32(f"{arch}.{key}", floats[key])
        else:
            writer.add_uint32(f"{arch}.{key}", value)
    writer.add_layer_norm_rms_eps(1e-5)
    if file_type is not None:
        writer.add_file_type(file_type)
    if experts:
        writer.add_expert_count(experts)
        writer.add_expert_used_count(2)
        writer.add_expert_feed_forward_length(ff)
    writer.add_token_list([f"t{k}" for k in range(v)])
    result = {}
    for name, (qtype, shape) in layout.items():
        block, type_bytes = gguf.GGML_QUANT_SIZES[qtype]
        row_bytes = shape[-1] // block * type_bytes
        rows = math.prod(shape[:-1])
        if qtype == q.F32:
            data = np.zeros(shape, dtype=np.float32)
        else:
            data = np.zeros((*shape[:-1], row_bytes), dtype=np.uint8)
        writer.add_tensor(name, data, raw_dtype=qtype)
        result[name] = (qtype.name, shape, rows * row_bytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return result
