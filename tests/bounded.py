"""Run a snippet of Python in a child process held to 1.5 GB of address space and a time bound.

Hostile inputs that once took gigabytes or minutes are kept as tests; run in the test process,
a regression would take the machine's memory or hang the suite. In a child under
``RLIMIT_AS`` it ends as a MemoryError traceback or a timeout, which the test reports. The time
bound is a guard against a hang, not a speed figure: every case ends in well under a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ADDRESS_SPACE_BYTES = 1536 * 2**20
SECONDS = 60.0
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


_LIMIT = (
    "import resource\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE_BYTES}, {ADDRESS_SPACE_BYTES}))\n"
)


def run_bounded(
    code: str,
    *,
    seconds: float = SECONDS,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    codes: tuple[int, ...] = (0,),
) -> Outcome:
    """Run ``code`` (dedented) in a fresh interpreter from the repository root; fail the test on
    a timeout, a traceback, or an exit status not in ``codes``.

    Args:
        stdin: text written to its standard input (then closed); None: standard input closed.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LIMIT + textwrap.dedent(code)],
            cwd=ROOT,
            check=False,
            env={**os.environ, **(env or {})},
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            timeout=seconds,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {seconds:.0f} s") from None
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in codes, f"exit {done.returncode}: {done.stderr[-3000:]}"
    return Outcome(done.returncode, done.stdout, done.stderr)


def command(*argv: object) -> str:
    """Code that runs ``vramgui ARGV...`` as the installed command does."""
    args = ["vramgui", *(str(a) for a in argv)]
    return f"import runpy, sys\nsys.argv = {args!r}\nrunpy.run_module('vramgui', run_name='__main__')\n"
