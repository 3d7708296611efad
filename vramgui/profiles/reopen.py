"""Re-estimating a saved profile with today's core, for the command line and the window alike.

A profile stores what to estimate, not the figures; reopening it loads the model again and
estimates its workload now. Loading models and naming GPUs belong to other layers
(``sources``, ``hardware``), so the caller hands those in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelRef, ModelSpec
from vramgui.core.report import document_for
from vramgui.core.workload import Workload
from vramgui.profiles.model import Profile, source_of


class Loaded(Protocol):
    """What loading a model gives (``vramgui.sources.results.ResolvedModel``, named by its shape:
    the profiles do not import the sources)."""

    @property
    def spec(self) -> ModelSpec: ...

    @property
    def ref(self) -> ModelRef: ...

    @property
    def notices(self) -> Sequence[str]: ...


LoadModel = Callable[[str], Loaded]
# GPU names -> (name, capacity in bytes); raises VramguiError for a name it does not know.
ResolveGpus = Callable[[list[str]], list[tuple[str, int]]]
# (spec, workload, capacities) -> the estimate document (``vramgui.estimate/1``).
DocumentFor = Callable[[ModelSpec, Workload, list[tuple[str, int]]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Reestimate:
    """A profile and its estimate with today's core, or why there is none.

    Attributes:
        profile: the profile.
        document: the estimate document now (``vramgui.estimate/1``, with ``source``), or None
            when it could not be computed.
        error: why it could not, or None.
        notices: what the user should know (a changed model file, a GPU not in the catalog).
    """

    profile: Profile
    document: dict[str, Any] | None = None
    error: str | None = None
    notices: tuple[str, ...] = ()

    @property
    def shown(self) -> dict[str, Any]:
        """The estimate to show: today's, or the saved one when today's cannot be computed."""
        return self.document if self.document is not None else self.profile.saved_estimate


def reestimate(
    profile: Profile,
    load_model: LoadModel,
    resolve_gpus: ResolveGpus,
    estimate_document: DocumentFor = document_for,
) -> Reestimate:
    """Load a profile's model again and estimate its workload with the current core.

    Never raises: a model that cannot be loaded (gone, renamed, offline, a path that is no path
    on this machine) or a setup the core refuses becomes ``error``, so that one profile cannot
    sink a comparison of several.
    """
    notices: list[str] = []
    try:
        loaded = load_model(source_of(profile.model))
        capacities = gpu_capacities(profile, resolve_gpus, notices)
        document = estimate_document(loaded.spec, profile.workload, capacities)
    except Exception as exc:  # a profile from anywhere: see the docstring
        reason = str(exc) if isinstance(exc, VramguiError) else f"{type(exc).__name__}: {exc}"
        return Reestimate(profile, error=reason, notices=tuple(notices))
    document["source"] = loaded.ref.to_dict()
    notices.extend(loaded.notices)
    notices.extend(model_changes(profile.model, loaded.ref))
    return Reestimate(profile, document, notices=tuple(notices))


def gpu_capacities(
    profile: Profile, resolve_gpus: ResolveGpus, notices: list[str]
) -> list[tuple[str, int]]:
    """The profile's GPUs as ``(name, capacity_bytes)``.

    A name the catalog does not know (a local GPU of another machine, say) keeps the capacity
    saved with the profile; without one it is left out, and ``notices`` says so.
    """
    saved = {
        row["gpu"]: row["capacity_bytes"]
        for row in profile.saved_estimate.get("fit") or []
        if isinstance(row.get("gpu"), str) and isinstance(row.get("capacity_bytes"), int)
    }
    pairs: list[tuple[str, int]] = []
    for name in profile.gpus:
        try:
            pairs.extend(resolve_gpus([name]))
        except VramguiError as exc:
            if name in saved:
                pairs.append((name, saved[name]))
                notices.append(f"{name}: {exc}; using the capacity saved with the profile")
            else:
                notices.append(f"{name} left out: {exc}")
    return pairs


def model_changes(saved: ModelRef, now: ModelRef) -> list[str]:
    """What changed in a local model file since the profile was saved (size, then time)."""
    if saved.size_bytes is not None and now.size_bytes not in (None, saved.size_bytes):
        return [f"{saved.id} changed size since the profile was saved"]
    if saved.mtime is not None and now.mtime not in (None, saved.mtime):
        return [f"{saved.id} was modified since the profile was saved"]
    return []
