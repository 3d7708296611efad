"""ProfileStore: one JSON file per profile in a folder, written atomically, read tolerantly.

Rules that keep the user's data safe:
- every write goes to a temporary file in the same folder, is flushed and fsynced, then renamed
  over (or hard-linked to) its target, and the folder is fsynced, so a crash leaves either the old
  file or the new one, never half of one (``vramgui.files.write_atomic``);
- a file that cannot be read (corrupt, truncated, not a profile, a newer format, too large, not a
  regular file) is listed as unreadable with the reason and is never overwritten, renamed or
  deleted; every other profile keeps working;
- saving never replaces a profile unless asked to update it, and an update first keeps the
  previous version in the ``versions`` subfolder, from which ``restore_version`` brings it back;
- a new file never replaces an existing one: it is created with a hard link, which fails if the
  name is taken, and an operating-system lock on ``.lock`` serialises the check-then-write of
  saves from several threads or processes, so two saves under one name cannot both win. The OS
  drops the lock when its holder dies, so a crash never blocks later saves; the temporary files a
  killed save left behind are removed by the next write;
- delete moves the file to a ``trash`` subfolder, from which ``restore`` brings it back.

Reading is bounded: a profile file larger than ``MAX_PROFILE_BYTES`` or an import larger than
``MAX_BUNDLE_BYTES`` is refused after a ``stat``, and files are parsed again only when they
change, which keeps the locked part of a save to a folder scan and one write.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import re
import stat
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramgui import files, paths
from vramgui.core.units import MiB
from vramgui.profiles.model import (
    BUNDLE_FORMAT,
    FORMAT_VERSION,
    NameTaken,
    Profile,
    ProfileError,
    check_name,
    check_notes,
    now,
)

SUFFIX = ".json"
TRASH = "trash"
VERSIONS = "versions"
LOCK = ".lock"
# Saves hold the lock for a folder scan and one small write (milliseconds); this long means
# another process is stuck inside one (a hung network drive).
LOCK_WAIT_SECONDS = 10.0
# The largest real profile (Llama 3.1 405B with three GPUs) is 16 KB, with the longest notes
# about 100 KB: a file of more is not one vramgui wrote.
MAX_PROFILE_BYTES = 1 * MiB
# An export of about 2,000 of the largest profiles.
MAX_BUNDLE_BYTES = 32 * MiB
_MAX_SLUG = 60
# Names Windows gives its devices, with or without an extension (learn.microsoft.com: "Naming
# Files, Paths, and Namespaces"); a slug has no dot, so its whole is what is checked.
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul", *(f"{port}{n}" for port in ("com", "lpt") for n in range(10))]
)


@dataclass(frozen=True, slots=True)
class ProfileListing:
    """One file of the profile folder, readable or not.

    Attributes:
        path: the file.
        name: the profile's name, or for an unreadable file the name it seems to hold, else its
            file name.
        profile: the profile, or None if the file could not be read.
        error: why the file could not be read, or None.
    """

    path: Path
    name: str
    profile: Profile | None = None
    error: str | None = None

    @property
    def readable(self) -> bool:
        return self.profile is not None


@dataclass(frozen=True, slots=True)
class TrashedProfile:
    """A deleted profile, kept so that the deletion can be undone."""

    name: str
    original_path: Path
    trash_path: Path


# ``list`` inside ProfileStore is its method: the class's annotations use these names.
Listings = list[ProfileListing]
Names = list[str]


def slugify(name: str) -> str:
    """A file-name-safe, lower-case form of a profile name (ASCII letters, digits, dashes), on
    every system: never a device name Windows reserves (``con``, ``nul``, ``com1``...), which a
    file there cannot be named, whatever its extension."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:_MAX_SLUG].strip("-")
    if slug in _WINDOWS_DEVICES:
        return f"{slug}-profile"
    return slug or "profile"


class ProfileStore:
    """The user's saved profiles.

    Args:
        directory: the folder holding the profile files; by default ``profiles`` in the user data
            directory (``VRAMGUI_HOME`` redirects it for tests and portable use). It is created on
            the first save, not before.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = (
            Path(directory) if directory is not None else paths.user_dir("data") / "profiles"
        )
        # path -> (what stat said when it was read, what was read); see _read.
        self._cache: dict[Path, tuple[tuple[int, ...], ProfileListing]] = {}
        self._cache_lock = threading.Lock()

    # Reading ---------------------------------------------------------------------------------

    def list(self) -> Listings:
        """Every profile file: readable ones by name, then unreadable ones by file name."""
        listings = self._scan(self.directory)
        listings.sort(key=lambda item: (not item.readable, item.name.casefold(), item.path.name))
        return listings

    def names(self) -> Names:
        """Names of the readable profiles."""
        return [item.name for item in self.list() if item.readable]

    def get(self, name: str) -> Profile:
        """The profile with this name (case-insensitive).

        Raises:
            ProfileError: there is none, or its file cannot be read.
        """
        return self._listing(name)[1]

    def find(self, name: str) -> Profile | None:
        """The readable profile with this name (case-insensitive), or None."""
        found = self._find(name)
        return found.profile if found is not None else None

    def versions(self, name: str | None = None) -> Listings:
        """The previous versions kept by updates, newest first; only those of ``name`` if given.

        A version keeps the name the profile had when it was replaced.
        """
        wanted = name.strip().casefold() if name is not None else None
        found = [
            item
            for item in self._scan(self.directory / VERSIONS)
            if wanted is None or item.name.casefold() == wanted
        ]
        found.sort(key=lambda item: _kept_order(item.path), reverse=True)
        return found

    def _find(self, name: str) -> ProfileListing | None:
        wanted = name.strip().casefold()
        readable = [i for i in self.list() if i.readable and i.name.casefold() == wanted]
        return readable[0] if readable else None

    def _listing(self, name: str) -> tuple[ProfileListing, Profile]:
        """The file of the readable profile ``name`` and the profile."""
        found = self._find(name)
        if found is not None and found.profile is not None:
            return found, found.profile
        wanted = name.strip().casefold()
        unreadable = [i for i in self.list() if not i.readable and i.name.casefold() == wanted]
        if unreadable:
            item = unreadable[0]
            raise ProfileError(
                f"profile {item.name!r} cannot be read ({item.path.name}: {item.error})"
            )
        raise ProfileError(f"no profile named {name!r}")

    def _scan(self, folder: Path) -> Listings:
        """Every ``*.json`` entry of ``folder`` (dot files are temporary), read or from cache."""
        try:
            entries = sorted(
                (Path(e.path) for e in os.scandir(folder)),
                key=lambda p: p.name,
            )
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ProfileError(f"cannot read the profile folder {folder}: {exc.strerror}") from exc
        listings = [
            self._read(path)
            for path in entries
            if path.name.endswith(SUFFIX) and not path.name.startswith(".")
        ]
        seen = {item.path for item in listings}
        with self._cache_lock:
            for path in [p for p in self._cache if p.parent == folder and p not in seen]:
                del self._cache[path]
        return listings

    def _read(self, path: Path) -> ProfileListing:
        """The listing of one file, parsed again only when ``stat`` says the file changed."""
        try:
            info = os.stat(path)
        except OSError as exc:
            return ProfileListing(path, path.stem, error=f"cannot be read: {exc.strerror}")
        key = (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_mode)
        with self._cache_lock:
            cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        listing = _read_listing(path)
        if stat.S_ISREG(info.st_mode):
            with self._cache_lock:
                self._cache[path] = (key, listing)
        return listing

    # Writing ---------------------------------------------------------------------------------

    def save(self, profile: Profile, update: bool = False) -> Profile:
        """Save a profile, stamping its modification time; returns the profile as saved.

        Args:
            profile: the profile; its name must not be taken unless ``update``.
            update: replace the saved profile of the same name, if there is one: its previous
                version is kept first (``versions``, ``restore_version``), and its creation
                time carries over. Without one, the profile is saved as new.

        Raises:
            NameTaken: the name is taken and ``update`` is False.
            ProfileError: a bad name or notes, or the file cannot be written (read-only folder,
                full disk...); what was on disk before is untouched.
        """
        name = check_name(profile.name)
        check_notes(profile.notes)
        with self._locked():
            existing = self._find(name)
            if existing is not None and not update:
                raise NameTaken(existing.name)
            created = existing.profile.created if existing and existing.profile else profile.created
            saved = dataclasses.replace(
                profile, name=name, created=created, modified=now(), format_version=FORMAT_VERSION
            )
            data = _encoded(saved)
            if existing is not None:
                self._replace_keeping_previous(existing, data, what=f"save profile {name!r}")
            else:
                self._create(name, data)
        return saved

    def restore_version(self, version: ProfileListing) -> Profile:
        """Make a kept version the current profile of its name again.

        The profile it replaces is kept as a version in turn (so this can be undone the same
        way), and the version itself stays where it is. When no profile has that name any more
        (renamed or deleted since), the version comes back as a new profile.

        Raises:
            ProfileError: the version cannot be read, or a write fails.
        """
        with self._locked():
            listing = _read_listing(version.path)
            if listing.profile is None:
                raise ProfileError(f"cannot restore {version.path.name}: {listing.error}")
            restored = dataclasses.replace(listing.profile, modified=now())
            data = _encoded(restored)
            what = f"restore profile {restored.name!r}"
            current = self._find(restored.name)
            if current is not None:
                self._replace_keeping_previous(current, data, what=what)
            else:
                self._create(restored.name, data)
        return restored

    def rename(self, old: str, new: str) -> Profile:
        """Give a profile a new name (its file name follows).

        Raises:
            ProfileError: no profile ``old``, ``new`` is taken by another profile, or a write fails.
        """
        new = check_name(new)
        with self._locked():
            listing, profile = self._listing(old)
            clash = self._find(new)
            if clash is not None and clash.path != listing.path:
                raise NameTaken(clash.name)
            renamed = dataclasses.replace(profile, name=new, modified=now())
            data = _encoded(renamed)
            if slugify(new) == slugify(listing.name):
                self._write(listing.path, data, replace=True, what=f"rename profile {old!r}")
            else:
                self._create(new, data)
                _remove(listing.path, what=f"remove the old file of profile {new!r}")
        return renamed

    def duplicate(self, name: str, new_name: str | None = None) -> Profile:
        """Save a copy of a profile, under ``new_name`` or "NAME (copy)" made unique.

        Raises:
            ProfileError: no such profile, ``new_name`` is taken, or the write fails.
        """
        original = self.get(name)
        stamp = now()
        if new_name is None:
            taken = {n.casefold() for n in self.names()}
            new_name = unique_name(f"{original.name} (copy)", taken)
        copy = dataclasses.replace(original, name=new_name, created=stamp, modified=stamp)
        return self.save(copy)

    def delete(self, name: str) -> TrashedProfile:
        """Move a profile to the trash folder; ``restore`` undoes it.

        Raises:
            ProfileError: no such profile, or the file cannot be moved.
        """
        with self._locked():
            listing, _ = self._listing(name)
            what = f"delete profile {listing.name!r}"
            target = self._subfolder(TRASH, what) / f"{_stamp()}-{listing.path.name}"
            target = _free_path(target)
            try:
                os.replace(listing.path, target)
            except OSError as exc:
                raise _write_error(exc, what, self.directory) from exc
            files.fsync_folder(self.directory)
        return TrashedProfile(name=listing.name, original_path=listing.path, trash_path=target)

    def restore(self, trashed: TrashedProfile) -> Profile:
        """Bring back a deleted profile.

        Raises:
            ProfileError: the trashed file is gone or unreadable, or its name was taken meanwhile.
        """
        with self._locked():
            listing = _read_listing(trashed.trash_path)
            profile = listing.profile
            if profile is None:
                raise ProfileError(f"cannot restore {trashed.name!r}: {listing.error}")
            if self._find(profile.name) is not None:
                raise ProfileError(
                    f"cannot restore {profile.name!r}: a profile with that name exists now"
                )
            self._create(profile.name, _encoded(profile))
            _remove(trashed.trash_path, what=f"remove the trashed copy of {profile.name!r}")
        return profile

    # Import and export -----------------------------------------------------------------------

    def bundle(self, names: Iterable[str]) -> tuple[bytes, Names]:
        """The export file of the named profiles (all readable ones if ``names`` is empty).

        Returns:
            The file's bytes and the exported names.

        Raises:
            ProfileError: a name is unknown or unreadable, or there is nothing to export.
        """
        wanted = list(names)
        profiles = (
            [self.get(n) for n in wanted]
            if wanted
            else [i.profile for i in self.list() if i.profile is not None]
        )
        if not profiles:
            raise ProfileError("there are no profiles to export")
        doc = {
            "format": BUNDLE_FORMAT,
            "format_version": FORMAT_VERSION,
            "profiles": [p.to_dict() for p in profiles],
        }
        data = _encode(doc)
        if len(data) > MAX_BUNDLE_BYTES:
            # An import reads at most this much: a larger export could never come back.
            raise ProfileError(
                f"the export would take {len(data) / MiB:.1f} MiB, more than the "
                f"{MAX_BUNDLE_BYTES // MiB} MiB an import reads; export fewer profiles"
            )
        return data, [p.name for p in profiles]

    def export(self, names: Iterable[str], path: Path, replace: bool = False) -> Names:
        """Write the named profiles (all readable ones if ``names`` is empty) to one file.

        Only a regular file is written, new or (with ``replace``) replaced whole: a symbolic
        link, named pipe, device or folder at ``path`` is refused, never written through or
        replaced.

        Returns:
            The exported names.

        Raises:
            ProfileError: a name is unknown, ``path`` is not a regular file or exists (without
                ``replace``), or the file cannot be written.
        """
        path = Path(path)
        data, exported = self.bundle(names)
        check_export_target(path, replace)
        try:
            files.write_atomic(path, data, replace=replace)
        except FileExistsError as exc:
            raise ProfileError(f"{path} exists; choose another file name") from exc
        except OSError as exc:
            raise _write_error(exc, f"write the export file {path}", path.parent) from exc
        return exported

    def import_(self, path: Path) -> Names:
        """Add the profiles of an export file (or of a single profile file); never overwrites.

        Raises:
            ProfileError: the file cannot be read (missing, not a regular file, larger than
                ``MAX_BUNDLE_BYTES``) or holds an unreadable profile.
        """
        path = Path(path)
        try:
            raw = files.read_regular(path, MAX_BUNDLE_BYTES)
        except OSError as exc:
            raise ProfileError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return self.import_bytes(raw, str(path))

    def import_bytes(self, raw: bytes, label: str) -> Names:
        """Add the profiles of an export file's bytes; ``label`` names it in messages.

        A name already taken gets " (2)", " (3)"... appended. Nothing is imported unless every
        profile of the file can be read.

        Returns:
            The names the profiles were saved under.

        Raises:
            ProfileError: the bytes are too many, not JSON, or hold an unreadable profile.
        """
        if len(raw) > MAX_BUNDLE_BYTES:
            raise ProfileError(f"{label} is larger than {MAX_BUNDLE_BYTES // MiB} MiB")
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise ProfileError(f"{label} is not a JSON file ({exc})") from exc
        if isinstance(doc, dict) and doc.get("format") == BUNDLE_FORMAT:
            version = doc.get("format_version", 1)
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise ProfileError(
                    f"{label} was exported by a newer vramgui (format {version!r:.20}); "
                    "update vramgui"
                )
            items = doc.get("profiles")
            if not isinstance(items, list):
                raise ProfileError(f"{label}: 'profiles' must be a list")
        else:
            items = [doc]
        profiles = []
        for index, item in enumerate(items, start=1):
            try:
                profiles.append(Profile.from_dict(item))
            except ProfileError as exc:
                raise ProfileError(f"{label}: profile {index}: {exc}") from exc
        for index, profile in enumerate(profiles, start=1):
            try:
                check_notes(profile.notes)
                # Saved, it must list as readable: a file past MAX_PROFILE_BYTES would be listed
                # as unreadable forever, and each import would add another.
                _encoded(profile)
            except ProfileError as exc:
                raise ProfileError(
                    f"{label}: profile {index}: {exc}; nothing was imported"
                ) from exc
        imported = []
        with self._locked():
            taken = {i.name.casefold() for i in self.list() if i.readable}
            for profile in profiles:
                name = unique_name(profile.name, taken)
                taken.add(name.casefold())
                self._create(name, _encoded(dataclasses.replace(profile, name=name)))
                imported.append(name)
        return imported

    # Internals ------------------------------------------------------------------------------

    def _create(self, name: str, data: bytes) -> Path:
        """Write ``data`` to a new file named after ``name``; existing files are never touched."""
        base = slugify(name)
        for n in range(1, 10_000):
            target = self.directory / (f"{base}{SUFFIX}" if n == 1 else f"{base}-{n}{SUFFIX}")
            if os.path.lexists(target):
                continue
            try:
                self._write(target, data, replace=False, what=f"save profile {name!r}")
            except FileExistsError:
                continue  # another writer took it between the check and the link
            return target
        raise ProfileError(f"too many profile files named like {base!r}")

    def _replace_keeping_previous(self, current: ProfileListing, data: bytes, what: str) -> None:
        """Replace a readable profile's file with ``data``, after copying it to ``versions``.

        A copy, not a hard link: a file edited in place later must not change its versions.
        If the replacement fails, the copy goes again (the profile is as it was).
        """
        try:
            previous = files.read_regular(current.path, MAX_PROFILE_BYTES)
        except OSError as exc:
            raise ProfileError(f"cannot {what}: {exc.strerror or exc}") from exc
        folder = self._subfolder(VERSIONS, what)
        # When it was kept, to the microsecond: versions are listed in this order.
        kept_at = dt.datetime.now(dt.UTC).strftime(_KEPT_FORMAT)
        base = folder / f"{current.path.stem}--{kept_at}{SUFFIX}"
        for n in range(1, 10_000):
            kept = base if n == 1 else base.with_name(f"{base.stem}-{n}{SUFFIX}")
            try:
                self._write(kept, previous, replace=False, what=what)
                break
            except FileExistsError:
                continue
        else:
            raise ProfileError(f"cannot {what}: too many versions named like {base.name!r}")
        try:
            self._write(current.path, data, replace=True, what=what)
        except BaseException:
            with suppress(OSError):
                kept.unlink()
            raise

    def _write(self, path: Path, data: bytes, *, replace: bool, what: str) -> None:
        """``files.write_atomic`` with failures as messages (FileExistsError passes through)."""
        try:
            files.write_atomic(path, data, replace=replace)
        except FileExistsError:
            raise
        except OSError as exc:
            raise _write_error(exc, what, path.parent) from exc

    def _subfolder(self, name: str, what: str) -> Path:
        folder = self.directory / name
        try:
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise _write_error(exc, what, self.directory) from exc
        return folder

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the folder's lock, so check-then-write sequences do not interleave.

        Whoever holds it first removes the temporary files of writes that never finished: every
        write in the folder happens under the lock, so none of them can still be in progress.
        The folder is read before the lock is taken, so that under it only what changed since
        is parsed.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _write_error(exc, "change profiles", self.directory) from exc
        self.list()
        with ExitStack() as held:
            try:
                held.enter_context(files.locked(self.directory / LOCK, LOCK_WAIT_SECONDS))
            except TimeoutError:
                raise ProfileError(
                    f"the profile folder {self.directory} is busy: another vramgui has been "
                    f"saving for over {LOCK_WAIT_SECONDS:g} s; try again"
                ) from None
            except OSError as exc:
                raise _write_error(exc, "change profiles", self.directory) from exc
            self._remove_leftovers()
            yield

    def _remove_leftovers(self) -> None:
        for folder in (self.directory, self.directory / TRASH, self.directory / VERSIONS):
            with suppress(OSError):
                for entry in os.scandir(folder):
                    name = entry.name
                    if name.startswith(files.TEMP_PREFIX) and name.endswith(files.TEMP_SUFFIX):
                        with suppress(OSError):
                            if entry.is_file(follow_symlinks=False):
                                os.unlink(entry.path)


def check_export_target(path: Path, replace: bool) -> None:
    """Refuse an export to anything but a new or (with ``replace``) existing regular file.

    Raises:
        ProfileError: ``path`` is a symbolic link, named pipe, device, socket or folder, or it
            exists and ``replace`` is False.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ProfileError(f"cannot write the export file {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ProfileError(
            f"{path} is {files.file_kind(info.st_mode)}: an export is written only to a regular "
            "file"
        )
    if not replace:
        raise ProfileError(f"{path} exists; choose another file name")


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or "name (2)", "name (3)"... whichever is not in ``taken`` (casefolded names)."""
    candidate, n = name, 1
    while candidate.casefold() in taken:
        n += 1
        candidate = f"{name} ({n})"
    return candidate


_KEPT_FORMAT = "%Y%m%d-%H%M%S-%f"
_KEPT = re.compile(r"--(\d{8}-\d{6}-\d{6})(?:-(\d+))?\.json$")


def _kept_order(path: Path) -> tuple[str, int]:
    """When a version file was kept, from its name (a renamed one sorts as the oldest)."""
    match = _KEPT.search(path.name)
    return (match[1], int(match[2] or 1)) if match else ("", 0)


def _read_listing(path: Path) -> ProfileListing:
    """Read one profile file; whatever is wrong with it becomes the listing's ``error``."""
    try:
        raw = files.read_regular(path, MAX_PROFILE_BYTES)
    except OSError as exc:
        return ProfileListing(path, path.stem, error=f"cannot be read: {exc.strerror or exc}")
    return _listing_of(path, raw)


def _listing_of(path: Path, raw: bytes) -> ProfileListing:
    """The listing of a profile file's bytes, as ``_read_listing`` reads them."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        return ProfileListing(path, path.stem, error="not valid JSON (nested too deeply)")
    except ValueError as exc:
        if not raw.strip():
            reason = "empty file"
        elif isinstance(exc, json.JSONDecodeError):
            reason = "not valid JSON (truncated or corrupt)"
        else:  # e.g. an integer past Python's 4,300-digit limit
            reason = f"not valid JSON ({exc})"
        return ProfileListing(path, path.stem, error=reason)
    seen_name = doc.get("name") if isinstance(doc, dict) else None
    try:
        shown = check_name(seen_name)
    except ProfileError:
        shown = path.stem
    try:
        profile = Profile.from_dict(doc)
    except ProfileError as exc:
        # The message as raised: it names the settings, for each front end to word.
        message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)
        return ProfileListing(path, shown, error=message)
    except Exception as exc:  # one bad file must never break the listing of the others
        return ProfileListing(path, shown, error=f"cannot be read ({type(exc).__name__}: {exc})")
    return ProfileListing(path, profile.name, profile=profile)


def _encode(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _encoded(profile: Profile) -> bytes:
    """The file of ``profile``, once it is known to list as readable when read back.

    Raises:
        ProfileError: it would be larger than ``MAX_PROFILE_BYTES``, or would not read back.
    """
    data = _encode(profile.to_dict())
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(
            f"{profile.name!r} would take {len(data) / MiB:.1f} MiB on disk, more than the "
            f"{MAX_PROFILE_BYTES // MiB} MiB a profile file may hold"
        )
    listing = _listing_of(Path(f"{slugify(profile.name)}{SUFFIX}"), data)
    if listing.profile is None:
        raise ProfileError(f"{profile.name!r} would not read back: {listing.error}")
    return data


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def _free_path(path: Path) -> Path:
    candidate, n = path, 1
    while os.path.lexists(candidate):
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def _remove(path: Path, what: str) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _write_error(exc, what, path.parent) from exc
    files.fsync_folder(path.parent)


def _write_error(exc: OSError, action: str, folder: Path) -> ProfileError:
    """A message for a failed write; ``action`` says what was attempted ("save profile 'x'")."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ProfileError(f"cannot {action}: the folder {folder} is read-only or not yours")
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return ProfileError(f"cannot {action}: the disk is full; free some space and retry")
    return ProfileError(f"cannot {action} in {folder}: {exc.strerror or exc}")
