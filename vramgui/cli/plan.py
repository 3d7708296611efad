"""``vramgui plan SOURCE [options]``: which layers go where, how fast it runs, and the engine settings."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.estimate import add_estimate_options, load_for
from vramgui.core import offload
from vramgui.core.errors import WorkloadError
from vramgui.core.offload import Bandwidths, Placement
from vramgui.core.units import GB, GiB, format_bytes
from vramgui.core.workload import Workload, served_family

if TYPE_CHECKING:
    from vramgui.core.model import ModelSpec

SCHEMA = "vramgui.plan/1"
# The GPU whose bandwidth and TFLOPS the speed model uses when no --gpu is named.
DEFAULT_GPU = "RTX 4090"

# The budget and the speed model's figures, all floats: (option, default, help).
_NUMBER_OPTIONS: tuple[tuple[str, float | None, str], ...] = (
    ("--vram-gib", None, "GPU memory (default: the first --gpu's)"),
    (
        "--margin-gib",
        offload.DEFAULT_MARGIN_BYTES / GiB,
        "GPU memory the most that fit leave free (llama.cpp's --fit keeps 1 GiB)",
    ),
    ("--ram-gib", None, "host RAM for weights (default: available now)"),
    ("--disk-gbps", None, "disk read speed, GB/s (default: NVMe)"),
    (
        "--pcie-gbps",
        None,
        "host-to-GPU copies in practice, GB/s (default: the GPU's PCIe generation)",
    ),
    ("--gpu-gbps", None, "GPU memory bandwidth, peak GB/s (default: the catalog's)"),
    ("--gpu-tflops", None, "GPU 16-bit TFLOPS (default: the catalog's)"),
    (
        "--cpu-ram-gbps",
        offload.DEFAULT_CPU_RAM_PEAK_BYTES_PER_S / GB,
        "host memory bandwidth, peak GB/s (dual-channel DDR5-4800)",
    ),
    (
        "--gpu-efficiency",
        offload.GPU_MEMORY_EFFICIENCY,
        "share of the GPU's peak bandwidth decoding reaches (1: peak)",
    ),
    (
        "--ram-efficiency",
        offload.HOST_MEMORY_EFFICIENCY,
        "share of host RAM's peak bandwidth decoding reaches (1: peak)",
    ),
    ("--cpu-tflops", offload.DEFAULT_CPU_FLOPS / 1e12, "CPU matrix TFLOPS"),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``vramgui plan`` on the top-level subparsers."""
    parser = sub.add_parser(
        "plan",
        help=SUBCOMMANDS["plan"],
        description=(
            "Place a model's layers on the GPU, in host RAM and on disk the way llama.cpp, "
            "accelerate or layer streaming would, estimate its speed, and print engine settings."
        ),
    )
    parser.add_argument(
        "source", help="config.json, model folder, .safetensors, .gguf, Hub id or catalog name"
    )
    add_estimate_options(parser)
    parser.add_argument(
        "--planner",
        choices=offload.PLANNERS,
        default=None,
        help="placement rule (default: llamacpp when llama.cpp serves the model, else accelerate)",
    )
    for flag, default, help_text in _NUMBER_OPTIONS:
        parser.add_argument(flag, type=float, default=default, help=help_text)
    parser.add_argument(
        "--ngl",
        type=int,
        default=None,
        help="llama.cpp -ngl; more than the model's layers puts them all on the GPU "
        "(default: the most that fit)",
    )
    parser.add_argument(
        "--prompt",
        type=int,
        default=None,
        help="prompt tokens for the prefill time (default: --seq)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=run)


def _positive(name: str, value: float | None) -> float | None:
    if value is not None and not 0 < value < 1e9:
        raise WorkloadError(f"--{name} must be a positive number, got {value}")
    return value


def _margin(args: argparse.Namespace) -> int:
    if not 0 <= args.margin_gib < 1 << 20:
        raise WorkloadError(f"--margin-gib must be a size in GiB, got {args.margin_gib}")
    return round(args.margin_gib * GiB)


def _gpu_and_budget(args: argparse.Namespace) -> tuple[Any, str, int]:
    """The catalog GPU for speeds (or None), its display name, and the VRAM budget in bytes."""
    from vramgui.hardware.capacity import resolve_capacities
    from vramgui.hardware.errors import HardwareError
    from vramgui.hardware.gpus import find_gpu

    capacities = resolve_capacities(args.gpu[:1]) if args.gpu else []
    name = capacities[0][0] if capacities else DEFAULT_GPU
    try:
        gpu = find_gpu(name)
    except HardwareError:
        gpu = None
    vram_gib = _positive("vram-gib", args.vram_gib)
    if vram_gib is not None:
        budget = round(vram_gib * GiB)
    elif capacities:
        budget = capacities[0][1]
    else:
        raise WorkloadError("give the GPU memory with --vram-gib X or a GPU with --gpu NAME")
    return gpu, name, budget


def bandwidths_from_args(args: argparse.Namespace, gpu: Any) -> Bandwidths:
    """The speed model's bandwidths: the GPU's catalog peaks and host defaults, as overridden,
    with the memory bandwidths at the share decoding reaches (``--gpu-efficiency``,
    ``--ram-efficiency``)."""
    from vramgui.hardware.gpus import find_gpu
    from vramgui.hardware.host import DEFAULT_DISK_READ_BYTES_PER_S, pcie_bytes_per_s

    source = gpu if gpu is not None else find_gpu(DEFAULT_GPU)
    catalog_tflops = source.bf16_tflops or source.fp16_tflops
    tflops = _positive("gpu-tflops", args.gpu_tflops) or catalog_tflops
    if tflops is None:
        raise WorkloadError(
            f"the catalog has no 16-bit TFLOPS for {source.name}; give --gpu-tflops"
        )
    gpu_gbps = _positive("gpu-gbps", args.gpu_gbps)
    pcie_gbps = _positive("pcie-gbps", args.pcie_gbps)
    disk_gbps = _positive("disk-gbps", args.disk_gbps)
    return offload.expected_bandwidths(
        gpu_peak_bytes_per_s=gpu_gbps * GB if gpu_gbps else source.memory_bandwidth_bytes_per_s,
        pcie_bytes_per_s=pcie_gbps * GB if pcie_gbps else pcie_bytes_per_s(source.pcie_gen or 4),
        cpu_ram_peak_bytes_per_s=_positive("cpu-ram-gbps", args.cpu_ram_gbps) * GB,  # type: ignore[operator]
        disk_bytes_per_s=disk_gbps * GB if disk_gbps else DEFAULT_DISK_READ_BYTES_PER_S,
        gpu_flops=tflops * 1e12,
        cpu_flops=_positive("cpu-tflops", args.cpu_tflops) * 1e12,  # type: ignore[operator]
        gpu_efficiency=args.gpu_efficiency,
        host_efficiency=args.ram_efficiency,
    )


def _host_ram(args: argparse.Namespace) -> int | None:
    ram = _positive("ram-gib", args.ram_gib)
    if ram is not None:
        return round(ram * GiB)
    from vramgui.hardware.host import read_host_info

    return read_host_info().ram_available_bytes


def plan_document(
    spec: ModelSpec,
    workload: Workload,
    placement: Placement,
    bandwidths: Bandwidths,
    *,
    gpu_name: str,
    prompt_tokens: int | None = None,
) -> dict[str, Any]:
    """The ``vramgui.plan/1`` document: layers with devices, memory, speed and launch settings."""
    from vramgui.core import launch
    from vramgui.core.report import model_summary

    speed = offload.decode_throughput(placement, bandwidths)
    curve = offload.throughput_curve(placement, bandwidths)
    return {
        "schema": SCHEMA,
        "model": model_summary(spec),
        "settings": workload.to_dict(),
        "planner": placement.planner,
        "gpu": gpu_name,
        "bandwidths": {
            "gpu_bytes_per_s": bandwidths.gpu_bytes_per_s,
            "pcie_bytes_per_s": bandwidths.pcie_bytes_per_s,
            "cpu_ram_bytes_per_s": bandwidths.cpu_ram_bytes_per_s,
            "disk_bytes_per_s": bandwidths.disk_bytes_per_s,
            "gpu_flops": bandwidths.gpu_flops,
            "cpu_flops": bandwidths.cpu_flops,
        },
        "vram_budget_bytes": list(placement.vram_budget_bytes),
        "margin_bytes": placement.margin_bytes,
        "fits": placement.fits,
        "gpu_layers": placement.gpu_layers,
        "min_vram_bytes": offload.min_vram_bytes(spec, workload),
        "gpu_bytes": list(placement.gpu_bytes),
        "host_bytes": placement.host_bytes,
        "disk_bytes": placement.disk_bytes,
        "stream_bytes": placement.stream_bytes,
        "buffers_bytes": placement.buffers_bytes,
        "overhead_bytes": placement.overhead_bytes,
        "layers": [
            {
                "index": p.unit.index,
                "name": p.unit.name,
                "device": p.device,
                "bytes": p.unit.bytes,
                "kv_cache_bytes": p.unit.kv_cache_bytes,
                "kv_device": p.kv_device,
                "gpu_bytes": p.gpu_bytes,
            }
            for p in placement.units
        ],
        "tokens_per_second": speed.tokens_per_second,
        "bound": speed.bound,
        "prefill_seconds": offload.prefill_seconds(placement, bandwidths, prompt_tokens),
        "compute_bound_batch": offload.compute_bound_batch(placement, bandwidths),
        "throughput": [
            {"batch": t.batch, "tokens_per_second": t.tokens_per_second, "bound": t.bound}
            for t in curve
        ],
        "launch": [s.to_dict() for s in launch.launch_settings(spec, workload, placement)],
        "notes": list(placement.notes),
    }


def run(args: argparse.Namespace) -> int:
    """Print the plan as a table or as JSON."""
    loaded, workload = load_for(args)
    if workload.mode == "training":
        # Training keeps every layer on the GPUs; what the plan can give is the DeepSpeed setup.
        doc = training_document(loaded.spec, workload)
        print(json.dumps(doc, indent=2) if args.json else format_training(doc))
        return 0
    gpu, gpu_name, budget = _gpu_and_budget(args)
    bandwidths = bandwidths_from_args(args, gpu)
    planner = args.planner or ("llamacpp" if workload.engine == "llamacpp" else "accelerate")
    if args.ngl is not None and planner != "llamacpp":
        raise WorkloadError("--ngl applies to --planner llamacpp")
    if planner != "llamacpp" and served_family(workload.quant, loaded.spec.quantization) == "gguf":
        raise WorkloadError(
            f"--planner {planner} loads the model with transformers, which dequantizes GGUF to "
            "--dtype: use --planner llamacpp for GGUF weights, or --quant none"
        )
    most = loaded.spec.facts.num_layers + 1
    if args.ngl is not None and args.ngl < 0:
        raise WorkloadError(f"--ngl must be 0 or more, got {args.ngl}")
    if args.prompt is not None and args.prompt < 1:
        raise WorkloadError(f"--prompt must be at least 1, got {args.prompt}")
    placement = offload.plan(
        planner,
        loaded.spec,
        workload,
        budget,
        host_ram_bytes=_host_ram(args),
        n_gpu_layers=args.ngl,
        margin_bytes=_margin(args),
    )
    doc = plan_document(
        loaded.spec,
        placement.workload,
        placement,
        bandwidths,
        gpu_name=gpu_name,
        prompt_tokens=args.prompt,
    )
    doc["source"] = loaded.ref.to_dict()
    doc["notices"] = list(loaded.notices)
    if args.ngl is not None and args.ngl > most:
        # llama.cpp's own reading of a large -ngl (-ngl 99 is the usual "all of them").
        doc["notices"].append(
            f"--ngl {args.ngl} is more than {loaded.spec.name}'s {most} layers ({most - 1} blocks "
            f"and the output): all {most} go to the GPU, as llama.cpp does."
        )
    if not args.gpu:
        doc["notices"].append(f"Speeds are the {DEFAULT_GPU}'s; name your GPU with --gpu.")
    print(json.dumps(doc, indent=2) if args.json else format_table(doc))
    return 0


def training_document(spec: ModelSpec, workload: Workload) -> dict[str, Any]:
    """The plan of a training setup: per-layer weights and the DeepSpeed configuration."""
    from vramgui.core import launch
    from vramgui.core.report import model_summary

    return {
        "schema": SCHEMA,
        "model": model_summary(spec),
        "settings": workload.to_dict(),
        "layers": [
            {"index": u.index, "name": u.name, "bytes": u.bytes}
            for u in offload.layer_weights(spec, workload)
        ],
        "launch": [s.to_dict() for s in launch.launch_settings(spec, workload)],
        "notes": ["Layers are placed for inference only; training keeps them on the GPUs."],
    }


def format_training(doc: dict[str, Any]) -> str:
    """A plain-text view of a training plan."""
    lines = [f"{doc['model']['name']}: training setup", ""]
    for settings in doc["launch"]:
        lines += [f"{settings['engine']}:", settings["text"], *settings["notes"]]
    return "\n".join(lines)


def _runs(layers: list[dict[str, Any]]) -> list[tuple[str, str, int, int]]:
    """Consecutive units on the same device, as (names, device, weight bytes, KV bytes)."""
    runs: list[tuple[str, str, int, int, str]] = []
    for layer in layers:
        key = layer["device"]
        if runs and runs[-1][1] == key and layer["name"].startswith("block"):
            first, _, size, kv, last = runs[-1]
            if last.startswith("block"):
                runs[-1] = (
                    first,
                    key,
                    size + layer["bytes"],
                    kv + layer["kv_cache_bytes"],
                    layer["name"],
                )
                continue
        runs.append((layer["name"], key, layer["bytes"], layer["kv_cache_bytes"], layer["name"]))
    return [
        (first if first == last else f"{first} - {last.removeprefix('block ')}", dev, size, kv)
        for first, dev, size, kv, last in runs
    ]


def format_table(doc: dict[str, Any]) -> str:
    """A plain-text view of the plan for people."""
    s = doc["settings"]
    lines = [
        f"{doc['model']['name']}: {doc['planner']} plan, GPU budget "
        f"{format_bytes(doc['vram_budget_bytes'][0])} ({doc['gpu']} speeds), {s['dtype']}"
        + (f" {s['quant']}" if s["quant"] != "none" else "")
        + f", batch {s['batch']}, seq {s['seq']:,}",
        "",
    ]
    for names, device, size, kv in _runs(doc["layers"]):
        kv_text = f"  + KV {format_bytes(kv)}" if kv else ""
        lines.append(f"  {names:<18}{device:<7}{format_bytes(size):>12}{kv_text}")
    lines.append("")
    verdict = "fits" if doc["fits"] else "does NOT fit"
    margin = f", {format_bytes(doc['margin_bytes'])} kept free" if doc["margin_bytes"] else ""
    lines.append(
        f"GPU layers: {doc['gpu_layers']}   GPU memory: {format_bytes(doc['gpu_bytes'][0])} "
        f"({verdict}{margin})"
    )
    lines.append(
        f"host RAM: {format_bytes(doc['host_bytes'])}   disk: {format_bytes(doc['disk_bytes'])}   "
        f"one-layer floor: {format_bytes(doc['min_vram_bytes'])}"
    )
    lines.append(
        f"decode: {doc['tokens_per_second']:,.2f} tokens/s (bound by {doc['bound'].replace('_', ' ')})"
        f"   prefill: {doc['prefill_seconds']:,.2f} s"
    )
    turn = doc["compute_bound_batch"]
    if turn:
        lines.append(f"compute-bound from batch {turn:,}")
    for settings in doc["launch"]:
        lines += ["", f"{settings['engine']}:", settings["text"]]
    for note in [*doc.get("notices", []), *doc["notes"]]:
        lines.append(f"note: {note}")
    return "\n".join(lines)
