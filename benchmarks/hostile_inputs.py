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

GROUPS = {
    "configs": {name: _SPEC.format(config=config) for name, config in CONFIGS.items()},
}


def run_case(code: str, seconds: float) -> tuple[float, str]:
    """Wall time and outcome of one case in a fresh, bounded interpreter."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LIMIT + textwrap.dedent(code)],
            cwd=ROOT,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=seconds,
        )
    except subprocess.TimeoutExpired:
        return seconds, f"still running after {seconds:.0f} s"
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    if "Traceback" in done.stderr or done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(nothing)"])[-1]
        return wall, f"exit {done.returncode}, traceback: {last}"
    return wall, lines[0] if lines else "(nothing printed)"


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
            wall, outcome = run_case(code, args.seconds)
            print(f"  {name:<52} {wall:6.2f} s  {textwrap.shorten(outcome, 110)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
