"""llama.cpp's start-up lines: ``llm_load_*`` (before mid-2025) and ``print_info`` /
``load_tensors`` / ``llama_context`` / ``llama_kv_cache`` (after), the memory-breakdown table,
several GPUs, and the allocation that failed. Ollama's llama runner prints the same lines."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import replace

from vramgui.core.logs.setup import (
    LoggedComponent,
    LoggedDecision,
    LoggedDevice,
    LoggedModel,
    LoggedSetup,
)
from vramgui.core.logs.text import SIZE, size_bytes
from vramgui.core.units import MiB

# Lines only llama.cpp prints; two of them name the engine.
MARKERS = (
    "llm_load_print_meta:",
    "llm_load_tensors:",
    "print_info:",
    "load_tensors:",
    "llama_context:",
    "llama_kv_cache",
    "llama_new_context_with_model:",
    "llama_init_from_model:",
    "llama_model_loader:",
    "ggml_backend_cuda_buffer_type_alloc_buffer:",
    "ggml_cuda_init:",
    "memory_breakdown_print:",
    "params_fit",
    "llama_memory_recurrent",
    "ggml_gallocr_reserve_n",
    "graph_reserve:",
    "srv    load_model:",
    "buffer type overrid",
)

# print_info / llm_load_print_meta names -> GGUF keys (under the architecture's prefix).
_META_KEYS = {
    "n_layer": "block_count",
    "n_embd": "embedding_length",
    "n_head": "attention.head_count",
    "n_head_kv": "attention.head_count_kv",
    "n_embd_head_k": "attention.key_length",
    "n_embd_head_v": "attention.value_length",
    "n_ff": "feed_forward_length",
    "n_expert": "expert_count",
    "n_expert_used": "expert_used_count",
    "n_ctx_train": "context_length",
    "n_swa": "attention.sliding_window",
    "n_rot": "rope.dimension_count",
    "n_lora_q": "attention.q_lora_rank",
    "n_lora_kv": "attention.kv_lora_rank",
    "n_ff_exp": "expert_feed_forward_length",
    "n_ff_shexp": "expert_shared_feed_forward_length",
    "n_expert_shared": "expert_shared_count",
    "n_layer_dense_lead": "leading_dense_block_count",
    "freq_base_train": "rope.freq_base",
    "f_norm_rms_eps": "attention.layer_norm_rms_epsilon",
}

_META = re.compile(r"(?:llm_load_print_meta|print_info): +([\w.]+(?: [\w.]+)?) += (.*)$")
_LOADER_KV = re.compile(r"llama_model_loader: - kv +\d+: +([\w.]+) +[\w\[\],]+ += (.*)$")
_BUFFER = re.compile(
    r"(?P<who>\w+): +(?P<buft>[\w\[\].:]+?)(?: (?P<kind>model|KV|RS|compute|output))? buffer size = +"
    r"(?P<mib>\d+(?:\.\d+)?) MiB"
)
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_CTX = re.compile(
    r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): +"
    r"(n_ctx|n_ctx_per_seq|n_seq_max|n_batch|n_ubatch|flash_attn|kv_unified) += (\S+)"
)
_KV_INIT = re.compile(r"kv_size = (\d+), offload = (\d), type_k = '(\w+)', type_v = '(\w+)'")
_KV_SIZE = re.compile(
    r"size = +(\d+(?:\.\d+)?) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\)"
    r"(?:, K \((\w+)\): +[\d.]+ MiB, V \((\w+)\))?"
)
_KV_SELF = re.compile(r"KV self size += +(\d+(?:\.\d+)?) MiB, (?:K|c\^KV) \((\w+)\)")
_ALLOC_FAIL = re.compile(
    r"allocating (\d+(?:\.\d+)?) MiB on device (\d+): cudaMalloc failed: out of memory"
)
_DEVICE = re.compile(r"Device (\d+): (.+?), compute capability ([\d.]+)")
_USING = re.compile(r"using device (CUDA\d+) \((.+?)\) - (\d+) MiB free")
_BUILD = re.compile(r"\b(?:build|version): (\d+ \([0-9a-f]+\))")
_BREAKDOWN = re.compile(
    r"\|\s+- (\S+)(?: \((.*?)\))?\s+\|\s+(\d+) = (\d+) \+ \(\s*(\d+) =\s+(\d+) \+\s+(\d+) \+\s+(\d+)\)"
)
_BREAKDOWN_HOST = re.compile(r"\|\s+- Host\s+\|\s+(\d+) =\s+(\d+) \+\s+(\d+) \+\s+(\d+)")
_FIT_FAILED = re.compile(r"failed to fit params to free device memory: (.*)$")
_OVERRIDDEN = re.compile(r"[Tt]ensor (\S+?)(?: \(\w+\))? buffer type overrid+en to (\w+)")
# ik_llama.cpp's own options, which change its graph (and compute buffers) from llama.cpp's.
_FORK = re.compile(r"(mla_attn|fused_moe|attn_max_b)\s+= (\d+)")
_SLOTS = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+)")

# The programs whose command line a report quotes before the log, and their flags that place
# memory: flag -> (setting, takes a value).
_PROGRAMS = re.compile(
    r"(?:^|[/\\\s])(?:llama-server|llama-cli|llama-bench|llama-sweep-bench|llama-batched-bench|llama-completion|llama-mtmd-cli|main)(?:\.exe)?\s"
)
_FLAGS: dict[str, tuple[str, bool]] = {
    "-m": ("model_path", True),
    "--model": ("model_path", True),
    "-c": ("n_ctx", True),
    "--ctx-size": ("n_ctx", True),
    "-ngl": ("n_gpu_layers", True),
    "--n-gpu-layers": ("n_gpu_layers", True),
    "--gpu-layers": ("n_gpu_layers", True),
    "-ot": ("override_tensor", True),
    "--override-tensor": ("override_tensor", True),
    "--cpu-moe": ("cpu_moe", False),
    "-cmoe": ("cpu_moe", False),
    "--n-cpu-moe": ("n_cpu_moe", True),
    "-ncmoe": ("n_cpu_moe", True),
    "-ts": ("tensor_split", True),
    "--tensor-split": ("tensor_split", True),
    "-sm": ("split_mode", True),
    "--split-mode": ("split_mode", True),
    "-mg": ("main_gpu", True),
    "--main-gpu": ("main_gpu", True),
    "-nkvo": ("no_kv_offload", False),
    "--no-kv-offload": ("no_kv_offload", False),
    "--no-op-offload": ("no_op_offload", False),
    "-ctk": ("type_k", True),
    "--cache-type-k": ("type_k", True),
    "-ctv": ("type_v", True),
    "--cache-type-v": ("type_v", True),
    "-ub": ("n_ubatch", True),
    "--ubatch-size": ("n_ubatch", True),
    "-b": ("n_batch", True),
    "--batch-size": ("n_batch", True),
    "-np": ("n_seq_max", True),
    "--parallel": ("n_seq_max", True),
}


def command_flags(lines: Sequence[str]) -> dict[str, int | float | str | bool]:
    """The memory flags of the first llama.cpp command line the text quotes (``\\``
    continuations joined); ``-ot`` given several times is kept as one comma-separated list."""
    for i, line in enumerate(lines[:2000]):
        if not _PROGRAMS.search(line + " "):
            continue
        parts = [line]
        j = i
        # Continued by a shell's \\, PowerShell's ` or cmd's ^, or by indented flag lines.
        while j + 1 < len(lines) and (
            parts[-1].rstrip().endswith(("\\", "`", "^"))
            or re.match(r"\s+--?\w", lines[j + 1]) is not None
        ):
            j += 1
            parts.append(lines[j])
        text = " ".join(p.rstrip().rstrip("\\`^") for p in parts)
        try:
            words = shlex.split(text, posix=True)
        except ValueError:
            words = text.split()
        out: dict[str, int | float | str | bool] = {}
        overrides: list[str] = []
        k = 0
        while k < len(words):
            word, _, inline = words[k].partition("=")
            known = _FLAGS.get(word) if word.startswith("-") else None
            if known is None:
                k += 1
                continue
            name, takes = known
            if not takes:
                out[name] = True
                k += 1
                continue
            value = inline or (words[k + 1] if k + 1 < len(words) else "")
            k += 1 if inline else 2
            if name == "override_tensor":
                overrides.append(value)
            else:
                out[name] = _number(value)
        if overrides:
            out["override_tensor"] = ",".join(overrides)
        if out:
            return out
    return {}


# How llama.cpp prints a file type -> the name vramgui's --quant takes.
_FTYPE_SUFFIX = {" - Medium": "_M", " - Small": "_S", " - Large": "_L", " - Extra Small": "_XS"}


def is_log(lines: Sequence[str]) -> bool:
    return sum(any(m in line for m in MARKERS) for line in lines[:20000]) >= 2


def _device(buft: str) -> str:
    """``CUDA0`` stays; ``CPU_Mapped``, ``CUDA_Host``, ``CPU_REPACK`` are the host's ``CPU``."""
    if re.fullmatch(r"(CUDA|ROCm|Vulkan|Metal|SYCL|RPC)\d*", buft) and not buft.startswith("CPU"):
        return buft
    return "CPU"


def _file_type(text: str) -> str:
    """``Q4_K - Medium`` -> ``Q4_K_M``; ``IQ4_XS - 4.25 bpw`` -> ``IQ4_XS``."""
    text = text.split("(", maxsplit=1)[0].strip()
    for suffix, short in _FTYPE_SUFFIX.items():
        if text.endswith(suffix):
            return text[: -len(suffix)] + short
    return text.split(" - ")[0].strip().replace(" ", "_")


def _number(text: str) -> int | float | str:
    text = text.strip()
    if text.startswith("["):  # per-layer values (some hybrids): the largest bounds the cache
        values = [_number(v) for v in text.strip("[]").split(",") if v.strip()]
        numbers = [v for v in values if isinstance(v, int | float)]
        return max(numbers) if numbers else text
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def read(lines: Sequence[str], engine: str = "llamacpp") -> LoggedSetup:
    """Everything llama.cpp printed in ``lines``; ``engine`` names who ran it (Ollama's runner)."""
    meta: dict[str, int | float | str] = {}
    printed: dict[str, str] = {}
    components: list[LoggedComponent] = []
    devices: dict[str, LoggedDevice] = {}
    settings: dict[str, int | float | str | bool] = {}
    facts: dict[str, int | float | str] = {}
    decision: LoggedDecision | None = None
    version = None
    kv_self = None
    overridden: dict[str, list[str]] = {}
    fork: list[str] = []
    breakdown: dict[str, tuple[int, int, int, str]] = {}
    failed = ""  # what the failed allocation was for, as the lines after it say
    for line in lines:
        if (m := _META.search(line)) is not None:
            printed.setdefault(m.group(1), m.group(2).strip())
        elif (m := _LOADER_KV.search(line)) is not None:
            meta.setdefault(m.group(1), _number(m.group(2)))
        elif (m := _BUFFER.search(line)) is not None:
            kind = m["kind"] or ("model" if "load_tensors" in m["who"] else "")
            name = {
                "model": "weights",
                "KV": "kv_cache",
                "RS": "recurrent_state",
                "compute": "compute_buffer",
                "output": "output_buffer",
            }.get(kind)
            if name is not None:
                components.append(
                    LoggedComponent(name, _device(m["buft"]), round(float(m["mib"]) * MiB), line)
                )
        elif (m := _OFFLOADED.search(line)) is not None:
            settings["n_gpu_layers"] = int(m.group(1))
            facts["layers_offloaded"] = int(m.group(1))
            facts["layers_total"] = int(m.group(2))
        elif (m := _CTX.search(line)) is not None:
            value = _number(m.group(2))
            settings.setdefault(m.group(1), value)
        elif (m := _KV_INIT.search(line)) is not None:
            settings.setdefault("n_ctx", int(m.group(1)))
            settings["kv_offload"] = m.group(2) == "1"
            settings["type_k"], settings["type_v"] = m.group(3), m.group(4)
        elif (m := _KV_SIZE.search(line)) is not None:
            settings.setdefault("kv_cells", int(m.group(2)))
            facts["kv_layers"] = int(m.group(3))
            if m.group(6):
                settings.setdefault("type_k", m.group(6))
                settings.setdefault("type_v", m.group(7))
        elif (m := _KV_SELF.search(line)) is not None:
            kv_self = round(float(m.group(1)) * MiB)
            settings.setdefault("type_k", m.group(2))
        elif (m := _ALLOC_FAIL.search(line)) is not None and decision is None:
            decision = LoggedDecision(
                "oom",
                f"allocating {m.group(1)} MiB on device {m.group(2)} failed (cudaMalloc: out of "
                "memory)",
                {"request_bytes": round(float(m.group(1)) * MiB), "device": f"CUDA{m.group(2)}"},
            )
        elif (m := _DEVICE.search(line)) is not None:
            name = f"CUDA{m.group(1)}"
            devices[name] = LoggedDevice(name, True, m.group(2))
        elif (m := _USING.search(line)) is not None:
            known = devices.get(m.group(1))
            total = known.total_bytes if known is not None else None
            devices[m.group(1)] = LoggedDevice(
                m.group(1), True, m.group(2), total, int(m.group(3)) * MiB
            )
        elif (m := _BREAKDOWN.search(line)) is not None:
            # llama.cpp prints the table at each --fit pass and at the end: the last one holds.
            name = m.group(1)
            total, free = int(m.group(3)) * MiB, int(m.group(4)) * MiB
            devices[name] = LoggedDevice(name, True, m.group(2) or "", total, free)
            breakdown[name] = (int(m.group(6)), int(m.group(7)), int(m.group(8)), line)
        elif (m := _BREAKDOWN_HOST.search(line)) is not None:
            breakdown["CPU"] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), line)
        elif (m := _FIT_FAILED.search(line)) is not None and decision is None:
            decision = LoggedDecision(
                "refusal",
                f"llama.cpp's --fit could not fit the model to the free memory: {m.group(1)}",
                {"reason": m.group(1)},
            )
        elif (m := _OVERRIDDEN.search(line)) is not None:
            overridden.setdefault(_device(m.group(2)), []).append(m.group(1))
        elif (m := _FORK.search(line)) is not None:
            if m.group(2) != "0":
                fork.append(f"{m.group(1)} = {m.group(2)}")
        elif (m := _SLOTS.search(line)) is not None:
            settings.setdefault("n_seq_max", int(m.group(1)))
            settings.setdefault("n_ctx_per_seq", int(m.group(2)))
        elif version is None and (m := _BUILD.search(line)) is not None:
            version = m.group(1)
        if decision is not None and decision.kind == "oom" and not failed:
            failed = _failed_what(line)
    if decision is not None and failed:
        decision = replace(decision, figures={**decision.figures, "what": failed})
    if kv_self is not None:
        facts["kv_total_bytes"] = kv_self
    printed_on = {c.device for c in components}
    for device, (model_mib, context_mib, compute_mib, line) in breakdown.items():
        if device in printed_on:  # the buffer lines say it already, to the hundredth of a MiB
            continue
        for name, mib in (
            ("weights", model_mib),
            ("kv_cache", context_mib),
            ("compute_buffer", compute_mib),
        ):
            if mib:
                components.append(LoggedComponent(name, device, mib * MiB, line))
    flags = command_flags(lines)
    for key, value in flags.items():
        if key in (
            "override_tensor",
            "cpu_moe",
            "n_cpu_moe",
            "tensor_split",
            "split_mode",
            "main_gpu",
            "no_kv_offload",
            "no_op_offload",
            "model_path",
        ):
            settings[key] = value
        else:
            settings.setdefault(key, value)
    if flags.get("no_kv_offload"):
        settings["kv_offload"] = False
    if overridden and "override_tensor" not in settings:
        settings["override_tensor"] = _override_patterns(overridden)
    if fork:
        facts["fork_options"] = ", ".join(dict.fromkeys(fork))
    model = _model(printed, meta)
    notes: list[str] = []
    if engine != "ollama" and not components and decision is None and not printed and not meta:
        notes.append("the log holds llama.cpp's lines but none with a buffer, a fact or a failure")
    assumed = []
    for key in ("n_ubatch", "flash_attn", "type_k"):
        if key not in settings and components:
            assumed.append(key)
    return LoggedSetup(
        engine="ollama" if engine == "ollama" else "llamacpp",
        engine_version=version,
        model=model,
        settings=settings,
        assumed=tuple(assumed),
        devices=tuple(devices.values()),
        components=tuple(components),
        facts=facts,
        decision=decision,
        notes=tuple(notes),
    )


def _override_patterns(overridden: dict[str, list[str]]) -> str:
    """The tensors the log says it placed, as ``--override-tensor`` pairs: per device, one
    pattern per tensor kind with the layers that hold it (``^blk\\.(3|4)\\.ffn_up_exps=CPU``).
    A checkpoint read from transformers' layout may hold the gate and up experts in one tensor
    (``ffn_gate_up_exps``): it goes where its two halves went."""
    pairs = []
    for device, names in overridden.items():
        layers: dict[str, list[str]] = {}
        for name in names:
            m = re.match(r"blk\.(\d+)\.(.+?)(?:\.weight|\.bias)?$", name)
            if m is None:
                pairs.append(f"^{re.escape(name)}$={device}")
                continue
            kinds = [m.group(2)]
            if m.group(2) in ("ffn_gate_exps", "ffn_up_exps"):
                kinds.append("ffn_gate_up_exps")
            for kind in kinds:
                layers.setdefault(kind, []).append(m.group(1))
        for kind, ids in layers.items():
            joined = "|".join(dict.fromkeys(ids))
            pairs.append(f"^blk\\.({joined})\\.{re.escape(kind)}($|\\.)={device}")
    return ",".join(pairs)


def _failed_what(line: str) -> str:
    """What a failed allocation was for, from the line llama.cpp prints after it ("" if not
    this one)."""
    if "compute buffers" in line or "graph_reserve" in line:
        return "compute buffer"
    if "kv cache" in line.lower() or ("KV" in line and "failed" in line):
        return "KV cache"
    if ("unable to allocate" in line and "buffer" in line) or "alloc_tensor_range" in line:
        return "model weights"
    return ""


def _model(printed: dict[str, str], meta: dict[str, int | float | str]) -> LoggedModel:
    """The model's facts: the loader's GGUF keys, else print_info's under GGUF names."""
    arch = str(meta.get("general.architecture") or printed.get("arch", "")) or None
    if arch is not None:
        for short, key in _META_KEYS.items():
            if short in printed and f"{arch}.{key}" not in meta:
                meta[f"{arch}.{key}"] = _number(printed[short])
        meta.setdefault("general.architecture", arch)
    if "n_vocab" in printed:
        meta.setdefault("tokenizer.token_count", _number(printed["n_vocab"]))
    name = printed.get("general.name") or meta.get("general.name")
    ftype = printed.get("file type") or printed.get("model ftype")
    size = None
    if (s := printed.get("model size") or printed.get("file size")) and (m := re.match(SIZE, s)):
        size = size_bytes(m.group(1), m.group(2))
    params = None
    if (p := printed.get("model params")) and (m := re.match(r"([\d.]+) ([KMBT])", p)):
        params = round(float(m.group(1)) * {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m.group(2)])
    layers = meta.get(f"{arch}.block_count") if arch else _number(printed.get("n_layer", ""))
    ctx = meta.get(f"{arch}.context_length") if arch else None
    return LoggedModel(
        name=str(name) if name else None,
        architecture=arch,
        layers=layers if isinstance(layers, int) else None,
        file_type=_file_type(ftype) if ftype else None,
        size_bytes=size,
        parameters=params,
        context_train=ctx if isinstance(ctx, int) else None,
        metadata=meta,
    )
