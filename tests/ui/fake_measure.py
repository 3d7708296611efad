"""A stand-in for ``vramgui measure ... --json --progress`` in the window's tests.

    python fake_measure.py SCENARIO SOURCE DEVICE

ok: three progress lines, then a document whose measured block says what it was asked;
slow: one progress line, then waits to be stopped; fail: the command's one-line error, exit 2;
stdin: reads its standard input to the end (a question a library might ask), then as ok.
"""

import json
import sys
import time

GiB = 2**30


def progress(step: str, done: int, of: int) -> None:
    print(
        json.dumps({"progress": {"step": step, "done": done, "of": of}}),
        file=sys.stderr,
        flush=True,
    )


def main() -> int:
    scenario, source, device = sys.argv[1:4]
    if scenario == "fail":
        print("Some library warning", file=sys.stderr)
        print(
            "vramgui: transformers could not run this model (load): ValueError: no", file=sys.stderr
        )
        return 2
    progress("starting", 0, 3)
    if scenario == "stdin":
        sys.stdin.read()
    if scenario == "slow":
        progress("load", 1, 3)
        time.sleep(60)
        return 0
    progress("load", 1, 3)
    progress("prefill", 2, 3)
    figure = {"estimate": 2 * GiB, "measured": 2 * GiB + GiB // 10, "difference_bytes": -GiB // 10,
              "error": 2 / 2.1 - 1}  # fmt: skip
    measured = {
        "device": device,
        "source": source,
        "phase": "prefill",
        "tensor_bytes": figure,
        "components": {},
        "notes": ["a note"],
    }
    print(json.dumps({"schema": "vramgui.estimate/1", "measured": measured}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
