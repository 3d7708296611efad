"""Model loads that misbehave, for the window's tests: module-level, so that a child process
(``vramgui.ui.workers.in_process``) imports them by name.

``load("hang:PIDFILE")`` writes its process id to PIDFILE and never returns;
``load("memory:")`` asks for 8 GiB; ``load("crash:")`` dies on a signal; ``load("bug:TEXT")``
raises a RuntimeError of TEXT, as a bug in a reader would; any other source is
``vramgui.sources.resolve.load_model``'s.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from vramgui.sources.resolve import load_model
from vramgui.sources.results import ResolvedModel


def load(source: str) -> ResolvedModel:
    kind, _, rest = source.partition(":")
    if kind == "hang":
        written = Path(f"{rest}.partial")
        written.write_text(str(os.getpid()))
        written.replace(rest)  # whole or absent, never empty
        while True:
            time.sleep(1)
    if kind == "memory":
        held = bytearray(8 * 2**30)
        return held  # type: ignore[return-value] # never reached under the child's limit
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "bug":
        raise RuntimeError(rest)
    return load_model(source)
