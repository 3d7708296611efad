"""Saved estimate profiles: versioned JSON files, written atomically, in the user data folder."""

from vramgui.profiles.model import (
    FORMAT,
    FORMAT_VERSION,
    MAX_NOTES_LENGTH,
    NameTaken,
    OffloadSettings,
    Profile,
    ProfileError,
    source_of,
)
from vramgui.profiles.store import (
    MAX_BUNDLE_BYTES,
    MAX_PROFILE_BYTES,
    ProfileListing,
    ProfileStore,
    TrashedProfile,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_BUNDLE_BYTES",
    "MAX_NOTES_LENGTH",
    "MAX_PROFILE_BYTES",
    "NameTaken",
    "OffloadSettings",
    "Profile",
    "ProfileError",
    "ProfileListing",
    "ProfileStore",
    "TrashedProfile",
    "source_of",
]
