"""Small GGUF files of several architectures, written with the ``gguf`` package, for checking
the estimate against llama.cpp's own accounting (``benchmarks/llamacpp_buffers.py``).

Each model has the tensors and metadata keys llama.cpp's loader asks for (``src/models/*.cpp``),
random weights (llama.cpp never looks at their values to size its buffers) and a plain
vocabulary of numbered tokens. Sizes are small enough to load in seconds on a CPU, large enough
that every buffer is megabytes: a dense Llama with grouped-query attention, a Qwen3 mixture of
experts, a Gemma 3 with sliding-window layers and a DeepSeek-V2 with multi-head latent
attention and shared experts.

    .venv/bin/python -m benchmarks.llamacpp_gguf OUT_FOLDER
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Arch:
    """One generated model: its GGUF architecture, metadata and a tensor list."""

    name: str
    arch: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    context: int = 32768
    experts: int = 0
    experts_used: int = 0
    expert_ffn: int = 0
    extra: dict[str, object] = field(default_factory=dict)
    tensors: Callable[[Arch], Iterator[tuple[str, Shape]]] | None = None


def _attention(a: Arch, i: int, norms: bool) -> Iterator[tuple[str, Shape]]:
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    yield f"blk.{i}.attn_norm.weight", (a.hidden,)
    yield f"blk.{i}.attn_q.weight", (q, a.hidden)
    yield f"blk.{i}.attn_k.weight", (kv, a.hidden)
    yield f"blk.{i}.attn_v.weight", (kv, a.hidden)
    yield f"blk.{i}.attn_output.weight", (a.hidden, q)
    if norms:
        yield f"blk.{i}.attn_q_norm.weight", (a.head_dim,)
        yield f"blk.{i}.attn_k_norm.weight", (a.head_dim,)


def _dense_ffn(
    a: Arch, i: int, suffix: str = "", width: int | None = None
) -> Iterator[tuple[str, Shape]]:
    ff = a.ffn if width is None else width
    yield f"blk.{i}.ffn_gate{suffix}.weight", (ff, a.hidden)
    yield f"blk.{i}.ffn_up{suffix}.weight", (ff, a.hidden)
    yield f"blk.{i}.ffn_down{suffix}.weight", (a.hidden, ff)


def _experts(a: Arch, i: int) -> Iterator[tuple[str, Shape]]:
    yield f"blk.{i}.ffn_gate_inp.weight", (a.experts, a.hidden)
    yield f"blk.{i}.ffn_gate_exps.weight", (a.experts, a.expert_ffn, a.hidden)
    yield f"blk.{i}.ffn_up_exps.weight", (a.experts, a.expert_ffn, a.hidden)
    yield f"blk.{i}.ffn_down_exps.weight", (a.experts, a.hidden, a.expert_ffn)


def _top(a: Arch, tied: bool = False) -> Iterator[tuple[str, Shape]]:
    yield "token_embd.weight", (a.vocab, a.hidden)
    yield "output_norm.weight", (a.hidden,)
    if not tied:
        yield "output.weight", (a.vocab, a.hidden)


def llama_tensors(a: Arch) -> Iterator[tuple[str, Shape]]:
    yield from _top(a)
    for i in range(a.layers):
        yield from _attention(a, i, norms=False)
        yield f"blk.{i}.ffn_norm.weight", (a.hidden,)
        yield from _dense_ffn(a, i)


def qwen3moe_tensors(a: Arch) -> Iterator[tuple[str, Shape]]:
    yield from _top(a)
    for i in range(a.layers):
        yield from _attention(a, i, norms=True)
        yield f"blk.{i}.ffn_norm.weight", (a.hidden,)
        yield from _experts(a, i)


def gemma3_tensors(a: Arch) -> Iterator[tuple[str, Shape]]:
    yield from _top(a, tied=True)
    for i in range(a.layers):
        yield from _attention(a, i, norms=True)
        yield f"blk.{i}.post_attention_norm.weight", (a.hidden,)
        yield f"blk.{i}.ffn_norm.weight", (a.hidden,)
        yield from _dense_ffn(a, i)
        yield f"blk.{i}.post_ffw_norm.weight", (a.hidden,)


def deepseek2_tensors(a: Arch) -> Iterator[tuple[str, Shape]]:
    rank_kv = int(a.extra["attention.kv_lora_rank"])  # type: ignore[call-overload]
    rank_q = int(a.extra["attention.q_lora_rank"])  # type: ignore[call-overload]
    rope = int(a.extra["rope.dimension_count"])  # type: ignore[call-overload]
    nope = a.head_dim - rope
    v = int(a.extra["attention.value_length_mla"])  # type: ignore[call-overload]
    dense = int(a.extra["leading_dense_block_count"])  # type: ignore[call-overload]
    shared = int(a.extra["expert_shared_count"])  # type: ignore[call-overload]
    yield from _top(a)
    for i in range(a.layers):
        yield f"blk.{i}.attn_norm.weight", (a.hidden,)
        yield f"blk.{i}.attn_q_a_norm.weight", (rank_q,)
        yield f"blk.{i}.attn_kv_a_norm.weight", (rank_kv,)
        yield f"blk.{i}.attn_q_a.weight", (rank_q, a.hidden)
        yield f"blk.{i}.attn_q_b.weight", (a.heads * (nope + rope), rank_q)
        yield f"blk.{i}.attn_kv_a_mqa.weight", (rank_kv + rope, a.hidden)
        yield f"blk.{i}.attn_k_b.weight", (a.heads, rank_kv, nope)
        yield f"blk.{i}.attn_v_b.weight", (a.heads, v, rank_kv)
        yield f"blk.{i}.attn_output.weight", (a.hidden, a.heads * v)
        yield f"blk.{i}.ffn_norm.weight", (a.hidden,)
        if i < dense:
            yield from _dense_ffn(a, i)
        else:
            yield from _experts(a, i)
            yield from _dense_ffn(a, i, "_shexp", a.expert_ffn * shared)


ARCHS = (
    Arch(
        "llama-dense",
        "llama",
        32000,
        1024,
        8,
        16,
        4,
        64,
        2816,
        tensors=llama_tensors,
        extra={"rope.dimension_count": 64, "rope.freq_base": 10000.0},
    ),
    Arch(
        "qwen3moe",
        "qwen3moe",
        32000,
        1024,
        8,
        16,
        4,
        64,
        2816,
        experts=32,
        experts_used=4,
        expert_ffn=512,
        tensors=qwen3moe_tensors,
        extra={"rope.freq_base": 1000000.0},
    ),
    # Small vocabularies: the feed-forward block, not the logits, sizes the compute buffer.
    Arch(
        "llama-wide",
        "llama",
        4000,
        2048,
        4,
        32,
        8,
        64,
        5632,
        tensors=llama_tensors,
        extra={"rope.dimension_count": 64, "rope.freq_base": 10000.0},
    ),
    Arch(
        "qwen3moe-64x8",
        "qwen3moe",
        4000,
        1536,
        4,
        16,
        4,
        128,
        4096,
        experts=64,
        experts_used=8,
        expert_ffn=384,
        tensors=qwen3moe_tensors,
        extra={"rope.freq_base": 1000000.0},
    ),
    Arch(
        "gemma3-swa",
        "gemma3",
        32000,
        1024,
        12,
        8,
        4,
        128,
        2816,
        tensors=gemma3_tensors,
        extra={"attention.sliding_window": 512, "rope.freq_base": 1000000.0},
    ),
    Arch(
        "deepseek2-mla",
        "deepseek2",
        32000,
        1024,
        6,
        16,
        1,
        192,
        2816,
        experts=16,
        experts_used=4,
        expert_ffn=512,
        tensors=deepseek2_tensors,
        extra={
            "attention.kv_lora_rank": 256,
            "attention.q_lora_rank": 384,
            "rope.dimension_count": 64,
            # As convert_hf_to_gguf writes MLA: the cache holds the latent and the rotary key.
            "attention.key_length": 256 + 64,
            "attention.value_length": 256,
            "attention.key_length_mla": 192,
            "attention.value_length_mla": 128,
            "leading_dense_block_count": 1,
            "expert_shared_count": 2,
            "expert_weights_scale": 1.0,
            "rope.freq_base": 10000.0,
        },
    ),
    Arch(
        "deepseek2-mla-wide",
        "deepseek2",
        32000,
        768,
        4,
        32,
        1,
        96,
        2048,
        experts=8,
        experts_used=2,
        expert_ffn=384,
        tensors=deepseek2_tensors,
        extra={
            "attention.kv_lora_rank": 512,
            "attention.q_lora_rank": 256,
            "rope.dimension_count": 32,
            "attention.key_length": 512 + 32,
            "attention.value_length": 512,
            "attention.key_length_mla": 96,
            "attention.value_length_mla": 64,
            "leading_dense_block_count": 1,
            "expert_shared_count": 1,
            "expert_weights_scale": 1.0,
            "rope.freq_base": 10000.0,
        },
    ),
)


def write(a: Arch, path: Path, seed: int = 0, *, data: bool = True) -> None:
    """Write ``a`` as an F16 GGUF (norms and the router in F32, as convert_hf_to_gguf does);
    ``data=False`` writes the header alone (metadata and tensor table), what vramgui reads."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), a.arch)
    w.add_name(a.name)
    w.add_context_length(a.context)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    if "attention.key_length" not in a.extra:
        w.add_key_length(a.head_dim)
        w.add_value_length(a.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(1)  # MOSTLY_F16
    if a.experts:
        w.add_expert_count(a.experts)
        w.add_expert_used_count(a.experts_used)
        w.add_expert_feed_forward_length(a.expert_ffn)
    for key, value in a.extra.items():
        full = f"{a.arch}.{key}"
        if isinstance(value, float):
            w.add_float32(full, value)
        else:
            w.add_uint32(full, int(value))  # type: ignore[call-overload]
    # SentencePiece's layout: control tokens, the 256 byte tokens, then words.
    words = a.vocab - 3 - 256
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(words)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * a.vocab)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * words)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    assert a.tensors is not None
    for name, shape in a.tensors(a):
        small = len(shape) == 1 or "ffn_gate_inp" in name
        dtype = np.float32 if small else np.float16
        if not data:
            size = int(np.prod(shape)) * np.dtype(dtype).itemsize
            raw = GGMLQuantizationType.F32 if small else GGMLQuantizationType.F16
            w.add_tensor_info(name, shape, np.dtype(dtype), size, raw_dtype=raw)
            continue
        values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dtype)
        raw = None if small else GGMLQuantizationType.F16
        w.add_tensor(name, values, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    if data:
        w.write_tensors_to_file()
    else:
        w.write_ti_data_to_file()
    w.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", help="these models only (default: all)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for a in ARCHS:
        if args.only and a.name not in args.only:
            continue
        path = args.out / f"{a.name}-f16.gguf"
        write(a, path)
        print(path, path.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
