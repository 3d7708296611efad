"""The worst model files vramgui accepts: how long each takes to read and estimate, and how much
memory it costs. ``python benchmarks/parse_limits.py`` (about a minute here).

Each file is at the limits of ``vramgui.sources.local`` and ``gguf_reader`` (tensor counts,
header and config sizes, array items), written into a temporary folder with its tensor data as
a hole (sparse). Each case runs in a fresh process: the time of ``load_model`` plus one
inference estimate and the offload plan's floor, and the peak RSS growth over the process's
own baseline (imports done). The limits and these figures are in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 32000,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 4096,
}


def tensor_names(count: int) -> list[str]:
    """``count`` names as a large MoE checkpoint spells them (layer, expert, projection)."""
    names = []
    per_layer = math.ceil(count / CONFIG["num_hidden_layers"])
    for i in range(count):
        layer, k = divmod(i, per_layer)
        expert, proj = divmod(k, 6)
        kind = ("gate_proj", "up_proj", "down_proj")[proj % 3]
        suffix = "weight" if proj < 3 else "weight_scale_inv"
        names.append(f"model.layers.{layer}.mlp.experts.{expert}.{kind}.{suffix}")
    return names


def bf16_64x64(names: list[str]) -> dict[str, tuple[str, tuple[int, int]]]:
    return dict.fromkeys(names, ("BF16", (64, 64)))


def build(folder: Path) -> dict[str, tuple[Path, str]]:
    """The files of each case: (path to open, what it is)."""
    from tests.fakehub.files import write_sparse_safetensors
    from vramgui.sources import gguf_reader, local

    cases: dict[str, tuple[Path, str]] = {}
    one = folder / "one-file"
    one.mkdir()
    (one / "config.json").write_text(json.dumps(CONFIG))
    size = write_sparse_safetensors(
        one / "model.safetensors", bf16_64x64(tensor_names(local.MAX_TENSORS))
    )
    cases["safetensors, one file"] = (
        one,
        f"{local.MAX_TENSORS:,} tensors, {size / 2**20:.1f} MiB header, config.json beside",
    )

    sharded = folder / "sharded"
    sharded.mkdir()
    (sharded / "config.json").write_text(json.dumps(CONFIG))
    names = tensor_names(local.MAX_TENSORS)
    shards, weight_map = 163, {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = names[k::shards]
        write_sparse_safetensors(sharded / file, bf16_64x64(part))
        weight_map.update(dict.fromkeys(part, file))
    index = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    (sharded / local.SAFETENSORS_INDEX).write_bytes(index)
    cases["safetensors, 163 shards"] = (
        sharded,
        f"{local.MAX_TENSORS:,} tensors, index {len(index) / 2**20:.1f} MiB",
    )

    config = folder / "config" / "config.json"
    config.parent.mkdir()
    filler = "[" + ",".join(["0"] * ((local.MAX_CONFIG_BYTES - 400) // 2)) + "]"
    text = json.dumps({**CONFIG, "x": 0})[:-1] + f', "filler": {filler}}}'
    config.write_text(text)
    cases["config.json"] = (config, f"{len(text) / 2**20:.2f} MiB, an array of 2M numbers")

    gguf = folder / "worst.gguf"
    tokens, tensors = gguf_file(gguf, gguf_reader)
    cases["GGUF"] = (
        gguf,
        f"{tokens:,} vocabulary strings, {tensors:,} tensors, "
        f"{gguf_reader.MAX_METADATA_ENTRIES:,} metadata entries",
    )
    return cases


def gguf_file(path: Path, gguf_reader: object) -> tuple[int, int]:
    """A llama GGUF at the reader's limits: every metadata entry, every array item, every
    tensor; the header just under its byte cap."""

    def string(text: bytes) -> bytes:
        return struct.pack("<Q", len(text)) + text

    def kv(key: str, kind: int, value: bytes) -> bytes:
        return string(key.encode()) + struct.pack("<I", kind) + value

    meta = [
        kv("general.architecture", 8, string(b"llama")),
        kv("llama.block_count", 4, struct.pack("<I", 64)),
        kv("llama.embedding_length", 4, struct.pack("<I", 64)),
        kv("llama.feed_forward_length", 4, struct.pack("<I", 128)),
        kv("llama.attention.head_count", 4, struct.pack("<I", 4)),
        kv("llama.context_length", 4, struct.pack("<I", 4096)),
    ]
    n_tensors = gguf_reader.MAX_TENSORS
    info_bytes = sum(
        len(string(f"blk.{i % 64}.t{i}.weight".encode())) + 4 + 8 + 4 + 8 for i in range(n_tensors)
    )
    room = gguf_reader.MAX_HEADER_BYTES - info_bytes - 2**20
    tokens = min(gguf_reader.MAX_ARRAY_ITEMS, room // 16)
    vocab = string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, tokens)
    vocab += b"".join(string(b"t%06d" % (i % 10**6)) for i in range(tokens))
    meta.append(vocab)
    fill = gguf_reader.MAX_METADATA_ENTRIES - len(meta)
    meta += [kv(f"x.k{i}", 4, struct.pack("<I", i)) for i in range(fill)]
    infos, offset = [], 0
    for i in range(n_tensors):
        name = f"blk.{i % 64}.t{i}.weight".encode()
        infos.append(string(name) + struct.pack("<IQIQ", 1, 32, 0, offset))
        offset += 128
    header = (
        b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(meta)) + b"".join(meta) + b"".join(infos)
    )
    with path.open("wb") as fh:
        fh.write(header)
        fh.truncate(-(-len(header) // 32) * 32 + offset)
    return tokens, n_tensors


def peak_rss_kib() -> int:
    """This process's peak resident memory: VmHWM on Linux (ru_maxrss carries a parent's peak
    across exec), ru_maxrss elsewhere."""
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))


def measure(path: str) -> dict[str, float]:
    """In this process: load, estimate and offload floor of ``path``, timed; peak RSS growth."""
    from vramgui.core import offload
    from vramgui.core.estimate import estimate
    from vramgui.core.workload import Workload
    from vramgui.sources.resolve import load_model

    base = peak_rss_kib()
    started = time.perf_counter()
    outcome = "accepted"
    try:
        spec = load_model(path).spec
        loaded = time.perf_counter() - started
        workload = Workload(seq=512)
        estimate(spec, workload)
        offload.min_vram_bytes(spec, workload)
    except Exception as exc:  # a limit reached is a figure to report, not a crash here
        loaded = time.perf_counter() - started
        outcome = f"refused: {type(exc).__name__}: {str(exc)[:120]}"
    total = time.perf_counter() - started
    grown = (peak_rss_kib() - base) / 1024
    return {"load_s": loaded, "total_s": total, "rss_mib": grown, "outcome": outcome}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    with tempfile.TemporaryDirectory(prefix="vramgui-limits-") as tmp:
        cases = build(Path(tmp))
        print(
            f"vramgui parse limits, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        )
        for name, (path, what) in cases.items():
            done = subprocess.run(
                [sys.executable, __file__, "--measure", str(path)],
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            result = json.loads(done.stdout)
            print(
                f"{name:<24} {what}\n{'':<24} read {result['load_s']:.2f} s, read + estimate + "
                f"offload floor {result['total_s']:.2f} s, peak RSS +{result['rss_mib']:.0f} MiB; "
                f"{result['outcome']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
