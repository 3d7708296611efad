"""``vramgui profile save|list|show|versions|restore|compare|export|import``: saved setups.

A profile stores the model reference, the workload and the GPUs; ``show`` and ``compare``
re-estimate with the current core and say what changed since the profile was saved. Saving never
replaces a profile unless ``--update`` says so, and an update keeps the previous version, which
``restore`` brings back.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.estimate import add_estimate_options, add_host_options, host_from_args, load_for
from vramgui.cli.text import printable, table
from vramgui.core.units import format_bytes
from vramgui.profiles import (
    MAX_BUNDLE_BYTES,
    NameTaken,
    OffloadSettings,
    Profile,
    ProfileError,
    ProfileStore,
    source_of,
)
from vramgui.profiles.compare import MODEL, TOTAL, FitCell, compare

if TYPE_CHECKING:
    from vramgui.profiles.reopen import Reestimate

LIST_SCHEMA = "vramgui.profiles/1"
SHOW_SCHEMA = "vramgui.profile-show/1"
VERSIONS_SCHEMA = "vramgui.profile-versions/1"
COMPARE_SCHEMA = "vramgui.profile-compare/1"
STDIO = "-"


def add_parser(subparsers: Any) -> None:
    """Register ``vramgui profile`` and its actions on the top-level subparsers."""
    parser = subparsers.add_parser(
        "profile",
        help=SUBCOMMANDS["profile"],
        description="Saved estimate setups: a model, a workload and the GPUs to fit against.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True

    save = actions.add_parser(
        "save",
        help="estimate a model and save the setup under a new name (or --update one)",
        description="Estimate a model and save the setup as a new profile. A name already taken "
        "is refused unless --update is given; an update keeps the replaced version, which "
        "`vramgui profile restore NAME` brings back.",
    )
    save.add_argument("name", metavar="NAME")
    save.add_argument("source", metavar="SOURCE", help="path, catalog name or Hub repo id")
    add_estimate_options(save)
    add_offload_options(save)
    save.add_argument(
        "--notes",
        default=None,
        help="free text saved with the profile (default: none; an update keeps the notes it had)",
    )
    save.add_argument(
        "--update",
        action="store_true",
        help="replace the profile of that name, keeping its previous version to restore",
    )
    save.set_defaults(run=_save)

    listing = actions.add_parser("list", help="list saved profiles (and unreadable files)")
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    listing.set_defaults(run=_list)

    show = actions.add_parser("show", help="re-estimate a profile and show what changed")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--json", action="store_true", help="print one JSON document")
    show.set_defaults(run=_show)

    versions = actions.add_parser(
        "versions", help="list the earlier versions of a profile that updates kept"
    )
    versions.add_argument("name", metavar="NAME")
    versions.add_argument("--json", action="store_true", help="print one JSON document")
    versions.set_defaults(run=_versions)

    restore = actions.add_parser(
        "restore",
        help="bring back an earlier version of a profile (the current one is kept in turn)",
    )
    restore.add_argument("name", metavar="NAME")
    restore.add_argument(
        "number",
        metavar="NUMBER",
        nargs="?",
        type=int,
        default=1,
        help="which version, as `versions` numbers them (default: 1, the latest)",
    )
    restore.set_defaults(run=_restore)

    compare = actions.add_parser("compare", help="re-estimate profiles and lay them side by side")
    compare.add_argument("names", metavar="NAME", nargs="+")
    compare.add_argument("--json", action="store_true", help="print one JSON document")
    compare.set_defaults(run=_compare)

    export = actions.add_parser(
        "export",
        help="write profiles to one file (all if none named)",
        description="Write profiles to one file, or to standard output with FILE `-`. Only a "
        "regular file is written: links, pipes and devices are refused.",
    )
    export.add_argument("file", metavar="FILE", help="a new file, or - for standard output")
    export.add_argument("names", metavar="NAME", nargs="*")
    export.add_argument("--force", action="store_true", help="replace FILE if it exists")
    export.set_defaults(run=_export)

    imp = actions.add_parser("import", help="add the profiles of an exported file")
    imp.add_argument("file", metavar="FILE", help="an exported file, or - for standard input")
    imp.set_defaults(run=_import)


def add_offload_options(parser: argparse.ArgumentParser) -> None:
    """The placement and host a llama.cpp profile keeps (``vramgui plan``'s flags)."""
    add_host_options(parser)
    group = parser.add_argument_group("llama.cpp placement kept with the profile")
    group.add_argument(
        "--ngl", type=int, default=None, help="llama.cpp -ngl (default: the fastest that fits)"
    )
    group.add_argument(
        "--n-cpu-moe", type=int, default=0, metavar="N", help="experts of the first N layers in RAM"
    )
    group.add_argument("--cpu-moe", action="store_true", help="every layer's experts in RAM")
    group.add_argument(
        "--no-op-offload", action="store_true", help="llama.cpp --no-op-offload (see `plan`)"
    )


def offload_from_args(args: argparse.Namespace) -> OffloadSettings:
    """The placement and host a profile keeps, from the flags (checked as `plan` checks them).

    Raises:
        WorkloadError: a negative layer count or a host figure that is not positive.
    """
    from vramgui.core.errors import WorkloadError

    for flag, value in (("ngl", args.ngl), ("n-cpu-moe", args.n_cpu_moe)):
        if value is not None and value < 0:
            raise WorkloadError(f"--{flag} must be 0 or more, got {value}")
    host = host_from_args(args)
    return OffloadSettings(
        n_gpu_layers=args.ngl,
        n_cpu_moe=args.n_cpu_moe,
        cpu_moe=args.cpu_moe,
        op_offload=not args.no_op_offload,
        ram_bytes=host.ram_bytes if host.ram_source == "set" else None,
        disk_bytes_per_s=host.disk_bytes_per_s if host.disk_source == "set" else None,
    )


def _save(args: argparse.Namespace) -> int:
    store = ProfileStore()
    # As `estimate` reads it: a GGUF file or an Ollama model is served by llama.cpp unless
    # --engine says otherwise, and a longer context than the model's is refused.
    loaded, workload = load_for(args)
    from vramgui.answers.documents import saved_document
    from vramgui.hardware.capacity import resolve_capacities

    gpus = _gpu_names(args)
    offload = offload_from_args(args)
    capacities = resolve_capacities(list(gpus))
    document = saved_document(loaded, workload, capacities, rates=_rates(), offload=offload)
    previous = store.find(args.name) if args.update else None
    notes = args.notes
    if notes is None:
        notes = previous.notes if previous is not None else ""
    profile = Profile(
        name=args.name,
        model=loaded.ref,
        workload=workload,
        gpus=gpus,
        notes=notes,
        saved_estimate=document,
        offload=offload,
    )
    try:
        saved = store.save(profile, update=args.update)
    except NameTaken as exc:
        raise ProfileError(
            f"{exc}; save under another name, or add --update to replace it "
            "(its previous version is kept)"
        ) from None
    for notice in loaded.notices:
        print(f"note: {notice}", file=sys.stderr)
    total = document.get("per_gpu", {}).get("total_bytes")
    size = f" ({format_bytes(total)} per GPU)" if isinstance(total, int) else ""
    if previous is None:
        print(f"saved profile {saved.name!r}{size}")
    else:
        print(
            f"updated profile {saved.name!r}{size}; the previous version is kept: "
            f"`vramgui profile restore {_quoted(saved.name)}` brings it back"
        )
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
    rows: list[tuple[str, ...]] = []
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


def _reopen(profile: Profile) -> Reestimate:
    """Re-estimate a profile and time it on its first GPU with its saved placement and host
    (``answers.documents.reestimate_profile``, as the window compares profiles); a model that
    cannot be loaded now leaves only the saved estimate."""
    from vramgui.answers.documents import reestimate_profile
    from vramgui.hardware.capacity import resolve_capacities
    from vramgui.sources.resolve import load_model

    return reestimate_profile(profile, load_model, resolve_capacities, _rates())


def _rates() -> Any:
    """The catalog's rates, with the utilization measured on this machine's GPU models."""
    from vramgui.answers.rates import catalog_rates
    from vramgui.hardware.calibration import measured_utilization
    from vramgui.hardware.gpus import load_catalog

    return catalog_rates(load_catalog(), measured_utilization)


def _notices(r: Reestimate) -> list[str]:
    if r.error is None:
        return list(r.notices)
    return [*r.notices, f"cannot re-estimate now ({r.error}); showing the estimate saved with it"]


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
            "notices": _notices(reopened),
        }
        print(json.dumps(document, indent=2))
        return 0
    print(printable(profile.name))
    if profile.notes:
        print(f"  {profile.notes}")
    print(f"model: {source_of(profile.model)} ({profile.model.kind})")
    print(f"settings: {_settings_line(profile)}")
    print(f"gpus: {', '.join(profile.gpus) or '-'}")
    print(f"saved: {profile.modified.strftime('%Y-%m-%d %H:%M')} UTC")
    for line in _notices(reopened):
        print(f"note: {line}")
    saved_per_gpu = profile.saved_estimate.get("per_gpu", {})
    current_per_gpu = (reopened.document or {}).get("per_gpu", {})
    saved, current = saved_per_gpu.get("components", {}), current_per_gpu.get("components", {})
    rows: list[tuple[str, ...]] = [
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
    comparison = compare(reopened)
    if args.json:
        document = {
            "schema": COMPARE_SCHEMA,
            "profiles": [
                {
                    **_profile_summary(r.profile),
                    "estimate": r.shown,
                    "re_estimated": r.document is not None,
                    "notices": _notices(r),
                }
                for r in reopened
            ],
            "differences": comparison.differences,
            "comparison": comparison.to_dict(),
        }
        print(json.dumps(document, indent=2))
        return 0
    header = ("", *(p.name for p in profiles))
    rows: list[tuple[str, ...]] = []
    for setting in sorted(comparison.settings, key=lambda s: (s.key != MODEL, s.option)):
        if setting.key == MODEL:
            label = "* model" if setting.differs else "model"
        elif setting.differs:
            label = f"* {setting.option}"
        else:
            continue
        cells = (
            _setting_cell(v) if a else "-"
            for v, a in zip(setting.values, setting.applies, strict=True)
        )
        rows.append((label, *cells))
    for figure in comparison.figures:
        label = "total per GPU" if figure.key == TOTAL else figure.key
        rows.append((label, *(_bytes_cell(v) for v in figure.shown)))
    for fit in comparison.fits:
        rows.append((f"fits {fit.gpu}", *(_fit_cell(c) for c in fit.cells)))
    print(table(header, rows))
    if comparison.differences:
        print("* settings that differ")
    for r in reopened:
        for line in _notices(r):
            print(f"note ({printable(r.profile.name)}): {printable(line)}")
    return 0


def _versions(args: argparse.Namespace) -> int:
    store = ProfileStore()
    versions = store.versions(args.name)
    if args.json:
        items = []
        for number, item in enumerate(versions, start=1):
            entry: dict[str, Any] = {"number": number, "file": str(item.path)}
            if item.profile is None:
                entry.update(name=item.name, readable=False, error=item.error)
            else:
                entry.update(_profile_summary(item.profile), readable=True)
            items.append(entry)
        document = {"schema": VERSIONS_SCHEMA, "name": args.name, "versions": items}
        print(json.dumps(document, indent=2))
        return 0
    if not versions:
        print(f"No earlier version of {args.name!r} is kept (updates keep one each).")
        return 0
    rows: list[tuple[str, ...]] = []
    for number, item in enumerate(versions, start=1):
        p = item.profile
        if p is None:
            rows.append((str(number), "-", "-", f"unreadable: {item.error}", "-"))
        else:
            when = p.modified.strftime("%Y-%m-%d %H:%M")
            rows.append((str(number), when, source_of(p.model), _settings_line(p), _saved_total(p)))
    print(table(("#", "saved (UTC)", "model", "settings", "saved total"), rows))
    print(f"`vramgui profile restore {_quoted(args.name)} NUMBER` brings one back.")
    return 0


def _restore(args: argparse.Namespace) -> int:
    store = ProfileStore()
    versions = store.versions(args.name)
    if not versions:
        raise ProfileError(f"no earlier version of {args.name!r} is kept")
    if not 1 <= args.number <= len(versions):
        raise ProfileError(
            f"{args.name!r} has {len(versions)} earlier version(s); pick 1 to {len(versions)}"
        )
    version = versions[args.number - 1]
    if version.profile is None:
        raise ProfileError(f"version {args.number} cannot be read ({version.error})")
    restored = store.restore_version(version)
    print(
        f"restored {restored.name!r} as saved on {version.profile.modified:%Y-%m-%d %H:%M} UTC; "
        f"the version it replaced is kept (`vramgui profile versions {_quoted(restored.name)}`)"
    )
    return 0


def _export(args: argparse.Namespace) -> int:
    store = ProfileStore()
    left_out = sum(1 for item in store.list() if not item.readable) if not args.names else 0
    if args.file == STDIO:
        data, names = store.bundle(args.names)
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        where = "standard output"
    else:
        path = Path(args.file)
        if not args.force and path.is_file() and not path.is_symlink():
            raise ProfileError(f"{path} exists; add --force to replace it")
        names = store.export(args.names, path, replace=args.force)
        where = str(path)
    # On stderr: with FILE -, stdout holds the export itself.
    print(f"exported {len(names)} profile(s) to {where}", file=sys.stderr)
    if left_out:
        print(f"note: {left_out} unreadable profile file(s) left out", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    store = ProfileStore()
    if args.file == STDIO:
        names = store.import_bytes(sys.stdin.buffer.read(MAX_BUNDLE_BYTES + 1), "standard input")
    else:
        names = store.import_(Path(args.file))
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


def _quoted(name: str) -> str:
    """``name`` as a shell argument (the names in messages are meant to be pasted)."""
    return shlex.quote(name)


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


def _setting_cell(value: Any) -> str:
    if value is None:
        return "default"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _fit_cell(cell: FitCell | None) -> str:
    if cell is None:
        return "-"
    return f"{'yes' if cell.fits else 'no'} ({_bytes_cell(cell.headroom_bytes)} headroom)"
