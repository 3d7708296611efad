"""``vramgui profile save|list|show|compare|export|import``: saved estimate setups.

A profile stores the model reference, the workload and the GPUs; ``show`` and ``compare``
re-estimate with the current core and say what changed since the profile was saved.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramgui.cli.estimate import add_estimate_options, workload_from_args
from vramgui.cli.text import table
from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelRef
from vramgui.core.report import document_for
from vramgui.core.units import format_bytes
from vramgui.core.workload import Workload
from vramgui.hardware.capacity import resolve_capacities
from vramgui.profiles import Profile, ProfileStore, source_of
from vramgui.sources.resolve import load_model
from vramgui.sources.results import ResolvedModel

LIST_SCHEMA = "vramgui.profiles/1"
SHOW_SCHEMA = "vramgui.profile-show/1"
COMPARE_SCHEMA = "vramgui.profile-compare/1"


def add_parser(subparsers: Any) -> None:
    """Register ``vramgui profile`` and its actions on the top-level subparsers."""
    parser = subparsers.add_parser(
        "profile",
        help="save, list, show, compare, export and import estimate profiles",
        description="Saved estimate setups: a model, a workload and the GPUs to fit against.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True

    save = actions.add_parser("save", help="estimate a model and save the setup under a name")
    save.add_argument("name", metavar="NAME")
    save.add_argument("source", metavar="SOURCE", help="path, catalog name or Hub repo id")
    add_estimate_options(save)
    save.add_argument("--notes", default="", help="free text saved with the profile")
    save.add_argument("--overwrite", action="store_true", help="replace a profile of that name")
    save.set_defaults(run=_save)

    listing = actions.add_parser("list", help="list saved profiles (and unreadable files)")
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    listing.set_defaults(run=_list)

    show = actions.add_parser("show", help="re-estimate a profile and show what changed")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--json", action="store_true", help="print one JSON document")
    show.set_defaults(run=_show)

    compare = actions.add_parser("compare", help="re-estimate profiles and lay them side by side")
    compare.add_argument("names", metavar="NAME", nargs="+")
    compare.add_argument("--json", action="store_true", help="print one JSON document")
    compare.set_defaults(run=_compare)

    export = actions.add_parser("export", help="write profiles to one file (all if none named)")
    export.add_argument("file", metavar="FILE", type=Path)
    export.add_argument("names", metavar="NAME", nargs="*")
    export.set_defaults(run=_export)

    imp = actions.add_parser("import", help="add the profiles of an exported file")
    imp.add_argument("file", metavar="FILE", type=Path)
    imp.set_defaults(run=_import)


def estimate_for(
    loaded: ResolvedModel, workload: Workload, gpus: tuple[str, ...]
) -> dict[str, Any]:
    """The estimate document (``vramgui.estimate/1``) of a setup, with where its model came from.

    Raises:
        VramguiError: the workload does not apply to the model, or a GPU name is unknown.
    """
    document = document_for(loaded.spec, workload, resolve_capacities(list(gpus)))
    document["source"] = loaded.ref.to_dict()
    return document


def _save(args: argparse.Namespace) -> int:
    loaded = load_model(args.source)
    workload = workload_from_args(args)
    gpus = _gpu_names(args)
    document = estimate_for(loaded, workload, gpus)
    profile = Profile(
        name=args.name,
        model=loaded.ref,
        workload=workload,
        gpus=gpus,
        notes=args.notes,
        saved_estimate=document,
    )
    saved = ProfileStore().save(profile, overwrite=args.overwrite)
    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    total = document.get("per_gpu", {}).get("total_bytes")
    size = f" ({format_bytes(total)} per GPU)" if isinstance(total, int) else ""
    print(f"saved profile {saved.name!r}{size}")
    return 0


def _list(args: argparse.Namespace) -> int:
    listings = ProfileStore().list()
    if args.json:
        items = []
        for item in listings:
            if item.profile is None:
                items.append(
                    {
                        "name": item.name,
                        "file": str(item.path),
                        "readable": False,
                        "error": item.error,
                    }
                )
            else:
                entry = _profile_summary(item.profile)
                entry.update(file=str(item.path), readable=True)
                items.append(entry)
        print(json.dumps({"schema": LIST_SCHEMA, "profiles": items}, indent=2))
        return 0
    if not listings:
        print("No profiles yet. Save one with `vramgui profile save NAME SOURCE`.")
        return 0
    rows = []
    for item in listings:
        if item.profile is None:
            rows.append((item.name, "-", "-", "-", "-", f"unreadable: {item.error}"))
            continue
        p = item.profile
        rows.append(
            (
                p.name,
                p.model.id,
                p.workload.mode,
                ", ".join(p.gpus) or "-",
                _saved_total(p),
                p.modified.strftime("%Y-%m-%d %H:%M"),
            )
        )
    print(table(("name", "model", "mode", "gpus", "saved total", "modified"), rows))
    return 0


@dataclass
class _Reopened:
    """A profile and its estimate with today's core (or why there is none)."""

    profile: Profile
    document: dict[str, Any] | None = None
    notices: list[str] = field(default_factory=list)
    error: str | None = None


def _reopen(profile: Profile) -> _Reopened:
    """Re-estimate a profile; a model that cannot be loaded now leaves only the saved estimate."""
    reopened = _Reopened(profile)
    try:
        loaded = load_model(source_of(profile.model))
        reopened.document = estimate_for(loaded, profile.workload, profile.gpus)
    except VramguiError as exc:
        reopened.error = f"cannot re-estimate now ({exc}); showing the estimate saved with it"
        return reopened
    reopened.notices.extend(loaded.notices)
    reopened.notices.extend(_model_changes(profile.model, loaded.ref))
    return reopened


def _model_changes(saved: ModelRef, now: ModelRef) -> list[str]:
    notes = []
    if saved.size_bytes is not None and now.size_bytes not in (None, saved.size_bytes):
        notes.append(f"{saved.id} changed size since the profile was saved")
    elif saved.mtime is not None and now.mtime not in (None, saved.mtime):
        notes.append(f"{saved.id} was modified since the profile was saved")
    return notes


def _show(args: argparse.Namespace) -> int:
    profile = ProfileStore().get(args.name)
    reopened = _reopen(profile)
    changes = _changes(profile.saved_estimate, reopened.document)
    if args.json:
        document = {
            "schema": SHOW_SCHEMA,
            "profile": _profile_summary(profile),
            "estimate": reopened.document,
            "saved_estimate": profile.saved_estimate,
            "changes": changes,
            "notices": reopened.notices + ([reopened.error] if reopened.error else []),
        }
        print(json.dumps(document, indent=2))
        return 0
    print(f"{profile.name}")
    if profile.notes:
        print(f"  {profile.notes}")
    print(f"model: {source_of(profile.model)} ({profile.model.kind})")
    print(f"settings: {_settings_line(profile)}")
    print(f"gpus: {', '.join(profile.gpus) or '-'}")
    print(f"saved: {profile.modified.strftime('%Y-%m-%d %H:%M')} UTC")
    for line in [*reopened.notices, *([reopened.error] if reopened.error else [])]:
        print(f"note: {line}")
    saved_per_gpu = profile.saved_estimate.get("per_gpu", {})
    current_per_gpu = (reopened.document or {}).get("per_gpu", {})
    saved, current = saved_per_gpu.get("components", {}), current_per_gpu.get("components", {})
    rows = [
        (key, *_compare_cells(saved.get(key), current.get(key)))
        for key in [*saved, *(k for k in current if k not in saved)]
    ]
    rows.append(
        (
            "total per GPU",
            *_compare_cells(saved_per_gpu.get("total_bytes"), current_per_gpu.get("total_bytes")),
        )
    )
    print(table(("component", "saved", "now", "change"), rows))
    if reopened.document is not None:
        print(
            f"{len(changes)} figure(s) changed since saving."
            if changes
            else "Same figures as when saved."
        )
    return 0


def _compare(args: argparse.Namespace) -> int:
    store = ProfileStore()
    profiles = [store.get(name) for name in args.names]
    reopened = [_reopen(p) for p in profiles]
    settings = [_settings(p) for p in profiles]
    differing = sorted(
        key for key in set().union(*settings) if len({str(s.get(key)) for s in settings}) > 1
    )
    if args.json:
        document = {
            "schema": COMPARE_SCHEMA,
            "profiles": [
                {
                    **_profile_summary(r.profile),
                    "estimate": r.document if r.document is not None else r.profile.saved_estimate,
                    "re_estimated": r.document is not None,
                    "notices": r.notices + ([r.error] if r.error else []),
                }
                for r in reopened
            ],
            "differences": differing,
        }
        print(json.dumps(document, indent=2))
        return 0
    documents = [
        r.document if r.document is not None else r.profile.saved_estimate for r in reopened
    ]
    header = ("", *(p.name for p in profiles))
    sources = [source_of(p.model) for p in profiles]
    rows = [("* model" if len(set(sources)) > 1 else "model", *sources)]
    rows += [(f"* {key}", *(str(s.get(key, "-")) for s in settings)) for key in differing]
    components: list[str] = []
    for doc in documents:
        for key in doc.get("per_gpu", {}).get("components", {}):
            if key not in components:
                components.append(key)
    for key in components:
        rows.append(
            (
                key,
                *(
                    _bytes_cell(d.get("per_gpu", {}).get("components", {}).get(key))
                    for d in documents
                ),
            )
        )
    rows.append(
        (
            "total per GPU",
            *(_bytes_cell(d.get("per_gpu", {}).get("total_bytes")) for d in documents),
        )
    )
    for gpu in sorted({f["gpu"] for d in documents for f in d.get("fit", []) if "gpu" in f}):
        rows.append((f"fits {gpu}", *(_fit_cell(d, gpu) for d in documents)))
    print(table(header, rows))
    if differing:
        print("* settings that differ")
    for r in reopened:
        for line in [*r.notices, *([r.error] if r.error else [])]:
            print(f"note ({r.profile.name}): {line}")
    return 0


def _export(args: argparse.Namespace) -> int:
    names = ProfileStore().export(args.names, args.file)
    print(f"exported {len(names)} profile(s) to {args.file}")
    return 0


def _import(args: argparse.Namespace) -> int:
    names = ProfileStore().import_(args.file)
    print(f"imported {len(names)} profile(s): {', '.join(names)}")
    return 0


def _gpu_names(args: argparse.Namespace) -> tuple[str, ...]:
    value = getattr(args, "gpu", None)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _profile_summary(profile: Profile) -> dict[str, Any]:
    document = profile.to_dict()
    document.pop("saved_estimate")
    document.pop("format")
    document.pop("format_version")
    document.pop("app_version")
    document["saved_total_bytes"] = profile.saved_estimate.get("per_gpu", {}).get("total_bytes")
    return document


def _settings(profile: Profile) -> dict[str, Any]:
    settings = dict(profile.workload.to_dict())
    settings["gpu"] = ", ".join(profile.gpus) or "-"
    return settings


def _settings_line(profile: Profile) -> str:
    w = profile.workload
    return f"{w.mode}, batch {w.batch}, seq {w.seq}, {w.dtype}, quant {w.quant}, {w.gpus} GPU(s)"


def _changes(saved: dict[str, Any], current: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Figures of the estimate document that differ between save time and now."""
    if current is None:
        return []
    before, after = _figures(saved), _figures(current)
    return [
        {"figure": key, "saved": before.get(key), "now": after.get(key)}
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def _figures(document: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for section in ("model", "per_gpu"):
        _flatten(document.get(section, {}), section, figures)
    for fit in document.get("fit", []):
        if isinstance(fit, dict) and "gpu" in fit:
            for key in ("fits", "capacity_bytes", "headroom_bytes"):
                figures[f"fit.{fit['gpu']}.{key}"] = fit.get(key)
    return figures


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}", out)
    elif isinstance(value, int | float | str | bool) or value is None:
        out[prefix] = value


def _saved_total(profile: Profile) -> str:
    total = profile.saved_estimate.get("per_gpu", {}).get("total_bytes")
    return _bytes_cell(total)


def _bytes_cell(value: Any) -> str:
    return format_bytes(value) if isinstance(value, int) and not isinstance(value, bool) else "-"


def _compare_cells(saved: Any, now: Any) -> tuple[str, str, str]:
    change = ""
    if isinstance(saved, int) and isinstance(now, int) and saved != now:
        sign = "+" if now > saved else "-"
        change = f"{sign}{format_bytes(abs(now - saved))}"
    return _bytes_cell(saved), _bytes_cell(now), change


def _fit_cell(document: dict[str, Any], gpu: str) -> str:
    for fit in document.get("fit", []):
        if fit.get("gpu") == gpu:
            verdict = "yes" if fit.get("fits") else "no"
            return f"{verdict} ({_bytes_cell(fit.get('headroom_bytes'))} headroom)"
    return "-"
