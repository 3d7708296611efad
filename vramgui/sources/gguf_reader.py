"""GGUF files: the metadata and tensor table, read by one walk of the header.

The header is read as a stream in 1 MiB pieces (never the whole file, never memory-mapped),
keeping the metadata an architecture needs and counting the tokenizer's large arrays without
keeping them. What no real model file holds ends the walk at once with a ``BadModelFile`` that
names the limit: see the limits below and docs/performance.md. The ``gguf`` package supplies
the tensor types' block sizes and the file type names; its reader builds a NumPy view per
value, which took 29 s and 1.6 GB for an 8 MB file of a million empty strings.
"""

from __future__ import annotations

import io
import math
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vramgui.core.errors import ConfigError, shown
from vramgui.core.families import SUPPORTED_MODEL_TYPES
from vramgui.core.model import ModelSpec
from vramgui.sources.checkpoint import (
    HeaderTensor,
    open_regular,
    regular_size,
    spec_from_checkpoint,
)
from vramgui.sources.errors import BadModelFile, IncompleteModel

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
# Limits, each far beyond real model files: a header of a 262k-token vocabulary with its merges
# is ~10 MB, ~60 metadata entries, ~1M array items; the largest MoE files hold ~2,000 tensors
# (experts merged per layer).
MAX_HEADER_BYTES = 64 * 2**20
MAX_METADATA_ENTRIES = 4096
MAX_TENSORS = 65_536
MAX_ARRAY_ITEMS = 4 * 2**20  # all arrays of a file together
MAX_NAME_BYTES = 4096  # a key or tensor name (llama.cpp allows 64 bytes per tensor name)
MAX_DIMS = 4  # GGML_MAX_DIMS
# Longer values are counted or skipped, not kept: the tokenizer's arrays, chat templates.
KEPT_ARRAY_ITEMS = 65_536
KEPT_STRING_BYTES = 64 * 1024
_CHUNK_BYTES = 2**20
_STRING, _ARRAY = 8, 9
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_DEFAULT_ALIGNMENT = 32
_PREFERRED = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q8_0")


@dataclass(frozen=True, slots=True)
class GgufContents:
    """What vramgui keeps of a GGUF header.

    Attributes:
        metadata: key/value metadata, without the tokenizer's large arrays.
        tensors: the tensor table in PyTorch shape order.
        token_count: vocabulary size from the tokenizer's token list, when present.
    """

    metadata: dict[str, Any]
    tensors: list[HeaderTensor]
    token_count: int | None


def preferred_gguf(names: list[str]) -> str:
    """The GGUF file read when none is named: the most common 4-bit quantization first."""
    for quant in _PREFERRED:
        for name in names:
            if quant.lower() in name.lower():
                return name
    return names[0]


def is_projector(name: str) -> bool:
    """A vision projector shipped beside a model's GGUF files (``mmproj-*.gguf``), not a model."""
    return name.rsplit("/", 1)[-1].lower().startswith("mmproj")


class HeaderBeyond(Exception):
    """The header runs past the bytes at hand (a prefix read from the Hub): read more."""


def load_gguf(path: Path, name: str | None = None) -> ModelSpec:
    """A .gguf file: tensor types and shapes and architecture metadata.

    Weights are the tensor data bytes in the file, each tensor in its GGUF type.
    """
    contents = read_gguf(path)
    return spec_from_gguf(contents, name or path.stem, f"GGUF {path}")


def read_gguf(path: Path) -> GgufContents:
    """Metadata and tensor table of a GGUF file; tensor data is never read.

    Raises:
        BadModelFile: wrong magic, truncated or corrupt header, or beyond a limit.
    """
    size = regular_size(path)
    with open_regular(path) as fh:
        try:
            return parse_gguf(fh, size, size, path.name)
        except OSError as exc:
            raise BadModelFile(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_gguf(stream: IO[bytes], available: int, size: int | None, origin: str) -> GgufContents:
    """Walk a GGUF header from ``stream``.

    Args:
        stream: the file, or a prefix of it.
        available: how many bytes ``stream`` holds.
        size: the whole file's size, to check that tensor data lies inside it (None: unknown).
        origin: the file's name, for messages.

    Raises:
        HeaderBeyond: ``stream`` is a prefix that ends inside the header.
        BadModelFile: not GGUF, truncated, corrupt, or beyond a limit.
    """
    cursor = _Cursor(stream, available, size, origin)
    magic = cursor.take(4)
    if magic != GGUF_MAGIC:
        raise BadModelFile(f"{origin}: not a GGUF file (wrong magic {magic!r})")
    version = cursor.u32()
    if version not in GGUF_VERSIONS:
        raise BadModelFile(f"{origin}: GGUF version {version} is not one vramgui reads (2 or 3)")
    n_tensors, n_kv = cursor.u64(), cursor.u64()
    if n_tensors > MAX_TENSORS or n_kv > MAX_METADATA_ENTRIES:
        raise BadModelFile(
            f"{origin}: the GGUF header announces {n_tensors} tensors and {n_kv} metadata "
            f"entries; real model files hold far fewer (vramgui reads up to {MAX_TENSORS:,} and "
            f"{MAX_METADATA_ENTRIES:,}), so the file is corrupt or not a model"
        )
    walk = _Walk(cursor)
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cursor.string(MAX_NAME_BYTES, "a metadata key")
        kind = cursor.u32()
        kept, value = walk.value(kind, key)
        if kept:
            metadata[key] = value
    infos = []
    for _ in range(n_tensors):
        name = cursor.string(MAX_NAME_BYTES, "a tensor name")
        n_dims = cursor.u32()
        if n_dims > MAX_DIMS:
            raise BadModelFile(f"{origin}: tensor {name!r} has {n_dims} dimensions (at most 4)")
        dims = struct.unpack(f"<{n_dims}Q", cursor.take(8 * n_dims))
        infos.append((name, dims, cursor.u32(), cursor.u64()))
    tensors = _tensor_table(infos, cursor.tell(), metadata, size, origin)
    return GgufContents(metadata, tensors, walk.token_count)


def _tensor_table(
    infos: list[tuple[str, tuple[int, ...], int, int]],
    header_end: int,
    metadata: Mapping[str, Any],
    size: int | None,
    origin: str,
) -> list[HeaderTensor]:
    """The tensors with their data sizes, each checked to lie inside the file."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise BadModelFile(f"{origin}: general.alignment {alignment!r} is not a power of two")
    data_start = -(-header_end // alignment) * alignment
    tensors = []
    for name, dims, type_id, offset in infos:
        try:
            qtype = GGMLQuantizationType(type_id)
            block, type_bytes = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise BadModelFile(f"{origin}: tensor {name!r} has an unknown type {type_id}") from None
        if dims and dims[0] % block:
            raise BadModelFile(
                f"{origin}: tensor {name!r} has rows of {dims[0]} values, not whole "
                f"{qtype.name} blocks of {block}"
            )
        nbytes = math.prod(dims) // block * type_bytes
        if size is not None and data_start + offset + nbytes > size:
            raise BadModelFile(f"{origin}: the tensor table points past the end of the file")
        tensors.append(HeaderTensor(name, qtype.name, tuple(reversed(dims)), nbytes))
    if not tensors:
        raise BadModelFile(f"{origin}: the GGUF file holds no tensors")
    return tensors


class _Cursor:
    """Sequential reads from a stream through a buffer of about 1 MiB."""

    def __init__(self, stream: IO[bytes], available: int, size: int | None, origin: str) -> None:
        self._stream = stream
        self._available = available
        self._prefix = size is None or available < size
        self.origin = origin
        self.buf = b""
        self.pos = 0
        self._base = 0  # file offset of buf[0]

    def tell(self) -> int:
        return self._base + self.pos

    def ensure(self, n: int) -> None:
        """At least ``n`` bytes in the buffer from ``pos``."""
        if len(self.buf) - self.pos >= n:
            return
        self._check_end(self.tell() + n)
        rest = self.buf[self.pos :]
        more = self._stream.read(max(_CHUNK_BYTES, n - len(rest)))
        self._base += self.pos
        self.buf, self.pos = rest + more, 0
        if len(self.buf) < n:
            self._past_end()

    def _check_end(self, end: int) -> None:
        if end > MAX_HEADER_BYTES:
            raise BadModelFile(
                f"{self.origin}: the GGUF header runs past {MAX_HEADER_BYTES // 2**20} MiB, "
                "beyond any real model file's; the file is corrupt or not a model"
            )
        if end > self._available:
            self._past_end()

    def _past_end(self) -> None:
        if self._prefix:
            raise HeaderBeyond
        raise BadModelFile(
            f"{self.origin}: the GGUF header is truncated (it runs past the end of the file)"
        )

    def take(self, n: int) -> bytes:
        self.ensure(n)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if len(self.buf) - self.pos >= n:
            self.pos += n
            return
        target = self.tell() + n
        self._check_end(target)
        self._stream.seek(target)
        self.buf, self.pos, self._base = b"", 0, target

    def u32(self) -> int:
        self.ensure(4)
        (value,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def u64(self) -> int:
        self.ensure(8)
        (value,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return value

    def string(self, limit: int, what: str) -> str:
        n = self.u64()
        if n > limit:
            raise BadModelFile(f"{self.origin}: {what} of {n:,} bytes; real ones are short")
        return self.take(n).decode("utf-8", errors="replace")


class _Walk:
    """Metadata values: kept when small, counted or skipped when large, refused past a limit."""

    def __init__(self, cursor: _Cursor) -> None:
        self._cursor = cursor
        self._items = 0
        self.token_count: int | None = None

    def value(self, kind: int, key: str) -> tuple[bool, Any]:
        """(kept, value) of one metadata value of type ``kind``."""
        cursor = self._cursor
        if kind in _SCALARS:
            fmt = _SCALARS[kind]
            return True, struct.unpack("<" + fmt, cursor.take(struct.calcsize(fmt)))[0]
        if kind == _STRING:
            n = cursor.u64()
            if n > KEPT_STRING_BYTES:
                cursor.skip(n)
                return False, None
            return True, cursor.take(n).decode("utf-8", errors="replace")
        if kind == _ARRAY:
            return self._array(key)
        raise BadModelFile(f"{cursor.origin}: unknown GGUF value type {kind} (key {key!r})")

    def _array(self, key: str) -> tuple[bool, Any]:
        cursor = self._cursor
        item, count = cursor.u32(), cursor.u64()
        self._items += count
        if self._items > MAX_ARRAY_ITEMS:
            raise BadModelFile(
                f"{cursor.origin}: the GGUF metadata holds over {MAX_ARRAY_ITEMS:,} array items "
                f"(at {key!r}); real model files hold about a million at most"
            )
        if key == "tokenizer.ggml.tokens":
            self.token_count = count
        keep = count <= KEPT_ARRAY_ITEMS and not key.startswith("tokenizer.ggml.")
        if item in _SCALARS:
            width = struct.calcsize(_SCALARS[item])
            if not keep:
                cursor.skip(width * count)
                return False, None
            return True, list(
                struct.unpack(f"<{count}{_SCALARS[item]}", cursor.take(width * count))
            )
        if item == _STRING:
            if not keep:
                self._skip_strings(count)
                return False, None
            return True, [
                cursor.string(KEPT_STRING_BYTES, f"an item of {key!r}") for _ in range(count)
            ]
        raise BadModelFile(
            f"{cursor.origin}: {key!r} is an array of type {item}; GGUF model files hold arrays "
            "of numbers or strings only"
        )

    def _skip_strings(self, count: int) -> None:
        """Step over ``count`` strings: the hot loop of a vocabulary, kept to plain locals."""
        cursor = self._cursor
        unpack = _U64.unpack_from
        buf, pos, end = cursor.buf, cursor.pos, len(cursor.buf)
        for _ in range(count):
            if end - pos < 8:
                cursor.pos = pos
                cursor.ensure(8)
                buf, pos, end = cursor.buf, cursor.pos, len(cursor.buf)
            (n,) = unpack(buf, pos)
            pos += 8 + n
            if pos > end:
                cursor.pos = pos - n
                cursor.skip(n)
                buf, pos, end = cursor.buf, cursor.pos, len(cursor.buf)
        cursor.pos = pos


def gguf_prefix_contents(prefix: bytes, size: int | None, origin: str) -> GgufContents:
    """The header of a file whose first bytes are ``prefix`` (read from the Hub).

    Raises:
        HeaderBeyond: the header runs past ``prefix``.
        BadModelFile: as :func:`parse_gguf`.
    """
    return parse_gguf(io.BytesIO(prefix), len(prefix), size, origin)


# GGUF architecture -> transformers model_type, for the llama-style families whose config.json
# keys the GGUF metadata translates to; other architectures are read as llama-like.
_GGUF_ARCH_TO_MODEL_TYPE = {
    "llama": "llama",
    "mistral": "mistral",
    "mixtral": "mixtral",
    "qwen2": "qwen2",
    "qwen2moe": "qwen2_moe",
    "qwen3": "qwen3",
    "qwen3moe": "qwen3_moe",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "deepseek2": "deepseek_v2",
}


def spec_from_gguf(contents: GgufContents, name: str, source: str) -> ModelSpec:
    """A ModelSpec from GGUF metadata (as a transformers-like config) and its tensor table.

    Where the metadata does not make a valid config of the architecture's family, the facts are
    read as a llama-like model's, with a warning; the tensor table stays exact either way.
    """
    quantization = gguf_file_type(contents.metadata, contents.tensors)
    try:
        config, warnings = gguf_config(contents.metadata, contents.tensors, contents.token_count)
        try:
            return spec_from_checkpoint(
                config, contents.tensors, name, source, warnings=warnings, quantization=quantization
            )
        except ConfigError as exc:
            if config["model_type"] == "llama":
                raise
            warnings.append(
                f"GGUF metadata does not describe a valid {config['model_type']} model ({exc}): "
                "facts read as a llama-like model"
            )
            config["model_type"] = "llama"
            return spec_from_checkpoint(
                config, contents.tensors, name, source, warnings=warnings, quantization=quantization
            )
    except (TypeError, ValueError) as exc:
        raise BadModelFile(
            f"{name}: GGUF metadata holds a value of the wrong type ({exc})"
        ) from None


def gguf_config(
    metadata: Mapping[str, Any], stored: list[HeaderTensor], token_count: int | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The config.json equivalent of GGUF architecture metadata, and warnings about gaps."""
    arch = str(metadata.get("general.architecture", ""))

    def get(key: str, default: Any = None) -> Any:
        value = metadata.get(f"{arch}.{key}", default)
        if isinstance(value, list):  # per-layer values (some hybrids): the largest is the bound
            return max(value) if value else default
        return value

    def whole(key: str, default: Any = None) -> int:
        # Sizes stored as floats (a FLOAT32 +inf block_count) must still be whole numbers.
        value = get(key, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{arch}.{key} is {shown(value)}, not a whole number")
        return value

    warnings: list[str] = []
    model_type = _GGUF_ARCH_TO_MODEL_TYPE.get(arch)
    experts = whole("expert_count", 0)
    names = {s.name: s for s in stored}
    if model_type == "llama" and experts:
        model_type = "mixtral"
    if model_type == "deepseek_v2" and any(n.endswith(".exp_probs_b.bias") for n in names):
        model_type = "deepseek_v3"  # V3's router carries a score-correction bias
    if model_type not in SUPPORTED_MODEL_TYPES:
        warnings.append(
            f"GGUF architecture {arch!r} is not one vramgui knows: facts read as a llama-like model"
        )
        model_type = "llama"
    embed = names.get("token_embd.weight")
    hidden = whole("embedding_length", embed.shape[-1] if embed else 0)
    vocab = token_count or (embed.shape[0] if embed else 0)
    heads = whole("attention.head_count", 0)
    if not (hidden and heads and vocab and get("block_count")):
        raise IncompleteModel(
            "the GGUF metadata lacks block_count, embedding_length, head_count or a vocabulary; "
            "vramgui cannot tell the architecture"
        )
    config: dict[str, Any] = {
        "model_type": model_type,
        "num_hidden_layers": whole("block_count"),
        "hidden_size": hidden,
        "intermediate_size": whole("feed_forward_length", 4 * hidden),
        "num_attention_heads": heads,
        "num_key_value_heads": whole("attention.head_count_kv", heads),
        "head_dim": whole("attention.key_length", hidden // heads),
        "max_position_embeddings": whole("context_length", 4096),
        "vocab_size": int(vocab),
        "tie_word_embeddings": "output.weight" not in names,
    }
    optional = {
        "v_head_dim": "attention.value_length",
        "sliding_window": "attention.sliding_window",
        "rope_theta": "rope.freq_base",
        "rms_norm_eps": "attention.layer_norm_rms_epsilon",
        "moe_intermediate_size": "expert_feed_forward_length",
        "num_experts_per_tok": "expert_used_count",
        "kv_lora_rank": "attention.kv_lora_rank",
        "q_lora_rank": "attention.q_lora_rank",
        "n_shared_experts": "expert_shared_count",
        "shared_expert_intermediate_size": "expert_shared_feed_forward_length",
        "first_k_dense_replace": "leading_dense_block_count",
        "qk_rope_head_dim": "rope.dimension_count",
    }
    for key, meta in optional.items():
        value = get(meta)
        if value is not None:
            config[key] = value
    if get("attention.key_length_mla") is not None:
        # MLA as convert_hf_to_gguf writes it since 2025: key_length / value_length describe the
        # cached latent (kv_lora_rank + rotary, kv_lora_rank); the heads' sizes have keys of their own.
        config["head_dim"] = whole("attention.key_length_mla")
        config["v_head_dim"] = whole("attention.value_length_mla", config["head_dim"])
        config["num_key_value_heads"] = heads
    if model_type.startswith("deepseek") and "qk_rope_head_dim" in config:
        # MLA: GGUF's key_length is the whole q/k head, the rotary part included.
        config["qk_nope_head_dim"] = config["head_dim"] - config["qk_rope_head_dim"]
    if experts:
        config["num_local_experts"] = experts
        config["num_experts"] = experts
        config["n_routed_experts"] = experts
    scaling = get("rope.scaling.type")
    if isinstance(scaling, str) and scaling not in ("", "none"):
        # convert_hf_to_gguf writes the config's rope_scaling as rope.scaling.* keys.
        config["rope_scaling"] = {
            "rope_type": scaling,
            "factor": get("rope.scaling.factor", 1.0),
            "original_max_position_embeddings": get("rope.scaling.original_context_length"),
        }
    return config, warnings


def gguf_file_type(metadata: Mapping[str, Any], stored: list[HeaderTensor]) -> str | None:
    """The file type a GGUF file states (``Q4_K_M``, ``F16``...), or its most common matrix type.

    Set even for 16-bit files: a GGUF file is estimated as it is stored, its F32 norms included.
    """
    file_type = metadata.get("general.file_type")
    if isinstance(file_type, int):
        try:
            from gguf import LlamaFileType

            return LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
        except ValueError:
            pass  # a file type newer than the gguf package: judge by the tensors
    matrix_types = Counter(s.dtype for s in stored if len(s.shape) >= 2)
    return matrix_types.most_common(1)[0][0] if matrix_types else None
