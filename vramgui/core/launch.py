"""Settings for real engines, derived from a placement or a workload, ready to copy.

llama.cpp (``llama-server`` flags), vLLM (``vllm serve`` flags), SGLang
(``python -m sglang.launch_server`` flags), accelerate (``max_memory`` and
``device_map`` for ``from_pretrained``), DeepSpeed (ZeRO-Inference for streaming, ZeRO for training).
Flag names follow the engines' current command lines.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vramgui.core import activations, dtypes, rope
from vramgui.core.engines import StartUp, engine, llamacpp, planner_engine, sglang, vllm
from vramgui.core.errors import Setting, phrase
from vramgui.core.kv_cache_types import KV_CACHE_TYPES
from vramgui.core.model import ModelSpec, RopeScaling
from vramgui.core.offload import CPU, DISK, Placement, is_gpu, llamacpp_model
from vramgui.core.offload.overrides import TensorOverride
from vramgui.core.serving import checkpoint_kv_dtype
from vramgui.core.units import MiB
from vramgui.core.workload import LLAMACPP_BATCH, Workload, served_family

_TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """One engine's settings.

    Attributes:
        engine: "llama.cpp", "vLLM", "SGLang", "accelerate", "DeepSpeed ZeRO-Inference" or
            "DeepSpeed".
        args: command-line flags, when the engine takes flags.
        config: the JSON configuration, when it takes one.
        text: what to copy: a command line or a JSON document.
        notes: what the settings assume or cannot express.
    """

    engine: str
    args: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "args": list(self.args),
            "config": self.config,
            "text": self.text,
            "notes": list(self.notes),
        }


def _command(program: Sequence[str], args: Sequence[str]) -> str:
    return shlex.join([*program, *args])


def _json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2)


# --- llama.cpp -----------------------------------------------------------------------------------


def _layer_set(indices: Sequence[int]) -> str:
    """A regular expression for these block numbers (``(3|4|5)``), or the one number."""
    return str(indices[0]) if len(indices) == 1 else "(" + "|".join(map(str, indices)) + ")"


def _compact_overrides(overrides: Sequence[TensorOverride]) -> list[str]:
    """``PATTERN=BUFFER`` pairs, the per-layer patterns of one kind joined into one pattern
    (``blk\\.(20|21|22)\\.ffn_..._exps=CPU``) so that a fitted placement stays one line."""
    out: list[str] = []
    grouped: dict[tuple[str, str], list[int]] = {}
    order: list[tuple[str, str] | str] = []
    for o in overrides:
        match = re.fullmatch(r"blk\\\.(\d+)(.*)", o.pattern)
        if match is None:
            order.append(o.text)
            continue
        key = (match.group(2), o.buffer)
        if key not in grouped:
            grouped[key] = []
            order.append(key)
        grouped[key].append(int(match.group(1)))
    for item in order:
        if isinstance(item, str):
            out.append(item)
        else:
            rest, buffer = item
            out.append(f"blk\\.{_layer_set(grouped[item])}{rest}={buffer}")
    return out


def _llamacpp_cache_type(w: Workload) -> str:
    """llama.cpp's ``--cache-type-k`` / ``-v`` for the workload's KV dtype (f16, its default, for
    one it does not take)."""
    return llamacpp.ENGINE.kv_flag(w.kv_dtype) or "f16"


def llamacpp_settings(spec: ModelSpec, placement: Placement) -> LaunchSettings:
    """``llama-server`` flags for a llama.cpp placement: ``-ngl``, ``-c``, cache types, batches,
    flash attention, and the tensor overrides and split across GPUs of its layout."""
    w = placement.workload
    cache = _llamacpp_cache_type(w)
    args = [
        "-ngl",
        str(placement.gpu_layers),
        "-c",
        str(w.seq * w.batch),
        # The compute buffer of the estimate is sized for one micro-batch of min(-ub, -b).
        "-b",
        str(w.batch_size),
        "-ub",
        str(w.ubatch_size),
        "--cache-type-k",
        cache,
        "--cache-type-v",
        cache,
        # The compute buffer of the estimate depends on it: said rather than left to "auto".
        "-fa",
        "on" if activations.llamacpp_flash_attention(w) else "off",
    ]
    notes: list[str] = []
    scaled = rope.user_scaling(spec.facts, w)
    if scaled is not None:
        args += rope.llamacpp_args(scaled)
    if w.batch > 1:
        # The context is shared: each of the -np slots gets -c / -np tokens.
        args += ["-np", str(w.batch)]
    if cache.startswith("q") and not activations.llamacpp_flash_attention(w):
        notes.append(
            phrase(
                "A quantized V cache needs flash attention: leave ",
                Setting("attention"),
                " at its default.",
            )
        )
    layout = placement.layout
    if layout is not None:
        if layout.cpu_moe:
            args.append("--cpu-moe")
        elif layout.n_cpu_moe:
            args += ["--n-cpu-moe", str(layout.n_cpu_moe)]
        pairs = _compact_overrides(layout.overrides)
        if pairs:
            args += ["-ot", ",".join(pairs)]
        gpus = len(placement.vram_budget_bytes)
        if gpus > 1 and layout.split_mode != "none":
            shares = layout.tensor_split or tuple(
                round(b / 1024**3, 1) for b in placement.vram_budget_bytes
            )
            args += ["-ts", ",".join(f"{x:g}" for x in shares)]
        if layout.split_mode != "layer" and gpus > 1:
            args += ["-sm", layout.split_mode]
        if layout.main_gpu:
            args += ["-mg", str(layout.main_gpu)]
        if not layout.op_offload:
            args.append("--no-op-offload")
        if gpus > 1:
            notes.append(
                "GPUs in the order given (CUDA0, CUDA1...): set CUDA_VISIBLE_DEVICES to that order."
            )
    if any(is_gpu(p.device) and not is_gpu(p.kv_device) for p in placement.units):
        args.append("--no-kv-offload")
    model = _gguf_path(spec)
    if model == _GGUF_PLACEHOLDER:
        notes.append(_convert_note(spec, w))
    return LaunchSettings(
        engine="llama.cpp",
        args=tuple(args),
        text=_command(["llama-server", "-m", model], args),
        notes=tuple(notes),
    )


# --- Ollama and LM Studio ------------------------------------------------------------------------

# Ollama's default context by the GPU memory it finds, summed over its GPUs (server/routes.go,
# "vram-based default context"). Its docs say 24 and 48 GiB; the code tests 23 and 47 GiB "to
# account for small differences in the exact value", so a 24 GB card (23.99 GiB) gets 32k.
OLLAMA_CONTEXTS = ((23 * 1024**3, 4096), (47 * 1024**3, 32768), (None, 262144))
# Ollama's num_batch default (api/types.go, DefaultOptions: NumBatch 512). Its runner hands
# llama.cpp n_ubatch = num_batch and n_batch = num_batch x parallel requests
# (llama/llama.go, NewContextParams).
OLLAMA_NUM_BATCH = 512
# LM Studio's Evaluation Batch Size default (its load settings, evalBatchSize).
LMSTUDIO_EVAL_BATCH = 512


def ollama_context(total_vram_bytes: int) -> int:
    """The context Ollama gives a model when nothing sets ``num_ctx``."""
    for below, context in OLLAMA_CONTEXTS:
        if below is None or total_vram_bytes < below:
            return context
    raise AssertionError("unreachable: the last bracket has no bound")


def ollama_workload(
    spec: ModelSpec, workload: Workload, budgets: Sequence[int], *, seq_given: bool
) -> tuple[Workload, list[str]]:
    """The settings Ollama runs an Ollama model with when nothing overrides them: its context by
    GPU memory (when ``--seq`` was not given), one request at a time (OLLAMA_NUM_PARALLEL=1), an
    f16 KV cache."""
    notes: list[str] = []
    changes: dict[str, object] = {}
    total = sum(budgets)
    if not seq_given:
        context = ollama_context(total)
        longest = spec.facts.max_position_embeddings
        if longest:
            context = min(context, longest)
        changes["seq"] = context
        notes.append(
            phrase(
                f"Ollama's default context for {total / 1024**3:.0f} GiB of GPU memory: "
                f"{context:,} tokens (num_ctx; ",
                Setting("seq"),
                " sets another).",
            )
        )
    if workload.batch != 1:
        notes.append(
            f"{workload.batch} requests at once: OLLAMA_NUM_PARALLEL={workload.batch} "
            "(Ollama's default is 1)."
        )
    return (workload.with_(**changes) if changes else workload), notes


def ollama_settings(spec: ModelSpec, name: str, placement: Placement) -> LaunchSettings:
    """A Modelfile and the server's environment for Ollama: ``num_ctx``, ``num_gpu`` (layers on
    the GPUs), flash attention and the KV cache type, parallel requests.

    Ollama places whole layers: where the placement keeps tensors of GPU layers in host RAM,
    ``num_gpu`` is the most whole layers that fit instead.
    """
    w = placement.workload
    layout = placement.layout
    moved = layout is not None and (layout.moves_experts or bool(layout.overrides))
    layers = placement.gpu_layers
    notes = []
    if moved:
        room = [b - placement.margin_bytes for b in placement.vram_budget_bytes]
        layers = llamacpp_model(spec, w).max_gpu_layers(room)
        notes.append(
            "Ollama places whole layers only: it has no setting that keeps experts in host RAM, "
            f"so num_gpu is the most whole layers that fit ({layers}), slower than llama.cpp's "
            "line."
        )
    modelfile = [
        f"FROM {name}",
        f"PARAMETER num_ctx {w.seq}",
        f"PARAMETER num_gpu {layers}",
    ]
    ubatch = activations.llamacpp_ubatch(w)
    if ubatch != OLLAMA_NUM_BATCH:
        modelfile.append(f"PARAMETER num_batch {ubatch}")
    if w.batch_size != LLAMACPP_BATCH:
        notes.append(
            "Ollama takes no --batch-size: its runner hands llama.cpp num_batch as -ub and "
            f"num_batch x parallel requests ({ubatch * w.batch:,} here) as -b."
        )
    env = [f"OLLAMA_FLASH_ATTENTION={1 if activations.llamacpp_flash_attention(w) else 0}"]
    ollama_cache = llamacpp.OLLAMA_KV_CACHE_TYPES.get(w.kv_dtype)
    if ollama_cache is not None:
        env.append(f"OLLAMA_KV_CACHE_TYPE={ollama_cache}")
    if w.batch > 1:
        env.append(f"OLLAMA_NUM_PARALLEL={w.batch}")
    custom = re.sub(
        r"[^a-z0-9._-]+", "-", name.rsplit("/", 1)[-1].split(":", maxsplit=1)[0].lower()
    )
    custom = f"{custom.removesuffix('.gguf').strip('-.') or 'model'}-planned"
    text = "\n".join(
        [
            "# Modelfile",
            *modelfile,
            "",
            "# then",
            f"{' '.join(env)} ollama serve",
            f"ollama create {custom} -f Modelfile && ollama run {custom}",
        ]
    )
    notes += _rope_not_set(spec, w, "Ollama")
    return LaunchSettings(
        engine="Ollama",
        config={"modelfile": modelfile, "environment": env},
        text=text,
        notes=tuple(notes),
    )


def _rope_not_set(spec: ModelSpec, w: Workload, engine: str) -> list[str]:
    """What an engine's settings here leave out of the user's RoPE scaling."""
    if rope.user_scaling(spec.facts, w) is None:
        return []
    return [
        f"{engine}'s settings here set no RoPE scaling: llama.cpp's line sets "
        f"--rope-scaling {w.rope_scaling} --rope-scale {w.rope_factor:g}, as estimated."
    ]


def lmstudio_settings(spec: ModelSpec, placement: Placement) -> LaunchSettings:
    """LM Studio's load settings (its llama.cpp engine) and the ``lms load`` line."""
    w = placement.workload
    n = placement.blocks + 1
    ratio = "max" if placement.gpu_layers >= n else f"{placement.gpu_layers / n:.2f}"
    layout = placement.layout
    experts = 0
    if layout is not None:
        experts = placement.blocks if layout.cpu_moe else layout.n_cpu_moe
    settings = {
        "Context Length": w.seq * w.batch,
        "GPU Offload": f"{placement.gpu_layers} of {n} layers",
        "Flash Attention": "On" if activations.llamacpp_flash_attention(w) else "Off",
        "K Cache Quantization Type": _llamacpp_cache_type(w),
        "V Cache Quantization Type": _llamacpp_cache_type(w),
    }
    if experts:
        settings["Number of layers for which to force MoE weights onto CPU"] = experts
    ubatch = activations.llamacpp_ubatch(w)
    batch_note = []
    if ubatch != LMSTUDIO_EVAL_BATCH:
        settings["Evaluation Batch Size"] = ubatch
        batch_note.append(
            "Evaluation Batch Size (evalBatchSize) is the batch LM Studio hands llama.cpp; the "
            f"compute buffer here assumes it runs micro-batches of that size ({ubatch:,})."
        )
    model = spec.name if spec.name.endswith(".gguf") else "MODEL"
    command = _command(
        ["lms", "load", model], ["--gpu", ratio, "--context-length", str(w.seq * w.batch)]
    )
    notes = ["In the app: the model's load settings, as listed here; the line loads from the CLI."]
    if experts:
        notes.append("lms load has no expert setting: set it in the app's load settings.")
    if layout is not None and layout.overrides:
        notes.append("LM Studio takes no --override-tensor: llama.cpp's line above does.")
    notes += _rope_not_set(spec, w, "LM Studio")
    notes += batch_note
    return LaunchSettings(
        engine="LM Studio",
        config=settings,
        text=command + "\n\n" + "\n".join(f"{k}: {v}" for k, v in settings.items()),
        notes=tuple(notes),
    )


_GGUF_PLACEHOLDER = "MODEL.gguf"


def _ollama_name(spec: ModelSpec) -> str:
    """What a Modelfile's FROM names: the GGUF file, or a placeholder for one to make."""
    return f"./{spec.name}" if spec.name.endswith(".gguf") else f"./{_GGUF_PLACEHOLDER}"


_GGUF_OUTTYPES = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


def _gguf_path(spec: ModelSpec) -> str:
    """The GGUF file to serve: the model's own file, or a placeholder for one to make."""
    return spec.name if spec.name.endswith(".gguf") else _GGUF_PLACEHOLDER


def _convert_note(spec: ModelSpec, w: Workload) -> str:
    outtype = _GGUF_OUTTYPES[w.dtype]
    quantize = "" if w.quant == "none" else f", then llama-quantize it to {w.quant}"
    return (
        f"MODEL.gguf: {spec.name} converted with llama.cpp's convert_hf_to_gguf.py "
        f"--outtype {outtype}{quantize}."
    )


# --- vLLM ----------------------------------------------------------------------------------------


def _vllm_quantization(quant: str) -> str | None:
    if quant == "none":
        return None
    scheme = dtypes.get_scheme(quant)
    if scheme.family == "gguf":
        return "gguf"
    if scheme.family == "bitsandbytes":
        return "bitsandbytes"
    if scheme.name.startswith("awq"):
        return "awq"
    if scheme.name.startswith("gptq"):
        return "gptq"
    return scheme.name


def vllm_settings(
    spec: ModelSpec, workload: Workload, placement: Placement | None = None
) -> LaunchSettings:
    """``vllm serve`` flags that reproduce the workload: every vLLM knob set away from vLLM's
    default, and ``--cpu-offload-gb`` for what the setting or a placement keeps in host RAM.

    Raises:
        WorkloadError: an unknown quantization scheme.
    """
    w = workload
    args = [
        "--dtype",
        _TORCH_DTYPES[w.dtype],
        "--max-model-len",
        str(w.seq),
        "--gpu-memory-utilization",
        f"{w.gpu_memory_utilization:g}",
        vllm.ENGINE.tensor_parallel_flag,
        str(w.tp),
    ]
    notes = []
    if w.pp > 1:
        args += ["--pipeline-parallel-size", str(w.pp)]
    vllm_cache = vllm.ENGINE.kv_flag(w.kv_dtype)
    if vllm_cache is not None:
        args += ["--kv-cache-dtype", vllm_cache]
    elif not vllm.ENGINE.takes_kv(w.kv_dtype):
        smaller = " / ".join(
            t.name for t in KV_CACHE_TYPES if t.saving and vllm.ENGINE.takes_kv(t.name)
        )
        notes.append(f"vLLM has no {w.kv_dtype} cache; its smaller cache type is {smaller}.")
    elif w.kv_dtype == "bf16" and checkpoint_kv_dtype(spec, w.with_(kv_dtype="auto")):
        # Without it, vLLM takes the checkpoint's FP8 KV-cache scheme.
        args += ["--kv-cache-dtype", "bfloat16"]
    if w.max_num_seqs is not None:
        args += ["--max-num-seqs", str(w.max_num_seqs)]
    if w.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(w.max_num_batched_tokens)]
    if w.enforce_eager:
        args.append("--enforce-eager")
    if w.enable_prefix_caching is not None:
        args.append(
            "--enable-prefix-caching" if w.enable_prefix_caching else "--no-enable-prefix-caching"
        )
    if w.enable_lora:
        args += ["--enable-lora", "--max-loras", str(w.max_loras)]
        args += ["--max-lora-rank", str(w.max_lora_rank)]
    speculative = _speculative_config(w)
    if speculative:
        args += ["--speculative-config", speculative]
    scaled = rope.user_scaling(spec.facts, w)
    if scaled is not None:
        # --rope-scaling left vLLM's command line in 0.10.2; --hf-overrides takes it in every
        # version, and vLLM's max_model_len check reads the scaled length from it: as
        # rope_scaling up to 0.11 (transformers 4), as rope_parameters with the rotary base since
        # (transformers 5; docs.vllm.ai features/context_extension).
        modern = w.vllm_version not in ("0.10", "0.11")
        args += ["--hf-overrides", _rope_override(spec, scaled, modern=modern)]
        if modern and spec.facts.rope_theta is None:
            notes.append(_NO_THETA)
    quantization = _vllm_quantization(w.quant)
    if quantization:
        args += ["--quantization", quantization]
    model = spec.name
    if served_family(w.quant, spec.quantization) == "gguf":
        # vLLM loads GGUF from a local file only, and takes the tokenizer from the original repo.
        model = _gguf_path(spec)
        args += ["--tokenizer", "ORIGINAL_REPO"]
        notes.append(
            "vLLM serves a local .gguf file; --tokenizer names the repository of the original "
            "(unquantized) model."
        )
        if model == _GGUF_PLACEHOLDER:
            notes.append(_convert_note(spec, w))
    # vLLM streams this many GiB of weights from host memory on every forward.
    offloaded = max(w.cpu_offload_gb, math.ceil(_offloaded_bytes(placement) / 1024**3))
    if offloaded:
        args += ["--cpu-offload-gb", f"{offloaded:g}"]
    return LaunchSettings(
        engine="vLLM",
        args=tuple(args),
        text=_command(["vllm", "serve", model], args),
        notes=tuple(notes),
    )


# SGLang's --quantization choices (server_args.py QUANTIZATION_CHOICES, 0.5.6) that a --quant
# maps to.
_SGLANG_QUANTIZATIONS = frozenset(
    {"awq", "fp8", "gptq", "bitsandbytes", "modelopt", "modelopt_fp4", "w8a8_int8", "w8a8_fp8"}
)


def sglang_settings(spec: ModelSpec, workload: Workload) -> LaunchSettings:
    """``python -m sglang.launch_server`` flags that reproduce the workload.

    ``--mem-fraction-static`` is written when it was set; otherwise SGLang picks it for the GPU
    as the estimate did (``core/sglang_startup.default_mem_fraction``).

    Raises:
        WorkloadError: an unknown quantization scheme.
    """
    w = workload
    model = spec.name
    args = ["--dtype", _TORCH_DTYPES[w.dtype], "--context-length", str(w.seq)]
    notes = []
    if w.mem_fraction_static is not None:
        args += ["--mem-fraction-static", f"{w.mem_fraction_static:g}"]
    else:
        notes.append(
            f"SGLang picks --mem-fraction-static for the GPU; the estimate follows SGLang "
            f"{w.sglang_version}'s rule."
        )
    if w.tp > 1:
        args += [sglang.ENGINE.tensor_parallel_flag, str(w.tp)]
    if w.pp > 1:
        args += ["--pp-size", str(w.pp)]
    sglang_cache = sglang.ENGINE.kv_flag(w.kv_dtype)
    if sglang_cache is not None:
        args += ["--kv-cache-dtype", sglang_cache]
    scaled = rope.user_scaling(spec.facts, w)
    if scaled is not None:
        args += ["--json-model-override-args", _rope_override(spec, scaled, modern=False)]
    if served_family(w.quant, spec.quantization) == "gguf":
        # SGLang loads a local .gguf file as GGUF (ServerArgs: check_gguf_file).
        model = _gguf_path(spec)
        if model == _GGUF_PLACEHOLDER:
            notes.append(_convert_note(spec, w))
    else:
        quantization = _vllm_quantization(w.quant)
        if quantization in _SGLANG_QUANTIZATIONS:
            args += ["--quantization", quantization]
        elif quantization:
            notes.append(
                f"SGLang has no --quantization {quantization}; serve a checkpoint "
                "stored in that format instead."
            )
    return LaunchSettings(
        engine="SGLang",
        args=("--model-path", model, *args),
        text=_command(["python", "-m", "sglang.launch_server", "--model-path", model], args),
        notes=tuple(notes),
    )


_NO_THETA = (
    "The config states no rope_theta: add the model's rotary base to rope_parameters, which "
    "replace the config's whole dict."
)


def _rope_parameters(spec: ModelSpec, scaled: RopeScaling, *, modern: bool) -> dict[str, Any]:
    """The config override that sets a RoPE scaling: transformers 5's ``rope_parameters`` (with
    the rotary base) where ``modern``, else transformers 4's ``rope_scaling``."""
    theta = spec.facts.rope_theta
    if modern and theta is not None:
        return {"rope_parameters": rope.config_override(scaled, theta)}
    return {"rope_scaling": rope.config_override(scaled)}


def _rope_override(spec: ModelSpec, scaled: RopeScaling, *, modern: bool) -> str:
    """``_rope_parameters`` as the JSON vLLM's and SGLang's command lines take."""
    return json.dumps(_rope_parameters(spec, scaled, modern=modern), separators=(",", ":"))


def _speculative_config(w: Workload) -> str:
    """vLLM's ``--speculative-config`` JSON for the workload's speculative decoding, or ""."""
    if w.mtp:
        config: dict[str, Any] = {"method": "mtp"}
    elif w.speculative == "draft":
        config = {"model": w.draft_model or "DRAFT_MODEL"}
    else:
        return ""
    config["num_speculative_tokens"] = w.num_speculative_tokens
    return json.dumps(config, separators=(",", ":"))


def _offloaded_bytes(placement: Placement | None) -> int:
    """Weights the placement keeps off the GPU because they do not fit there.

    llama.cpp keeps token embeddings in host memory whatever the room (lookups are cheap there);
    vLLM holds them on the GPU, so they count only as the rest of the model does.
    """
    if placement is None:
        return 0
    off = [p for p in placement.units if p.device in (CPU, DISK)]
    if planner_engine(placement.planner).ggml:
        off = [p for p in off if p.unit.index > 0]
    return sum(p.unit.bytes for p in off)


# --- accelerate ----------------------------------------------------------------------------------


def _mib(n: int) -> str:
    return f"{math.ceil(n / MiB)}MiB"


def accelerate_settings(spec: ModelSpec, placement: Placement) -> LaunchSettings:
    """``max_memory`` and an explicit ``device_map`` reproducing the placement in ``from_pretrained``.

    ``max_memory`` gives each device the weights placed on it, plus, on the main devices (first
    GPU and CPU), the room accelerate keeps for the largest unit.
    """
    device_map: dict[str, int | str] = {}
    per_device: dict[int | str, int] = {}
    for p in placement.units:
        target: int | str = int(p.device.split(":")[1]) if is_gpu(p.device) else p.device
        per_device[target] = per_device.get(target, 0) + p.unit.bytes
        for module in p.unit.modules:
            device_map[module] = target
    # infer_auto_device_map keeps the largest unit's room free on the main devices whatever else.
    largest = max(p.unit.bytes for p in placement.units)
    per_device[0] = per_device.get(0, 0) + largest
    if CPU in per_device:
        per_device[CPU] += largest
    max_memory = {
        k: _mib(v) for k, v in sorted(per_device.items(), key=lambda kv: _order(kv[0])) if k != DISK
    }
    config: dict[str, Any] = {"max_memory": max_memory, "device_map": device_map}
    notes = []
    if DISK in per_device:
        config["offload_folder"] = "offload"
        notes.append("Units marked disk are memory-mapped from offload_folder.")
    w = placement.workload
    quantization = _bitsandbytes_config(w)
    scaled = rope.user_scaling(spec.facts, w)
    call = (
        f"AutoModelForCausalLM.from_pretrained({spec.name!r}, dtype=torch.{_TORCH_DTYPES[w.dtype]}, "
        + (f"quantization_config={quantization}, " if quantization else "")
        + "".join(
            f"{key}={value!r}, "
            for key, value in (
                _rope_parameters(spec, scaled, modern=True).items() if scaled else ()
            )
        )
        + "**json.load(open('device_map.json')))"
    )
    notes.append(call)
    return LaunchSettings(
        engine="accelerate", config=config, text=_json(config), notes=tuple(notes)
    )


def _bitsandbytes_config(w: Workload) -> str:
    """The ``BitsAndBytesConfig`` that quantizes on load as the workload says, or "" for none.

    GPTQ, AWQ and FP8 checkpoints carry their quantization in their own config.
    """
    if w.quant == "none":
        return ""
    scheme = dtypes.get_scheme(w.quant)
    if scheme.family != "bitsandbytes":
        return ""
    if scheme.bits == 8:
        return "BitsAndBytesConfig(load_in_8bit=True)"
    kind = "nf4" if scheme.name.startswith("nf4") else "fp4"
    return (
        f"BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type={kind!r}, "
        f"bnb_4bit_use_double_quant={scheme.double_quant}, "
        f"bnb_4bit_compute_dtype=torch.{_TORCH_DTYPES[w.dtype]})"
    )


def _order(device: int | str) -> tuple[int, int]:
    return (0, device) if isinstance(device, int) else (1, 0 if device == CPU else 1)


# --- DeepSpeed -----------------------------------------------------------------------------------


def _precision(workload: Workload) -> dict[str, Any]:
    if workload.mode == "training" and workload.precision == "fp32":
        return {"bf16": {"enabled": False}, "fp16": {"enabled": False}}
    return {
        "bf16": {"enabled": workload.dtype == "bf16"},
        "fp16": {"enabled": workload.dtype == "fp16"},
    }


def zero_inference_settings(placement: Placement) -> LaunchSettings:
    """DeepSpeed ZeRO-Inference: ZeRO-3 with parameters offloaded to CPU or NVMe, streamed per layer."""
    w = placement.workload
    nvme = placement.disk_bytes > 0
    offload: dict[str, Any] = {"device": "nvme" if nvme else "cpu", "pin_memory": True}
    if nvme:
        offload["nvme_path"] = "/local_nvme"
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": w.batch,
        **_precision(w),
        "zero_optimization": {
            "stage": 3,
            "offload_param": offload,
            # Prefetch one unit ahead; DeepSpeed counts this bucket in parameters.
            "stage3_prefetch_bucket_size": max(p.unit.parameters for p in placement.units),
            "stage3_param_persistence_threshold": 0,
        },
    }
    notes = [
        "Create HfDeepSpeedConfig(config) before from_pretrained, then generate with "
        "deepspeed.initialize(model=model, config=config)[0].module."
    ]
    if nvme:
        notes.append("Set nvme_path to a folder on the fast disk.")
    return LaunchSettings(
        engine="DeepSpeed ZeRO-Inference", config=config, text=_json(config), notes=tuple(notes)
    )


def deepspeed_settings(workload: Workload) -> LaunchSettings:
    """A DeepSpeed ZeRO configuration for a training workload: stage, offload, precision, batches."""
    w = workload
    stage = 3 if w.fsdp else w.zero
    zero: dict[str, Any] = {"stage": stage}
    notes = []
    if w.fsdp:
        notes.append("FSDP full shard corresponds to ZeRO stage 3.")
    if w.cpu_offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
        notes.append("CPU offload runs the optimizer step on the CPU with DeepSpeedCPUAdam.")
    if stage >= 2:
        zero["overlap_comm"] = True
        zero["contiguous_gradients"] = True
    if w.precision == "pure":
        notes.append("DeepSpeed keeps fp32 master weights with bf16 / fp16 enabled (mixed).")
    config: dict[str, Any] = {
        "train_batch_size": w.batch * w.grad_accum * w.data_parallel,
        "train_micro_batch_size_per_gpu": w.batch,
        "gradient_accumulation_steps": w.grad_accum,
        **_precision(w),
        "zero_optimization": zero,
    }
    if w.grad_checkpointing:
        notes.append(
            "Enable gradient checkpointing in the model (model.gradient_checkpointing_enable())."
        )
    return LaunchSettings(engine="DeepSpeed", config=config, text=_json(config), notes=tuple(notes))


# --- all of them ---------------------------------------------------------------------------------


def launch_settings(
    spec: ModelSpec,
    workload: Workload,
    placement: Placement | None = None,
    *,
    ollama: str | None = None,
) -> tuple[LaunchSettings, ...]:
    """Settings for every engine that applies: the placement's own engine first (for llama.cpp,
    then Ollama and LM Studio, which run it), then vLLM, and SGLang when it is the engine
    chosen.

    Training workloads get the DeepSpeed configuration only.

    Args:
        spec: the model.
        workload: the settings.
        placement: the placement the settings reproduce, if any.
        ollama: the Ollama name of a model Ollama serves (its settings come first).

    Raises:
        WorkloadError: an unknown quantization scheme.
    """
    if workload.mode == "training":
        return (deepspeed_settings(workload),)
    out: list[LaunchSettings] = []
    if placement is not None:
        if planner_engine(placement.planner).ggml:
            local = [
                ollama_settings(spec, ollama or _ollama_name(spec), placement),
                lmstudio_settings(spec, placement),
            ]
            cpp = llamacpp_settings(spec, placement)
            out += [local[0], cpp, local[1]] if ollama else [cpp, *local]
        elif placement.planner == "accelerate":
            out.append(accelerate_settings(spec, placement))
        else:
            out.append(zero_inference_settings(placement))
    out.append(vllm_settings(spec, workload, placement))
    if engine(workload.engine).startup is StartUp.SGLANG:
        out.append(sglang_settings(spec, workload))
    return tuple(out)
