"""Saved estimate profiles: versioned JSON files, written atomically, in the user data folder."""

from vramgui.profiles.model import FORMAT, FORMAT_VERSION, Profile, ProfileError, source_of
from vramgui.profiles.store import ProfileListing, ProfileStore, TrashedProfile

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Profile",
    "ProfileError",
    "ProfileListing",
    "ProfileStore",
    "TrashedProfile",
    "source_of",
]
