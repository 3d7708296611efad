"""SGLang's start-up lines: ``Load weight end``, ``KV Cache is allocated``, ``Memory pool end``,
``Capture cuda graph end``, ``max_total_num_tokens=``, its server arguments and refusals.

SGLang prints GB for figures it divides by 2**30: they are GiB."""

from __future__ import annotations

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
    "sglang",
    "SGLang",
    "Load weight end",
    "KV Cache is allocated",
    "max_total_num_tokens",
    "mem-fraction-static",
    "mem_fraction_static",
    "Memory pool end",
    "exceeds the maximum allowed length",
)
_LOADED = re.compile(r"Load weight end\..*?avail mem=([\d.]+) GB, mem usage=([\d.]+) GB")
_KV = re.compile(
    r"KV Cache is allocated\..*?#tokens: (\d+), K size: ([\d.]+) GB, V size: ([\d.]+) GB"
)
_KV_MLA = re.compile(r"KV Cache is allocated\..*?#tokens: (\d+), KV size: ([\d.]+) GB")
_GRAPHS = re.compile(r"Capture cuda graph end\..*?mem usage=([\d.]+) GB")
_MAX_TOKENS = re.compile(r"max_total_num_tokens=(\d+).*?context_len=(\d+)")
_SERVER_ARGS = {
    "model_path": "model",
    "tp_size": "tp",
    "mem_fraction_static": "mem_fraction_static",
    "context_length": "seq",
    "kv_cache_dtype": "kv_dtype",
    "quantization": "quant",
}
_FLAGS = {
    "--model-path": "model",
    "--model": "model",
    "--tp": "tp",
    "--tp-size": "tp",
    "--mem-fraction-static": "mem_fraction_static",
    "--context-length": "seq",
}
_TOO_LONG = re.compile(
    r"Input length \((\d+) tokens\) exceeds the maximum allowed length \((\d+) tokens\)"
)
_NOT_ENOUGH = re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static")
_VERSION = re.compile(r"sglang(?:==| version:? )v?([\d.]+\w*)")


def is_log(lines: Sequence[str]) -> bool:
    return any(any(m in line for m in MARKERS) for line in lines[:20000])


def _value(text: str) -> int | float | str:
    text = text.strip("'\"")
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read(lines: Sequence[str]) -> LoggedSetup:
    settings: dict[str, int | float | str | bool] = {}
    facts: dict[str, int | float | str] = {}
    components: dict[str, LoggedComponent] = {}
    decision: LoggedDecision | None = None
    version = None

    def add(name: str, gib: float, line: str) -> None:
        components.setdefault(name, LoggedComponent(name, "GPU 0", round(gib * GiB), line))

    for line in lines:
        if version is None and (m := _VERSION.search(line)):
            version = m.group(1)
        if "ServerArgs(" in line or "server_args=" in line:
            for key, value in re.findall(r"(\w+)=('[^']*'|[^,)]+)", line):
                if key in _SERVER_ARGS and value not in ("None",):
                    settings.setdefault(_SERVER_ARGS[key], _value(value))
        if "launch_server" in line or "sglang serve" in line:
            words = line.split()
            for i, word in enumerate(words[:-1]):
                if word in _FLAGS:
                    settings.setdefault(_FLAGS[word], _value(words[i + 1]))
        if (m := _LOADED.search(line)) is not None:
            facts.setdefault("free_after_weights_bytes", round(float(m.group(1)) * GiB))
            add("weights", float(m.group(2)), line)
        elif (m := _KV.search(line)) is not None:
            facts.setdefault("kv_tokens", int(m.group(1)))
            add("kv_cache", float(m.group(2)) + float(m.group(3)), line)
        elif (m := _KV_MLA.search(line)) is not None:
            facts.setdefault("kv_tokens", int(m.group(1)))
            add("kv_cache", float(m.group(2)), line)
        elif (m := _GRAPHS.search(line)) is not None:
            add("cuda_graphs", float(m.group(1)), line)
        elif (m := _MAX_TOKENS.search(line)) is not None:
            facts.setdefault("max_total_num_tokens", int(m.group(1)))
            settings.setdefault("seq", int(m.group(2)))
        elif (m := _TOO_LONG.search(line)) is not None and decision is None:
            decision = LoggedDecision(
                "refusal",
                f"SGLang refused a prompt of {int(m.group(1)):,} tokens: its KV pool holds "
                f"{int(m.group(2)):,}",
                {"prompt_tokens": int(m.group(1)), "allowed_tokens": int(m.group(2))},
            )
        elif _NOT_ENOUGH.search(line) and decision is None:
            decision = LoggedDecision(
                "refusal",
                "SGLang refused to start: not enough memory for the KV pool at this "
                "--mem-fraction-static",
                {},
            )
    devices: tuple[LoggedDevice, ...] = ()
    if decision is None and (found := pytorch.oom(lines)) is not None:
        decision, device, parts = found
        devices = (device,)
        for c in parts:
            components.setdefault(c.name, c)
    name = settings.pop("model", None)
    assumed = tuple(k for k in ("mem_fraction_static", "tp") if k not in settings)
    return LoggedSetup(
        engine="sglang",
        engine_version=version,
        model=LoggedModel(name=str(name) if name else None),
        settings=settings,
        assumed=assumed,
        devices=devices,
        components=tuple(components.values()),
        facts=facts,
        decision=decision,
    )
