"""``vramgui plan SOURCE [options]``: which layers go where, how fast it runs, and the engine settings."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.estimate import add_estimate_options, custom_gpus, load_for, vram_budgets
from vramgui.cli.text import APPROXIMATE, is_approximate, note_lines, printable
from vramgui.core import engines, offload
from vramgui.core.engines import StartUp
from vramgui.core.errors import WorkloadError
from vramgui.core.offload.overrides import LlamaCppLayout, parse_overrides, parse_tensor_split
from vramgui.core.units import GB, GiB, format_bytes
from vramgui.core.workload import Workload, served_family

if TYPE_CHECKING:
    from vramgui.answers.host import HostSettings
    from vramgui.answers.offload import CardSpeeds, OffloadAnswer
    from vramgui.core.model import ModelSpec
    from vramgui.core.offload import Bandwidths, curves
    from vramgui.core.offload.fit import FitResult

SCHEMA = "vramgui.plan/1"
# The GPU whose bandwidth and TFLOPS the speed model uses when no --gpu is named.
DEFAULT_GPU = "RTX 4090"

# The budget and the speed model's figures, all floats: (option, default, help).
_NUMBER_OPTIONS: tuple[tuple[str, float | None, str], ...] = (
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
    parser.add_argument(
        "--vram-gib",
        default=None,
        help="GPU memory, one figure or one per GPU (24,12) (default: each --gpu's)",
    )
    for flag, default, help_text in _NUMBER_OPTIONS:
        parser.add_argument(flag, type=float, default=default, help=help_text)
    parser.add_argument(
        "--ngl",
        type=int,
        default=None,
        help="llama.cpp -ngl: the output layer and the last N - 1 blocks on the GPUs; more than "
        "the model's layers puts them all there (default: the most that fit)",
    )
    experts = parser.add_argument_group(
        "llama.cpp tensor placement and several GPUs (its own flags)"
    )
    experts.add_argument(
        "--cpu-moe",
        "-cmoe",
        action="store_true",
        help="keep every layer's routed experts in host RAM",
    )
    experts.add_argument(
        "--n-cpu-moe",
        "-ncmoe",
        type=int,
        default=0,
        metavar="N",
        help="keep the routed experts of the first N layers in host RAM",
    )
    experts.add_argument(
        "--override-tensor",
        "-ot",
        action="append",
        default=[],
        metavar="PATTERN=DEVICE",
        help="put the tensors whose GGUF name the regular expression finds on CPU, CUDA0, "
        "CUDA1... (exps=CPU); comma-separated pairs, repeatable",
    )
    experts.add_argument(
        "--tensor-split",
        "-ts",
        default=None,
        metavar="N0,N1,...",
        help="share of the GPU layers per GPU, in the order of --gpu (default: by memory)",
    )
    experts.add_argument(
        "--split-mode",
        "-sm",
        choices=("layer", "row", "none"),
        default="layer",
        help="layer: whole layers per GPU; row: every matrix split by rows, the KV cache and "
        "buffers on the main GPU; none: the main GPU only",
    )
    experts.add_argument(
        "--main-gpu", "-mg", type=int, default=0, help="the main GPU for row and none"
    )
    experts.add_argument(
        "--no-kv-offload", "-nkvo", action="store_true", help="keep the KV cache in host RAM"
    )
    experts.add_argument(
        "--no-op-offload",
        action="store_true",
        help="multiply host weights on the CPU at every batch size (llama.cpp copies them to the "
        "GPU's compute buffer for batches of 32 tokens or more)",
    )
    fit = parser.add_argument_group("fitting like llama.cpp's --fit")
    fit.add_argument(
        "--fit",
        action="store_true",
        help="choose -ngl, the tensor split and the layers whose experts stay in host RAM "
        "the way llama.cpp's --fit does, keeping --margin-gib (--fit-target) free per GPU",
    )
    fit.add_argument(
        "--fit-ctx",
        type=int,
        default=None,
        metavar="N",
        help="with --fit: the context is not set (llama.cpp's -c 0): start from the model's "
        "trained context and shrink it, no lower than N (llama.cpp's default 4096)",
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


@dataclass(frozen=True)
class _Gpu:
    name: str
    budget_bytes: int
    catalog: Any  # its catalog entry (or the card --vram-gib describes), or None


def _gpus(args: argparse.Namespace, total: int = 1) -> list[_Gpu]:
    """The GPUs the model spans: each --gpu (``local``: every local GPU), in order, with the
    --vram-gib budgets when given (one figure for all, or one per GPU); one GPU named with
    ``total`` (--gpus) above 1 is that many of them. Without --gpu, --vram-gib describes cards
    the catalog lacks (with --gpu-gbps, --gpu-tflops), named by their figures as ``estimate``
    names them ("Custom 24 GiB, 900 GB/s")."""
    from vramgui.hardware.capacity import resolve_capacities
    from vramgui.hardware.errors import HardwareError
    from vramgui.hardware.gpus import find_gpu

    capacities = resolve_capacities(args.gpu) if args.gpu else []
    if not capacities:
        cards = custom_gpus(args)
        if not cards:
            raise WorkloadError("give the GPU memory with --vram-gib X or a GPU with --gpu NAME")
        if len(cards) == 1:
            cards *= total
        return [_Gpu(card.name, card.memory_bytes, card) for card in cards]
    budgets = vram_budgets(args.vram_gib)
    if len(capacities) == 1 and len(budgets) <= 1 and total > 1:
        capacities *= total
    count = max(len(capacities), len(budgets))
    if len(budgets) == 1:
        budgets *= count
    elif budgets and capacities and len(budgets) != len(capacities):
        raise WorkloadError(
            f"--vram-gib gives {len(budgets)} figures for {len(capacities)} GPUs (--gpu)"
        )
    out = []
    for i in range(count):
        name = capacities[i][0] if i < len(capacities) else capacities[0][0]
        budget = budgets[i] if budgets else capacities[i][1]
        try:
            gpu = find_gpu(name.split(": ", 1)[-1])
        except HardwareError:
            gpu = None
        out.append(_Gpu(name, budget, gpu))
    return out


def bandwidths_from_args(
    args: argparse.Namespace, gpus: Sequence[_Gpu], host: HostSettings
) -> tuple[Bandwidths, list[CardSpeeds]]:
    """The speed model's bandwidths (``answers.offload.bandwidths_for``): each GPU's catalog
    peaks and host defaults, as overridden (the first GPU's by the flags); with the speeds of
    each GPU, where a card the catalog lacks has some assumed (the DEFAULT_GPU's)."""
    from vramgui.answers.offload import BANDWIDTH, PCIE, TFLOPS, bandwidths_for, card_speeds
    from vramgui.hardware.gpus import find_gpu

    given = [
        figure
        for figure, value in (
            (BANDWIDTH, args.gpu_gbps),
            (TFLOPS, args.gpu_tflops),
            (PCIE, args.pcie_gbps),
        )
        if value is not None
    ]
    stand_in = find_gpu(DEFAULT_GPU)
    speeds = [
        card_speeds(g.name, g.catalog, stand_in, given if i == 0 else ())
        for i, g in enumerate(gpus)
    ]
    source = speeds[0].gpu
    tflops = _positive("gpu-tflops", args.gpu_tflops) or source.bf16_tflops or source.fp16_tflops
    if tflops is None:
        raise WorkloadError(
            f"the catalog has no 16-bit TFLOPS for {source.name}; give --gpu-tflops"
        )
    gpu_gbps = _positive("gpu-gbps", args.gpu_gbps)
    pcie_gbps = _positive("pcie-gbps", args.pcie_gbps)
    return (
        bandwidths_for(
            source,
            host,
            gpu_peak_bytes_per_s=gpu_gbps * GB if gpu_gbps else None,
            gpu_flops=tflops * 1e12,
            pcie=pcie_gbps * GB if pcie_gbps else None,
            cpu_ram_peak_bytes_per_s=_positive("cpu-ram-gbps", args.cpu_ram_gbps) * GB,  # type: ignore[operator]
            cpu_flops=_positive("cpu-tflops", args.cpu_tflops) * 1e12,  # type: ignore[operator]
            gpu_efficiency=args.gpu_efficiency,
            host_efficiency=args.ram_efficiency,
            others=[s.gpu for s in speeds[1:]],
        ),
        speeds,
    )


# Each speed figure a card may lack, as the command line words it and sets it.
_ASSUMED = {
    "bandwidth": ("memory bandwidth", "--gpu-gbps"),
    "tflops": ("16-bit tensor rate", "--gpu-tflops"),
    "pcie": ("PCIe generation", "--pcie-gbps"),
}


def assumed_text(speeds: CardSpeeds) -> str:
    """The speeds assumed for a card the catalog lacks, and the flags that give its own."""
    figures = ", ".join(f"{_ASSUMED[f][0]} {value}" for f, value in speeds.assumed)
    flags = ", ".join(_ASSUMED[f][1] for f, _ in speeds.assumed)
    return (
        f"{speeds.gpu.name} is timed with assumed speeds, the {speeds.stand_in}'s: {figures} "
        f"(give {flags} for its own)."
    )


def _layout(args: argparse.Namespace, planner: str) -> LlamaCppLayout:
    """llama.cpp's tensor placement and split flags as given."""
    overrides = tuple(o for text in args.override_tensor for o in parse_overrides(text))
    layout = LlamaCppLayout(
        overrides=overrides,
        cpu_moe=args.cpu_moe,
        n_cpu_moe=args.n_cpu_moe,
        tensor_split=parse_tensor_split(args.tensor_split) if args.tensor_split else (),
        split_mode=args.split_mode,
        main_gpu=args.main_gpu,
        kv_offload=not args.no_kv_offload,
        op_offload=not args.no_op_offload,
    )
    if not engines.planner_engine(planner).ggml and layout != LlamaCppLayout():
        raise WorkloadError(
            "--cpu-moe, --n-cpu-moe, --override-tensor, --tensor-split, --split-mode, "
            "--main-gpu, --no-kv-offload and --no-op-offload are llama.cpp's: use --planner "
            "llamacpp"
        )
    return layout


def _host(args: argparse.Namespace) -> HostSettings:
    from vramgui.answers.host import host_settings

    ram = _positive("ram-gib", args.ram_gib)
    disk = _positive("disk-gbps", args.disk_gbps)
    return host_settings(
        None if ram is None else round(ram * GiB), None if disk is None else disk * GB
    )


def _layer_entry(p: offload.PlacedUnit) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": p.unit.index,
        "name": p.unit.name,
        "device": p.device,
        "bytes": p.unit.bytes,
        "kv_cache_bytes": p.unit.kv_cache_bytes,
        "kv_device": p.kv_device,
        "gpu_bytes": p.gpu_bytes,
    }
    if p.pieces:
        entry["pieces"] = [
            {
                "device": piece.device,
                "bytes": piece.bytes,
                "expert_bytes": piece.expert_bytes,
                "tensors": list(piece.names),
            }
            for piece in p.pieces
        ]
    return entry


def _curve(points: Sequence[curves.CurvePoint]) -> list[dict[str, Any]]:
    return [
        {
            "flag": point.flag,
            "value": point.value,
            "gpu_bytes": list(point.gpu_bytes),
            "host_bytes": point.host_bytes,
            "tokens_per_second": point.tokens_per_second,
            "first_token_seconds": point.first_token_seconds,
            "fits": point.fits,
        }
        for point in points
    ]


def plan_document(
    spec: ModelSpec,
    answer: OffloadAnswer,
    *,
    gpu_name: str,
    gpu_names: Sequence[str] = (),
    fit: FitResult | None = None,
    ollama: str | None = None,
) -> dict[str, Any]:
    """The ``vramgui.plan/1`` document of an offload plan (``answers.offload``): layers with
    devices, memory, speed, the alternatives and launch settings."""
    from vramgui.core import launch
    from vramgui.core.report import model_summary

    placement, bandwidths, speed = answer.placement, answer.bandwidths, answer.throughput
    workload = placement.workload
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "model": model_summary(spec),
        "settings": workload.to_dict(),
        "planner": placement.planner,
        "gpu": gpu_name,
        "gpus": list(gpu_names) or [gpu_name],
        "bandwidths": {
            "gpu_bytes_per_s": bandwidths.gpu_bytes_per_s,
            "pcie_bytes_per_s": bandwidths.pcie_bytes_per_s,
            "cpu_ram_bytes_per_s": bandwidths.cpu_ram_bytes_per_s,
            "disk_bytes_per_s": bandwidths.disk_bytes_per_s,
            "gpu_flops": bandwidths.gpu_flops,
            "cpu_flops": bandwidths.cpu_flops,
        },
        "host": answer.host.to_dict(),
        "chosen": answer.chosen,
        "vram_budget_bytes": list(placement.vram_budget_bytes),
        "margin_bytes": placement.margin_bytes,
        "fits": placement.fits,
        "gpu_layers": placement.gpu_layers,
        "min_vram_bytes": answer.min_vram_bytes,
        "gpu_bytes": list(placement.gpu_bytes),
        "host_bytes": placement.host_bytes,
        "disk_bytes": placement.disk_bytes,
        "stream_bytes": placement.stream_bytes,
        "buffers_bytes": placement.buffers_bytes,
        "overhead_bytes": placement.overhead_bytes,
        "layers": [_layer_entry(p) for p in placement.units],
        "tokens_per_second": speed.tokens_per_second,
        "bound": speed.bound,
        "prefill_seconds": answer.prefill_seconds,
        "compute_bound_batch": answer.compute_bound_batch,
        "throughput": [
            {"batch": t.batch, "tokens_per_second": t.tokens_per_second, "bound": t.bound}
            for t in answer.curve
        ],
        "launch": [
            s.to_dict() for s in launch.launch_settings(spec, workload, placement, ollama=ollama)
        ],
        # The model's warnings first, as the estimate's notes have them (what was guessed).
        "notes": [*spec.warnings, *placement.notes],
    }
    if placement.shares:
        doc["per_gpu"] = [
            {
                "weights_bytes": share.weights_bytes,
                "kv_cache_bytes": share.kv_cache_bytes,
                "buffers_bytes": share.buffers_bytes,
            }
            for share in placement.shares
        ]
    if placement.layout is not None:
        layout = placement.layout
        doc["llamacpp"] = {
            "cpu_moe": layout.cpu_moe,
            "n_cpu_moe": layout.n_cpu_moe,
            "override_tensor": [o.text for o in layout.overrides],
            "tensor_split": list(layout.tensor_split),
            "split_mode": layout.split_mode,
            "main_gpu": layout.main_gpu,
            "op_offload": layout.op_offload,
        }
        doc["curves"] = {"layers": _curve(answer.layers), "experts": _curve(answer.experts)}
        doc["best"] = {
            kind: _curve([point])[0] if point is not None else None
            for kind, point in answer.alternatives.items()
        }
    if fit is not None:
        doc["fit"] = {
            "context": fit.context,
            "layers_per_gpu": list(fit.layers_per_gpu),
            "expert_layers_on_cpu": fit.expert_layers_on_cpu,
            "changed": fit.changed,
        }
        doc["notes"] = [*fit.notes, *doc["notes"]]
    return doc


def run(args: argparse.Namespace) -> int:
    """Print the plan as a table or as JSON."""
    from vramgui.answers.offload import plan_offload
    from vramgui.core import launch
    from vramgui.sources.results import OLLAMA_PREFIX

    seq_given = args.seq is not None
    loaded, workload = load_for(args)
    spec = loaded.spec
    if workload.mode == "training":
        # Training keeps every layer on the GPUs; what the plan can give is the DeepSpeed setup.
        doc = training_document(spec, workload)
        print(json.dumps(doc, indent=2) if args.json else format_training(doc))
        return 0
    gpus = _gpus(args, workload.gpus)
    budgets = [g.budget_bytes for g in gpus]
    host = _host(args)
    bandwidths, speeds = bandwidths_from_args(args, gpus, host)
    planner = args.planner or engines.default_planner(workload.engine).key
    ggml = engines.planner_engine(planner).ggml
    if args.ngl is not None and not ggml:
        raise WorkloadError("--ngl applies to --planner llamacpp")
    if not ggml and served_family(workload.quant, spec.quantization) == "gguf":
        raise WorkloadError(
            f"--planner {planner} loads the model with transformers, which dequantizes GGUF to "
            "--dtype: use --planner llamacpp for GGUF weights, or --quant none"
        )
    layout = _layout(args, planner)
    most = spec.facts.num_layers + 1
    if args.ngl is not None and args.ngl < 0:
        raise WorkloadError(f"--ngl must be 0 or more, got {args.ngl}")
    if args.prompt is not None and args.prompt < 1:
        raise WorkloadError(f"--prompt must be at least 1, got {args.prompt}")
    notices = list(loaded.notices)
    ollama = None
    if args.source.startswith(OLLAMA_PREFIX) or spec.source.startswith("Ollama"):
        ollama = spec.name.removeprefix(OLLAMA_PREFIX)
        if ggml:
            workload, said = launch.ollama_workload(spec, workload, budgets, seq_given=seq_given)
            notices += said
    margin = _margin(args)
    fit = None
    if args.fit:
        if not ggml or args.ngl is not None:
            raise WorkloadError("--fit is llama.cpp's: use --planner llamacpp, without --ngl")
        if args.fit_ctx is not None and args.fit_ctx < 1:
            raise WorkloadError(f"--fit-ctx must be at least 1, got {args.fit_ctx}")
        from vramgui.core.offload.fit import fit_llamacpp

        fit = fit_llamacpp(
            spec,
            workload,
            budgets,
            margin_bytes=margin,
            context_auto=args.fit_ctx is not None or not seq_given,
            min_context=args.fit_ctx or offload.DEFAULT_FIT_MIN_CONTEXT,
            host_ram_bytes=host.ram_bytes,
            layout=layout,
        )
    answer = plan_offload(
        spec,
        workload,
        planner,
        budgets,
        bandwidths=bandwidths,
        host=host,
        n_gpu_layers=args.ngl,
        layout=layout if ggml else None,
        margin_bytes=margin,
        prompt_tokens=args.prompt,
        fit=fit,
        curves=True,
    )
    doc = plan_document(
        spec,
        answer,
        gpu_name=gpus[0].name,
        gpu_names=[g.name for g in gpus],
        fit=fit,
        ollama=ollama,
    )
    doc["source"] = loaded.ref.to_dict()
    doc["notices"] = notices
    if engines.engine(workload.engine).startup is StartUp.SGLANG:
        # The placement is the planner's; the SGLang line serves the model whole, as chosen.
        doc["launch"].append(launch.sglang_settings(spec, workload).to_dict())
    if args.ngl is not None and args.ngl > most:
        # llama.cpp's own reading of a large -ngl (-ngl 99 is the usual "all of them").
        doc["notices"].append(
            f"--ngl {args.ngl} is more than {spec.name}'s {most} layers ({most - 1} blocks "
            f"and the output): all {most} go to the GPU, as llama.cpp does."
        )
    doc["assumed_speeds"] = [s.to_dict() for s in dict.fromkeys(speeds) if s.assumed]
    doc["notices"] += [assumed_text(s) for s in dict.fromkeys(speeds) if s.assumed]
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
        "notes": [
            *spec.warnings,
            "Layers are placed for inference only; training keeps them on the GPUs.",
        ],
    }


def _approximate(doc: dict[str, Any]) -> list[str]:
    return [APPROXIMATE] if is_approximate(doc) else []


def format_training(doc: dict[str, Any]) -> str:
    """A plain-text view of a training plan."""
    lines = [f"{printable(doc['model']['name'])}: training setup", *_approximate(doc), ""]
    for settings in doc["launch"]:
        lines += [f"{settings['engine']}:", settings["text"], *settings["notes"]]
    return "\n".join([*lines, *note_lines(doc)])


def _where(layer: dict[str, Any]) -> str:
    """A layer's device, with where the parts an override moved live (``gpu:0+cpu``)."""
    pieces = layer.get("pieces")
    if not pieces:
        return layer["device"]
    others = sorted({p["device"] for p in pieces} - {layer["device"]})
    return "+".join([layer["device"], *others])


def _runs(layers: list[dict[str, Any]]) -> list[tuple[str, str, int, int]]:
    """Consecutive units on the same device, as (names, device, weight bytes, KV bytes)."""
    runs: list[tuple[str, str, int, int, str]] = []
    for layer in layers:
        key = _where(layer)
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


# Where the host figures come from, as the table says it (answers.host).
_HOST_SOURCES = {
    "set": "--ram-gib / --disk-gbps",
    "this machine": "available on this machine now; --ram-gib sets it",
    "unknown": "unknown: no limit assumed; --ram-gib sets it",
    "default": "the NVMe default; --disk-gbps sets it",
}


def format_table(doc: dict[str, Any]) -> str:
    """A plain-text view of the plan for people."""
    s = doc["settings"]
    gpus = doc.get("gpus") or [doc["gpu"]]
    budgets = " + ".join(format_bytes(b) for b in doc["vram_budget_bytes"])
    lines = [
        f"{printable(doc['model']['name'])}: {doc['planner']} plan, GPU budget {budgets} "
        f"({', '.join(gpus)} speeds), {s['dtype']}"
        + (f" {s['quant']}" if s["quant"] != "none" else "")
        + f", batch {s['batch']}, seq {s['seq']:,}",
        *_approximate(doc),
        "",
    ]
    for names, device, size, kv in _runs(doc["layers"]):
        kv_text = f"  + KV {format_bytes(kv)}" if kv else ""
        lines.append(f"  {names:<18}{device:<11}{format_bytes(size):>12}{kv_text}")
    lines.append("")
    verdict = "fits" if doc["fits"] else "does NOT fit"
    margin = f", {format_bytes(doc['margin_bytes'])} kept free" if doc["margin_bytes"] else ""
    used = " + ".join(format_bytes(b) for b in doc["gpu_bytes"])
    lines.append(f"GPU layers: {doc['gpu_layers']}   GPU memory: {used} ({verdict}{margin})")
    for i, share in enumerate(doc.get("per_gpu", []) if len(doc["gpu_bytes"]) > 1 else []):
        lines.append(
            f"  GPU {i}: weights {format_bytes(share['weights_bytes'])}, KV "
            f"{format_bytes(share['kv_cache_bytes'])}, compute buffer "
            f"{format_bytes(share['buffers_bytes'])}"
        )
    host = doc["host"]
    ram = "unknown" if host["ram_bytes"] is None else format_bytes(host["ram_bytes"])
    lines.append(
        f"host RAM: {format_bytes(doc['host_bytes'])} of {ram} ({_HOST_SOURCES[host['ram_source']]})"
        f"   disk: {format_bytes(doc['disk_bytes'])} at {host['disk_bytes_per_s'] / GB:g} GB/s"
        f" ({_HOST_SOURCES[host['disk_source']]})   one-layer floor: "
        f"{format_bytes(doc['min_vram_bytes'])}"
    )
    from vramgui.answers.bounds import bound_text

    lines.append(
        f"decode: {doc['tokens_per_second']:,.2f} tokens/s ({bound_text(doc['bound'])})"
        f"   prefill: {doc['prefill_seconds']:,.2f} s"
    )
    turn = doc["compute_bound_batch"]
    if turn:
        lines.append(f"compute-bound from batch {turn:,}")
    if doc.get("chosen") == "fastest" and doc.get("best"):
        lines.append(
            "the launch lines below take the fastest placement that fits; the alternatives:"
        )
    for kind, label in (("layers", "whole layers"), ("experts", "experts in host RAM")):
        point = (doc.get("best") or {}).get(kind)
        if point:
            memory = " + ".join(format_bytes(b) for b in point["gpu_bytes"])
            lines.append(
                f"fastest that fits, {label}: {point['flag']}, {memory}, "
                f"{point['tokens_per_second']:,.1f} tokens/s"
            )
    for settings in doc["launch"]:
        lines += ["", f"{settings['engine']}:", settings["text"]]
    lines.extend(note_lines(doc))
    return "\n".join(lines)
