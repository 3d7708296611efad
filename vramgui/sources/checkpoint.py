"""What a checkpoint's headers state, and how it becomes a ModelSpec; reading files safely.

Shared by the safetensors and config.json readers (``local``), the GGUF reader (``gguf_reader``)
and the Hub (``hub_repo``). Files are opened only when they are regular files: a named pipe, a
device or a socket given as a model would block a reader forever or feed it without end.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vramgui.core import formats, mtp, naming
from vramgui.core.errors import ConfigError
from vramgui.core.families import spec_from_config
from vramgui.core.model import Inventory, ModelRef, ModelSpec, Role, Tensor
from vramgui.sources.errors import BadModelFile, ModelNotFound


@dataclass(frozen=True, slots=True)
class HeaderTensor:
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


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading, when it is a regular file (or a link to one).

    Opened without blocking and checked on the open descriptor, so that a named pipe is refused
    at once and cannot be swapped in between a check and the open.

    Raises:
        ModelNotFound: nothing is there.
        BadModelFile: not a regular file, or it cannot be read (the reason is in the message).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ModelNotFound(f"no such file: {path}") from None
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {describe_os_error(exc)}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BadModelFile(
                f"{path} is {_kind(mode)}, not a file; vramgui reads regular files only"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_size(path: Path) -> int:
    """The size of a regular file (links followed); BadModelFile for anything else."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ModelNotFound(f"no such file: {path}") from None
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {describe_os_error(exc)}") from None
    if not stat.S_ISREG(info.st_mode):
        raise BadModelFile(
            f"{path} is {_kind(info.st_mode)}, not a file; vramgui reads regular files only"
        )
    return info.st_size


def read_regular(path: Path, limit_bytes: int, what: str) -> bytes:
    """A whole regular file of at most ``limit_bytes`` bytes.

    Raises:
        BadModelFile: larger than ``limit_bytes`` (``what`` names the file's role), not a regular
            file, or unreadable.
    """
    with open_regular(path) as fh:
        data = _read(fh, path, limit_bytes + 1)
    if len(data) > limit_bytes:
        raise BadModelFile(
            f"{path} is larger than {limit_bytes // 2**20} MiB, more than any real {what}"
        )
    return data


def _read(fh: IO[bytes], path: Path, size: int) -> bytes:
    try:
        return fh.read(size)
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {describe_os_error(exc)}") from None


def describe_os_error(exc: OSError) -> str:
    """What went wrong in words a person can act on."""
    if exc.errno == errno.ENAMETOOLONG:
        return "the file name is too long for this system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def local_ref(kind: str, path: Path, files: list[Path]) -> ModelRef:
    """A reference to a local model, with the size and time of its files to notice a change."""
    try:
        stats = [f.stat() for f in files]
    except OSError:
        return ModelRef(kind=kind, id=str(path))
    return ModelRef(
        kind=kind,
        id=str(path),
        size_bytes=sum(s.st_size for s in stats),
        mtime=max((s.st_mtime for s in stats), default=None),
    )


def inventory(stored: Iterable[HeaderTensor]) -> tuple[Tensor, ...]:
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


def quantization_of(
    config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None = None
) -> str | None:
    """The stored format a config's ``quantization_config`` (or a nested text config's, or
    ModelOpt's ``hf_quant_config.json``) declares, as ``ModelSpec.quantization`` names it."""
    fmt = formats.read_format(config, hf_quant_config)
    return fmt.name if fmt is not None else None


def as_shipped(
    spec: ModelSpec, config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None = None
) -> ModelSpec:
    """A spec synthesized from ``config`` with what the checkpoint ships: its stored format
    (the catalog, config-only and Hub paths without headers) and its MTP layers."""
    fmt = formats.read_format(config, hf_quant_config)
    extra: dict[str, Any] = {
        "mtp_tensors": mtp.synthesized_mtp(spec, mtp.mtp_layer_count(config)),
    }
    if fmt is not None:
        extra["stored_format"] = fmt
        extra["quantization"] = fmt.name
        if not fmt.known:
            extra["warnings"] = (
                *spec.warnings,
                f"quant_method {fmt.method!r} is not modelled: its weights are counted in "
                f"{fmt.dtype}, more than the checkpoint stores",
            )
            extra["inventory"] = Inventory.APPROXIMATE
    return dataclasses.replace(spec, **extra)


def _check_shapes(stored: tuple[Tensor, ...], built: tuple[Tensor, ...], name: str) -> None:
    """Refuse stored tensors no model could hold: a weight without elements, one of another rank
    than the config builds under its name, an embedding matrix that is not a matrix.

    Raises:
        BadModelFile: naming the tensor, its shape and what was expected.
    """
    ranks = {t.name: len(t.shape) for t in built}
    for t in stored:
        expected = ranks.get(t.name)
        if t.role is Role.EMBEDDING and t.name.endswith(".weight") and not t.is_bias:
            expected = 2
        if t.numel == 0 and t.role is not Role.OTHER:
            problem = "holds no elements"
        elif expected is not None and len(t.shape) != expected:
            problem = f"has {len(t.shape)} dimensions where the model's has {expected}"
        else:
            continue
        raise BadModelFile(f"{name}: tensor {t.name} of shape {list(t.shape)} {problem}")


def _sizes_from_tensors(
    config: Mapping[str, Any], stored: list[HeaderTensor]
) -> tuple[dict[str, Any], str]:
    """A config of a type vramgui cannot read, completed from the checkpoint's own tensors so that
    its weights (the tensors themselves) are still estimated; what is guessed says so.

    Raises:
        ConfigError: the tensors give no embedding matrix to read the sizes from.
    """
    matrices = [t for t in stored if len(t.shape) == 2 and "emb" in t.name.lower()]
    if not matrices:
        raise ConfigError(
            f"model_type {config.get('model_type')!r} is not known and its tensors name no "
            "embedding to read its sizes from"
        )
    vocab, hidden = max(matrices, key=lambda t: t.shape[0]).shape
    layers = {naming.classify(t.name).layer for t in stored} - {None}
    filled = {
        "hidden_size": hidden,
        "vocab_size": vocab,
        "num_hidden_layers": max(len(layers), 1),
        "num_attention_heads": max(hidden // 128, 1),
        "intermediate_size": 4 * hidden,
    }
    guessed = [k for k in filled if not isinstance(config.get(k), int)]
    out = {**config, **{k: filled[k] for k in guessed}}
    out["model_type"] = f"{config.get('model_type') or 'model'}"
    return out, (
        f"the config lacks {', '.join(guessed)}: read from the tensors or assumed (128-wide "
        "heads, a 4x MLP) for the KV cache and activations, which are rough; the weights are "
        "the checkpoint's own"
    )


def spec_from_checkpoint(
    config: Mapping[str, Any],
    stored: list[HeaderTensor],
    name: str,
    source: str,
    *,
    warnings: Iterable[str] = (),
    quantization: str | None = None,
    hf_quant_config: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """A ModelSpec whose facts come from ``config`` and whose tensors are the checkpoint's own.

    ``warnings`` name guesses made for the config (an architecture inferred from tensor shapes,
    GGUF metadata read as another family's): the spec is then approximate. Stored tensors of
    multi-token-prediction layers are set apart (``ModelSpec.mtp_tensors``); a quantized
    checkpoint keeps the tensors its config builds as its unquantized ones
    (``ModelSpec.logical_tensors``).
    """
    read_config = True
    try:
        spec = spec_from_config(dict(config), name)
    except ConfigError:
        if not stored:
            raise
        config, guessed = _sizes_from_tensors(config, stored)
        spec = spec_from_config(config, name)
        warnings = (*warnings, guessed)
        read_config = False
    warnings = tuple(warnings)
    exactness = spec.inventory
    if warnings:
        exactness = Inventory.APPROXIMATE
    elif stored and exactness is Inventory.EXACT:
        exactness = Inventory.FROM_HEADERS
    shipped = as_shipped(spec, config, hf_quant_config)
    own = quantization or shipped.quantization or spec.quantization
    if not stored:
        return dataclasses.replace(
            shipped,
            quantization=own,
            warnings=(*shipped.warnings, *warnings),
            source=source,
            inventory=Inventory.APPROXIMATE if warnings else shipped.inventory,
        )
    tensors = inventory(stored)
    _check_shapes(tensors, spec.tensors, name)
    layers = spec.facts.num_layers
    model = tuple(t for t in tensors if not mtp.is_mtp_tensor(t.name, t.layer, layers))
    extra = tuple(t for t in tensors if mtp.is_mtp_tensor(t.name, t.layer, layers))
    if not model:  # nothing but "MTP" names: the names mislead, keep every tensor
        model, extra = tensors, ()
    # A safetensors checkpoint stored quantized: the tensors its config builds are the model's
    # unquantized ones (a GGUF file's own shapes are those already).
    packed = (
        quantization is None
        and shipped.stored_format is not None
        and read_config
        and any(t.dtype and t.dtype.upper() not in ("BF16", "F16", "F32") for t in model)
    )
    return dataclasses.replace(
        spec,
        tensors=model,
        mtp_tensors=extra,
        logical_tensors=spec.tensors if packed else (),
        quantization=own,
        stored_format=shipped.stored_format,
        warnings=(*spec.warnings, *warnings),
        source=source,
        inventory=exactness,
    )
