"""Ollama's server log: the old estimator's ``msg=offload`` line (``memory.required.*``,
``memory.weights.*``, ``memory.graph.*``), the new engine's per-device ``model weights`` / ``kv
cache`` / ``compute graph`` lines, the runner's command line, and the llama.cpp output of the
runner it hands GGUF models to."""

from __future__ import annotations

import re
from collections.abc import Sequence

from vramgui.core.logs import llamacpp
from vramgui.core.logs.setup import LoggedComponent, LoggedDecision, LoggedDevice, LoggedSetup
from vramgui.core.logs.text import parse_size

_PAIR = re.compile(r'([\w.]+|"[^"]*")=("(?:[^"\\]|\\.)*"|\S+)')
_OFFLOAD = re.compile(r'msg=(?:offload|"offload to \w+")')
_CMD_FLAGS = {
    "--ctx-size": "n_ctx",
    "--batch-size": "n_batch",
    "--n-gpu-layers": "n_gpu_layers",
    "--parallel": "n_seq_max",
    "--tensor-split": "tensor_split",
    "--kv-cache-type": "type_k",
}
_VERSION = re.compile(r"\(version ([\w.+-]+)\)|\bversion=([\w.+-]+)")
_MSGS = {"model weights": "weights", "kv cache": "kv_cache", "compute graph": "compute_buffer"}


def pairs(line: str) -> dict[str, str]:
    """An Ollama (Go slog) line's ``key=value`` pairs, quotes taken off."""
    return {k.strip('"'): v.strip('"') for k, v in _PAIR.findall(line)}


def _sizes(text: str) -> list[int]:
    """``"[22.0 GiB 22.0 GiB]"`` -> bytes each."""
    return [
        n for n in (parse_size(p) for p in re.findall(r"[\d.]+ ?[KMGT]?i?B", text)) if n is not None
    ]


def read(lines: Sequence[str]) -> LoggedSetup:
    runner = llamacpp.read(lines, engine="ollama")
    settings = dict(runner.settings)
    facts = dict(runner.facts)
    components = list(runner.components)
    devices = {d.name: d for d in runner.devices}
    decision = runner.decision
    version = None
    offload: dict[str, str] | None = None
    for line in lines:
        if "=" not in line:
            continue
        kv = pairs(line)
        if version is None and (m := _VERSION.search(line)) and "ollama" in line.lower():
            version = m.group(1) or m.group(2)
        if _OFFLOAD.search(line):
            offload = kv
        msg = kv.get("msg", "")
        if msg in _MSGS and (size := parse_size(kv.get("size", ""))) is not None:
            device = kv.get("device") or kv.get("buffer") or kv.get("backend") or "CPU"
            components.append(LoggedComponent(_MSGS[msg], _ollama_device(device), size, line))
        elif msg == "total memory" and (size := parse_size(kv.get("size", ""))) is not None:
            facts["total_memory_bytes"] = size
        elif msg in {"starting llama server", "starting runner"}:
            _command(kv.get("cmd", ""), settings)
        elif msg == "loading model":
            if "model layers" in kv:
                facts["layers_total"] = int(kv["model layers"])
        elif (m := re.search(r"offloaded (\d+)/(\d+) layers", msg)) is not None:
            settings["n_gpu_layers"] = int(m.group(1))
            facts["layers_offloaded"], facts["layers_total"] = int(m.group(1)), int(m.group(2))
        elif msg == "inference compute" and "name" in kv:
            name = kv["name"]
            devices[name] = LoggedDevice(
                name,
                kv.get("library", "") != "cpu",
                kv.get("description", ""),
                parse_size(kv.get("total", "")),
                parse_size(kv.get("available", "")),
            )
        elif msg == "system memory":
            facts["host_total_bytes"] = parse_size(kv.get("total", "")) or 0
            facts["host_free_bytes"] = parse_size(kv.get("free", "")) or 0
    if offload is not None:
        decision = _offload_decision(offload, facts, settings, components) or decision
    return LoggedSetup(
        engine="ollama",
        engine_version=version,
        model=runner.model,
        settings=settings,
        assumed=runner.assumed,
        devices=tuple(devices.values()),
        components=tuple(components),
        facts=facts,
        decision=decision,
        notes=runner.notes,
    )


def _ollama_device(name: str) -> str:
    return name if re.fullmatch(r"(CUDA|ROCm|Vulkan|Metal)\d+", name) else "CPU"


def _command(cmd: str, settings: dict[str, int | float | str | bool]) -> None:
    """The runner's settings from its command line (``--ctx-size 4096 --n-gpu-layers 41``)."""
    words = cmd.split()
    for i, word in enumerate(words):
        if word in _CMD_FLAGS and i + 1 < len(words):
            value = words[i + 1]
            settings[_CMD_FLAGS[word]] = int(value) if value.isdigit() else value
        elif word == "--flash-attn":
            settings["flash_attn"] = 1
    if "--ollama-engine" in words:
        settings["ollama_engine"] = True


def _offload_decision(
    kv: dict[str, str],
    facts: dict[str, int | float | str],
    settings: dict[str, int | float | str | bool],
    components: list[LoggedComponent],
) -> LoggedDecision | None:
    """Ollama's layer count and the sums behind it, as its estimator printed them."""
    figures: dict[str, float | int | str] = {}
    for key in (
        "memory.required.full",
        "memory.required.partial",
        "memory.required.kv",
        "memory.weights.total",
        "memory.weights.repeating",
        "memory.weights.nonrepeating",
        "memory.graph.full",
        "memory.graph.partial",
        "memory.gpu_overhead",
        "projector.weights",
        "projector.graph",
    ):
        if key in kv and (size := parse_size(kv[key])) is not None:
            figures[key] = size
    available = _sizes(kv.get("memory.available", ""))
    allocations = _sizes(
        kv.get("memory.allocations", "") or kv.get("memory.required.allocations", "")
    )
    for i, size in enumerate(available):
        figures[f"memory.available[{i}]"] = size
    for i, size in enumerate(allocations):
        figures[f"memory.required.allocations[{i}]"] = size
    try:
        offloaded = int(kv.get("layers.offload", ""))
        total = int(kv.get("layers.model", ""))
    except ValueError:
        return None
    figures["layers.offload"], figures["layers.model"] = offloaded, total
    if kv.get("layers.split"):
        figures["layers.split"] = kv["layers.split"]
    settings.setdefault("n_gpu_layers", offloaded)
    facts.setdefault("layers_offloaded", offloaded)
    facts.setdefault("layers_total", total)
    if "projector.weights" in figures:
        components.append(LoggedComponent("projector", "GPU", int(figures["projector.weights"])))
    if "memory.required.kv" in figures:
        facts["ollama_kv_bytes"] = int(figures["memory.required.kv"])
    whole = "all" if offloaded >= total else f"{offloaded} of {total}"
    return LoggedDecision(
        "offload", f"Ollama put {whole} layers on the GPU (layers.offload={offloaded})", figures
    )
