"""The comparison of saved profiles, for the command line and the window alike: every setting
that applies to one of them, every figure of their estimates (today's beside the saved one), and
each GPU's fit. The front ends word and lay out this one comparison; they compute nothing of it.

A setting that does not apply to a profile's setup (a LoRA rank when serving, an engine when
training: ``Workload.unused``) is not one of its values: the row shows none for it, and a row
that applies to none of the compared profiles is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import TYPE_CHECKING, Any

from vramgui.core.workload import Workload
from vramgui.profiles.model import source_of

if TYPE_CHECKING:
    from vramgui.profiles.reopen import Reestimate

MODEL = "model"  # the model's SOURCE
GPU = "gpu"  # the GPUs the profile is fitted against
TOTAL = "total"  # the total per GPU, after the components


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting across the compared profiles.

    Attributes:
        key: :data:`MODEL`, :data:`GPU` or a ``Workload`` field name.
        values: one per profile; None where it does not apply (see ``applies``).
        applies: per profile, whether the setting is one of its setup's.
    """

    key: str
    values: tuple[Any, ...]
    applies: tuple[bool, ...]

    @property
    def differs(self) -> bool:
        """The profiles do not all agree: a value, or whether the setting applies."""
        return len({(a, repr(v)) for a, v in zip(self.applies, self.values, strict=True)}) > 1

    @property
    def option(self) -> str:
        """The command line's name of the setting (``lora-rank``)."""
        return self.key.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure (bytes per GPU) of the compared estimates.

    Attributes:
        key: a component name, or :data:`TOTAL`.
        now: per profile, today's figure (None: not re-estimated, or the estimate has none).
        saved: per profile, the figure saved with the profile (None: none saved).
        re_estimated: per profile, whether today's estimate exists.
    """

    key: str
    now: tuple[int | None, ...]
    saved: tuple[int | None, ...]
    re_estimated: tuple[bool, ...]

    @property
    def shown(self) -> tuple[int | None, ...]:
        """The figure to show: today's, or the saved one where there is no estimate today."""
        return tuple(
            n if r else s for n, s, r in zip(self.now, self.saved, self.re_estimated, strict=True)
        )

    @property
    def changed(self) -> tuple[bool, ...]:
        """Per profile, whether today's figure differs from a saved one."""
        return tuple(
            r and s is not None and n != s
            for n, s, r in zip(self.now, self.saved, self.re_estimated, strict=True)
        )

    @property
    def differs(self) -> bool:
        """The profiles' shown figures are not all the same."""
        return len(set(self.shown)) > 1


@dataclass(frozen=True, slots=True)
class FitCell:
    """One profile against one GPU."""

    fits: bool
    headroom_bytes: int


@dataclass(frozen=True, slots=True)
class Fit:
    """One GPU across the compared profiles: a cell per profile, None where it was not fitted."""

    gpu: str
    cells: tuple[FitCell | None, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    """What the comparison shows, in display order.

    Attributes:
        settings: the model, the GPUs, then every setting that applies to one of the profiles.
        phases: per profile, the moment of the peak (None: unknown).
        figures: the components of any estimate, shown or saved, then :data:`TOTAL`.
        fits: every GPU any profile is fitted against, in the order they first appear.
    """

    settings: tuple[Setting, ...]
    phases: tuple[str | None, ...]
    figures: tuple[Figure, ...]
    fits: tuple[Fit, ...]

    @property
    def differences(self) -> list[str]:
        """The option names of the settings that differ, the model left out, sorted."""
        return sorted(s.option for s in self.settings if s.differs and s.key != MODEL)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready rows (``vramgui profile compare --json``)."""
        return {
            "settings": [
                {
                    "setting": s.option,
                    "values": [_json(v) for v in s.values],
                    "applies": list(s.applies),
                    "differs": s.differs,
                }
                for s in self.settings
            ],
            "phases": list(self.phases),
            "figures": [
                {
                    "figure": f.key,
                    "bytes": list(f.shown),
                    "now_bytes": list(f.now),
                    "saved_bytes": list(f.saved),
                    "differs": f.differs,
                }
                for f in self.figures
            ],
            "fits": [
                {
                    "gpu": fit.gpu,
                    "profiles": [
                        None if c is None else {"fits": c.fits, "headroom_bytes": c.headroom_bytes}
                        for c in fit.cells
                    ],
                }
                for fit in self.fits
            ],
        }


def compare(results: Sequence[Reestimate]) -> Comparison:
    """The comparison of re-estimated profiles (``profiles.reopen.reestimate``)."""
    profiles = [r.profile for r in results]
    settings = [
        Setting(MODEL, tuple(source_of(p.model) for p in profiles), (True,) * len(profiles)),
        Setting(GPU, tuple(", ".join(p.gpus) or "-" for p in profiles), (True,) * len(profiles)),
    ]
    for f in fields(Workload):
        applies = tuple(f.name not in p.workload.unused() for p in profiles)
        if any(applies):
            values = tuple(
                getattr(p.workload, f.name) if a else None
                for p, a in zip(profiles, applies, strict=True)
            )
            settings.append(Setting(f.name, values, applies))
    names: list[str] = []
    for r in results:
        for source in (r.shown, r.profile.saved_estimate):
            names.extend(n for n in components(source) if n not in names)
    figures = [_figure(n, results, partial(_component, n)) for n in names]
    figures.append(_figure(TOTAL, results, _total))
    gpus: list[str] = []
    for r in results:
        gpus.extend(g for g in fits_by_gpu(r.shown) if g not in gpus)
    fits = tuple(
        Fit(gpu, tuple(_fit_cell(fits_by_gpu(r.shown).get(gpu)) for r in results)) for gpu in gpus
    )
    phases = tuple(_text(per_gpu(r.shown).get("phase")) for r in results)
    return Comparison(tuple(settings), phases, tuple(figures), fits)


def _figure(
    key: str, results: Sequence[Reestimate], pick: Callable[[dict[str, Any]], int | None]
) -> Figure:
    return Figure(
        key,
        now=tuple(pick(r.document) if r.document is not None else None for r in results),
        saved=tuple(pick(r.profile.saved_estimate) for r in results),
        re_estimated=tuple(r.document is not None for r in results),
    )


def _component(name: str, document: dict[str, Any]) -> int | None:
    return components(document).get(name)


def _total(document: dict[str, Any]) -> int | None:
    return whole(per_gpu(document).get("total_bytes"))


def _fit_cell(row: dict[str, Any] | None) -> FitCell | None:
    headroom = whole(row.get("headroom_bytes")) if row else None
    if row is None or headroom is None:
        return None
    return FitCell(bool(row.get("fits")), headroom)


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def whole(value: Any) -> int | None:
    """``value`` if it is an integer (a byte figure of a document), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def per_gpu(document: dict[str, Any]) -> dict[str, Any]:
    """An estimate document's ``per_gpu`` section ({} where it has none)."""
    per_gpu = document.get("per_gpu")
    return per_gpu if isinstance(per_gpu, dict) else {}


def components(document: dict[str, Any]) -> dict[str, int]:
    """An estimate document's components per GPU, by name, in bytes."""
    raw = per_gpu(document).get("components")
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if whole(v) is not None}


def fits_by_gpu(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """An estimate document's fit rows by GPU name."""
    rows = document.get("fit")
    if not isinstance(rows, list):
        return {}
    return {r["gpu"]: r for r in rows if isinstance(r, dict) and isinstance(r.get("gpu"), str)}
