"""``vramgui estimate SOURCE [options]``: the estimate as a table, or as JSON (vramgui.estimate/1)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vramgui.cli import SUBCOMMANDS
from vramgui.cli.text import APPROXIMATE, is_approximate, model_line, note_lines
from vramgui.core import engines
from vramgui.core.dtypes import SCHEMES
from vramgui.core.errors import WorkloadError
from vramgui.core.units import GiB, format_bytes, format_duration, format_money, format_rate
from vramgui.core.units import parse_count as units_parse_count
from vramgui.core.vllm.encoders import towers_named
from vramgui.core.workload import (
    ATTENTIONS,
    DTYPES,
    ENGINES,
    GPU_ARCH_CHOICES,
    KV_DTYPES,
    LOOPS,
    METHOD_RECIPES,
    METHODS,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    ROPE_SCALINGS,
    SGLANG_VERSIONS,
    TRANSFORMERS_VERSIONS,
    VLLM_VERSIONS,
    Workload,
    default_engine,
    engine_quant,
)

if TYPE_CHECKING:
    from vramgui.core.model import ModelSpec
    from vramgui.hardware.gpus import CatalogGpu

# The estimator, the sources and the GPUs are imported where they run (see vramgui.cli): the
# options alone must not cost their import, as `vramgui plan --help` and `vramgui measure` build
# them too.

_DEFAULTS = Workload()
# What --rank ranks by: core.fit.RANK_KEYS (named here so that the options cost no estimator
# import; tests/cli/test_speed_cli.py checks that they agree).
RANK_KEYS = ("cost", "time")


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "estimate",
        help=SUBCOMMANDS["estimate"],
        description="Estimate GPU memory per GPU at the peak of inference or training.",
    )
    parser.add_argument(
        "source", help="config.json, model folder, .safetensors, .gguf, Hub id or catalog name"
    )
    add_estimate_options(parser)
    parser.add_argument(
        "--prompt",
        type=int,
        default=None,
        metavar="N",
        help="transformers: prompt tokens it prefills; the rest of --seq is generated; llama.cpp: "
        "the prompt of the time to first token (default: --seq, a prefill of the whole context)",
    )
    parser.add_argument(
        "--free-memory",
        action="store_true",
        help="fit local GPUs against their free memory now, not their total",
    )
    parser.add_argument(
        "--cheapest",
        action="store_true",
        help="rank catalog GPUs by the price of the fewest that fit (up to 8: one machine)",
    )
    parser.add_argument(
        "--rank",
        choices=RANK_KEYS,
        default=None,
        help="rank the catalog GPUs that fit (the fewest of each, up to 8) by the time or the "
        "rental cost of the work: per million tokens trained (a whole run with --train-tokens) "
        "or generated at --batch concurrent sequences",
    )
    add_custom_gpu_options(parser)
    add_speed_options(parser)
    add_host_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(run=run)


def add_custom_gpu_options(parser: argparse.ArgumentParser) -> None:
    """A card the catalog lacks, given by its memory and bandwidth (docs/cli.md)."""
    group = parser.add_argument_group(
        "a card the catalog lacks", "fit, headroom, largest batch and context, and speed on it"
    )
    group.add_argument(
        "--vram-gib",
        default=None,
        metavar="GIB[,GIB...]",
        help="its memory in GiB; several figures (24,12) give one card each",
    )
    group.add_argument(
        "--gpu-gbps", type=float, default=None, help="its peak memory bandwidth, GB/s (for speed)"
    )
    group.add_argument(
        "--gpu-tflops",
        type=float,
        default=None,
        help="its dense 16-bit tensor TFLOPS (for speed; decoding needs it as well)",
    )


def vram_budgets(text: str | None) -> list[int]:
    """``--vram-gib`` in bytes: one figure, or one per GPU ("24,12"); [] when not given.

    Raises:
        WorkloadError: not a list of positive numbers.
    """
    if text is None:
        return []
    try:
        figures = [float(value) for value in str(text).split(",")]
    except ValueError:
        raise WorkloadError(
            f"--vram-gib takes GiB, one figure or one per GPU (24,12); got {text!r}"
        ) from None
    for figure in figures:
        if not 0 < figure < 1e9:
            raise WorkloadError(f"--vram-gib must be a positive number, got {figure}")
    return [round(figure * GiB) for figure in figures]


def custom_gpus(args: argparse.Namespace) -> list[CatalogGpu]:
    """The cards ``--vram-gib`` (with ``--gpu-gbps``, ``--gpu-tflops``) describes, as catalog
    entries named "Custom 20 GiB, 500 GB/s".

    Raises:
        VramguiError: a figure that is not a positive number, or a bandwidth or a rate without
            the memory.
    """
    from vramgui.hardware.errors import CardFigureError
    from vramgui.hardware.gpus import custom_gpu

    budgets = vram_budgets(args.vram_gib)
    if not budgets and (args.gpu_gbps is not None or args.gpu_tflops is not None):
        raise WorkloadError("--gpu-gbps and --gpu-tflops describe a card: give its --vram-gib")
    try:
        return [custom_gpu(budget / GiB, args.gpu_gbps, args.gpu_tflops) for budget in budgets]
    except CardFigureError as exc:
        flag = {"memory": "--vram-gib", "bandwidth": "--gpu-gbps"}.get(exc.figure, "--gpu-tflops")
        raise WorkloadError(
            f"{flag} must be a positive number a card can have, got {exc.value:g}"
        ) from None


def add_speed_options(parser: argparse.ArgumentParser) -> None:
    """Training time and cost: how much to train and at what price (docs/cli.md, "speed")."""
    group = parser.add_argument_group(
        "training time and cost (with --mode training and a --gpu the catalog knows)"
    )
    group.add_argument(
        "--train-tokens",
        type=parse_count,
        default=None,
        metavar="N",
        help="tokens to train in all (200M, 1.5B, 2e9): gives wall time, GPU-hours and cost",
    )
    group.add_argument(
        "--dataset-tokens",
        type=parse_count,
        default=None,
        metavar="N",
        help="tokens in one epoch of the dataset (with --epochs, instead of --train-tokens)",
    )
    group.add_argument(
        "--epochs", type=float, default=None, help="passes over --dataset-tokens (default 1)"
    )
    group.add_argument(
        "--price-per-hour",
        type=float,
        default=None,
        metavar="PRICE",
        help="price of one GPU for one hour (default: the catalog's on-demand rental price)",
    )
    group.add_argument(
        "--currency", default="USD", help="currency of --price-per-hour (default USD)"
    )
    group.add_argument(
        "--matmul-utilization",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of the GPU's 16-bit tensor peak the matrix products reach, 0-1 (default: "
        "measured on this GPU by `vramgui measure --device cuda`, else the architecture's "
        "published figure)",
    )


def parse_count(text: str) -> int:
    """A token count as people write it (``core.units.parse_count``), for argparse.

    Raises:
        argparse.ArgumentTypeError: not a positive count.
    """
    try:
        return units_parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a token count: {text!r} (at least 1; e.g. 200M, 1.5B)"
        ) from None


def train_tokens_from_args(args: argparse.Namespace) -> int | None:
    """The tokens to train: --train-tokens, or --epochs over --dataset-tokens.

    Raises:
        WorkloadError: both ways given, or --epochs without --dataset-tokens.
    """
    if args.dataset_tokens is None:
        if args.epochs is not None:
            raise WorkloadError("--epochs needs --dataset-tokens (the tokens in one epoch)")
        return args.train_tokens
    if args.train_tokens is not None:
        raise WorkloadError("give --train-tokens or --dataset-tokens with --epochs, not both")
    epochs = 1.0 if args.epochs is None else args.epochs
    if not 0 < epochs < 1e6:
        raise WorkloadError(f"--epochs must be positive, got {epochs}")
    return max(1, round(epochs * args.dataset_tokens))


def add_host_options(parser: argparse.ArgumentParser) -> None:
    """The host RAM and disk a llama.cpp setup that does not fit its GPUs is placed with."""
    group = parser.add_argument_group(
        "host (llama.cpp places what the GPUs do not hold in host RAM, then on disk)"
    )
    group.add_argument(
        "--ram-gib", type=float, default=None, help="host RAM for weights (default: available now)"
    )
    group.add_argument(
        "--disk-gbps", type=float, default=None, help="disk read speed, GB/s (default: NVMe)"
    )


def host_from_args(args: argparse.Namespace) -> Any:
    """``answers.host.HostSettings`` from --ram-gib and --disk-gbps (this machine's where not
    given).

    Raises:
        WorkloadError: a figure that is not positive.
    """
    from vramgui.answers.host import host_settings
    from vramgui.core.units import GB

    for flag, value in (("ram-gib", args.ram_gib), ("disk-gbps", args.disk_gbps)):
        if value is not None and not 0 < value < 1e9:
            raise WorkloadError(f"--{flag} must be a positive number, got {value}")
    return host_settings(
        None if args.ram_gib is None else round(args.ram_gib * GiB),
        None if args.disk_gbps is None else args.disk_gbps * GB,
    )


def rates_from_args(
    gpu_name: str,
    dtype: str,
    args: argparse.Namespace,
    custom: Sequence[CatalogGpu] = (),
) -> Any:
    """``answers.rates.Rates`` of ``gpu_name`` (a catalog GPU, or one of the ``custom`` cards)
    computing in ``dtype``, with --price-per-hour and --matmul-utilization.

    Raises:
        NoRates: the GPU cannot be timed (a custom card names the flag it lacks).
        WorkloadError: a utilization outside (0, 1].
    """
    from vramgui.answers.rates import NoRates, rates_for, set_utilization

    card = next((card for card in custom if card.name == gpu_name), None)
    if card is not None and not (card.memory_bandwidth_gbps and card.bf16_tflops):
        missing = "--gpu-tflops" if card.memory_bandwidth_gbps else "--gpu-gbps"
        raise NoRates(gpu_name, f"{gpu_name} needs a bandwidth and a tensor rate (give {missing})")
    from vramgui.core.speed import Price
    from vramgui.hardware.calibration import measured_utilization

    price = None
    if args.price_per_hour is not None:
        price = Price(args.price_per_hour, args.currency, "set with --price-per-hour")
    utilization = None
    if args.matmul_utilization is not None:
        if not 0 < args.matmul_utilization <= 1:
            raise WorkloadError(
                f"--matmul-utilization must be in (0, 1], got {args.matmul_utilization}"
            )
        utilization = set_utilization(args.matmul_utilization, "--matmul-utilization")
    return rates_for(
        gpu_name,
        dtype,
        catalog=None if card is None else (card,),
        price=price,
        utilization=utilization,
        measured=measured_utilization,
    )


def add_estimate_options(parser: argparse.ArgumentParser) -> None:
    """The options of the command line's contract (docs/cli.md), shared by estimate, plan and
    profile save.

    Options whose default depends on other choices (the engine on the quantization and the model,
    the precision and checkpointing on the training method) default to None here and are
    resolved by ``workload_from_args``.
    """
    d = _DEFAULTS
    parser.add_argument(
        "--mode", choices=MODES, default=d.mode, help="serve the model, or train it for a step"
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=d.batch,
        help="sequences at once (per GPU for data-parallel training)",
    )
    parser.add_argument(
        "--seq",
        "--max-model-len",
        type=int,
        default=None,
        help=f"context (inference) or sequence length (training), at most the model's context "
        f"(default: {d.seq:,}, or the model's context when shorter)",
    )
    parser.add_argument(
        "--rope-scaling",
        choices=ROPE_SCALINGS,
        default=d.rope_scaling,
        help="RoPE scaling to run past the model's context, as llama.cpp, vLLM, SGLang and "
        "transformers take it (default: none, the config's own scaling if it has one)",
    )
    parser.add_argument(
        "--rope-factor",
        type=float,
        default=d.rope_factor,
        help="how many times --rope-scaling stretches the context (YaRN: the original context "
        "times it is the longest --seq, as vLLM derives its max_model_len)",
    )
    parser.add_argument(
        "--rope-original-context",
        "--yarn-orig-ctx",
        type=int,
        default=None,
        help="the context --rope-scaling stretches (default: the config's, its scaling's "
        "original_max_position_embeddings or else max_position_embeddings)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, default=d.dtype, help="dtype of unquantized weights and compute"
    )
    named = ", ".join(n for n, s in SCHEMES.items() if s.family not in ("none", "gguf"))
    parser.add_argument(
        "--quant",
        default=d.quant,
        help=f"weight quantization, as the libraries name it: none (a pre-quantized checkpoint: "
        f"as it is stored), {named}, a GPTQ / AWQ / w4a16 group size (gptq-int4-g32), or a "
        "GGUF type such as Q4_K_M; a scheme other than the checkpoint's own is estimated in its "
        "place, with a note",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="inference engine (default: llamacpp for GGUF, else transformers)",
    )
    parser.add_argument(
        "--kv-dtype",
        "--kv-cache-dtype",
        choices=KV_DTYPES,
        default=d.kv_dtype,
        help="KV cache dtype; auto follows --dtype (llama.cpp: f16), or a checkpoint's FP8 "
        "KV-cache scheme where the engine takes it (vLLM, SGLang)",
    )
    parser.add_argument(
        "--attention", choices=ATTENTIONS, default=d.attention, help="attention implementation"
    )
    parser.add_argument(
        "--method", choices=METHODS, default=d.method, help="training: what is trained"
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="training precision (default: the method's usual recipe: mixed for full and "
        "QLoRA, pure for LoRA; QLoRA's mixed is prepare_model_for_kbit_training's fp32 upcast of "
        "what is not quantized, pure keeps it in --dtype)",
    )
    parser.add_argument(
        "--optimizer", choices=OPTIMIZERS, default=d.optimizer, help="training optimizer"
    )
    parser.add_argument(
        "--grad-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="recompute activations in backward (default: on for LoRA and QLoRA, as their usual "
        "recipes run, off for a full fine-tune)",
    )
    parser.add_argument(
        "--grad-accum",
        type=int,
        default=d.grad_accum,
        help="micro-batches per optimizer step (no change to peak memory)",
    )
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default=d.loop,
        help="training loop: trainer = transformers' Trainer (outputs dropped once the loss is "
        "taken); custom = outputs = model(**batch); loss = outputs.loss; loss.backward() "
        "(the logits stay alive through backward and the optimizer step)",
    )
    parser.add_argument("--lora-rank", type=int, default=d.lora_rank, help="LoRA rank r")
    parser.add_argument(
        "--lora-targets",
        default=",".join(d.lora_targets),
        help="modules LoRA adapts, comma-separated, or all-linear",
    )
    parser.add_argument("--gpus", type=int, default=d.gpus, help="GPUs in total")
    parser.add_argument(
        "--zero", type=int, choices=(0, 1, 2, 3), default=d.zero, help="DeepSpeed ZeRO stage"
    )
    parser.add_argument("--fsdp", action="store_true", help="PyTorch FSDP full shard")
    parser.add_argument(
        "--tp", "--tensor-parallel-size", type=int, default=d.tp, help="tensor-parallel degree"
    )
    parser.add_argument(
        "--pp", "--pipeline-parallel-size", type=int, default=d.pp, help="pipeline-parallel degree"
    )
    parser.add_argument(
        "--cpu-offload",
        action="store_true",
        help="optimizer states (and ZeRO-3 parameters) in host RAM",
    )
    parser.add_argument(
        "--transformers-version",
        choices=TRANSFORMERS_VERSIONS,
        default=d.transformers_version,
        help="the transformers release to follow: from 5.0 a MoE block's experts are stacked "
        "parameters, which bitsandbytes (QLoRA, --quant nf4 / int8) leaves in 16 bits (fp32 "
        "after QLoRA's upcast); before, each expert is a linear layer it quantizes",
    )
    add_vllm_options(parser)
    add_sglang_options(parser)
    add_llamacpp_options(parser)
    parser.add_argument(
        "--overhead-gib",
        type=float,
        default=None,
        help="runtime overhead per GPU (default: measured)",
    )
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="NAME|local",
        help="fit check against a catalog GPU or the local GPUs (repeatable)",
    )
    parser.add_argument(
        "--gpu-arch",
        choices=GPU_ARCH_CHOICES,
        default=None,
        help="the GPU generation the engine runs on, which decides what it does with FP8, FP4 "
        "and MXFP4 weights (default: the first --gpu's; auto: one that runs the format natively)",
    )
    parser.add_argument(
        "--mtp",
        action="store_true",
        help="load the checkpoint's multi-token-prediction layers (vLLM MTP speculative decoding)",
    )


def add_vllm_options(parser: argparse.ArgumentParser) -> None:
    """vLLM's own knobs, named as ``vllm serve`` names them (docs/cli.md)."""
    d = _DEFAULTS
    group = parser.add_argument_group("vLLM", "what `vllm serve` takes (with --engine vllm)")
    group.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=d.gpu_memory_utilization,
        help="share of GPU memory vLLM takes",
    )
    group.add_argument(
        "--max-num-seqs",
        type=int,
        default=None,
        help="requests vLLM runs at once (default: vLLM's for the GPU, 256 or 1024)",
    )
    group.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        help="tokens per scheduler step, the size vLLM profiles (default: vLLM's for the GPU, "
        "2048 or 8192)",
    )
    group.add_argument(
        "--enforce-eager", action="store_true", help="no CUDA graphs (saves their memory)"
    )
    group.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="prefix caching on or off (default: the version's: off for models with state "
        "layers up to 0.24); with state layers (Mamba, linear attention) it keeps more states "
        "per request",
    )
    group.add_argument(
        "--enable-lora", action="store_true", help="reserve LoRA adapter slots on the GPU"
    )
    group.add_argument(
        "--max-loras", type=int, default=d.max_loras, help="LoRA adapters held on the GPU at once"
    )
    group.add_argument(
        "--max-lora-rank",
        type=int,
        default=d.max_lora_rank,
        help="largest LoRA rank vLLM reserves room for (1, 8, 16, 32, 64, 128, 256, 320, 512)",
    )
    group.add_argument(
        "--speculative-model",
        default=None,
        metavar="SOURCE",
        help="speculative decoding with this draft model (catalog name, Hub id, folder)",
    )
    group.add_argument(
        "--num-speculative-tokens",
        type=int,
        default=d.num_speculative_tokens,
        help="tokens proposed per step when speculating",
    )
    group.add_argument(
        "--cpu-offload-gb",
        type=float,
        default=d.cpu_offload_gb,
        help="GiB of weights per GPU vLLM keeps in host RAM and streams in",
    )
    group.add_argument(
        "--vllm-version",
        choices=VLLM_VERSIONS,
        default=d.vllm_version,
        help="the vLLM version whose start-up rules to follow (0.20: 0.20.2 and later)",
    )


def add_llamacpp_options(parser: argparse.ArgumentParser) -> None:
    """llama.cpp's batch sizes, named as ``llama-server`` names them (docs/cli.md)."""
    d = _DEFAULTS
    group = parser.add_argument_group(
        "llama.cpp", "what `llama-server` takes (with --engine llamacpp; Ollama: num_batch)"
    )
    group.add_argument(
        "--ubatch-size",
        type=int,
        default=d.ubatch_size,
        metavar="N",
        help="physical micro-batch (-ub): the compute buffer is sized for one micro-batch of "
        "this many tokens",
    )
    group.add_argument(
        "--batch-size",
        type=int,
        default=d.batch_size,
        metavar="N",
        help="logical batch (-b); micro-batches are at most this large",
    )


def add_sglang_options(parser: argparse.ArgumentParser) -> None:
    """SGLang's own knobs, named as ``python -m sglang.launch_server`` names them (docs/cli.md)."""
    group = parser.add_argument_group(
        "SGLang", "what `python -m sglang.launch_server` takes (with --engine sglang)"
    )
    group.add_argument(
        "--mem-fraction-static",
        type=float,
        default=None,
        help="share of the GPU's free memory SGLang's weights and KV pool take (default: "
        "SGLang's for the GPU); --gpu-memory-utilization is vLLM's and does not apply",
    )
    group.add_argument(
        "--sglang-version",
        choices=SGLANG_VERSIONS,
        default=_DEFAULTS.sglang_version,
        help="the SGLang version whose default --mem-fraction-static to follow (0.4.4: 0.4.0 to "
        "0.4.8; 0.4.9: 0.4.9 and 0.4.10; 0.5.6: the 0.5 line)",
    )


def workload_from_args(
    args: argparse.Namespace, stored: str | None = None, context: int | None = None
) -> Workload:
    """The Workload the options describe, with the defaults that depend on other choices resolved.

    Args:
        args: the parsed options.
        stored: the quantization the model is stored in (``ModelSpec.quantization``), if known:
            a GGUF file is served by llama.cpp unless ``--engine`` says otherwise.
        context: the model's longest context, if known: the default ``--seq`` stops there.

    Raises:
        WorkloadError: invalid values, or an engine that does not run the chosen quantization.
    """
    overhead = None
    if args.overhead_gib is not None:
        if not 0 <= args.overhead_gib < 1 << 20:
            raise WorkloadError(f"--overhead-gib must be a size in GiB, got {args.overhead_gib}")
        overhead = round(args.overhead_gib * GiB)
    recipe = METHOD_RECIPES[args.method] if args.mode == "training" else {}
    quant = args.quant
    if quant == "none":
        quant = recipe.get("quant", quant)
    engine = args.engine or default_engine(quant, stored)
    if args.mode == "inference":
        quant = engine_quant(engine, quant, stored)
    seq = args.seq
    if seq is None:
        seq = min(_DEFAULTS.seq, context) if context else _DEFAULTS.seq
    speculative = "draft" if args.speculative_model else "none"
    prompt = getattr(args, "prompt", None)  # estimate's, for the prefill's memory; plan's too
    if prompt is not None and prompt > seq:
        raise WorkloadError(
            f"--prompt {prompt:,} is longer than the context --seq {seq:,}, which holds the "
            "prompt and the generated tokens"
        )
    gpu_arch = args.gpu_arch
    if gpu_arch is None:
        from vramgui.hardware.gpus import architecture_of

        gpu_arch = architecture_of(args.gpu[0]) if args.gpu else "auto"
    return Workload(
        mode=args.mode,
        batch=args.batch,
        seq=seq,
        dtype=args.dtype,
        quant=quant,
        engine=engine,
        kv_dtype=args.kv_dtype,
        attention=args.attention,
        method=args.method,
        precision=args.precision or recipe.get("precision", _DEFAULTS.precision),
        optimizer=args.optimizer,
        grad_checkpointing=(
            args.grad_checkpointing
            if args.grad_checkpointing is not None
            else recipe.get("grad_checkpointing", False)
        ),
        grad_accum=args.grad_accum,
        lora_rank=args.lora_rank,
        lora_targets=tuple(t.strip() for t in args.lora_targets.split(",") if t.strip()),
        gpus=args.gpus,
        zero=args.zero,
        fsdp=args.fsdp,
        tp=args.tp,
        pp=args.pp,
        overhead_bytes=overhead,
        gpu_memory_utilization=args.gpu_memory_utilization,
        cpu_offload=args.cpu_offload,
        loop=args.loop,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enforce_eager=args.enforce_eager,
        enable_lora=args.enable_lora,
        max_loras=args.max_loras,
        max_lora_rank=args.max_lora_rank,
        speculative=speculative,
        num_speculative_tokens=args.num_speculative_tokens,
        draft_model=args.speculative_model or "",
        cpu_offload_gb=args.cpu_offload_gb,
        enable_prefix_caching=args.enable_prefix_caching,
        vllm_version=args.vllm_version,
        gpu_arch=gpu_arch,
        mtp=args.mtp,
        mem_fraction_static=args.mem_fraction_static,
        sglang_version=args.sglang_version,
        rope_scaling=args.rope_scaling,
        rope_factor=args.rope_factor,
        rope_original_context=args.rope_original_context,
        ubatch_size=args.ubatch_size,
        batch_size=args.batch_size,
        prompt=prompt,
        transformers_version=args.transformers_version,
    )


def load_for(args: argparse.Namespace) -> tuple[Any, Workload]:
    """The model ``args.source`` names and the workload for it.

    The options are checked before the model is read (no network for a typing mistake), and
    again once its stored quantization is known.

    Raises:
        VramguiError: bad options, a model that cannot be read, or options it cannot take.
    """
    from vramgui.core.rope import check_context
    from vramgui.sources.resolve import load_model

    workload_from_args(args)
    loaded = load_model(args.source)
    spec = loaded.spec
    workload = workload_from_args(args, spec.quantization, spec.facts.max_position_embeddings)
    workload.check_checkpoint(spec.quantization)
    check_context(spec.name, spec.facts, workload)
    return loaded, workload


def cheapest_catalog(
    spec: ModelSpec, workload: Workload, top: int = 5, draft: ModelSpec | None = None
) -> list[dict[str, Any]]:
    """The catalog GPUs whose fewest-that-fit cost least (NVIDIA-queryable and priced ones)."""
    from vramgui.core.fit import cheapest
    from vramgui.hardware.gpus import load_catalog

    offers = [(g.name, g.capacity_bytes(), g.typical_price_usd) for g in load_catalog()]
    return [
        {"gpu": name, "count": count, "total_price_usd": price}
        for name, count, price in cheapest(spec, workload, offers, draft=draft)[:top]
    ]


def load_draft(workload: Workload) -> ModelSpec | None:
    """The draft model ``--speculative-model`` names, loaded like the model itself.

    Raises:
        VramguiError: a draft that cannot be read.
    """
    if workload.speculative != "draft" or not workload.draft_model:
        return None
    from vramgui.sources.resolve import load_model

    return load_model(workload.draft_model).spec


def ranked_catalog(
    spec: ModelSpec,
    workload: Workload,
    by: str,
    *,
    train_tokens: int | None,
    args: argparse.Namespace,
    draft: ModelSpec | None = None,
) -> list[dict[str, Any]]:
    """The catalog's NVIDIA GPUs that fit, ranked by time or cost (``answers.timing``), timed
    with --price-per-hour, --matmul-utilization and the host options."""
    from vramgui.answers.rates import NoRates, timing_dtype
    from vramgui.answers.timing import rank_setups
    from vramgui.hardware.gpus import load_catalog

    offers, dtype = [], timing_dtype(workload)
    for gpu in load_catalog():
        if not gpu.nvml:
            continue
        try:
            offers.append((gpu.name, gpu.capacity_bytes(), rates_from_args(gpu.name, dtype, args)))
        except NoRates:
            continue
    ranked = rank_setups(
        spec,
        workload,
        offers,
        by=by,
        host=host_from_args(args),
        train_tokens=train_tokens,
        draft=draft,
    )
    return [r.to_dict() for r in ranked]


def run(args: argparse.Namespace) -> int:
    from vramgui.answers.documents import estimate_json
    from vramgui.hardware.capacity import resolve_capacities

    custom = custom_gpus(args)
    loaded, workload = load_for(args)
    spec, draft = loaded.spec, load_draft(workload)
    capacities = resolve_capacities(args.gpu, args.free_memory)
    capacities += [(card.name, card.capacity_bytes()) for card in custom]
    if capacities and workload.gpu_arch == "auto" and args.gpu_arch is None:
        from vramgui.hardware.gpus import architecture_of

        # "local": the generation of the first GPU NVML names
        workload = workload.with_(gpu_arch=architecture_of(capacities[0][0]))
    flagged: dict[str, Any] = {}
    if args.cheapest:
        flagged["cheapest"] = cheapest_catalog(spec, workload, draft=draft)
    train_tokens = train_tokens_from_args(args)
    if train_tokens is not None and (workload.mode != "training" or not (capacities or args.rank)):
        raise WorkloadError(
            "--train-tokens and --dataset-tokens need --mode training and a --gpu (or --rank) "
            "to time the run on"
        )
    if args.rank:
        flagged["ranked"] = ranked_catalog(
            spec, workload, args.rank, train_tokens=train_tokens, args=args, draft=draft
        )
    doc = estimate_json(
        loaded,
        workload,
        capacities,
        rates=lambda gpu, dtype: rates_from_args(gpu, dtype, args, custom),
        host=host_from_args(args),
        train_tokens=train_tokens,
        draft=draft,
        flagged=flagged,
        custom=custom,
    )
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(format_table(doc))
    return 0


def _stack_text(settings: dict[str, Any]) -> str:
    """The settings line's software: the engine (transformers with its release, and the prompt
    it prefills; llama.cpp with its batch sizes)."""
    eng = engines.engine(settings["engine"] if settings["mode"] == "inference" else "transformers")
    if eng.ggml:
        return f", {eng.key} -ub {settings.get('ubatch-size')} -b {settings.get('batch-size')}"
    if not eng.eager_pytorch:
        return f", {eng.key}"
    prompt = settings.get("prompt")
    text = f", transformers {settings.get('transformers-version')}"
    return text + (f", prompt {prompt:,}" if prompt and settings["mode"] == "inference" else "")


def format_table(doc: dict[str, Any]) -> str:
    """A plain-text view of the document for people."""
    from vramgui.core.estimate import COMPONENTS

    model, per_gpu = doc["model"], doc["per_gpu"]
    s = doc["settings"]
    approximate = is_approximate(doc)
    lines = [
        model_line(model),
        f"{s['mode']}: batch {s['batch']}, seq {s['seq']:,}, {s['dtype']}"
        + (f", {s['quant']}" if s["quant"] != "none" else "")
        + (f", {s['method']}, {s['optimizer']}" if s["mode"] == "training" else "")
        + _stack_text(s)
        + (f", {doc['gpus']} GPUs" if doc["gpus"] > 1 else ""),
        "",
    ]
    for name in (*COMPONENTS, *sorted(set(per_gpu["components"]) - set(COMPONENTS))):
        value = per_gpu["components"].get(name)
        if value:
            lines.append(f"  {name.replace('_', ' '):<22}{format_bytes(value):>14}")
    total = ("≈ " if approximate else "") + format_bytes(per_gpu["total_bytes"])
    lines.append(f"  {'total per GPU':<22}{total:>14}   (peak: {per_gpu['phase']})")
    if approximate:
        lines.append(f"  {APPROXIMATE}")
    if doc["host_bytes"]:
        lines.append(f"  {'host RAM':<22}{format_bytes(doc['host_bytes']):>14}")
    lines.append("")
    # The classic rules size the whole model; beside per-GPU figures they must say so.
    whole = f" (the whole model; the figures above are per GPU of {doc['gpus']})"
    lines.append("Rules of thumb" + (whole if doc["gpus"] > 1 else "") + ":")
    for name, value in doc["rules_of_thumb"].items():
        lines.append(f"  {name:<22}{format_bytes(value):>14}")
    largest = doc.get("largest_fitting", {})
    needed = doc.get("gpus_needed", {})
    for row in doc["fit"]:
        more = _more_gpus_text(row, needed.get(row["gpu"]), doc["settings"])
        lines.append(_fit_line(row, largest.get(row["gpu"], {}), more))
    speed = doc.get("speed")
    if speed:
        lines.extend(speed_lines(speed, doc["gpus"]))
    serving = doc.get("serving")
    if serving:
        lines.append(serving_line(serving, doc["gpus"]))
        # What the speeds rest on and where they are approximate (a mixture of experts' prompt).
        lines.extend(f"  speed: {note}" for note in serving.get("notes", ()))
    ranked = doc.get("ranked")
    if ranked is not None:
        lines.extend(ranked_lines(ranked, doc["settings"]))
    from vramgui.answers.advice import saving_text

    for advice in doc.get("advice", []):
        verdict = "fits" if advice["fits"] else "does not fit yet"
        gives = saving_text(
            advice["saves_bytes"], advice["kv_pool_bytes"], advice["kv_pool_tokens"]
        )
        lines.append(
            f"advice: {advice['title']} ({verdict}; {gives + '; ' if gives else ''}"
            f"{advice['cost']})"
        )
    for offer in doc.get("cheapest", []):
        lines.append(
            f"cheapest: {offer['count']} x {offer['gpu']} (about ${offer['total_price_usd']:,.0f})"
        )
    lines.extend(note_lines(doc))
    return "\n".join(lines)


def _more_gpus_text(row: dict[str, Any], needed: int | None, settings: dict[str, Any]) -> str:
    """``; N GPUs with <how the setup shards over them> would <fit it>``, for a GPU the setup
    does not fit (``core.fit.gpus_needed``'s count, sharded as ``core.fit.sharded`` shards)."""
    if row["fits"] or not needed:
        return ""
    if settings["mode"] == "training":
        zero = settings["zero"] or (3 if needed > 1 else 0)
        how = "FSDP" if settings["fsdp"] else (f"ZeRO-{zero}" if zero else "data parallelism")
    else:
        eng = engines.engine(settings["engine"])
        if eng.tensor_parallel_flag:
            how = f"{eng.tensor_parallel_flag} {needed}"
        elif not eng.splits_tensors:
            how = "the layers split across them"
        else:
            how = "tensor parallelism"
    vllm = row.get("vllm")
    if vllm is not None and not vllm["starts"]:
        would = "would start it"
    elif row.get("sglang") is not None:
        would = "would serve it"
    else:
        would = "would fit it"
    return f"; {needed} GPUs with {how} {would}"


def _fit_line(row: dict[str, Any], best: dict[str, Any], more: str) -> str:
    """One GPU's verdict: fits or not, and under vLLM whether it starts and what its pool holds;
    ``more``: the GPUs of its kind that would fit (:func:`_more_gpus_text`)."""
    capacity = format_bytes(row["capacity_bytes"])
    size = f"({capacity}, headroom {format_bytes(row['headroom_bytes'])})"
    sglang = row.get("sglang")
    if sglang is not None:
        if not sglang["serves"]:
            # The headroom of a refusal is the GPU's shortfall on the smallest that serves.
            short = format_bytes(-row["headroom_bytes"])
            size = f"({capacity}; {short} smaller than the GPU SGLang needs to serve the context)"
        return _sglang_fit_line(row, sglang, more, size)
    vllm = row.get("vllm")
    if vllm is not None and not vllm["starts"]:
        if row["headroom_bytes"] >= -1:
            # Refused for a reason other than memory (more sequences than state blocks).
            size = f"({capacity})"
        else:
            # The headroom of a refusal is what vLLM's own check lacks (its error, below).
            short = format_bytes(-row["headroom_bytes"])
            size = f"({capacity}; {short} short of vLLM's start-up check)"
    if vllm is None:
        verdict = "fits" if row["fits"] else "does not fit"
        if best.get("seq"):
            verdict += f"; largest context {best['seq']:,}"
            # No batch fits where the context as set does not (the JSON's batch is then null).
            if best.get("batch"):
                verdict += f", largest batch {best['batch']:,}"
        return _fit_tail(row, verdict, size, more)
    # Towers whose profile is not counted leave every figure an upper bound, a start uncertain.
    towers = towers_named(vllm["unmodelled"]) if "unmodelled" in vllm else ""
    at_most = "at most " if towers else ""
    if vllm["starts"] and row["fits"]:
        start = (
            f"vLLM starts unless the profile of its {towers} (not counted) needs more"
            if towers
            else "vLLM starts"
        )
        verdict = (
            f"{start}; KV pool {at_most}{vllm['kv_pool_tokens']:,} tokens, "
            f"{at_most}{vllm['max_concurrency']:.2f} requests at the context at once"
        )
        if best.get("seq"):
            verdict += f"; largest --max-model-len {at_most}{best['seq']:,}"
    else:
        verdict = "vLLM would not start" if not vllm["starts"] else "does not fit"
        if vllm["largest_max_model_len"]:
            verdict += (
                f"; largest --max-model-len that starts {at_most}{vllm['largest_max_model_len']:,}"
            )
    return _fit_tail(row, verdict, size, more)


def _fit_tail(row: dict[str, Any], verdict: str, size: str, more: str) -> str:
    """A GPU's line from its verdict: the GPUs needed, its size and vLLM's own error."""
    line = f"{row['gpu']}: {verdict}{more} {size}"
    vllm = row.get("vllm")
    if vllm is not None and vllm["error"]:
        line += f"\n  vLLM: {vllm['error']}"
    return line


def _sglang_fit_line(row: dict[str, Any], sglang: dict[str, Any], more: str, size: str) -> str:
    """One GPU's verdict under SGLang: whether it starts, its pool, the context it serves."""
    if sglang["serves"]:
        verdict = (
            f"SGLang starts; KV pool {sglang['kv_pool_tokens']:,} tokens, "
            f"{sglang['max_concurrency']:.2f} requests at the context at once"
        )
    elif sglang["starts"]:
        verdict = "SGLang starts but its pool is shorter than the context"
    else:
        verdict = "SGLang would not start"
    if sglang["largest_context_length"]:
        verdict += f"; largest --context-length served {sglang['largest_context_length']:,}"
    verdict += f"{more} (--mem-fraction-static {sglang['mem_fraction_static']:g})"
    line = f"{row['gpu']}: {verdict} {size}"
    if sglang["error"]:
        line += f"\n  SGLang: {sglang['error']}"
    return line


def speed_lines(speed: dict[str, Any], gpus: int) -> list[str]:
    """The table's lines for the ``speed`` block: throughput, and the run's time and cost."""
    u = speed["utilization"]
    where = f"{gpus} x {speed['gpu']}" if gpus > 1 else speed["gpu"]
    placement = speed.get("placement")
    if placement and placement["kind"] != "as set":
        where = f"{placement['text']} (the setup as chosen does not fit)"
    basis = {
        "default": f"default for {u.get('detail', 'this GPU')}",
        "unmeasured": "a guess: no measurement on this architecture",
        "measured": f"measured: {u.get('detail', '')}",
        "set": "set with --matmul-utilization",
    }.get(u["source"], u["source"])
    lines = [
        f"speed on {where}: {format_rate(speed['tokens_per_second'])} tokens/s, "
        f"{speed['step_seconds']:.2f} s a step (MFU {speed['mfu']:.0%}; matrix products at "
        f"{u['matmul']:.0%} of peak, {basis})"
    ]
    if "time_seconds" in speed:
        text = (
            f"{speed['train_tokens']:,} tokens: {format_duration(speed['time_seconds'])}, "
            f"{speed['gpu_hours']:,.1f} GPU-hours"
        )
        price = speed.get("price")
        if speed["cost"] is not None and price:
            dated = f", {price['date']}" if price.get("date") else ""
            text += (
                f", {format_money(speed['cost'], price['currency'])} at "
                f"{format_money(price['per_gpu_hour'], price['currency'])} per GPU-hour "
                f"({price['source']}{dated})"
            )
        else:
            text += " (no price for this GPU: --price-per-hour sets one)"
        lines.append(text)
    return lines


def ranked_lines(ranked: list[dict[str, Any]], settings: dict[str, Any]) -> list[str]:
    """The table's lines for ``--rank``: one setup a line, best first."""
    if not ranked:
        return ["ranked: no catalog GPU fits this setup (up to 8 of a kind)"]
    made = "trained" if settings["mode"] == "training" else "generated"
    lines = [f"ranked ({settings['mode']}):"]
    for place, r in enumerate(ranked, 1):
        text = f"  {place}. {r['count']} x {r['gpu']}: {r['tokens_per_second']:,.0f} tokens/s"
        if r.get("basis"):
            text += f" ({r['basis']})"
        price = r["price"]
        if r["time_seconds"] is not None:
            text += f", {format_duration(r['time_seconds'])}"
        if r["cost"] is not None and price:
            text += f", {format_money(r['cost'], price['currency'])}"
        if r["cost_per_million_tokens"] is not None and price:
            per = format_money(r["cost_per_million_tokens"], price["currency"])
            text += f" ({per} per million tokens {made})"
        elif price is None:
            text += " (no price)"
        lines.append(text)
    return lines


def serving_line(serving: dict[str, Any], gpus: int) -> str:
    """The table's line for the ``serving`` block: decode speed and cost per million tokens,
    on the placement timed when it is not the setup as chosen."""
    from vramgui.answers.bounds import bound_text

    where = f"{gpus} x {serving['gpu']}" if gpus > 1 else serving["gpu"]
    placement = serving.get("placement")
    if placement and placement["kind"] != "as set":
        where = f"{placement['text']} (the setup as chosen does not fit)"
    text = (
        f"serving on {where}: {format_rate(serving['tokens_per_second'])} tokens/s generated at batch "
        f"{serving['concurrency']} ({bound_text(serving['bound'])} decode at full context"
        + (f", {serving['basis']})" if serving.get("basis") else ")")
    )
    host_range = serving.get("host_range_tokens_per_second")
    if host_range:
        text += f", {format_rate(host_range[0])} to {format_rate(host_range[1])} by the host's CPU"
    if serving.get("time_to_first_token_seconds") is not None:
        text += (
            f", first token after {serving['time_to_first_token_seconds']:,.2f} s "
            f"({serving['prompt_tokens']:,}-token prompt)"
        )
    price = serving.get("price")
    if serving["cost_per_million_tokens"] is not None and price:
        text += (
            f", {format_money(serving['cost_per_million_tokens'], price['currency'])} per million "
            f"tokens at {format_money(price['per_gpu_hour'], price['currency'])} per GPU-hour"
        )
    return text
