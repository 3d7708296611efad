"""Hostile inputs: how long each takes to end, and how it ends, under a 1.5 GB address space.

``python benchmarks/hostile_inputs.py [--only GROUP ...] [--seconds N]`` runs each case in a fresh
interpreter held to 1.5 GB of address space (``RLIMIT_AS``) with standard input closed, and
prints its wall time (imports included) and the first line of what it printed: the result, or
the message it ended with. A case that raises a traceback, exits non-zero or runs past
``--seconds`` (default 60) says so. The cases are the probes of docs/performance.md ("Hostile
inputs"); the tests keep each one (tests/core/test_hostile_configs.py and the others named there).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakehub.stores import HOSTILE_STORES  # noqa: E402

ADDRESS_SPACE_BYTES = 1536 * 2**20
_LIMIT = (
    "import resource\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE_BYTES}, {ADDRESS_SPACE_BYTES}))\n"
)

_SPEC = """
import json
from vramgui.core.errors import ConfigError
from vramgui.core.families import spec_from_config

def nested(depth):
    return json.loads("[" * depth + "]" * depth)

try:
    spec = spec_from_config({config})
except ConfigError as exc:
    print("refused:", exc)
else:
    print(f"estimated: {{spec.parameters:,}} parameters, {{spec.inventory.value}}")
"""

CONFIGS = {
    "['full_attention'] * 2e8 layers (laguna)": (
        "{'model_type': 'laguna', 'num_hidden_layers': 200_000_000}"
    ),
    "string head count x head_dim 2^28 (gemma4)": (
        "{'model_type': 'gemma4_text', 'num_attention_heads': 'abcdefgh', 'head_dim': 2**28}"
    ),
    "per_layer_config, 2^62 layers": (
        "{'model_type': 'smollm3', 'num_hidden_layers': 2**62,"
        " 'per_layer_config': {'0': {'head_dim': 64}}}"
    ),
    "block_ffn_dim_multiplier 1e308 (lfm2)": (
        "{'model_type': 'lfm2', 'block_ffn_dim_multiplier': 1e308, 'block_auto_adjust_ff_dim': True}"
    ),
    "block_ffn_dim_multiplier Infinity (lfm2)": (
        "{'model_type': 'lfm2', 'block_auto_adjust_ff_dim': True,"
        " 'block_ffn_dim_multiplier': json.loads('Infinity')}"
    ),
    "head_dim list of 1M (gemma4)": (
        "{'model_type': 'gemma4_text', 'head_dim': [256] * 500_000 + [512] * 500_000}"
    ),
    "mlp_only_layers of 2M, 4,000 layers (qwen3_next)": (
        "{'model_type': 'qwen3_next', 'mlp_only_layers': [-1] * 2_000_000,"
        " 'num_hidden_layers': 4000}"
    ),
    "mlp_only_layers of 4,000, 4,000 layers (qwen3_next)": (
        "{'model_type': 'qwen3_next', 'mlp_only_layers': [-1] * 4000, 'num_hidden_layers': 4000}"
    ),
    "moe_layers of 2M, 4,000 layers (llama4)": (
        "{'model_type': 'llama4_text', 'moe_layers': [-1] * 2_000_000, 'num_hidden_layers': 4000}"
    ),
    "full_attn_idxs of 2M, 4,000 layers (lfm2)": (
        "{'model_type': 'lfm2', 'full_attn_idxs': [-1] * 2_000_000, 'num_hidden_layers': 4000}"
    ),
    "a list nested 900 deep (smollm3)": "{'model_type': 'smollm3', 'foo': nested(900)}",
    "text_config list nested 990 deep (qwen2_5_vl)": (
        "{'model_type': 'qwen2_5_vl', 'text_config': {'layer_types': nested(990)}}"
    ),
}

# A model folder whose config names code of its own, with "y" waiting on standard input.
_MEASURE = """
import json, pathlib, runpy, sys, tempfile
folder = pathlib.Path(tempfile.mkdtemp()) / "model"
folder.mkdir()
code = 'import pathlib\\npathlib.Path(__file__).with_name("RAN").touch()\\n'
for name in ("modeling_own.py", "configuration_own.py"):
    (folder / name).write_text(code)
config = {config}
config.update(auto_map={{"AutoConfig": "configuration_own.OwnConfig",
                         "AutoModelForCausalLM": "modeling_own.OwnForCausalLM"}},
              _name_or_path=str(folder))
(folder / "config.json").write_text(json.dumps(config))
sys.argv = ["vramgui", "measure", str(folder), "--device", "fake", "--seq", "16"]
try:
    runpy.run_module("vramgui", run_name="__main__")
finally:
    print("the folder's code ran" if (folder / "RAN").exists() else "no code of the folder ran")
"""

MEASURE = {
    "qwen3_vl with auto_map, 'y' on stdin": "{'model_type': 'qwen3_vl',"
    " 'architectures': ['Qwen3VLForConditionalGeneration']}",
    "own type with auto_map, 'y' on stdin": "{'model_type': 'own_llm', 'hidden_size': 64,"
    " 'num_hidden_layers': 2, 'num_attention_heads': 4, 'intermediate_size': 128,"
    " 'vocab_size': 100}",
    "llama of 4,096 layers, fake run": "{'model_type': 'llama', 'hidden_size': 64,"
    " 'num_hidden_layers': 4096, 'num_attention_heads': 4, 'intermediate_size': 128,"
    " 'vocab_size': 100}",
}

# A store built in a temporary home, then `vramgui local` as a user runs it (its table).
_STORE = """
import contextlib, io, os, runpy, sys, tempfile, unicodedata
from pathlib import Path
from tests.fakehub.stores import hostile_store
home = Path(tempfile.mkdtemp())
os.environ.update(hostile_store(home, {case!r}))
out, err = io.StringIO(), io.StringIO()
sys.argv = ["vramgui", "local"]
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        runpy.run_module("vramgui", run_name="__main__")
    except SystemExit as exc:
        code = exc.code
said = out.getvalue() + err.getvalue()
rows = [line for line in out.getvalue().splitlines()[1:] if line.strip()]
raw = any(unicodedata.category(c) == "Cc" and c != "\\n" for c in said)
notes = [line for line in err.getvalue().splitlines() if line.startswith("note:")]
print(f"exit {{code}}, {{len(rows)}} rows, {{len(notes)}} notes"
      + (", control characters printed raw" if raw else "")
      + (f"; {{notes[0][:90]}}" if notes else ""))
"""

# `vramgui profile import` of a bundle, twice, then `vramgui profile list`.
_PROFILES = """
import contextlib, io, json, os, runpy, sys, tempfile
from pathlib import Path
from tests.profiles.test_hardening import make
home = Path(tempfile.mkdtemp())
os.environ["VRAMGUI_HOME"] = str(home)
bundle = home / "bundle.json"
profiles = [make("fine"), make("huge", gpus=tuple(f"GPU {{i:05d}} " + "x" * 990 for i in range({gpus})))]
bundle.write_text(json.dumps({{"format": "vramgui.profiles", "format_version": 1,
                               "profiles": [p.to_dict() for p in profiles]}}))
said = []
for argv in (["import", str(bundle)], ["import", str(bundle)], ["list"]):
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["vramgui", "profile", *argv]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("vramgui", run_name="__main__")
        except SystemExit as exc:
            code = exc.code
    said.append((code, (out.getvalue() + err.getvalue()).strip()))
(first, imported), (again, _), (_, listed) = said
print(f"import: exit {{first}}, again: exit {{again}}, list: {{listed.count('unreadable')}} "
      f"unreadable; {{imported.splitlines()[0][:150]}}")
"""

GROUPS = {
    "configs": {name: _SPEC.format(config=config) for name, config in CONFIGS.items()},
    "measure": {name: _MEASURE.format(config=config) for name, config in MEASURE.items()},
    "stores": {case: _STORE.format(case=case) for case in HOSTILE_STORES},
    "profiles": {
        "bundle with 10,000 GPU names of 1,000 characters": _PROFILES.format(gpus=10_000),
    },
}
STDIN = {"measure": "y\n"}


def run_case(code: str, seconds: float, stdin: str | None = None) -> tuple[float, str]:
    """Wall time and outcome of one case in a fresh, bounded interpreter (standard input closed,
    or ``stdin`` written to it)."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LIMIT + textwrap.dedent(code)],
            cwd=ROOT,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            timeout=seconds,
        )
    except subprocess.TimeoutExpired:
        return seconds, f"still running after {seconds:.0f} s"
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    errors = done.stderr.strip().splitlines()
    if "Traceback" in done.stderr:
        return wall, f"exit {done.returncode}, traceback: {errors[-1]}"
    said = [*(errors[-1:] if done.returncode else ()), *lines[-1:]]
    return wall, " / ".join([f"exit {done.returncode}", *said])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(GROUPS))
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"vramgui hostile inputs, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
        f"load {load:.1f}, address space {ADDRESS_SPACE_BYTES / 2**30:.1f} GiB"
    )
    for group in args.only or GROUPS:
        print(f"\n{group}")
        for name, code in GROUPS[group].items():
            wall, outcome = run_case(code, args.seconds, STDIN.get(group))
            print(f"  {name:<52} {wall:6.2f} s  {textwrap.shorten(outcome, 110)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
