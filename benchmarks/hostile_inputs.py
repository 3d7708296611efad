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

# One command line, as a user runs it, after ``setup`` (Python run first: files, environment).
# Prints its exit status and first line; flags any control character that reached the output and
# any negative byte count in a JSON answer; ``after`` may add to what is said (``extra``).
_CLI = """
import contextlib, io, json, os, re, sys, tempfile, unicodedata
from pathlib import Path
home = Path(tempfile.mkdtemp())
os.environ["VRAMGUI_HOME"] = str(home / "vramgui")
os.environ["HF_HOME"] = str(home / "hf")
os.environ.pop("HF_TOKEN", None)
extra = ""
{setup}
from vramgui.cli import main
out, err = {stream}, io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main({argv!r})
    except SystemExit as exc:
        code = exc.code
{after}
out.flush()
text = out.getvalue() if isinstance(out, io.StringIO) else out.buffer.getvalue().decode("cp1252")
said = text + err.getvalue()
raw = sum(1 for c in said if c != "\\n" and unicodedata.category(c)[0] == "C")
negative = re.search(r'bytes": -[0-9]', said)
first = (err.getvalue().strip() or text.strip()).splitlines()[:1]
print(f"exit {{code}}" + (f", {{raw}} control characters printed raw" if raw else "")
      + (", negative bytes" if negative else "") + extra + (f": {{first[0][:150]}}" if first else ""))
"""

_CONFIG_FILE = """
config = {config}
path = home / "model" / "config.json"
path.parent.mkdir()
path.write_text(json.dumps(config))
"""
_TINY = (
    "{'model_type': 'llama', 'hidden_size': 256, 'intermediate_size': 512, "
    "'num_hidden_layers': 2, 'num_attention_heads': 4, 'vocab_size': 1000"
)


def _cli(argv: list[str], setup: str = "", after: str = "", stream: str = "io.StringIO()") -> str:
    return _CLI.format(argv=argv, setup=setup, after=after, stream=stream)


# A Hub whose files live in Xet storage on a second host; both count the requests with the token.
_XET = """
from tests.fakehub.server import FakeHub
from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, repo_files
hub, storage = FakeHub().start(), FakeHub().start()
hub.add("org/tiny", repo_files(TINY_LLAMA_CONFIG, llama_tensors(TINY_LLAMA_CONFIG)))
hub.xet_auth = storage.url
os.environ.update(HF_ENDPOINT=hub.url, HF_TOKEN="hf_secret")
"""
_XET_COUNT = """
extra = (f", token sent {sum(r.token == 'hf_secret' for r in hub.requests)} times to the Hub, "
         f"{sum(r.token == 'hf_secret' for r in storage.requests)} times to the Xet host")
"""
_XET_MEASURE = (
    _XET
    + """
from vramgui.core.model import ModelRef
from vramgui.sources.configs import config_of
config_of(ModelRef("hub", "org/tiny"))
"""
)

# Every core size of every table architecture at 0: how many are refused, estimated, crash.
_ZERO_SIZES = """
import collections
from tests.architecture_table import bare
from vramgui.core.errors import ConfigError
from vramgui.core.families import spec_from_config, table
from vramgui.core.estimate import estimate
from vramgui.core.workload import Workload
SIZES = ("hidden_size", "intermediate_size", "num_attention_heads", "head_dim", "vocab_size",
         "num_key_value_heads")
counts = collections.Counter()
for key in sorted(table._table()["architectures"]):
    arch = table.architecture(*key.partition(":")[::2])
    for name in SIZES:
        for sub in ("", "text_config"):
            if f"{sub}.{name}".lstrip(".") not in arch.defaults:
                continue
            config = dict(bare(key), **({sub: {name: 0}} if sub else {name: 0}))
            try:
                spec = spec_from_config(config)
                estimate(spec, Workload(mode="training", seq=64))
            except ConfigError:
                counts["refused"] += 1
            except Exception as exc:
                counts[type(exc).__name__] += 1
            else:
                counts["estimated"] += 1
print(", ".join(f"{n} {k}" for k, n in counts.most_common()))
"""

_GGUF_INF = """
from tests.fakehub.files import write_gguf
write_gguf(home / "model.gguf", floats={{"{key}": float("inf")}})
"""
_LOCAL_LIST = """
import tempfile
from pathlib import Path
home = Path(tempfile.mkdtemp())
from tests.fakehub.files import write_gguf
from tests.fakehub.stores import sample_stores
from vramgui.sources import on_disk
from vramgui.ui.local_models import read_all
stores = sample_stores(home / "stores")
write_gguf(stores.lm_studio[0] / "lmstudio-community" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf",
           floats={"block_count": float("inf")})
try:
    found = read_all(lambda: on_disk.scan(stores), on_disk.open_model)
except Exception as exc:
    print(f"the whole list lost: {type(exc).__name__}: {exc}")
else:
    bad = [f for f in found if f.spec is None]
    print(f"{len(found) - len(bad)} of {len(found)} rows estimated; {bad[0].problem[:110]}")
"""

_EVIL = "'\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e'"
_ESCAPES = _CONFIG_FILE.format(
    config=_TINY + f", 'architectures': ['LlamaForCausalLM' + {_EVIL}],"
    f" 'quantization_config': {{'quant_method': 'own' + {_EVIL}}}}}"
)

_TENSORS = """
from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, write_model_folder
tensors = {{**llama_tensors(TINY_LLAMA_CONFIG), "{name}": ("BF16", {shape})}}
write_model_folder(home / "model", TINY_LLAMA_CONFIG, tensors)
"""

_NAMES = _CONFIG_FILE.format(config=_TINY + "}").replace('"model"', '"名前"')
_CP1252 = 'io.TextIOWrapper(io.BytesIO(), encoding="cp1252")'

_ENVIRONMENT = {
    "HF_TOKEN_PATH a named pipe": "os.mkfifo(home / 'fifo'); os.environ['HF_TOKEN_PATH'] = "
    "str(home / 'fifo')",
    "HF_TOKEN_PATH /dev/zero": "os.environ['HF_TOKEN_PATH'] = '/dev/zero'",
    "HF_ENDPOINT=http://[::1": "os.environ['HF_ENDPOINT'] = 'http://[::1'",
    "HF_ENDPOINT port 99999": "os.environ['HF_ENDPOINT'] = 'http://127.0.0.1:99999'",
    "HF_HUB_ETAG_TIMEOUT=abc": "os.environ['HF_HUB_ETAG_TIMEOUT'] = 'abc'",
    "VRAMGUI_HOME naming a file": "(home / 'file').write_text('x'); "
    "os.environ['VRAMGUI_HOME'] = str(home / 'file')",
}
# No Hub answers here: a refused connection, at once.
_OFFLINE_HUB = "os.environ.setdefault('HF_ENDPOINT', 'http://127.0.0.1:9')\n"

_WINDOWS_NAMES = """
import tempfile
from pathlib import Path
home = Path(tempfile.mkdtemp())
from vramgui.profiles import ProfileStore
from tests.profiles.test_store import make
store = ProfileStore(home / "profiles")
names = ["CON", "nul", "Aux.txt", "COM1", "lpt9 . .", "COM¹", "con-profile"]
for name in names:
    store.save(make(name))
files = sorted(p.name for p in store.directory.glob("*.json"))
print(f"{len(store.names())} of {len(names)} listed back; files: {', '.join(files)}")
"""


def _quantization_cases() -> dict[str, str]:
    from tests.core.test_hostile_configs import _LLAMA, QUANTIZATION

    cases = {}
    for name, (quantization, _) in QUANTIZATION.items():
        setup = _CONFIG_FILE.format(config=repr({**_LLAMA, "quantization_config": quantization}))
        setup = setup.replace("nan", "float('nan')").replace("inf,", "float('inf'),")
        model = 'str(home / "model")'
        cases[name] = _cli(["estimate", "MODEL", "--json"], setup).replace("'MODEL'", model)
        cases[f"{name}, as a draft"] = _cli(
            [
                "estimate",
                "smollm-135m",
                "--engine",
                "vllm",
                "--speculative-model",
                "MODEL",
                "--json",
            ],
            setup,
        ).replace("'MODEL'", model)
    return cases


def _model(argv: list[str], setup: str, **kwargs: str) -> str:
    """A command line on the model ``setup`` wrote to ``home / "model"``."""
    return _cli(argv, setup, **kwargs).replace("'MODEL'", 'str(home / "model")')


GROUPS = {
    "configs": {name: _SPEC.format(config=config) for name, config in CONFIGS.items()},
    "measure": {name: _MEASURE.format(config=config) for name, config in MEASURE.items()},
    "stores": {case: _STORE.format(case=case) for case in HOSTILE_STORES},
    "profiles": {
        "bundle with 10,000 GPU names of 1,000 characters": _PROFILES.format(gpus=10_000),
    },
    "xet": {
        "estimate, files in Xet storage elsewhere": _cli(
            ["estimate", "org/tiny"], _XET, _XET_COUNT
        ),
        "measure's config.json, the same Hub": _cli(["gpus"], _XET_MEASURE, _XET_COUNT),
    },
    "zero-sizes": {"every core size at 0, every table architecture": _ZERO_SIZES},
    "gguf": {
        **{
            f"FLOAT32 +inf {key}": _cli(["estimate", "MODEL"], _GGUF_INF.format(key=key)).replace(
                "'MODEL'", 'str(home / "model.gguf")'
            )
            for key in ("block_count", "embedding_length", "attention.head_count", "context_length")
        },
        "'On this machine' with one +inf GGUF": _LOCAL_LIST,
    },
    "escapes": {
        "estimate, escapes in architecture and quant_method": _model(
            ["estimate", "MODEL"], _ESCAPES
        ),
        "estimate --engine vllm, the same": _model(
            ["estimate", "MODEL", "--engine", "vllm"], _ESCAPES
        ),
    },
    "tensors": {
        f"{what}, training": _model(
            ["estimate", "MODEL", "--mode", "training"], _TENSORS.format(name=name, shape=shape)
        )
        for what, name, shape in (
            ("scalar embed_tokens.weight", "model.embed_tokens.weight", "()"),
            ("[32, 0] embed_tokens.weight", "model.embed_tokens.weight", "(32, 0)"),
            ("[32, 0] q_proj", "model.layers.0.self_attn.q_proj.weight", "(32, 0)"),
        )
    },
    "encoding": {
        f"cp1252 output: {' '.join(argv[:2])}": _cli(argv, _NAMES + setup, stream=_CP1252).replace(
            "'MODEL'", 'str(home / "名前")'
        )
        for argv, setup in (
            (["estimate", "MODEL"], ""),
            (["profile", "save", "名前", "MODEL"], ""),
            (
                ["profile", "list"],
                "from vramgui.cli import main as m\nm(['profile', 'save', '名前', "
                "str(home / '名前')])\n",
            ),
        )
    },
    "environment": {
        f"{name}, {' '.join(argv)}": _cli(argv, _OFFLINE_HUB.join(("", setup)))
        for name, setup in _ENVIRONMENT.items()
        for argv in (["search", "llama"], ["profile", "list"])
        if "VRAMGUI_HOME" in name or argv[0] == "search"
    },
    "arguments": {
        f"--gpu-memory-utilization {value}": _cli(
            ["estimate", "smollm-135m", "--engine", "vllm", "--gpu-memory-utilization", value]
        )
        for value in ("1e-300", "0.01")
    },
    "profile-names": {"names Windows reserves": _WINDOWS_NAMES},
}
GROUPS["quantization"] = _quantization_cases()
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
