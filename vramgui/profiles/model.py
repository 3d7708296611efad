"""Profile: a saved estimate setup (model reference, workload, GPUs) and its JSON document.

A profile stores what to estimate, not how: reopening it re-estimates with the current core, so
saved profiles improve when the core improves. The estimate as computed at save time is kept
beside it for reference, to show what changed.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from vramgui import __version__
from vramgui.core.errors import VramguiError, WorkloadError
from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload

FORMAT = "vramgui.profile"
BUNDLE_FORMAT = "vramgui.profiles"
FORMAT_VERSION = 1
MAX_NAME_LENGTH = 200


class ProfileError(VramguiError):
    """A profile could not be saved, read, found or named as asked."""


def now() -> dt.datetime:
    """The current time in UTC, to the second (what profiles record)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def check_name(name: str) -> str:
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


@dataclass(frozen=True, slots=True)
class Profile:
    """One saved setup.

    Attributes:
        name: unique among the user's profiles, compared case-insensitively.
        model: where the model comes from (Hub id + revision, catalog name, local path + size/mtime).
        workload: every estimate setting.
        gpus: GPUs to fit against: catalog GPU names, or "local" for the GPUs of this machine.
        notes: free text.
        saved_estimate: the estimate JSON document (DESIGN.md's ``vramgui.estimate/1``) as computed
            when the profile was saved; empty if none was computed.
        created: when the profile was first saved (UTC).
        modified: when it was last saved (UTC).
        format_version: the file format version the profile was read from or will be written in.
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

    def to_dict(self) -> dict[str, Any]:
        """The profile's JSON document."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "app_version": __version__,
            "name": self.name,
            "notes": self.notes,
            "model": self.model.to_dict(),
            "workload": self.workload.to_dict(),
            "gpus": list(self.gpus),
            "created": self.created.isoformat(),
            "modified": self.modified.isoformat(),
            "saved_estimate": self.saved_estimate,
        }

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
            raise ProfileError(f"unknown profile format version {version!r}")
        if version > FORMAT_VERSION:
            raise ProfileError(
                f"saved by a newer vramgui (profile format {version}, this version reads "
                f"{FORMAT_VERSION}); update vramgui to open it"
            )
        try:
            name = check_name(data.get("name"))
            model = ModelRef.from_dict(_field(data, "model", dict))
            workload = Workload.from_dict(data.get("workload", {}))
        except (ValueError, WorkloadError) as exc:
            raise ProfileError(f"bad profile field: {exc}") from exc
        gpus = _field(data, "gpus", list, [])
        if not all(isinstance(g, str) for g in gpus):
            raise ProfileError("bad profile field: 'gpus' must be a list of names")
        return cls(
            name=name,
            model=model,
            workload=workload,
            gpus=tuple(gpus),
            notes=_field(data, "notes", str, ""),
            saved_estimate=_field(data, "saved_estimate", dict, {}),
            created=_timestamp(data, "created"),
            modified=_timestamp(data, "modified"),
            format_version=version,
        )


def source_of(ref: ModelRef) -> str:
    """The SOURCE text (CLI argument, window input) that loads the model ``ref`` points to."""
    if ref.kind != "hub":
        return ref.id
    source = ref.id
    if ref.revision:
        source += f"@{ref.revision}"
    if ref.file:
        source += f":{ref.file}"
    return source


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
        raise ProfileError(f"bad profile field: {key!r} is not a date ({raw!r})") from exc
    # A hand-edited stamp without a zone is read as UTC, the zone profiles are written in.
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
