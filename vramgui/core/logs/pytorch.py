"""PyTorch's ``CUDA out of memory`` message, old (``(GPU 0; 6.00 GiB total capacity; ...)``) and
new (``GPU 0 has a total capacity of ...``), and ``torch.cuda.memory_summary()``'s table."""

from __future__ import annotations

import re
from collections.abc import Sequence

from vramgui.core.logs.setup import LoggedComponent, LoggedDecision, LoggedDevice, LoggedSetup
from vramgui.core.logs.text import SIZE, size_bytes

_NEW = re.compile(
    rf"Tried to allocate {SIZE}\. GPU (\d+) has a total capac(?:i)?ty of {SIZE} of which "
    rf"{SIZE} is free\.(?: Including non-PyTorch memory, this process has {SIZE} memory in use\.)?"
    rf"(?: Of the allocated memory {SIZE} is allocated by PyTorch, and {SIZE} is reserved by "
    r"PyTorch but unallocated)?"
)
_OLD = re.compile(
    rf"Tried to allocate {SIZE} \(GPU (\d+); {SIZE} total capacity; {SIZE} already allocated; "
    rf"{SIZE} free; (?:{SIZE} cached|{SIZE} reserved in total by PyTorch)"
)
_SUMMARY = re.compile(
    rf"\|\s+(Allocated memory|Active memory|Reserved memory|GPU reserved memory)\s+\|\s+{SIZE}\s+\|"
    rf"\s+{SIZE}\s+\|"
)
MARKER = "CUDA out of memory"


def is_log(lines: Sequence[str]) -> bool:
    return any(MARKER in line for line in lines)


def _b(groups: tuple[str | None, ...], i: int) -> int | None:
    number, unit = groups[i], groups[i + 1]
    return size_bytes(number, unit) if number and unit else None


def oom(lines: Sequence[str]) -> tuple[LoggedDecision, LoggedDevice, list[LoggedComponent]] | None:
    """The first out-of-memory message in ``lines``: the decision, the GPU and its figures."""
    text = " ".join(line for line in lines if line.strip())
    components: list[LoggedComponent] = []
    if (m := _NEW.search(text)) is not None:
        g = m.groups()
        request, gpu, total, free = _b(g, 0), g[2], _b(g, 3), _b(g, 5)
        in_use, allocated, reserved = _b(g, 7), _b(g, 9), _b(g, 11)
    elif (m := _OLD.search(text)) is not None:
        g = m.groups()
        request, gpu, total, allocated, free = _b(g, 0), g[2], _b(g, 3), _b(g, 5), _b(g, 7)
        cached = _b(g, 9) or _b(g, 11)
        in_use = None
        reserved = cached - allocated if cached is not None and allocated is not None else None
    else:
        return None
    device = f"GPU {gpu}"
    figures: dict[str, float | int | str] = {"device": device}
    for key, value in (
        ("request_bytes", request),
        ("total_bytes", total),
        ("free_bytes", free),
        ("process_bytes", in_use),
        ("allocated_bytes", allocated),
        ("reserved_unallocated_bytes", reserved),
    ):
        if value is not None:
            figures[key] = value
    if allocated is not None:
        components.append(LoggedComponent("torch_allocated", device, allocated))
    if reserved is not None:
        components.append(LoggedComponent("torch_reserved_free", device, reserved))
    if in_use is not None and allocated is not None and reserved is not None:
        components.append(
            LoggedComponent("non_torch", device, max(0, in_use - allocated - reserved))
        )
    if total is not None and free is not None and in_use is not None:
        components.append(LoggedComponent("other_processes", device, max(0, total - free - in_use)))
    for s in _SUMMARY.finditer(text):
        key = s.group(1).lower().replace(" ", "_")
        figures[f"summary_{key}_current_bytes"] = size_bytes(s.group(2), s.group(3))
        figures[f"summary_{key}_peak_bytes"] = size_bytes(s.group(4), s.group(5))
    # The request is said by the explanation, beside the free memory, in the reader's unit.
    summary = f"CUDA out of memory on {device}"
    return (
        LoggedDecision("oom", summary, figures),
        LoggedDevice(device, True, total_bytes=total, free_bytes=free),
        components,
    )


def read(lines: Sequence[str]) -> LoggedSetup:
    found = oom(lines)
    if found is None:
        return LoggedSetup(
            engine="pytorch",
            notes=("the log says 'CUDA out of memory' but not in a form PyTorch prints it",),
        )
    decision, device, components = found
    return LoggedSetup(
        engine="pytorch", devices=(device,), components=tuple(components), decision=decision
    )
