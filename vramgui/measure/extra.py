"""Whether the ``measure`` extra is installed, and what to install when it is not.

Asked by the command line before it imports anything heavy, and by the window, whose process must
never import torch: this module only looks packages up (``importlib.util.find_spec`` and their
installed metadata), it imports none of them.
"""

from __future__ import annotations

import importlib.util
import re
import sys

# The versions the measuring code was written and checked against (docs/accuracy.md).
REQUIREMENTS = (("torch", (2, 13)), ("transformers", (5, 24)), ("peft", (0, 21)))
INSTALL = 'pip install "vramgui[measure]"'
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def _version(name: str) -> tuple[int, ...] | None:
    # Here, not at the top: importlib.metadata costs `vramgui measure --help` a third of its start.
    import importlib.metadata

    try:
        text = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def missing_packages() -> tuple[str, ...]:
    """What is missing of the extra, one phrase per package ("torch is not installed").

    Empty when everything is installed at a version the measuring code was checked with.
    """
    problems = []
    for name, least in REQUIREMENTS:
        if importlib.util.find_spec(name) is None:
            problems.append(f"{name} is not installed")
            continue
        found = _version(name)
        if found is not None and found < least:
            wanted = ".".join(map(str, least))
            have = ".".join(map(str, found))
            problems.append(f"{name} {have} is older than the {wanted} it needs")
    return tuple(problems)


def install_hint(problems: tuple[str, ...]) -> str:
    """One paragraph: what is missing and the exact commands that install it."""
    frozen = getattr(sys, "frozen", False)
    where = (
        "Measuring runs PyTorch, which the double-click application does not bundle: install "
        "vramgui with Python and run it from there. "
        if frozen
        else ""
    )
    return (
        f"Measuring needs PyTorch, transformers and peft (the measure extra): "
        f"{'; '.join(problems)}. {where}Install them with: {INSTALL} "
        f"(without an NVIDIA GPU, a CPU build of PyTorch is enough and much smaller: "
        f"{CPU_TORCH} first)."
    )
