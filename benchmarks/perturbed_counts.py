"""One attribute at a time: which sizes a config names does the architecture table not read?

benchmarks/parameter_counts.py changes every size of a config at once; a size the table holds as
a constant (a rope width of 64 where the config names ``qk_rope_head_dim``) then hides among the
others, or is called approximate for another reason. This probe takes each table type's default
config, cut to a few layers (per-layer lists cycled) so each build is quick, and changes its
integer attributes one at a time (nested ones such as ``text_config.*`` included; a width with
its head count kept dividing it, a K/V head count kept dividing the heads), each to a value the
table was not learned at; sizes the default leaves unset (a LoRA rank, a head width) are given
one, and fractions that may size a tensor (a rotary share, an expansion factor) are changed. transformers counts each on the meta device, as
tools/build_architectures.py counts; the estimate reads each config.json alone. A change that
moves transformers' count and leaves the estimate's where it was is a constant of the table; one
that moves both differently is a size read wrong. Either, with the estimate calling itself exact,
is the failure this finds.

Results go to benchmarks/data/perturbed_counts.json (every probed pair); the configs whose
change moves transformers' count, and the pairs found, with transformers' counts, go to
tests/data/architectures/perturbed.json, which tests/core/test_architectures.py holds the
estimator to without building any model.

Needs the measure extra. Run from the repository root (a few minutes on one core):

    python -m benchmarks.perturbed_counts                      # every table type, written
    python -m benchmarks.perturbed_counts --only deepseek_v32 -v
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import transformers

from benchmarks.parameter_counts import (
    _LAYERS,
    _SKIP,
    _STRUCTURE,
    TABLE,
    _config,
    _core,
    _grouped,
    _is_int,
    _leaves,
    _small,
    _width,
    _with_layers,
    count,
    defaults,
    estimate,
    judge,
    model_class_of,
)
from benchmarks.percent import signed
from vramgui.core.errors import ConfigError
from vramgui.core.families import _defaulted_sizes, configs, table
from vramgui.core.families.classic import CLASSIC_TYPES
from vramgui.core.model import Inventory

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "data" / "perturbed_counts.json"
CASES = ROOT / "tests" / "data" / "architectures" / "perturbed.json"

SEED = 20261207
# Layers each probed config keeps (enough for a dense-then-sparse stack or a 5:1 pattern).
LAYERS = 6
# Seconds one type may take; the attributes left when it runs out are listed as not probed.
BUDGET_S = 30.0


# Sizes a default may leave unset (a LoRA rank, a head width), given a value; fractions that
# size a tensor (a rotary share, an expansion factor), changed.
_UNSET = re.compile(r"(size|dim|rank|heads|experts)$")
_FRACTION = re.compile(r"(factor|ratio|expand|multiplier|fraction)$")


def _probed(leaf: str, value: Any) -> bool:
    """Whether an attribute of the default is changed alone: an integer size, an unset size or
    a fraction that may size a tensor."""
    if _SKIP.fullmatch(leaf) or _LAYERS.match(leaf):
        return False
    if value is None:
        return bool(_UNSET.search(leaf))
    if isinstance(value, float):
        return bool(_FRACTION.search(leaf)) and value > 0
    return _is_int(value)


def _candidates(key: str, v: Any, rng: random.Random, width: int) -> list[Any]:
    """Values to try for one attribute, the first that builds kept."""
    leaf = key.rsplit(".", 1)[-1]
    if v is None:
        return [width // 4, width // 2, 64]
    if isinstance(v, float):
        return [v / 2, v * 2, v * 3 / 2]
    if _STRUCTURE.search(leaf) or v < 16:
        first = _small(v, rng)
        return [x for x in dict.fromkeys([first, v + 1, max(v - 1, 0), v * 2]) if x != v]
    first = _width(v, rng)
    return [x for x in dict.fromkeys([first, v + 16, v * 2, v + 8, v + 2]) if x != v]


def _base(base: dict[str, Any]) -> dict[str, Any]:
    """The default config cut to a few layers, every scope's core sizes stated."""
    cut = {
        k: min(v, LAYERS)
        for k, v in _leaves(base)
        if _LAYERS.match(k.rsplit(".", 1)[-1]) and _is_int(v) and v > LAYERS
    }
    return _core(base, _with_layers(base, cut))


def probe_type(key: str, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """Every integer attribute of one type changed alone: a row per attribute."""
    model_type, klass = model_class_of(key)
    rng = random.Random(f"{SEED}:{key}")
    out: dict[str, Any] = {"type": key, "rows": [], "not_probed": []}
    try:
        full = defaults(model_type)
    except Exception as exc:  # a config class that cannot build its own default
        out["skipped"] = f"no default config: {type(exc).__name__}"
        return out
    for start in (_base(full), _core(full, {})):  # cut, or whole where the cut does not build
        config = _config(model_type, klass, start)
        base_expected = count(model_type, klass, config)
        if base_expected is not None:
            break
    else:
        out["skipped"] = "transformers does not build the default"
        return out
    base_got, base_inventory, _ = estimate(config)
    out["base"] = {
        "config": config,
        "transformers": base_expected,
        "estimate": base_got,
        "verdict": judge(base_expected, base_got, base_inventory),
    }
    t0 = time.perf_counter()
    for attr, value in _leaves(full):
        if not _probed(attr.rsplit(".", 1)[-1], value):
            continue
        if time.perf_counter() - t0 > budget_s:
            out["not_probed"].append(attr)
            continue
        current = start.get(attr, value)
        row: dict[str, Any] = {"attribute": attr, "default": current}
        scope = attr.rpartition(".")[0]
        width = start.get(f"{scope}.hidden_size" if scope else "hidden_size")
        for new in _candidates(attr, current, rng, width if _is_int(width) else 1024):
            changes = _with_layers(full, _grouped(full, {**start, attr: new}))
            if changes.get(attr) != new:
                continue  # kept consistent by moving it back (a K/V head count)
            trial = _config(model_type, klass, changes)
            expected = count(model_type, klass, trial)
            if expected is None:
                continue
            got, inventory, notes = estimate(trial)
            row.update(
                value=new,
                transformers=expected,
                estimate=got,
                verdict=judge(expected, got, inventory),
                moves=expected != base_expected,
                config=trial,
            )
            if got is not None and got != expected and counted_surely(trial):
                # Which failure: the estimate stayed put (a constant), or moved differently;
                # called exact, or approximate only for what the count does not hold.
                row["finding"] = "constant" if got == base_got else "read wrong"
                row["silent"] = row["verdict"] in ("wrong", "off")
            if notes and row["verdict"] != "exact":
                row["notes"] = notes[:2]
            break
        else:
            row["verdict"] = "unbuildable"
        out["rows"].append(row)
    return out


def counted_surely(config: dict[str, Any]) -> bool:
    """Whether the estimate holds its parameter count sure: no size it defaulted or guessed (the
    estimate may still say approximate for its KV cache or activations, which a config stating
    its context length or a type modelled in more detail would not; a constant of the table
    would then be called exact)."""
    named = config.get("architectures") or [""]
    arch = table.architecture(config["model_type"], named[0])
    if arch is None or arch.model_type in CLASSIC_TYPES:
        return estimate(config)[1] == Inventory.EXACT.value
    try:
        _, guesses = configs.resolve(arch, config)
    except ConfigError:
        return False
    return not guesses and not _defaulted_sizes(config, arch.defaults)


def table_keys() -> list[str]:
    return sorted(json.loads(TABLE.read_text())["architectures"])


def summary(types: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for t in types for r in t["rows"]]
    verdicts = [r["verdict"] for r in rows]
    found = [r for r in rows if "finding" in r]
    return {
        "types": len(types),
        "types_probed": sum("base" in t for t in types),
        "attributes": len(rows),
        "moving": sum(bool(r.get("moves")) for r in rows),
        "not_probed": sum(len(t["not_probed"]) for t in types),
        **{
            v: verdicts.count(v)
            for v in ("exact", "off", "wrong", "approximate", "refused", "unbuildable")
        },
        "constants": sum(r["finding"] == "constant" for r in found),
        "read_wrong": sum(r["finding"] == "read wrong" for r in found),
        "silent": sum(r["silent"] for r in found),
    }


def write(types: list[dict[str, Any]], output: Path, cases: Path) -> None:
    doc = {
        "about": "Each integer attribute of each table type's default config changed alone, "
        "counted by transformers and by the estimate (benchmarks/perturbed_counts.py).",
        "transformers": transformers.__version__,
        "layers": LAYERS,
        "summary": summary(types),
        "types": [
            {
                **{k: v for k, v in t.items() if k not in ("rows", "base")},
                **(
                    {"base": {k: v for k, v in t["base"].items() if k != "config"}}
                    if "base" in t
                    else {}
                ),
                "rows": [{k: v for k, v in r.items() if k != "config"} for r in t["rows"]],
            }
            for t in types
        ],
    }
    output.write_text(json.dumps(doc, indent=1) + "\n")
    held = [
        {
            "type": t["type"],
            "attribute": r["attribute"],
            "config": r["config"],
            "transformers": r["transformers"],
            "verdict": r["verdict"],
            **({"finding": r["finding"]} if "finding" in r else {}),
        }
        for t in types
        for r in t["rows"]
        if r.get("moves")
    ]
    cases.write_text(
        json.dumps(
            {
                "about": "One attribute of each table type's default config (cut to "
                f"{LAYERS} layers) changed alone, where it moves transformers' count: the "
                "config, transformers' count, the verdict the estimate had when "
                "benchmarks/perturbed_counts.py wrote them, and what it found wrong.",
                "transformers": transformers.__version__,
                "cases": held,
            },
            separators=(",", ":"),
        )
        + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="table keys to probe, printed only")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds per type")
    parser.add_argument("-o", "--output", type=Path, default=RESULTS)
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every attribute")
    args = parser.parse_args()
    started = time.perf_counter()
    types = []
    for key in args.only or table_keys():
        t0 = time.perf_counter()
        probed = probe_type(key, args.budget)
        types.append(probed)
        found = [r for r in probed["rows"] if "finding" in r]
        shown = ", ".join(
            f"{r['attribute']} {r['finding']}{' (called exact)' if r['silent'] else ''} "
            f"({signed(r['estimate'] / r['transformers'] - 1, 2)})"
            for r in found
        )
        state = probed.get("skipped") or shown or "ok"
        print(
            f"{key}: {len(probed['rows'])} attributes, {state} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        if args.verbose:
            for r in probed["rows"]:
                print(
                    f"   {r['attribute']:40} {r['verdict']:11} moves={r.get('moves')}", flush=True
                )
    if not args.only:
        write(types, args.output, args.cases)
    s = summary(types)
    print(
        f"{s['attributes']} attributes of {s['types_probed']} types ({s['moving']} move "
        f"transformers' count, {s['not_probed']} not probed in time): {s['exact']} exact, "
        f"{s['wrong']} off by more than 1 % yet called exact, {s['off']} off by less, "
        f"{s['approximate']} approximate, {s['refused']} refused, {s['unbuildable']} "
        f"unbuildable; {s['constants']} constants, {s['read_wrong']} read wrong, "
        f"{s['silent']} of them called exact "
        f"({time.perf_counter() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
