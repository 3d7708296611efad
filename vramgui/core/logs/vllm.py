"""vLLM's start-up lines (V1: ``Model loading took``, ``Available KV cache memory``, ``GPU KV
cache size``, ``Maximum concurrency``, ``Graph capturing finished``; V0's memory profile) and
its refusals."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from vramgui.core.logs import pytorch
from vramgui.core.logs.setup import (
    LoggedComponent,
    LoggedDecision,
    LoggedDevice,
    LoggedModel,
    LoggedSetup,
)
from vramgui.core.units import GiB

MARKERS = (
    "vLLM",
    "vllm",
    "LLM engine",
    "Model loading took",
    "Available KV cache memory",
    "GPU KV cache size",
    "KV cache is needed",
    "maximum number of tokens that can be stored in KV cache",
    "gpu_memory_utilization",
)
_GIB = r"(\d+(?:\.\d+)?) ?Gi?B"
_VERSION = re.compile(r"(?:LLM engine \(v|vLLM API server version |vLLM version:? )([\w.+-]+)")
_CONFIG = re.compile(r"with config: (.*?)(?:\(\w+ pid=|$)")
_ARGS = re.compile(r"non-default args: (\{.*?\})(?:\(|$|[^,'])")
_LOADED = re.compile(rf"(?:Model loading took|Loading model weights took) {_GIB}")
_AVAILABLE = re.compile(r"Available KV cache memory: (-?\d+(?:\.\d+)?) GiB")
_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_GRAPHS = re.compile(rf"Graph capturing finished in \d+ secs?, took {_GIB}")
_V0_SPLIT = re.compile(
    rf"model weights take {_GIB}; non_torch_memory takes {_GIB}; PyTorch activation peak memory "
    rf"takes {_GIB}; the rest of the memory reserved for KV Cache is {_GIB}"
)
_V0_TOTAL = re.compile(rf"total_gpu_memory \({_GIB}\) x gpu_memory_utilization \(([\d.]+)\)")
_V0_PROFILE = re.compile(
    rf"total_gpu_memory={_GIB}.*?peak_torch_memory={_GIB}.*?non_torch_memory={_GIB} "
    rf"kv_cache_size={_GIB} gpu_memory_utilization=([\d.]+)"
)
_REFUSAL = re.compile(
    r"max seq len \((\d+)\),? ?\(?([\d.]+) GiB KV cache is needed, which is larger than the "
    r"available KV cache memory \(([\d.]+) GiB\)(?:\. Based on the available memory, the "
    r"estimated maximum model length is (\d+))?"
)
_REFUSAL_TOKENS = re.compile(
    r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in "
    r"KV cache \((\d+)\)"
)
_SAMPLER = re.compile(r"Using FlashInfer for top-p & top-k sampling")
_SERVE = re.compile(r"vllm serve (\S+)(.*)$")
_SERVE_FLAGS = {
    "--tensor-parallel-size": "tp",
    "--pipeline-parallel-size": "pp",
    "--max-model-len": "seq",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--kv-cache-dtype": "kv_dtype",
    "--quantization": "quant",
    "--max-num-seqs": "max_num_seqs",
}
_NO_MEMORY = re.compile(r"No available memory for the cache blocks")
_FREE_LESS = re.compile(
    r"Free memory on device \(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory "
    r"utilization \(([\d.]+), ([\d.]+) GiB\)"
)
_CONFIG_KEYS = {
    "model": "model",
    "max_seq_len": "seq",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "quantization": "quant",
    "kv_cache_dtype": "kv_dtype",
    "enforce_eager": "enforce_eager",
    "dtype": "dtype",
}
_ARG_KEYS = {
    "max_model_len": "seq",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "kv_cache_dtype": "kv_dtype",
    "quantization": "quant",
    "enforce_eager": "enforce_eager",
    "model": "model",
}


def is_log(lines: Sequence[str]) -> bool:
    return sum(any(m in line for m in MARKERS) for line in lines[:20000]) >= 1


def _gib(text: str) -> int:
    return round(float(text) * GiB)


def _config(text: str, settings: dict[str, int | float | str | bool]) -> None:
    for key, raw in re.findall(r"(\w+)=('[^']*'|[^,]+)", text):
        if key in _CONFIG_KEYS:
            value = raw.strip("'")
            if key == "dtype":
                value = value.removeprefix("torch.")
            if value in ("None", "auto") and key != "kv_cache_dtype":
                continue
            name = _CONFIG_KEYS[key]
            parsed: int | str | bool = int(value) if value.isdigit() else value
            if value in ("True", "False"):
                parsed = value == "True"
            settings.setdefault(name, parsed)


def _args(text: str, settings: dict[str, int | float | str | bool]) -> None:
    try:
        args = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return
    if not isinstance(args, dict):
        return
    for key, value in args.items():
        if key in _ARG_KEYS and isinstance(value, int | float | str | bool):
            settings[_ARG_KEYS[key]] = value


def read(lines: Sequence[str]) -> LoggedSetup:
    settings: dict[str, int | float | str | bool] = {}
    facts: dict[str, int | float | str] = {}
    components: dict[str, LoggedComponent] = {}
    decision: LoggedDecision | None = None
    version = None

    def add(name: str, size: int, line: str) -> None:
        components.setdefault(name, LoggedComponent(name, "GPU 0", size, line))

    for line in lines:
        if version is None and (m := _VERSION.search(line)):
            version = m.group(1)
        if _SAMPLER.search(line):
            facts["sampler"] = "flashinfer"
        elif (m := _SERVE.search(line)) is not None:
            settings.setdefault("model", m.group(1))
            words = m.group(2).replace("=", " ").split()
            for i, word in enumerate(words[:-1]):
                if word in _SERVE_FLAGS:
                    value = words[i + 1]
                    settings.setdefault(
                        _SERVE_FLAGS[word],
                        int(value)
                        if value.isdigit()
                        else float(value)
                        if re.fullmatch(r"\d*\.\d+", value)
                        else value,
                    )
        elif (m := _LOADED.search(line)) is not None:
            add("weights", _gib(m.group(1)), line)
        elif (m := _AVAILABLE.search(line)) is not None:
            add("kv_pool", _gib(m.group(1)), line)
        elif (m := _TOKENS.search(line)) is not None:
            facts.setdefault("kv_tokens", int(m.group(1).replace(",", "")))
        elif (m := _CONCURRENCY.search(line)) is not None:
            settings.setdefault("seq", int(m.group(1).replace(",", "")))
            facts.setdefault("max_concurrency", float(m.group(2)))
        elif (m := _GRAPHS.search(line)) is not None:
            add("cuda_graphs", _gib(m.group(1)), line)
        elif (m := _V0_SPLIT.search(line)) is not None:
            add("weights", _gib(m.group(1)), line)
            add("non_torch", _gib(m.group(2)), line)
            add("activations", _gib(m.group(3)), line)
            add("kv_pool", _gib(m.group(4)), line)
        elif (m := _V0_TOTAL.search(line)) is not None:
            facts.setdefault("cuda_total_bytes", _gib(m.group(1)))
            settings.setdefault("gpu_memory_utilization", float(m.group(2)))
        elif (m := _V0_PROFILE.search(line)) is not None:
            facts.setdefault("cuda_total_bytes", _gib(m.group(1)))
            add("non_torch", _gib(m.group(3)), line)
            add("kv_pool", _gib(m.group(4)), line)
            settings.setdefault("gpu_memory_utilization", float(m.group(5)))
    joined = "".join(lines)  # lines wrapped mid-word by a terminal, a file or a reporter
    if (m := _ARGS.search(joined)) is not None:
        _args(m.group(1), settings)
    if (m := _CONFIG.search(joined)) is not None:
        _config(m.group(1), settings)
    spaced = " ".join(line.strip() for line in lines)
    if (m := _REFUSAL.search(spaced) or _REFUSAL.search(joined)) is not None:
        settings.setdefault("seq", int(m.group(1)))
        figures: dict[str, float | int | str] = {
            "max_model_len": int(m.group(1)),
            "needed_bytes": _gib(m.group(2)),
            "available_bytes": _gib(m.group(3)),
        }
        if m.group(4):
            figures["estimated_max_model_len"] = int(m.group(4))
        add("kv_pool", _gib(m.group(3)), "")
        decision = LoggedDecision(
            "refusal",
            f"vLLM refused to start: one request of {int(m.group(1)):,} tokens needs "
            f"{m.group(2)} GiB of KV cache, {m.group(3)} GiB is available",
            figures,
        )
    elif (m := _REFUSAL_TOKENS.search(spaced)) is not None:
        settings.setdefault("seq", int(m.group(1)))
        decision = LoggedDecision(
            "refusal",
            f"vLLM refused to start: --max-model-len {int(m.group(1)):,} is more than the "
            f"{int(m.group(2)):,} tokens its KV cache holds",
            {"max_model_len": int(m.group(1)), "pool_tokens": int(m.group(2))},
        )
    elif _NO_MEMORY.search(spaced):
        decision = LoggedDecision(
            "refusal", "vLLM refused to start: no memory left for the KV cache", {}
        )
    elif (m := _FREE_LESS.search(spaced)) is not None:
        decision = LoggedDecision(
            "refusal",
            f"vLLM refused to start: {m.group(1)} GiB free of {m.group(2)} GiB, less than "
            f"--gpu-memory-utilization {m.group(3)} asks ({m.group(4)} GiB)",
            {
                "free_bytes": _gib(m.group(1)),
                "total_bytes": _gib(m.group(2)),
                "gpu_memory_utilization": float(m.group(3)),
            },
        )
    devices: tuple[LoggedDevice, ...] = ()
    if decision is None and (found := pytorch.oom(lines)) is not None:
        decision, device, torch_parts = found
        devices = (device,)
        for c in torch_parts:
            components.setdefault(c.name, c)
    model_name = settings.pop("model", None)
    assumed = tuple(
        key
        for key, present in (
            ("gpu_memory_utilization", "gpu_memory_utilization" in settings),
            ("tp", "tp" in settings),
            ("kv_dtype", "kv_dtype" in settings),
        )
        if not present
    )
    return LoggedSetup(
        engine="vllm",
        engine_version=version,
        model=LoggedModel(name=str(model_name) if model_name else None),
        settings=settings,
        assumed=assumed,
        devices=devices,
        components=tuple(components.values()),
        facts=facts,
        decision=decision,
    )
