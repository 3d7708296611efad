"""llama.cpp's own accounting against the estimate: the model, KV cache and compute buffers it
prints per device when it loads a model, for small GGUFs of several architectures
(``benchmarks/llamacpp_gguf.py``), with and without expert offload, on one and two devices.

llama.cpp is built on the CPU with its RPC backend: each ``ggml-rpc-server`` started on this
machine is a device llama.cpp offloads layers to exactly as to a GPU (``RPC0``, ``RPC1``), with
``-ngl``, ``--tensor-split``, ``--cpu-moe`` and ``-ot`` as on CUDA, and it prints the buffers of
each. The devices compute with the CPU backend, so the compute buffers are those of the same
graph on a backend that runs every operation (CUDA runs every one these models use).

Build (llama.cpp's code stays outside this repository): the sources of llama.cpp come with the
``llama-cpp-python`` package on PyPI (``vendor/llama.cpp`` in its sdist):

    pip download --no-deps --no-binary :all: llama-cpp-python   # or any llama.cpp checkout
    cmake -S .../vendor/llama.cpp -B build -DGGML_RPC=ON -DLLAMA_CURL=OFF
    cmake --build build --target llama-completion ggml-rpc-server llama-quantize

Run:

    .venv/bin/python -m benchmarks.llamacpp_buffers --bin build/bin --models /tmp/gguf
    .venv/bin/python -m benchmarks.llamacpp_buffers --bin build/bin --models /tmp/gguf --markdown

``--markdown`` rewrites the table in docs/offload.md between its markers; ``--from-json FILE
--markdown`` does so from rows recorded earlier (benchmarks/data/llamacpp_buffers.json).

``--op-offload`` runs the cases with experts in host memory on RPC devices that take the
products of host weights as CUDA does (ggml-cuda's ``offload_op``: 32 tokens or more; an RPC
device has no ``offload_op`` and leaves them to the host). That needs a build of llama.cpp whose
``ggml/src/ggml-rpc/ggml-rpc.cpp`` gives its device interface an ``offload_op`` returning, as
ggml-cuda's ``get_op_batch_size(op) >= 32`` does: ``op->ne[1] >= 32`` for ``GGML_OP_MUL_MAT``,
``op->ne[2] >= 32`` for ``GGML_OP_MUL_MAT_ID`` and ``GGML_OP_ROPE``, false for
``GGML_OP_GET_ROWS``, ``ggml_nrows(op) >= 32`` otherwise. The scheduler then copies each host
expert matrix into the device's compute buffer before its product, as on CUDA (records:
benchmarks/data/llamacpp_op_offload.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks import llamacpp_gguf
from vramgui.core import offload
from vramgui.core.model import ModelSpec
from vramgui.core.offload.overrides import LlamaCppLayout, parse_overrides
from vramgui.core.units import MiB
from vramgui.core.workload import Workload
from vramgui.sources.gguf_reader import load_gguf, parse_gguf, spec_from_gguf

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "offload.md"
BEGIN = "<!-- llamacpp-buffers:begin -->"
END = "<!-- llamacpp-buffers:end -->"
OP_BEGIN = "<!-- llamacpp-op-offload:begin -->"
OP_END = "<!-- llamacpp-op-offload:end -->"
PORT = 50152
# llama.cpp's buffer lines: "load_tensors:   CPU_Mapped model buffer size =   297.07 MiB".
_LINE = re.compile(
    r"(?P<who>load_tensors|llama_kv_cache|sched_reserve|llama_memory_recurrent):\s+"
    r"(?P<buft>\S+)\s+(?P<kind>model|KV|compute|RS) buffer size =\s+(?P<mib>[\d.]+) MiB"
)


@dataclass(frozen=True)
class Case:
    """One load of one model: llama.cpp's flags and what they mean to the estimate."""

    name: str
    model: str  # a file in --models
    ctx: int
    devices: int = 1  # RPC devices
    ngl: int = 99
    fa: str = "on"
    ubatch: int = 512
    cpu_moe: bool = False
    n_cpu_moe: int = 0
    override: str = ""
    tensor_split: tuple[float, ...] = ()
    quant: str | None = None  # llama-quantize the f16 file to this first
    extra: tuple[str, ...] = field(default_factory=tuple)
    # The RPC devices offload host-weight products of 32 tokens or more as CUDA does (a build
    # with the patch of --op-offload below); False: as RPC devices do, never.
    op_offload: bool = False

    def args(self) -> list[str]:
        out = ["-c", str(self.ctx), "-ngl", str(self.ngl), "-fa", self.fa, "-ub", str(self.ubatch)]
        if self.cpu_moe:
            out.append("--cpu-moe")
        if self.n_cpu_moe:
            out += ["--n-cpu-moe", str(self.n_cpu_moe)]
        if self.override:
            out += ["-ot", self.override]
        if self.tensor_split:
            out += ["-ts", ",".join(f"{s:g}" for s in self.tensor_split)]
        return out + list(self.extra)

    def layout(self) -> LlamaCppLayout:
        return LlamaCppLayout(
            overrides=parse_overrides(self.override.replace("RPC", "CUDA"))
            if self.override
            else (),
            cpu_moe=self.cpu_moe,
            n_cpu_moe=self.n_cpu_moe,
            tensor_split=self.tensor_split,
            # RPC devices offload no operation (their offload_op is NULL): the host runs the
            # products of host weights, as CUDA does with --no-op-offload.
            op_offload=self.op_offload,
        )


CASES = (
    Case("dense, all on 1 device", "llama-dense-f16", 4096),
    Case("dense, -fa off", "llama-dense-f16", 4096, fa="off"),
    Case("dense, 16k context", "llama-dense-f16", 16384),
    Case("dense Q4_K_M, -ngl 5", "llama-dense-f16", 8192, ngl=5, quant="Q4_K_M"),
    Case("dense, 2 devices -ts 3,1", "llama-dense-f16", 8192, devices=2, tensor_split=(3, 1)),
    Case("MoE, all on 1 device", "qwen3moe-f16", 8192),
    Case("MoE, --cpu-moe", "qwen3moe-f16", 8192, cpu_moe=True),
    Case("MoE, --n-cpu-moe 3", "qwen3moe-f16", 8192, n_cpu_moe=3),
    Case("MoE Q4_K_M, -ot exps=CPU", "qwen3moe-f16", 8192, override="exps=CPU", quant="Q4_K_M"),
    Case("MoE, 2 devices, --n-cpu-moe 2", "qwen3moe-f16", 8192, devices=2, n_cpu_moe=2),
    Case("MoE, 2 devices -ts 1,1", "qwen3moe-f16", 8192, devices=2, tensor_split=(1, 1)),
    Case("dense, 2 devices, -fa off", "llama-dense-f16", 8192, devices=2, fa="off"),
    Case("dense, 2 devices, -ngl 6", "llama-dense-f16", 8192, devices=2, ngl=6),
    Case("dense, 3 devices -ts 2,1,1", "llama-dense-f16", 16384, devices=3, tensor_split=(2, 1, 1)),
    Case("wide dense, small vocabulary", "llama-wide-f16", 8192),
    Case("wide dense, -fa off, 2 devices", "llama-wide-f16", 4096, devices=2, fa="off"),
    Case("wide dense, 2 devices -ts 1,3", "llama-wide-f16", 16384, devices=2, tensor_split=(1, 3)),
    Case("MoE 64x8, small vocabulary", "qwen3moe-64x8-f16", 8192),
    Case("MoE 64x8, --n-cpu-moe 2, 16k", "qwen3moe-64x8-f16", 16384, n_cpu_moe=2),
    Case("MoE 64x8, 2 devices", "qwen3moe-64x8-f16", 8192, devices=2),
    Case("sliding window, 8k", "gemma3-swa-f16", 8192),
    Case("sliding window, 32k, -fa off", "gemma3-swa-f16", 32768, fa="off"),
    Case("MLA + shared experts", "deepseek2-mla-f16", 8192),
    Case("MLA, --cpu-moe", "deepseek2-mla-f16", 8192, cpu_moe=True),
    Case("MLA, -fa off", "deepseek2-mla-f16", 8192, fa="off"),
    Case("MLA, 16k context", "deepseek2-mla-f16", 16384),
    Case("MLA 32 heads, 512 latent", "deepseek2-mla-wide-f16", 8192),
    Case("MLA 32 heads, -fa off, 4k", "deepseek2-mla-wide-f16", 4096, fa="off"),
    Case("MLA 32 heads, 32k context", "deepseek2-mla-wide-f16", 32768),
    Case("MLA, 2 devices -ts 1,1", "deepseek2-mla-f16", 8192, devices=2, tensor_split=(1, 1)),
    Case("MLA, 2 devices -ts 3,1", "deepseek2-mla-f16", 8192, devices=2, tensor_split=(3, 1)),
    Case("MLA, 2 devices, --n-cpu-moe 2", "deepseek2-mla-f16", 8192, devices=2, n_cpu_moe=2),
    Case("MLA 32 heads, 2 devices", "deepseek2-mla-wide-f16", 8192, devices=2, tensor_split=(1, 1)),
    Case("MLA 32 heads, 3 devices, -fa off", "deepseek2-mla-wide-f16", 8192, devices=3, fa="off"),
    Case(
        "MLA, 3 devices -ts 2,1,1, 32k",
        "deepseek2-mla-f16",
        32768,
        devices=3,
        tensor_split=(2, 1, 1),
    ),
)

# The cases with experts in host memory again, on RPC devices that offload like CUDA.
OP_OFFLOAD_CASES = tuple(
    replace(c, name=f"{c.name}, op offload", op_offload=True)
    for c in CASES
    if c.cpu_moe or c.n_cpu_moe or "exps" in c.override
)


@dataclass
class Buffers:
    """Bytes per device (``cpu``, ``gpu:0``...) of each kind: model, KV, compute."""

    model: dict[str, int] = field(default_factory=dict)
    kv: dict[str, int] = field(default_factory=dict)
    compute: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, device: str, size: int) -> None:
        table = {"model": self.model, "KV": self.kv, "RS": self.kv, "compute": self.compute}[kind]
        table[device] = table.get(device, 0) + size


def device_of(buffer_type: str) -> str:
    """``CUDA1`` -> ``gpu:1``; an RPC buffer, named after its server (``RPC0[127.0.0.1:50153]``),
    -> the GPU of that server's port; ``CPU_Mapped``, ``CPU``, ``CUDA_Host`` -> ``cpu``."""
    rpc = re.match(r"RPC\d*\[[^:]+:(\d+)\]", buffer_type)
    if rpc:
        return f"gpu:{int(rpc.group(1)) - PORT}"
    match = re.match(r"CUDA(\d+)$", buffer_type)
    return f"gpu:{match.group(1)}" if match else "cpu"


def parse_log(text: str) -> Buffers:
    """The buffers a llama.cpp log prints (run with ``-fit off``: a fit pass prints sizes too)."""
    out = Buffers()
    for match in _LINE.finditer(text):
        out.add(match["kind"], device_of(match["buft"]), round(float(match["mib"]) * MiB))
    return out


@contextlib.contextmanager
def rpc_servers(binary: Path, count: int) -> Iterator[list[str]]:
    """``count`` ggml-rpc-server processes on this machine; their addresses."""
    procs = []
    try:
        for i in range(count):
            procs.append(
                subprocess.Popen(
                    [str(binary), "-p", str(PORT + i), "-t", "1"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(1.0)
        yield [f"127.0.0.1:{PORT + i}" for i in range(count)]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def f16_file(models: Path, case: Case, *, data: bool = True) -> Path:
    """The case's F16 GGUF in ``models``, written when missing (``data`` False: without the
    tensor data, which the estimate never reads)."""
    f16 = models / f"{case.model}.gguf"
    if not f16.exists():
        arch = next(a for a in llamacpp_gguf.ARCHS if f"{a.name}-f16" == case.model)
        llamacpp_gguf.write(arch, f16, data=data)
    return f16


def header_spec(models: Path, case: Case) -> ModelSpec:
    """The case's model read from an F16 GGUF written without its tensor data (the estimate
    reads the header only; the tests use this, the measurement needs the whole file)."""
    path = f16_file(models, case, data=False)
    with path.open("rb") as fh:
        contents = parse_gguf(fh, path.stat().st_size, None, path.name)
    return spec_from_gguf(contents, path.stem, "test")


def model_file(models: Path, bins: Path, case: Case) -> Path:
    f16 = f16_file(models, case)
    if case.quant is None:
        return f16
    out = models / f"{case.model.removesuffix('-f16')}-{case.quant}.gguf"
    if not out.exists():
        subprocess.run(
            [str(bins / "llama-quantize"), str(f16), str(out), case.quant],
            check=True,
            capture_output=True,
        )
    return out


def llama_build(bins: Path) -> str:
    """The llama.cpp build, as ``--version`` says it ("0.5.0-dev (build 1, commit 0c1e570)")."""
    run = subprocess.run(
        [str(bins / "llama-completion"), "--version"],
        check=False,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    match = re.search(r"version: (.+)", run.stdout + run.stderr)
    return match.group(1).strip() if match else "unknown"


def measure(bins: Path, path: Path, case: Case) -> tuple[Buffers, str]:
    """Load ``path`` in llama.cpp with the case's flags on its RPC devices; the buffers it prints."""
    with rpc_servers(bins / "ggml-rpc-server", case.devices) as addresses:
        command = [
            str(bins / "llama-completion"),
            "-m", str(path),
            "--rpc", ",".join(addresses),
            "-fit", "off",
            "-lm", "none",  # host buffers hold the host tensors, not a mapped file range
            "-n", "1", "-p", "t5 t6", "--no-warmup", "-no-cnv", "-t", "1", "-v",
            *case.args(),
        ]  # fmt: skip
        run = subprocess.run(
            command, check=False, capture_output=True, text=True, errors="replace", timeout=900
        )
    text = run.stdout + run.stderr
    if run.returncode != 0:
        raise RuntimeError(f"{case.name}: llama.cpp failed ({run.returncode}): {text[-2000:]}")
    return parse_log(text), llama_build(bins)


def estimate(path: Path, case: Case) -> Buffers:
    """The estimate's buffers per device for the case, from the same GGUF file."""
    return estimate_for(load_gguf(path), case)


def estimate_for(spec: ModelSpec, case: Case) -> Buffers:
    """The estimate's buffers per device for the case and a model read from its GGUF."""
    kv = "fp16"
    workload = Workload(
        engine="llamacpp",
        quant=spec.quantization or "none",
        seq=case.ctx,
        kv_dtype=kv,
        attention="flash" if case.fa == "on" else "eager",
        ubatch_size=case.ubatch,
    )
    # Room to spare on every device: the case sets -ngl, nothing is chosen by the budget.
    budgets = [1 << 40] * case.devices
    p = offload.plan_llamacpp(
        spec, workload, budgets, n_gpu_layers=case.ngl, layout=case.layout(), host_ram_bytes=None
    )
    out = Buffers()
    for i, share in enumerate(p.shares):
        device = f"gpu:{i}"
        out.add("model", device, share.weights_bytes)
        out.add("KV", device, share.kv_cache_bytes)
        out.add("compute", device, share.buffers_bytes)
    out.add(
        "model",
        "cpu",
        sum(piece.bytes for u in p.units for piece in u.parts if piece.device == "cpu"),
    )
    out.add("KV", "cpu", sum(u.unit.kv_cache_bytes for u in p.units if u.kv_device == "cpu"))
    return out


def compare(measured: Buffers, estimated: Buffers) -> list[tuple[str, str, int, int]]:
    """(kind, device, measured, estimated) for every buffer either side has, host compute aside."""
    rows = []
    for kind in ("model", "KV", "compute"):
        got = getattr(measured, kind.lower() if kind != "KV" else "kv")
        want = getattr(estimated, kind.lower() if kind != "KV" else "kv")
        for device in sorted(set(got) | set(want)):
            if kind == "compute" and device == "cpu":
                continue  # the host's compute buffer is not estimated (see docs/offload.md)
            m, e = got.get(device, 0), want.get(device, 0)
            if m or e:
                rows.append((kind, device, m, e))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, help="llama.cpp's build/bin folder")
    parser.add_argument("--models", type=Path, help="folder for the GGUF files")
    parser.add_argument("--only", nargs="*", help="case names to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument(
        "--markdown", action="store_true", help="rewrite the table in docs/offload.md"
    )
    parser.add_argument(
        "--from-json", type=Path, help="write the table from rows recorded earlier (no llama.cpp)"
    )
    parser.add_argument(
        "--op-offload",
        action="store_true",
        help="the cases with experts in host memory, on RPC devices patched to offload "
        "host-weight products of 32 tokens or more as CUDA does (see the module's text)",
    )
    args = parser.parse_args(argv)
    markers = (OP_BEGIN, OP_END) if args.op_offload else (BEGIN, END)
    if args.from_json:
        write_markdown(json.loads(args.from_json.read_text()), markers)
        return 0
    if args.bin is None or args.models is None:
        parser.error("--bin and --models are needed to run llama.cpp")
    args.models.mkdir(parents=True, exist_ok=True)
    table = []
    for case in OP_OFFLOAD_CASES if args.op_offload else CASES:
        if args.only and case.name not in args.only:
            continue
        path = model_file(args.models, args.bin, case)
        measured, build = measure(args.bin, path, case)
        if args.op_offload:
            build += ", with the RPC offload_op patch of --op-offload"
        rows = compare(measured, estimate(path, case))
        for kind, device, m, e in rows:
            error = (e - m) / m if m else float("inf")
            print(
                f"{case.name:34} {kind:8} {device:6} {m / MiB:10.2f} {e / MiB:10.2f} {error:+8.2%}"
            )
        table.append(
            {
                "case": case.name,
                "model": case.model,
                "quant": case.quant,
                "flags": case.args(),
                "devices": case.devices,
                "llama_cpp_build": build,
                "rows": [
                    {"kind": k, "device": d, "measured_bytes": m, "estimate_bytes": e}
                    for k, d, m, e in rows
                ],
            }
        )
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    if args.markdown:
        write_markdown(table, markers)
    return 0


def write_markdown(table: list[dict[str, object]], markers: tuple[str, str] = (BEGIN, END)) -> None:
    begin, end_marker = markers
    lines = [
        begin,
        "| case | llama.cpp flags | buffer | device | llama.cpp MiB | estimate MiB | error |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for entry in table:
        for row in entry["rows"]:  # type: ignore[attr-defined]
            kind, device = row["kind"], row["device"]
            m, e = row["measured_bytes"], row["estimate_bytes"]
            error = f"{(e - m) / m:+.1%}" if m else "n/a"
            flags = " ".join(entry["flags"])  # type: ignore[arg-type]
            lines.append(
                f"| {entry['case']} | `{flags}` | {kind} | {device} | {m / MiB:,.2f} | "
                f"{e / MiB:,.2f} | {error} |"
            )
    lines.append(end_marker)
    text = DOC.read_text()
    start, end = text.index(begin), text.index(end_marker) + len(end_marker)
    DOC.write_text(text[:start] + "\n".join(lines) + text[end:])


if __name__ == "__main__":
    raise SystemExit(main())
