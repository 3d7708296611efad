"""Models on disk: a folder (config.json + safetensors), a lone .safetensors file, a .gguf file.

Only headers are read: the safetensors JSON header (parsed and validated here, never the tensor
data) and the GGUF metadata and tensor table (through the ``gguf`` package). config.json is read as
data; no model code is ever imported. The tensor inventory of the resulting ModelSpec is the
checkpoint's own, with the exact stored dtypes and shapes; the architecture facts come from
``vramgui.core.families``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramgui.core import naming
from vramgui.core.errors import ConfigError
from vramgui.core.families import SUPPORTED_MODEL_TYPES, spec_from_config
from vramgui.core.model import Inventory, ModelSpec, Tensor
from vramgui.sources.errors import BadModelFile, IncompleteModel, ModelNotFound

# A real header is a few MB at most (a 400B model has ~1,000 tensors per shard); past this cap a
# length field is corrupt, and reading it would only waste memory.
MAX_HEADER_BYTES = 100 * 1024 * 1024
MAX_CONFIG_BYTES = 16 * 1024 * 1024
SAFETENSORS_INDEX = "model.safetensors.index.json"
SAFETENSORS_SINGLE = "model.safetensors"
GGUF_MAGIC = b"GGUF"

# Bits per element of each safetensors dtype.
SAFETENSORS_DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "C64": 64,
}


@dataclass(frozen=True, slots=True)
class StoredTensor:
    """One tensor as a checkpoint header states it.

    Attributes:
        name: checkpoint name.
        dtype: stored type (``BF16``, ``I32``, GGUF ``Q4_K``...).
        shape: PyTorch order.
        nbytes: bytes of its data in the file.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


# ----------------------------------------------------------------------------- safetensors


def parse_safetensors_header(
    header: bytes, data_bytes: int | None, origin: str
) -> list[StoredTensor]:
    """Validate a safetensors JSON header and list its tensors.

    Args:
        header: the JSON header (the bytes after the 8-byte length).
        data_bytes: size of the data section after the header, when known, to check offsets.
        origin: file name for messages.

    Raises:
        BadModelFile: the header is not valid JSON or describes impossible tensors.
    """
    try:
        doc = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadModelFile(f"{origin}: the safetensors header is not valid JSON ({exc})") from None
    except RecursionError:
        raise BadModelFile(f"{origin}: the safetensors header nests too deeply") from None
    if not isinstance(doc, dict):
        raise BadModelFile(f"{origin}: the safetensors header is not a JSON object")
    tensors: list[StoredTensor] = []
    for name, info in doc.items():
        if name == "__metadata__":
            continue
        tensors.append(_header_entry(name, info, data_bytes, origin))
    return tensors


def _header_entry(name: str, info: object, data_bytes: int | None, origin: str) -> StoredTensor:
    where = f"{origin}: tensor {name!r}"
    if not isinstance(info, dict):
        raise BadModelFile(f"{where} has no dtype/shape/data_offsets entry")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPE_BITS:
        raise BadModelFile(f"{where} has an unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise BadModelFile(f"{where} has an invalid shape {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise BadModelFile(f"{where} has invalid data_offsets {offsets!r}")
    if data_bytes is not None and offsets[1] > data_bytes:
        raise BadModelFile(
            f"{where} ends at byte {offsets[1]} of the data but the file holds only {data_bytes}; "
            "the file is truncated or corrupt"
        )
    nbytes = offsets[1] - offsets[0]
    expected = math.ceil(math.prod(shape) * SAFETENSORS_DTYPE_BITS[dtype] / 8)
    if nbytes != expected:
        raise BadModelFile(
            f"{where} stores {nbytes} bytes but {dtype} {tuple(shape)} needs {expected}"
        )
    return StoredTensor(name, dtype, tuple(shape), nbytes)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def header_length(prefix: bytes, file_size: int | None, origin: str) -> int:
    """The JSON header length from the first 8 bytes of a safetensors file, validated."""
    if len(prefix) < 8:
        raise BadModelFile(f"{origin}: too short to be a safetensors file (truncated header)")
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES:
        raise BadModelFile(
            f"{origin}: header length {length} bytes is beyond any real safetensors header; "
            "the file is corrupt or not safetensors"
        )
    if file_size is not None and 8 + length > file_size:
        raise BadModelFile(
            f"{origin}: header length {length} bytes exceeds the file ({file_size} bytes); "
            "the file is truncated or not safetensors"
        )
    return length


def read_safetensors_header(path: Path) -> list[StoredTensor]:
    """Tensors of a local safetensors file, from its header only."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            length = header_length(fh.read(8), size, path.name)
            header = fh.read(length)
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(header) < length:
        raise BadModelFile(f"{path.name}: the header is truncated")
    return parse_safetensors_header(header, size - 8 - length, path.name)


# ----------------------------------------------------------------------------- config.json


def read_config(path: Path) -> dict[str, Any]:
    """config.json as a dict (read as data, never executed)."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise BadModelFile(f"{path} is too large to be a model config.json")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelNotFound(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadModelFile(f"cannot read {path}: {exc}") from None
    return parse_config(text, str(path))


def parse_config(text: str, origin: str) -> dict[str, Any]:
    """Parse config.json text; a clear error when it is not a JSON object."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadModelFile(
            f"{origin} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:  # thousands of nested brackets: no config nests that deep
        raise BadModelFile(f"{origin} nests too deeply to be a model config") from None
    if not isinstance(config, dict):
        raise BadModelFile(f"{origin} is not a JSON object")
    return config


def quantization_of(config: Mapping[str, Any]) -> str | None:
    """The stored quantization scheme a config's ``quantization_config`` declares, if any."""
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    bits = qc.get("bits", 4)
    if method in ("gptq", "awq"):
        return f"{method}-int{bits}"
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return "int8"
        return str(qc.get("bnb_4bit_quant_type", "nf4")).lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "compressed-tensors":
        for group in (qc.get("config_groups") or {}).values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict):
                num_bits = weights.get("num_bits", 8)
                return "fp8" if weights.get("type") == "float" else f"gptq-int{num_bits}"
        return "compressed-tensors"
    return method or None


# ----------------------------------------------------------------------------- spec assembly


def inventory(stored: Iterable[StoredTensor]) -> tuple[Tensor, ...]:
    """Core tensors from stored ones: exact dtype and shape, role / layer / module by name."""
    result = []
    for s in stored:
        info = naming.classify(s.name)
        result.append(
            Tensor(
                name=s.name,
                shape=s.shape,
                role=info.role,
                layer=info.layer,
                module=info.module,
                dtype=s.dtype,
                is_bias=info.is_bias,
            )
        )
    return tuple(result)


def spec_from_checkpoint(
    config: Mapping[str, Any],
    stored: list[StoredTensor],
    name: str,
    source: str,
    *,
    warnings: Iterable[str] = (),
    quantization: str | None = None,
) -> ModelSpec:
    """A ModelSpec whose facts come from ``config`` and whose tensors are the checkpoint's own.

    ``warnings`` name guesses made for the config (an architecture inferred from tensor shapes,
    GGUF metadata read as another family's): the spec is then approximate.
    """
    spec = spec_from_config(dict(config), name)
    warnings = tuple(warnings)
    exactness = spec.inventory
    if warnings:
        exactness = Inventory.APPROXIMATE
    elif stored and exactness is Inventory.EXACT:
        exactness = Inventory.FROM_HEADERS
    return dataclasses.replace(
        spec,
        tensors=inventory(stored) if stored else spec.tensors,
        quantization=quantization or quantization_of(config) or spec.quantization,
        warnings=(*spec.warnings, *warnings),
        source=source,
        inventory=exactness,
    )


# ----------------------------------------------------------------------------- folders and files


def load_config_file(path: Path) -> ModelSpec:
    """A spec synthesized from a config.json alone (no checkpoint headers)."""
    config = read_config(path)
    # A config.json is its folder's model; any other .json names the model itself.
    spec = spec_from_config(
        config, _model_name(path.parent) if path.name == "config.json" else path.stem
    )
    return dataclasses.replace(spec, source=f"config.json at {path}")


def load_folder(path: Path) -> ModelSpec:
    """A model folder: config.json plus its safetensors shards (or a single GGUF file)."""
    config_path = path / "config.json"
    shards = _shard_files(path)
    if not config_path.is_file():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1 and not shards:
            return load_gguf(ggufs[0])
        if len(ggufs) > 1:
            names = ", ".join(p.name for p in ggufs)
            raise IncompleteModel(f"{path} holds several GGUF files ({names}); choose one of them")
        raise IncompleteModel(
            f"{path} has no config.json; vramgui needs it for the architecture "
            "(or point at a single .safetensors or .gguf file)"
        )
    config = read_config(config_path)
    name = _model_name(path)
    if not shards:
        spec = spec_from_config(config, name)
        return dataclasses.replace(
            spec,
            warnings=(
                *spec.warnings,
                "no .safetensors files in the folder: tensors synthesized from config.json",
            ),
            source=f"config.json at {config_path}",
        )
    stored: list[StoredTensor] = []
    seen: set[str] = set()
    for shard in shards:
        for t in read_safetensors_header(shard):
            if t.name not in seen:
                seen.add(t.name)
                stored.append(t)
    return spec_from_checkpoint(
        config, stored, name, f"config.json and safetensors headers in {path}"
    )


def _shard_files(folder: Path) -> list[Path]:
    index = folder / SAFETENSORS_INDEX
    names = {p.name for p in folder.glob("*.safetensors")}
    if SAFETENSORS_SINGLE in names or not index.is_file():
        return [folder / f for f in weight_files(names)]
    files = index_shards(read_config(index), str(index))
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise IncompleteModel(f"{folder} lacks shards named in its index: {', '.join(missing)}")
    return [folder / f for f in files]


def weight_files(names: Iterable[str]) -> list[str]:
    """The safetensors files that hold the model, when there is no index to say.

    ``model.safetensors`` alone when present; otherwise every file except the duplicate
    ``consolidated`` checkpoint (Mistral's own format) and adapters, unless nothing else is there.
    """
    files = sorted(n for n in names if n.endswith(".safetensors"))
    if SAFETENSORS_SINGLE in files:
        return [SAFETENSORS_SINGLE]
    preferred = [f for f in files if not f.startswith(("consolidated", "adapter_model"))]
    return preferred or files


def index_shards(index: Mapping[str, Any], origin: str) -> list[str]:
    """The shard files a ``model.safetensors.index.json`` names."""
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise BadModelFile(f"{origin} has no weight_map")
    return sorted({str(f) for f in weight_map.values()})


def load_safetensors_file(path: Path) -> ModelSpec:
    """A lone .safetensors file; a config.json beside it supplies the facts when present.

    Without one, a llama-like architecture is inferred from the tensor shapes, and the spec warns
    that KV cache and activation figures rest on an assumed head size and context length.
    """
    stored = read_safetensors_header(path)
    config_path = path.parent / "config.json"
    # "model.safetensors" (and its shards) say nothing of the model: its folder does.
    name = (
        f"{_model_name(path.parent)}/{path.name}"
        if path.stem.split("-")[0] in _GENERIC_STEMS
        else path.stem
    )
    source = f"safetensors header of {path}"
    if config_path.is_file():
        config = read_config(config_path)
        return spec_from_checkpoint(config, stored, name, f"{source} with {config_path}")
    config, warnings = infer_config(stored, path.name)
    return spec_from_checkpoint(config, stored, name, source, warnings=warnings)


def infer_config(stored: list[StoredTensor], origin: str) -> tuple[dict[str, Any], list[str]]:
    """A llama-like config.json guessed from tensor shapes, with the assumptions it made."""
    by_module: dict[str, tuple[int, ...]] = {}
    layers = -1
    for s in stored:
        info = naming.classify(s.name)
        if info.is_bias:
            continue
        by_module.setdefault(info.module, s.shape)
        if info.layer is not None:
            layers = max(layers, info.layer)
    embed, q, k = by_module.get("embed_tokens"), by_module.get("q_proj"), by_module.get("k_proj")
    up = by_module.get("up_proj") or by_module.get("gate_proj")
    if (
        layers < 0
        or embed is None
        or q is None
        or k is None
        or up is None
        or any(len(shape) != 2 for shape in (embed, q, k, up))
    ):
        raise IncompleteModel(
            f"{origin} has no config.json beside it and its tensor names are not llama-like; "
            "put the model's config.json in the same folder"
        )
    vocab, hidden = embed
    # The head size is not in the shapes; take the most common one that divides both projections.
    width = math.gcd(q[0], k[0])
    head_dim = next((d for d in (128, 64, 256, 96, 80, 32, 16, 8) if width % d == 0), width)
    context = 4096
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers + 1,
        "num_attention_heads": q[0] // head_dim,
        "num_key_value_heads": k[0] // head_dim,
        "head_dim": head_dim,
        "intermediate_size": up[0],
        "max_position_embeddings": context,
        "tie_word_embeddings": "lm_head" not in by_module,
    }
    warning = (
        f"no config.json beside {origin}: architecture inferred from tensor shapes "
        f"(llama-like, head_dim {head_dim} and context {context} assumed); weights are exact, "
        "but put the model's config.json beside the file for exact KV cache and activation figures"
    )
    return config, [warning]


_GENERIC_STEMS = ("model", "pytorch_model", "consolidated", "adapter_model")


def _model_name(folder: Path) -> str:
    return folder.resolve().name or str(folder)


# ----------------------------------------------------------------------------- GGUF

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
# Smallest tensor-info record: name length, 1 dim, type, offset; used to reject absurd counts.
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8
_MIN_KV_BYTES = 8 + 4 + 1


def load_gguf(path: Path, name: str | None = None) -> ModelSpec:
    """A .gguf file: tensor types and shapes and architecture metadata, via the gguf package.

    Weights are the tensor data bytes in the file, each tensor in its GGUF type.
    """
    contents = read_gguf(path)
    return spec_from_gguf(contents, name or path.stem, f"GGUF {path}")


@dataclass(frozen=True, slots=True)
class GgufContents:
    """What vramgui keeps of a GGUF header.

    Attributes:
        metadata: key/value metadata, without the tokenizer's large arrays.
        tensors: the tensor table in PyTorch shape order.
        token_count: vocabulary size from the tokenizer's token list, when present.
    """

    metadata: dict[str, Any]
    tensors: list[StoredTensor]
    token_count: int | None


def read_gguf(path: Path) -> GgufContents:
    """Metadata and tensor table of a GGUF file; tensor data is never read.

    Raises:
        BadModelFile: wrong magic, truncated or corrupt header or tensor table.
    """
    size = _check_gguf_prefix(path)
    try:
        from gguf import GGUFReader

        reader = GGUFReader(path, "r")
        metadata = {
            key: _plain(field.contents())
            for key, field in reader.fields.items()
            if not key.startswith("tokenizer.ggml.") or key == "tokenizer.ggml.model"
        }
        token_field = reader.fields.get("tokenizer.ggml.tokens")
        token_count = len(token_field.data) if token_field is not None else None
        stored = [
            StoredTensor(
                name=str(t.name),
                dtype=t.tensor_type.name,
                shape=tuple(int(d) for d in reversed(t.shape.tolist())),
                nbytes=int(t.n_bytes),
            )
            for t in reader.tensors
        ]
        data_end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except (
        Exception
    ) as exc:  # the reader raises anything from ValueError to IndexError on bad input
        raise BadModelFile(
            f"{path.name}: the GGUF header or tensor table is truncated or corrupt "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if data_end > size or not stored:
        raise BadModelFile(f"{path.name}: the tensor table points past the end of the file")
    return GgufContents(metadata, stored, token_count)


def _plain(value: Any) -> Any:
    """Metadata values as JSON-ready Python values (the reader hands out numpy scalars)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


# A GGUF header (metadata, vocabulary, tensor table) longer than this is not a model file.
_MAX_GGUF_HEADER_BYTES = 256 * 1024 * 1024


def _check_gguf_prefix(path: Path) -> int:
    """Magic and sane counts, checked before the reader memory-maps the file."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(24)
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {exc.strerror or exc}") from None
    if head[:4] != GGUF_MAGIC:
        raise BadModelFile(f"{path.name}: not a GGUF file (wrong magic {head[:4]!r})")
    if len(head) < 24:
        raise BadModelFile(f"{path.name}: the GGUF header is truncated")
    tensor_count, kv_count = struct.unpack("<QQ", head[8:24])
    if tensor_count * _MIN_TENSOR_INFO_BYTES + kv_count * _MIN_KV_BYTES > size:
        raise BadModelFile(
            f"{path.name}: the GGUF header announces {tensor_count} tensors and {kv_count} "
            f"metadata entries, more than {size} bytes can hold; the file is truncated or corrupt"
        )
    # Walk the whole header before the reader does: a count that claims more items than the
    # file holds must end here, not in an allocation the size of the claim.
    try:
        with path.open("rb") as fh:
            prefix = fh.read(min(size, _MAX_GGUF_HEADER_BYTES))
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {exc.strerror or exc}") from None
    if gguf_header_end(prefix, path.name) is None:
        raise BadModelFile(
            f"{path.name}: the GGUF header or tensor table runs past the end of the file; "
            "the file is truncated or corrupt"
        )
    return size


def gguf_header_end(buf: bytes, origin: str) -> int | None:
    """Where the tensor table of a GGUF header ends in ``buf``, or None if ``buf`` is too short.

    Walks the metadata and tensor infos without interpreting them.

    Raises:
        BadModelFile: not GGUF, or a value type no GGUF version defines.
    """
    if len(buf) >= 4 and buf[:4] != GGUF_MAGIC:
        raise BadModelFile(f"{origin}: not a GGUF file (wrong magic {buf[:4]!r})")
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    pos = 24
    try:
        n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)

        def string_end(at: int) -> int:
            (n,) = struct.unpack_from("<Q", buf, at)
            return at + 8 + n

        def value_end(at: int, kind: int) -> int:
            if kind in scalar:
                return at + scalar[kind]
            if kind == 8:
                return string_end(at)
            if kind == 9:
                item, count = struct.unpack_from("<IQ", buf, at)
                at += 12
                if item in scalar:
                    return at + scalar[item] * count
                for _ in range(count):
                    at = value_end(at, item)
                    if at > len(buf):
                        return at
                return at
            raise BadModelFile(f"{origin}: unknown GGUF value type {kind}")

        for _ in range(n_kv):
            pos = string_end(pos)
            (kind,) = struct.unpack_from("<I", buf, pos)
            pos = value_end(pos + 4, kind)
            if pos > len(buf):
                return None
        for _ in range(n_tensors):
            pos = string_end(pos)
            (n_dims,) = struct.unpack_from("<I", buf, pos)
            pos += 4 + 8 * n_dims + 4 + 8
            if pos > len(buf):
                return None
    except (struct.error, OverflowError):  # offsets past the buffer, or past 2**63
        return None
    return pos


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
    metadata: Mapping[str, Any], stored: list[StoredTensor], token_count: int | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The config.json equivalent of GGUF architecture metadata, and warnings about gaps."""
    arch = str(metadata.get("general.architecture", ""))

    def get(key: str, default: Any = None) -> Any:
        value = metadata.get(f"{arch}.{key}", default)
        if isinstance(value, list):  # per-layer values (some hybrids): the largest is the bound
            return max(value) if value else default
        return value

    warnings: list[str] = []
    model_type = _GGUF_ARCH_TO_MODEL_TYPE.get(arch)
    experts = int(get("expert_count", 0) or 0)
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
    hidden = int(get("embedding_length", embed.shape[-1] if embed else 0))
    vocab = token_count or (embed.shape[0] if embed else 0)
    heads = int(get("attention.head_count", 0) or 0)
    if not (hidden and heads and vocab and get("block_count")):
        raise IncompleteModel(
            "the GGUF metadata lacks block_count, embedding_length, head_count or a vocabulary; "
            "vramgui cannot tell the architecture"
        )
    config: dict[str, Any] = {
        "model_type": model_type,
        "num_hidden_layers": int(get("block_count")),
        "hidden_size": hidden,
        "intermediate_size": int(get("feed_forward_length", 4 * hidden)),
        "num_attention_heads": heads,
        "num_key_value_heads": int(get("attention.head_count_kv", heads)),
        "head_dim": int(get("attention.key_length", hidden // heads)),
        "max_position_embeddings": int(get("context_length", 4096)),
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
    if model_type.startswith("deepseek") and "qk_rope_head_dim" in config:
        # MLA: GGUF's key_length is the whole q/k head, the rotary part included.
        config["qk_nope_head_dim"] = config["head_dim"] - config["qk_rope_head_dim"]
    if experts:
        config["num_local_experts"] = experts
        config["num_experts"] = experts
        config["n_routed_experts"] = experts
    return config, warnings


def gguf_file_type(metadata: Mapping[str, Any], stored: list[StoredTensor]) -> str | None:
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
