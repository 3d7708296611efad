"""Engine logs read into a ``LoggedSetup``: which engine, its version, the model, the settings,
the devices, each figure it printed and the decision it made. Standard library only; one reader
per engine, picked by the lines each engine alone prints."""

from __future__ import annotations

import re

from vramgui.core.errors import VramguiError
from vramgui.core.logs import llamacpp, ollama, pytorch, sglang, vllm
from vramgui.core.logs.setup import (
    COMPONENT_LABELS,
    COMPONENTS,
    ENGINE_NAMES,
    LoggedComponent,
    LoggedDecision,
    LoggedDevice,
    LoggedModel,
    LoggedSetup,
    component_label,
)
from vramgui.core.logs.text import MAX_CHARS, plain_lines

_OLLAMA = re.compile(
    r"ollama\[\d+\]:|^ollama\s+\| |/\.ollama/models/blobs/|ollama_llama_server", re.M
)

__all__ = [
    "COMPONENTS",
    "COMPONENT_LABELS",
    "ENGINE_NAMES",
    "LogUnreadable",
    "LoggedComponent",
    "LoggedDecision",
    "LoggedDevice",
    "LoggedModel",
    "LoggedSetup",
    "component_label",
    "read_log",
]


class LogUnreadable(VramguiError):
    """A text that is no log of an engine vramgui reads, or one that says nothing it can use."""


def read_log(text: str) -> LoggedSetup:
    """The setup ``text`` (a pasted or saved log) describes.

    Raises:
        LogUnreadable: no engine vramgui reads printed it, or it holds none of the lines that
            carry a figure, a setting or a decision.
    """
    if "\x00" in text[:4096]:
        raise LogUnreadable("this is a binary file, not a log")
    lines = plain_lines(text)
    # Ollama's llama runner prints llama.cpp's lines; journald or docker name it before each,
    # and it loads its models from its own store.
    by_ollama = _OLLAMA.search(text[:MAX_CHARS]) is not None
    if not any(line.strip() for line in lines):
        raise LogUnreadable("the log is empty")
    if any("source=" in line and "msg=" in line for line in lines[:20000]) or (
        by_ollama and llamacpp.is_log(lines)
    ):
        setup = ollama.read(lines)
    elif vllm.is_log(lines):
        setup = vllm.read(lines)
    elif sglang.is_log(lines):
        setup = sglang.read(lines)
    elif llamacpp.is_log(lines):
        setup = llamacpp.read(lines)
    elif pytorch.is_log(lines):
        setup = pytorch.read(lines)
    else:
        raise LogUnreadable(
            "no line of llama.cpp, Ollama, vLLM, SGLang or PyTorch's out-of-memory message was "
            "found: vramgui reads the start-up log of those engines"
        )
    model = setup.model
    if not (
        setup.components
        or setup.decision
        or setup.facts
        or model.metadata
        or model.name
        or model.layers
    ):
        raise LogUnreadable(
            f"the log is {setup.engine_name}'s but holds no figure, fact or decision vramgui "
            "reads (a log cut before the engine loaded the model?)"
        )
    return setup
