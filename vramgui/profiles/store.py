"""ProfileStore: one JSON file per profile in a folder, written atomically, read tolerantly.

Rules that keep the user's data safe:
- every write goes to a temporary file in the same folder, is flushed and fsynced, then renamed
  over (or hard-linked to) its target, and the folder is fsynced, so a crash leaves either the old
  file or the new one, never half of one;
- a file that cannot be read (corrupt, truncated, not a profile, a newer format) is listed as
  unreadable with the reason and is never overwritten, renamed or deleted;
- a new file never replaces an existing one: it is created with a hard link, which fails if the
  name is taken, and a lock file serialises the check-then-write of saves from several threads or
  processes, so two saves under one name cannot both win;
- delete moves the file to a ``trash`` subfolder, from which ``restore`` brings it back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramgui import paths
from vramgui.profiles.model import (
    BUNDLE_FORMAT,
    FORMAT_VERSION,
    Profile,
    ProfileError,
    check_name,
    now,
)

SUFFIX = ".json"
TRASH = "trash"
LOCK = ".lock"
# A save holds the lock for milliseconds; one older than this was left by a process that died.
STALE_LOCK_SECONDS = 30.0
LOCK_WAIT_SECONDS = 5.0
_MAX_SLUG = 60
# What os.link raises where the file system has no hard links.
_NO_HARD_LINKS = {
    errno.EPERM,
    errno.EXDEV,
    errno.ENOSYS,
    getattr(errno, "ENOTSUP", errno.EPERM),
    getattr(errno, "EOPNOTSUPP", errno.EPERM),
}


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


def slugify(name: str) -> str:
    """A file-name-safe, lower-case form of a profile name (ASCII letters, digits, dashes)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:_MAX_SLUG].strip("-")
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

    # Reading ---------------------------------------------------------------------------------

    def list(self) -> list[ProfileListing]:
        """Every profile file: readable ones by name, then unreadable ones by file name."""
        try:
            files = sorted(
                p for p in self.directory.glob(f"*{SUFFIX}") if not p.name.startswith(".")
            )
        except OSError as exc:
            raise ProfileError(f"cannot read the profile folder {self.directory}: {exc}") from exc
        listings = [_read_listing(p) for p in files if p.is_file()]
        listings.sort(key=lambda item: (not item.readable, item.name.casefold(), item.path.name))
        return listings

    def names(self) -> list[str]:
        """Names of the readable profiles."""
        return [item.name for item in self.list() if item.readable]

    def get(self, name: str) -> Profile:
        """The profile with this name (case-insensitive).

        Raises:
            ProfileError: there is none, or its file cannot be read.
        """
        return self._listing(name).profile  # type: ignore[return-value]

    def _find(self, name: str) -> ProfileListing | None:
        wanted = name.strip().casefold()
        readable = [i for i in self.list() if i.readable and i.name.casefold() == wanted]
        return readable[0] if readable else None

    def _listing(self, name: str) -> ProfileListing:
        found = self._find(name)
        if found is not None:
            return found
        unreadable = [
            i for i in self.list() if not i.readable and i.name.casefold() == name.casefold()
        ]
        if unreadable:
            raise ProfileError(
                f"profile {name!r} cannot be read ({unreadable[0].path.name}: {unreadable[0].error})"
            )
        raise ProfileError(f"no profile named {name!r}")

    # Writing ---------------------------------------------------------------------------------

    def save(self, profile: Profile, overwrite: bool = False) -> Profile:
        """Save a profile, stamping its modification time; returns the profile as saved.

        Args:
            profile: the profile; its name must not be taken unless ``overwrite``.
            overwrite: replace the saved profile of the same name (its creation time is kept).

        Raises:
            ProfileError: the name is taken (and not ``overwrite``), or the file cannot be written
                (read-only folder, full disk...); what was on disk before is untouched.
        """
        name = check_name(profile.name)
        with self._locked():
            existing = self._find(name)
            if existing is not None and not overwrite:
                raise ProfileError(f"a profile named {existing.name!r} exists")
            stamp = now()
            created = existing.profile.created if existing and existing.profile else profile.created
            saved = dataclasses.replace(
                profile, name=name, created=created, modified=stamp, format_version=FORMAT_VERSION
            )
            data = _encode(saved.to_dict())
            if existing is not None:
                _write_atomic(existing.path, data, replace=True, what=f"save profile {name!r}")
            else:
                self._create(name, data)
        return saved

    def rename(self, old: str, new: str) -> Profile:
        """Give a profile a new name (its file name follows).

        Raises:
            ProfileError: no profile ``old``, ``new`` is taken by another profile, or a write fails.
        """
        new = check_name(new)
        with self._locked():
            listing = self._listing(old)
            clash = self._find(new)
            if clash is not None and clash.path != listing.path:
                raise ProfileError(f"a profile named {clash.name!r} exists")
            renamed = dataclasses.replace(listing.profile, name=new, modified=now())  # type: ignore[arg-type]
            data = _encode(renamed.to_dict())
            if slugify(new) == slugify(listing.name):
                _write_atomic(listing.path, data, replace=True, what=f"rename profile {old!r}")
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
            new_name = _unique(f"{original.name} (copy)", taken)
        copy = dataclasses.replace(original, name=new_name, created=stamp, modified=stamp)
        return self.save(copy)

    def delete(self, name: str) -> TrashedProfile:
        """Move a profile to the trash folder; ``restore`` undoes it.

        Raises:
            ProfileError: no such profile, or the file cannot be moved.
        """
        with self._locked():
            listing = self._listing(name)
            trash = self.directory / TRASH
            try:
                trash.mkdir(exist_ok=True)
            except OSError as exc:
                raise _write_error(exc, f"delete profile {listing.name!r}", self.directory) from exc
            target = trash / f"{time.strftime('%Y%m%d-%H%M%S')}-{listing.path.name}"
            target = _free_path(target)
            try:
                os.replace(listing.path, target)
            except OSError as exc:
                raise _write_error(exc, f"delete profile {listing.name!r}", self.directory) from exc
            _fsync_dir(self.directory)
        return TrashedProfile(name=listing.name, original_path=listing.path, trash_path=target)

    def restore(self, trashed: TrashedProfile) -> Profile:
        """Bring back a deleted profile.

        Raises:
            ProfileError: the trashed file is gone or unreadable, or its name was taken meanwhile.
        """
        with self._locked():
            listing = _read_listing(trashed.trash_path)
            if listing.profile is None:
                raise ProfileError(f"cannot restore {trashed.name!r}: {listing.error}")
            clash = self._find(listing.name)
            if clash is not None:
                raise ProfileError(
                    f"cannot restore {listing.name!r}: a profile with that name exists now"
                )
            data = trashed.trash_path.read_bytes()
            self._create(listing.name, data)
            _remove(trashed.trash_path, what=f"remove the trashed copy of {listing.name!r}")
        return listing.profile

    # Import and export -----------------------------------------------------------------------

    def export(self, names: Iterable[str], path: Path) -> list[str]:
        """Write the named profiles (all readable ones if ``names`` is empty) to one bundle file.

        Returns:
            The exported names.

        Raises:
            ProfileError: a name is unknown, or the file cannot be written.
        """
        wanted = list(names)
        profiles = (
            [self.get(n) for n in wanted]
            if wanted
            else [i.profile for i in self.list() if i.profile is not None]
        )
        if not profiles:
            raise ProfileError("there are no profiles to export")
        bundle = {
            "format": BUNDLE_FORMAT,
            "format_version": FORMAT_VERSION,
            "profiles": [p.to_dict() for p in profiles],
        }
        path = Path(path)
        _write_atomic(path, _encode(bundle), replace=True, what=f"write the export file {path}")
        return [p.name for p in profiles]

    def import_(self, path: Path) -> list[str]:
        """Add the profiles of a bundle (or of a single profile file); never overwrites.

        A name already taken gets " (2)", " (3)"... appended. Nothing is imported unless every
        profile of the file can be read.

        Returns:
            The names the profiles were saved under.

        Raises:
            ProfileError: the file cannot be read or holds an unreadable profile.
        """
        path = Path(path)
        try:
            doc = json.loads(path.read_bytes())
        except OSError as exc:
            raise ProfileError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise ProfileError(f"{path} is not a JSON file ({exc})") from exc
        if isinstance(doc, dict) and doc.get("format") == BUNDLE_FORMAT:
            version = doc.get("format_version", 1)
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise ProfileError(
                    f"{path} was exported by a newer vramgui (format {version}); update vramgui"
                )
            raw = doc.get("profiles")
            if not isinstance(raw, list):
                raise ProfileError(f"{path}: 'profiles' must be a list")
        else:
            raw = [doc]
        profiles = []
        for index, item in enumerate(raw, start=1):
            try:
                profiles.append(Profile.from_dict(item))
            except ProfileError as exc:
                raise ProfileError(f"{path}: profile {index}: {exc}") from exc
        imported = []
        with self._locked():
            taken = {i.name.casefold() for i in self.list() if i.readable}
            for profile in profiles:
                name = _unique(profile.name, taken)
                taken.add(name.casefold())
                self._create(name, _encode(dataclasses.replace(profile, name=name).to_dict()))
                imported.append(name)
        return imported

    # Internals ------------------------------------------------------------------------------

    def _create(self, name: str, data: bytes) -> Path:
        """Write ``data`` to a new file named after ``name``; existing files are never touched."""
        base = slugify(name)
        for n in range(1, 10_000):
            target = self.directory / (f"{base}{SUFFIX}" if n == 1 else f"{base}-{n}{SUFFIX}")
            if target.exists():
                continue
            try:
                _write_atomic(target, data, replace=False, what=f"save profile {name!r}")
            except FileExistsError:
                continue  # another writer took it between the check and the link
            return target
        raise ProfileError(f"too many profile files named like {base!r}")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the folder's lock file, so check-then-write sequences do not interleave."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _write_error(exc, "change profiles", self.directory) from exc
        lock = self.directory / LOCK
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                if _is_stale(lock):
                    with contextlib.suppress(OSError):
                        lock.unlink()
                    continue
                if time.monotonic() > deadline:
                    raise ProfileError(
                        f"the profile folder is busy (another vramgui is saving); if none is "
                        f"running, delete {lock}"
                    ) from None
                time.sleep(0.01)
            except OSError as exc:
                raise _write_error(exc, "change profiles", self.directory) from exc
        os.close(fd)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                lock.unlink()


def _is_stale(lock: Path) -> bool:
    try:
        return time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS
    except OSError:
        return False  # it went away: the next attempt will take it


def _read_listing(path: Path) -> ProfileListing:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return ProfileListing(path, path.stem, error=f"cannot be read: {exc.strerror or exc}")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        reason = "empty file" if not raw.strip() else "not valid JSON (truncated or corrupt)"
        return ProfileListing(path, path.stem, error=reason)
    seen_name = doc.get("name") if isinstance(doc, dict) else None
    shown = seen_name.strip() if isinstance(seen_name, str) and seen_name.strip() else path.stem
    try:
        profile = Profile.from_dict(doc)
    except ProfileError as exc:
        return ProfileListing(path, shown, error=str(exc))
    return ProfileListing(path, profile.name, profile=profile)


def _encode(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate.casefold() in taken:
        n += 1
        candidate = f"{name} ({n})"
    return candidate


def _free_path(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def _write_atomic(path: Path, data: bytes, *, replace: bool, what: str) -> None:
    """Write a whole file or nothing: temp file, fsync, then rename (or link when not ``replace``).

    Raises:
        FileExistsError: ``replace`` is False and ``path`` exists (nothing was changed).
        ProfileError: any other failure, with what the user can do about it.
    """
    folder = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _write_error(exc, what, folder) from exc
    tmp = Path(tmp_name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            _link_exclusive(tmp, path)
    except FileExistsError:
        _discard(tmp)
        raise
    except OSError as exc:
        _discard(tmp)
        raise _write_error(exc, what, folder) from exc
    except BaseException:
        _discard(tmp)
        raise
    _fsync_dir(folder)


def _link_exclusive(tmp: Path, path: Path) -> None:
    """Move a complete temp file to ``path`` only if ``path`` does not exist.

    A hard link fails when the target exists, so it is an atomic exclusive create of a complete
    file. File systems without hard links (FAT, some network shares) fall back to check-then-rename,
    which the store's lock file keeps safe between vramgui writers.
    """
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if path.exists():
            raise FileExistsError(errno.EEXIST, "file exists", str(path)) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink()


def _remove(path: Path, what: str) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _write_error(exc, what, path.parent) from exc
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; POSIX only (Windows cannot open a directory for fsync)."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename itself has happened
    finally:
        os.close(fd)


def _write_error(exc: OSError, action: str, folder: Path) -> ProfileError:
    """A message for a failed write; ``action`` says what was attempted ("save profile 'x'")."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ProfileError(f"cannot {action}: the folder {folder} is read-only or not yours")
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return ProfileError(f"cannot {action}: the disk is full; free some space and retry")
    return ProfileError(f"cannot {action} in {folder}: {exc.strerror or exc}")
