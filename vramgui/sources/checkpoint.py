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

from vramgui.core import naming
from vramgui.core.errors import ConfigError
from vramgui.core.families import spec_from_config
from vramgui.core.model import Inventory, ModelRef, ModelSpec, Tensor
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
) -> ModelSpec:
    """A ModelSpec whose facts come from ``config`` and whose tensors are the checkpoint's own.

    ``warnings`` name guesses made for the config (an architecture inferred from tensor shapes,
    GGUF metadata read as another family's): the spec is then approximate.
    """
    try:
        spec = spec_from_config(dict(config), name)
    except ConfigError:
        if not stored:
            raise
        config, guessed = _sizes_from_tensors(config, stored)
        spec = spec_from_config(config, name)
        warnings = (*warnings, guessed)
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
