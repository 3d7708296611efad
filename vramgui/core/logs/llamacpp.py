"""llama.cpp's start-up lines: ``llm_load_*`` (before mid-2025) and ``print_info`` /
``load_tensors`` / ``llama_context`` / ``llama_kv_cache`` (after), the memory-breakdown table,
several GPUs, and the allocation that failed. Ollama's llama runner prints the same lines."""

from __future__ import annotations

import re
from collections.abc import Sequence

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
    "llama_memory_breakdown_print:",
    "llama_memory_recurrent",
    "ggml_gallocr_reserve_n",
    "graph_reserve:",
    "srv    load_model:",
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
    r"\|\s+- (\w+)(?: \((.*?)\))?\s+\|\s+(\d+) = (\d+) \+ \((\d+) = (\d+) \+\s+(\d+) \+\s+(\d+)\)"
)
_SLOTS = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+)")

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
    text = text.split("(")[0].strip()
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
            devices[m.group(1)] = LoggedDevice(
                m.group(1), True, m.group(2), free_bytes=int(m.group(3)) * MiB
            )
        elif (m := _BREAKDOWN.search(line)) is not None:
            name = m.group(1)
            total, free = int(m.group(3)) * MiB, int(m.group(4)) * MiB
            devices[name] = LoggedDevice(name, True, m.group(2) or "", total, free)
            for comp, value in (
                ("total", 5),
                ("weights", 6),
                ("kv_cache", 7),
                ("compute_buffer", 8),
            ):
                facts[f"breakdown_{name}_{comp}"] = int(m.group(value)) * MiB
        elif (m := _SLOTS.search(line)) is not None:
            settings.setdefault("n_seq_max", int(m.group(1)))
            settings.setdefault("n_ctx_per_seq", int(m.group(2)))
        elif version is None and (m := _BUILD.search(line)) is not None:
            version = m.group(1)
        if decision is not None and decision.kind == "oom" and "what" not in decision.figures:
            what = _failed_what(line)
            if what:
                decision.figures["what"] = what
    if kv_self is not None:
        facts["kv_total_bytes"] = kv_self
    model = _model(printed, meta)
    notes: list[str] = []
    if engine == "llamacpp" and not components and decision is None and not printed and not meta:
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


def _failed_what(line: str) -> str:
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
    layers = meta.get(f"{arch}.block_count") if arch else None
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
