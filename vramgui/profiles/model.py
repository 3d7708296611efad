"""Profile: a saved estimate setup (model reference, workload, GPUs) and its JSON document.

A profile stores what to estimate, not how: reopening it re-estimates with the current core, so
saved profiles improve when the core improves. The estimate as computed at save time is kept
beside it for reference, to show what changed.
"""

from __future__ import annotations

import datetime as dt
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from vramgui import __version__
from vramgui.core.errors import VramguiError, WorkloadError, message_of, phrase, shown
from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload

FORMAT = "vramgui.profile"
BUNDLE_FORMAT = "vramgui.profiles"
FORMAT_VERSION = 1
MAX_NAME_LENGTH = 200
# About ten pages of text; the notes are the only part of a profile a user can make large.
MAX_NOTES_LENGTH = 20_000
# No byte figure of a real estimate comes near 2**63 (8 EiB); anything past it is not a figure.
_MAX_BYTES = 2**63


class ProfileError(VramguiError):
    """A profile could not be saved, read, found or named as asked."""


class NameTaken(ProfileError):
    """The name asked for belongs to another profile.

    Attributes:
        name: the other profile's name, as spelled there.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"a profile named {name!r} exists")
        self.name = name


def now() -> dt.datetime:
    """The current time in UTC, to the second (what profiles record)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def check_name(name: object) -> str:
    """The name with surrounding blanks removed.

    Raises:
        ProfileError: the name is empty, too long or holds control characters.
    """
    if not isinstance(name, str):
        raise ProfileError("a profile name must be text")
    clean = name.strip()
    if not clean:
        raise ProfileError("a profile needs a name")
    if len(clean) > MAX_NAME_LENGTH:
        raise ProfileError(f"a profile name can have at most {MAX_NAME_LENGTH} characters")
    if any(unicodedata.category(c).startswith("C") for c in clean):
        raise ProfileError("a profile name cannot contain control characters")
    return clean


def check_notes(notes: str) -> str:
    """The notes, unchanged.

    Raises:
        ProfileError: they are not text or longer than ``MAX_NOTES_LENGTH`` characters.
    """
    if not isinstance(notes, str):
        raise ProfileError("profile notes must be text")
    if len(notes) > MAX_NOTES_LENGTH:
        raise ProfileError(
            f"profile notes can have at most {MAX_NOTES_LENGTH:,} characters "
            f"(these have {len(notes):,})"
        )
    return notes


@dataclass(frozen=True, slots=True)
class OffloadSettings:
    """The placement saved with a profile (llama.cpp's flags) and the host it is planned for.

    Attributes:
        n_gpu_layers: ``-ngl``; None: the fastest placement that fits.
        n_cpu_moe: ``--n-cpu-moe``: the routed experts of the first N layers in host RAM.
        cpu_moe: ``--cpu-moe``: every layer's routed experts in host RAM.
        op_offload: llama.cpp's op offload (False: ``--no-op-offload``).
        ram_bytes: host RAM for weights; None: what the machine reopening it has free.
        disk_bytes_per_s: the disk's read speed; None: the default (NVMe).
    """

    n_gpu_layers: int | None = None
    n_cpu_moe: int = 0
    cpu_moe: bool = False
    ram_bytes: int | None = None
    disk_bytes_per_s: float | None = None
    op_offload: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_gpu_layers": self.n_gpu_layers,
            "n_cpu_moe": self.n_cpu_moe,
            "cpu_moe": self.cpu_moe,
            "op_offload": self.op_offload,
            "ram_bytes": self.ram_bytes,
            "disk_bytes_per_s": self.disk_bytes_per_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OffloadSettings:
        """Read the ``offload`` object of a profile; a field left out takes its default.

        Raises:
            ProfileError: a field of the wrong kind or out of range.
        """

        def figure(key: str, whole: bool, low: float) -> Any:
            value = data.get(key)
            if value is None:
                return None
            number = isinstance(value, int) or (isinstance(value, float) and not whole)
            if isinstance(value, bool) or not number or not low <= value < 2**62:
                raise ProfileError(f"bad profile field: 'offload.{key}' ({_short(value)})")
            return value

        switches = {key: data.get(key, key == "op_offload") for key in ("cpu_moe", "op_offload")}
        for key, value in switches.items():
            if not isinstance(value, bool):
                raise ProfileError(f"bad profile field: 'offload.{key}' must be true or false")
        disk = figure("disk_bytes_per_s", False, 1)
        return cls(
            n_gpu_layers=figure("n_gpu_layers", True, 0),
            n_cpu_moe=figure("n_cpu_moe", True, 0) or 0,
            cpu_moe=switches["cpu_moe"],
            op_offload=switches["op_offload"],
            ram_bytes=figure("ram_bytes", True, 1),
            disk_bytes_per_s=None if disk is None else float(disk),
        )


@dataclass(frozen=True, slots=True)
class Profile:
    """One saved setup.

    Attributes:
        name: unique among the user's profiles, compared case-insensitively.
        model: where the model comes from (Hub id + revision, catalog name, local path + size/mtime).
        workload: the estimate settings that apply to the setup (``Workload.applicable``).
        gpus: GPUs to fit against: catalog GPU names, or "local" for the GPUs of this machine.
        notes: free text.
        saved_estimate: the estimate JSON document (``vramgui.estimate/1``, see
            docs/architecture.md) as computed when the profile was saved; empty if none was.
        created: when the profile was first saved (UTC).
        modified: when it was last saved (UTC).
        format_version: the file format version the profile was read from or will be written in.
        offload: the placement and host saved with it; None where none was (profiles saved
            before it was kept read as None).
    """

    name: str
    model: ModelRef
    workload: Workload = field(default_factory=Workload)
    gpus: tuple[str, ...] = ()
    notes: str = ""
    saved_estimate: dict[str, Any] = field(default_factory=dict)
    created: dt.datetime = field(default_factory=now)
    modified: dt.datetime = field(default_factory=now)
    format_version: int = FORMAT_VERSION
    offload: OffloadSettings | None = None

    def __post_init__(self) -> None:
        # A profile keeps the settings of its own setup: a serving profile's LoRA rank or
        # optimizer is what an earlier training setup left, not a setting of this one (profiles
        # saved before this carry them; they read back without).
        object.__setattr__(self, "workload", self.workload.applicable())

    def to_dict(self) -> dict[str, Any]:
        """The profile's JSON document."""
        out = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "app_version": __version__,
            "name": self.name,
            "notes": self.notes,
            "model": self.model.to_dict(),
            "workload": {
                key: value
                for key, value in self.workload.to_dict().items()
                if key.replace("-", "_") not in self.workload.unused()
            },
            "gpus": list(self.gpus),
            "created": self.created.isoformat(),
            "modified": self.modified.isoformat(),
            "saved_estimate": self.saved_estimate,
        }
        if self.offload is not None:
            out["offload"] = self.offload.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Profile:
        """Read a profile document, refusing anything this version cannot read faithfully.

        Raises:
            ProfileError: the document is not a profile, is from a newer format, or has a bad field;
                the message names the problem.
        """
        if not isinstance(data, dict):
            raise ProfileError("not a profile (the file does not hold a JSON object)")
        if data.get("format") != FORMAT:
            raise ProfileError("not a vramgui profile (no 'format': 'vramgui.profile')")
        version = data.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ProfileError(f"unknown profile format version {_short(version)}")
        if version > FORMAT_VERSION:
            raise ProfileError(
                f"saved by a newer vramgui (profile format {_short(version)}, this version reads "
                f"{FORMAT_VERSION}); update vramgui to open it"
            )
        name = check_name(data.get("name"))
        model = _model_ref(_field(data, "model", dict))
        try:
            workload = Workload.from_dict(data.get("workload", {}))
        except (ValueError, TypeError, WorkloadError) as exc:
            raise ProfileError(phrase("bad profile field: 'workload': ", message_of(exc))) from exc
        except OverflowError as exc:
            raise ProfileError("bad profile field: 'workload' holds a number out of range") from exc
        gpus = _field(data, "gpus", list, [])
        if not all(isinstance(g, str) for g in gpus):
            raise ProfileError("bad profile field: 'gpus' must be a list of names")
        return cls(
            name=name,
            model=model,
            workload=workload,
            gpus=tuple(gpus),
            notes=_field(data, "notes", str, ""),
            saved_estimate=_saved_estimate(_field(data, "saved_estimate", dict, {})),
            created=_timestamp(data, "created"),
            modified=_timestamp(data, "modified"),
            format_version=version,
            offload=(
                None
                if data.get("offload") is None
                else OffloadSettings.from_dict(_field(data, "offload", dict))
            ),
        )


def source_of(ref: ModelRef) -> str:
    """The SOURCE text (CLI argument, window input) that loads the model ``ref`` points to."""
    if ref.kind == "ollama":
        return f"ollama:{ref.id}"
    if ref.kind != "hub":
        return ref.id
    source = ref.id
    if ref.revision:
        source += f"@{ref.revision}"
    if ref.file:
        source += f":{ref.file}"
    return source


def _model_ref(data: dict[str, Any]) -> ModelRef:
    """The model reference, its numbers checked first (ModelRef itself would overflow on them)."""
    size, mtime = data.get("size_bytes"), data.get("mtime")
    if size is not None and not _is_int(size, 0, _MAX_BYTES):
        raise ProfileError(f"bad profile field: 'model.size_bytes' is not a size ({_short(size)})")
    if mtime is not None and not (
        _is_int(mtime, -(2**53), 2**53) or (isinstance(mtime, float) and math.isfinite(mtime))
    ):
        raise ProfileError(f"bad profile field: 'model.mtime' is not a time ({_short(mtime)})")
    try:
        return ModelRef.from_dict(data)
    except ValueError as exc:
        raise ProfileError(f"bad profile field: 'model': {exc}") from exc


def _saved_estimate(doc: dict[str, Any]) -> dict[str, Any]:
    """The saved estimate document, once the parts that are read back have their shapes.

    Only what list, show and compare read is checked: the per-GPU totals and components, the fit
    rows and the model summary; the rest is kept for reference as it is.

    Raises:
        ProfileError: a part that is read back has the wrong shape or an impossible figure.
    """
    per_gpu = _part(doc, "per_gpu", dict)
    if per_gpu is not None:
        _byte_figure(per_gpu, "total_bytes", "saved_estimate.per_gpu")
        _part(per_gpu, "phase", str, "saved_estimate.per_gpu")
        components = _part(per_gpu, "components", dict, "saved_estimate.per_gpu")
        for key in components or {}:
            _byte_figure(components, key, "saved_estimate.per_gpu.components")
    fits = _part(doc, "fit", list)
    for index, row in enumerate(fits or []):
        where = f"saved_estimate.fit[{index}]"
        if not isinstance(row, dict):
            raise ProfileError(f"bad profile field: {where!r} must be a JSON object")
        _part(row, "gpu", str, where)
        _part(row, "fits", bool, where)
        _byte_figure(row, "capacity_bytes", where)
        _byte_figure(row, "headroom_bytes", where)
    summary = _part(doc, "model", dict)
    for key, value in (summary or {}).items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            continue  # the estimate's stated uncertainties
        if not (value is None or isinstance(value, str | bool | float) or _is_int(value)):
            raise ProfileError(
                f"bad profile field: 'saved_estimate.model.{key}' must be a plain value"
            )
    return doc


def _part(doc: dict[str, Any], key: str, kind: type, where: str = "saved_estimate") -> Any:
    """``doc[key]`` if present (then of ``kind``; null is not), else None."""
    value = doc.get(key)
    if key in doc and not isinstance(value, kind):
        names = {dict: "a JSON object", list: "a list", str: "text", bool: "true or false"}
        raise ProfileError(f"bad profile field: '{where}.{key}' must be {names[kind]}")
    return value


def _byte_figure(doc: dict[str, Any], key: str, where: str) -> None:
    value = doc.get(key)
    if value is not None and not _is_int(value, -_MAX_BYTES, _MAX_BYTES):
        raise ProfileError(
            f"bad profile field: '{where}.{key}' is not a byte count ({_short(value)})"
        )


def _is_int(value: Any, low: int = -_MAX_BYTES, high: int = _MAX_BYTES) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value < high


def _short(value: Any) -> str:
    """A value for a message, cut short: a 400-digit number need not be printed whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        # str() of an int past 4,300 digits raises; the bit length says how big it is.
        return f"a number of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = shown(value)  # bounded in depth too: a list nested 900 deep has no repr
    return text if len(text) <= 40 else text[:37] + "..."


def _field(data: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    value = data.get(key, default)
    if not isinstance(value, kind):
        raise ProfileError(f"bad profile field: {key!r} must be a JSON {kind.__name__}")
    return value


def _timestamp(data: dict[str, Any], key: str) -> dt.datetime:
    raw = _field(data, key, str)
    try:
        stamp = dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ProfileError(f"bad profile field: {key!r} is not a date ({_short(raw)})") from exc
    # A hand-edited stamp without a zone is read as UTC, the zone profiles are written in.
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
