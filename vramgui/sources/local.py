"""Models on disk: a folder (config.json + safetensors), a lone .safetensors file, a .gguf file.

Only headers are read: the safetensors JSON header (parsed and validated here, never the tensor
data) and the GGUF metadata and tensor table (``gguf_reader``). config.json is read as data; no
model code is ever imported. The tensor inventory of the resulting ModelSpec is the checkpoint's
own, with the exact stored dtypes and shapes; the architecture facts come from
``vramgui.core.families``.

Parsing costs what the file is worth: the limits below are far above any real model (the
largest public checkpoints hold ~140k tensors, ~17 MB of headers and a ~14 MB index) and what
exceeds them is refused before it is materialized; docs/performance.md gives the time and
memory of the worst file accepted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vramgui.core import naming
from vramgui.core.families import spec_from_config
from vramgui.core.model import ModelSpec
from vramgui.sources.checkpoint import (
    HeaderTensor,
    as_shipped,
    describe_os_error,
    open_regular,
    read_regular,
    regular_size,
    spec_from_checkpoint,
)
from vramgui.sources.errors import BadModelFile, IncompleteModel
from vramgui.sources.gguf_reader import load_gguf

# One safetensors header; a real one is at most a few MB per shard.
MAX_HEADER_BYTES = 32 * 2**20
# Tensors of a whole checkpoint, all shards together (Kimi K2, FP8 with scales: ~140k).
MAX_TENSORS = 2**18
MAX_CONFIG_BYTES = 4 * 2**20
MAX_INDEX_BYTES = 32 * 2**20
# A model folder holds its config, tokenizer and shards: a few hundred names at most.
MAX_FOLDER_ENTRIES = 65_536
# Integers in config.json: none is longer (a 2^64 byte count has 20 digits).
MAX_INT_DIGITS = 24
# Dimensions of a tensor in a header; values of dimensions and offsets are below 2^64.
MAX_DIMS = 8
SAFETENSORS_INDEX = "model.safetensors.index.json"
SAFETENSORS_SINGLE = "model.safetensors"
# NVIDIA ModelOpt writes its quantization here rather than in config.json.
HF_QUANT_CONFIG = "hf_quant_config.json"

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


_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1},}}")  # the whole run of digits


class _Refused(Exception):
    """A JSON document exceeded a limit while it was parsed."""


def parse_json(text: str | bytes, origin: str, *, max_objects: int | None = None) -> Any:
    """JSON from a model file, refused early when it is out of proportion.

    Args:
        text: the document.
        origin: the file, for messages.
        max_objects: the most JSON objects it may hold (a safetensors header: one per tensor).

    Raises:
        BadModelFile: not JSON, nested too deeply, an integer longer than
            :data:`MAX_INT_DIGITS` digits, or more objects than ``max_objects``.
    """
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if max_objects is not None and text.count("{") > max_objects:
            # Every object opens with a brace: only a document that may hold too many objects
            # pays for counting them as they are parsed.
            return _bounded_decoder(max_objects).decode(text)
        return json.loads(text)
    except _Refused as exc:
        raise BadModelFile(f"{origin} {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadModelFile(
            f"{origin} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except UnicodeDecodeError as exc:
        raise BadModelFile(f"{origin} is not UTF-8 text ({exc.reason})") from None
    except ValueError:  # an integer past the 4,300 digits Python converts
        raise BadModelFile(f"{origin} holds an integer of over 4,300 digits") from None
    except RecursionError:  # thousands of nested brackets: no model file nests that deep
        raise BadModelFile(f"{origin} nests too deeply to be a model file") from None


def _bounded_decoder(max_objects: int | None) -> json.JSONDecoder:
    """A parser that counts objects as it goes and stops at the limit."""
    objects = 0

    def counted(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal objects
        objects += 1
        if max_objects is not None and objects > max_objects:
            raise _Refused(f"holds over {max_objects:,} entries, more than any real model")
        return dict(pairs)

    return json.JSONDecoder(object_pairs_hook=counted)


# ----------------------------------------------------------------------------- safetensors


def parse_safetensors_header(
    header: bytes, data_bytes: int | None, origin: str, *, max_tensors: int = MAX_TENSORS
) -> list[HeaderTensor]:
    """Validate a safetensors JSON header and list its tensors.

    Args:
        header: the JSON header (the bytes after the 8-byte length).
        data_bytes: size of the data section after the header, when known, to check offsets.
        origin: file name for messages.
        max_tensors: the most tensors it may hold.

    Raises:
        BadModelFile: the header is not valid JSON, describes impossible tensors, or holds more
            than ``max_tensors``.
    """
    # Each tensor states its data_offsets: counting them first refuses an oversized header
    # before any of it is parsed. The object count bounds a header that hides the key in escapes.
    if header.count(b'"data_offsets"') > max_tensors:
        raise BadModelFile(_too_many_tensors(origin, header.count(b'"data_offsets"'), max_tensors))
    doc = parse_json(header, f"{origin}: the safetensors header", max_objects=max_tensors + 2)
    if not isinstance(doc, dict):
        raise BadModelFile(f"{origin}: the safetensors header is not a JSON object")
    tensors = [
        header_entry(name, info, data_bytes, origin)
        for name, info in doc.items()
        if name != "__metadata__"
    ]
    if len(tensors) > max_tensors:
        raise BadModelFile(_too_many_tensors(origin, len(tensors), max_tensors))
    return tensors


def _too_many_tensors(origin: str, count: int, limit: int) -> str:
    return (
        f"{origin}: the safetensors header lists {count:,} tensors, more than vramgui reads "
        f"for one model ({limit:,}; the largest real checkpoints hold ~140,000)"
    )


def header_entry(name: str, info: object, data_bytes: int | None, origin: str) -> HeaderTensor:
    """One tensor of a safetensors header, checked against what its dtype and shape need.

    Runs once per tensor (262,144 times for the largest header accepted): messages are built
    only for a tensor that fails.
    """
    if type(info) is not dict:
        raise BadModelFile(f"{_where(origin, name)} has no dtype/shape/data_offsets entry")
    # Any: the checks below are ``type() is`` tests (fast, but no narrowing for a type checker).
    dtype: Any = info.get("dtype")
    shape: Any = info.get("shape")
    offsets: Any = info.get("data_offsets")
    bits = SAFETENSORS_DTYPE_BITS.get(dtype) if type(dtype) is str else None
    if bits is None:
        raise BadModelFile(f"{_where(origin, name)} has an unknown dtype {dtype!r}")
    if type(shape) not in (list, tuple) or not _counts(shape):
        raise BadModelFile(f"{_where(origin, name)} has an invalid shape {shape!r}")
    if (
        type(offsets) not in (list, tuple)
        or len(offsets) != 2
        or not _counts(offsets)
        or offsets[0] > offsets[1]
    ):
        raise BadModelFile(f"{_where(origin, name)} has invalid data_offsets {offsets!r}")
    if data_bytes is not None and offsets[1] > data_bytes:
        raise BadModelFile(
            f"{_where(origin, name)} ends at byte {offsets[1]} of the data but the file holds "
            f"only {data_bytes}; the file is truncated or corrupt"
        )
    nbytes = offsets[1] - offsets[0]
    expected = (math.prod(shape) * bits + 7) // 8
    if nbytes != expected:
        raise BadModelFile(
            f"{_where(origin, name)} stores {nbytes} bytes but {dtype} {tuple(shape)} needs "
            f"{expected}"
        )
    return HeaderTensor(name, dtype, tuple(shape), nbytes)


def _where(origin: str, name: str) -> str:
    return f"{origin}: tensor {name!r}"


def _counts(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether there are at most 8 values (a tensor has up to 5 dimensions), each an int in
    [0, 2^64) (a bool is not a count): products of them stay cheap to compute."""
    if len(values) > MAX_DIMS:
        return False
    return all(type(value) is int and 0 <= value < 2**64 for value in values)


def header_length(prefix: bytes, file_size: int | None, origin: str) -> int:
    """The JSON header length from the first 8 bytes of a safetensors file, validated."""
    if len(prefix) < 8:
        raise BadModelFile(f"{origin}: too short to be a safetensors file (truncated header)")
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES:
        raise BadModelFile(
            f"{origin}: header length {length} bytes is beyond any real safetensors header "
            f"({MAX_HEADER_BYTES // 2**20} MiB at most); the file is corrupt or not safetensors"
        )
    if file_size is not None and 8 + length > file_size:
        raise BadModelFile(
            f"{origin}: header length {length} bytes exceeds the file ({file_size} bytes); "
            "the file is truncated or not safetensors"
        )
    return length


def read_safetensors_header(path: Path, *, max_tensors: int = MAX_TENSORS) -> list[HeaderTensor]:
    """Tensors of a local safetensors file, from its header only."""
    size = regular_size(path)
    with open_regular(path) as fh:
        try:
            length = header_length(fh.read(8), size, path.name)
            header = fh.read(length)
        except OSError as exc:
            raise BadModelFile(f"cannot read {path}: {describe_os_error(exc)}") from None
    if len(header) < length:
        raise BadModelFile(f"{path.name}: the header is truncated")
    return parse_safetensors_header(header, size - 8 - length, path.name, max_tensors=max_tensors)


# ----------------------------------------------------------------------------- config.json


def read_config(path: Path, limit_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """config.json (or another JSON file of a model) as a dict, read as data, never executed."""
    return parse_config(read_regular(path, limit_bytes, "model config"), str(path))


def parse_config(text: str | bytes, origin: str) -> dict[str, Any]:
    """Parse config.json text; a clear error when it is not a JSON object.

    An integer longer than :data:`MAX_INT_DIGITS` digits is refused before Python converts it
    (the conversion is quadratic in the digits up to 4,300, an error past them): no config
    field is that long, and the core would compute with it.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    long = _LONG_DIGITS.search(text)
    if long is not None:
        digits = len(long[0])
        raise BadModelFile(f"{origin} holds an integer of {digits:,} digits; real ones are short")
    config = parse_json(text, origin)
    if not isinstance(config, dict):
        raise BadModelFile(f"{origin} is not a JSON object")
    return config


# ----------------------------------------------------------------------------- folders and files


def load_config_file(path: Path) -> ModelSpec:
    """A spec synthesized from a config.json alone (no checkpoint headers), in the format its
    ``quantization_config`` (or an ``hf_quant_config.json`` beside it) declares."""
    config = read_config(path)
    # A config.json is its folder's model; any other .json names the model itself.
    is_folder_config = path.name == "config.json"
    spec = spec_from_config(config, _model_name(path.parent) if is_folder_config else path.stem)
    quant = read_hf_quant_config(path.parent) if is_folder_config else None
    return _with_source(as_shipped(spec, config, quant), f"config.json at {path}")


def read_hf_quant_config(folder: Path) -> dict[str, Any] | None:
    """ModelOpt's ``hf_quant_config.json`` of a model folder, when it has one."""
    try:
        names = folder_names(folder)
    except BadModelFile:
        return None
    if HF_QUANT_CONFIG not in names:
        return None
    return read_config(folder / HF_QUANT_CONFIG)


def _with_source(spec: ModelSpec, source: str, warnings: tuple[str, ...] = ()) -> ModelSpec:
    return dataclasses.replace(spec, source=source, warnings=(*spec.warnings, *warnings))


def folder_names(folder: Path) -> set[str]:
    """The names in a model folder.

    Raises:
        BadModelFile: the folder cannot be listed (permission denied, ...).
    """
    names: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                names.add(entry.name)
                if len(names) > MAX_FOLDER_ENTRIES:
                    raise BadModelFile(
                        f"{folder} holds over {MAX_FOLDER_ENTRIES:,} entries, more than any "
                        "model folder"
                    )
    except OSError as exc:
        raise BadModelFile(f"cannot read the folder {folder}: {describe_os_error(exc)}") from None
    return names


def load_folder(path: Path, name: str | None = None) -> ModelSpec:
    """A model folder: config.json plus its safetensors shards (or a single GGUF file).

    Args:
        path: the folder.
        name: the model's name; by default the folder's.
    """
    names = folder_names(path)
    shards = _shard_files(path, names)
    if "config.json" not in names:
        ggufs = sorted(n for n in names if n.endswith(".gguf"))
        if len(ggufs) == 1 and not shards:
            return load_gguf(path / ggufs[0], name)
        if len(ggufs) > 1:
            raise IncompleteModel(
                f"{path} holds several GGUF files ({', '.join(ggufs)}); choose one of them"
            )
        raise IncompleteModel(
            f"{path} has no config.json; vramgui needs it for the architecture "
            "(or point at a single .safetensors or .gguf file)"
        )
    config_path = path / "config.json"
    config = read_config(config_path)
    name = name or _model_name(path)
    quant = read_config(path / HF_QUANT_CONFIG) if HF_QUANT_CONFIG in names else None
    if not shards:
        return _with_source(
            as_shipped(spec_from_config(config, name), config, quant),
            f"config.json at {config_path}",
            ("no .safetensors files in the folder: tensors synthesized from config.json",),
        )
    stored: list[HeaderTensor] = []
    seen: set[str] = set()
    for shard in shards:
        for t in read_safetensors_header(shard, max_tensors=MAX_TENSORS - len(stored)):
            if t.name not in seen:
                seen.add(t.name)
                stored.append(t)
    return spec_from_checkpoint(
        config,
        stored,
        name,
        f"config.json and safetensors headers in {path}",
        hf_quant_config=quant,
    )


def _shard_files(folder: Path, names: set[str]) -> list[Path]:
    if SAFETENSORS_SINGLE in names or SAFETENSORS_INDEX not in names:
        return [folder / f for f in weight_files(names)]
    index = read_config(folder / SAFETENSORS_INDEX, MAX_INDEX_BYTES)
    files = index_shards(index, str(folder / SAFETENSORS_INDEX))
    missing = [f for f in files if f not in names]
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
    """The shard files a ``model.safetensors.index.json`` names (plain names, in the folder)."""
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise BadModelFile(f"{origin} has no weight_map")
    files = sorted({str(f) for f in weight_map.values()})
    odd = [f for f in files if "/" in f or "\\" in f or f in ("", ".", "..")]
    if odd:
        raise BadModelFile(f"{origin} names shards outside its folder: {', '.join(odd[:3])}")
    return files


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
    if "config.json" in folder_names(path.parent):
        config = read_config(config_path)
        return spec_from_checkpoint(
            config,
            stored,
            name,
            f"{source} with {config_path}",
            hf_quant_config=read_hf_quant_config(path.parent),
        )
    config, warnings = infer_config(stored, path.name)
    return spec_from_checkpoint(config, stored, name, source, warnings=warnings)


def infer_config(stored: list[HeaderTensor], origin: str) -> tuple[dict[str, Any], list[str]]:
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
    """A folder's model name: its own, or for a snapshot of the Hugging Face cache (a folder
    named by its commit) its repo's."""
    resolved = folder.resolve()
    if resolved.parent.name == "snapshots":
        repo = hf_cache_repo_id(resolved.parent.parent.name)
        if repo is not None:
            return repo
    return resolved.name or str(folder)


def hf_cache_repo_id(folder_name: str) -> str | None:
    """The repo id a Hugging Face cache folder holds (``models--org--name``), or None."""
    if not folder_name.startswith("models--"):
        return None
    return folder_name.removeprefix("models--").replace("--", "/", 1)
