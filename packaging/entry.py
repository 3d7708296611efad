"""The bundled executable's entry point: the ``vramgui`` command, plus ``--smoke-test``.

``vramgui`` with no arguments opens the window, with arguments it is the CLI (on Windows the
windowed bundle has no console to print to; the CLI is for installs made with pip).
``vramgui --smoke-test [options]`` starts the real window, waits for it and quits (see smoke.py).
"""

import multiprocessing
import sys

SMOKE_FLAG = "--smoke-test"


def main() -> int:
    """Run the smoke check when asked to, the ``vramgui`` command otherwise."""
    # The window reads models in child processes (vramgui.ui.workers): in the bundle, the
    # executable started as multiprocessing's server runs that, not the window.
    multiprocessing.freeze_support()
    if sys.argv[1:2] == [SMOKE_FLAG]:
        import smoke

        return smoke.main(sys.argv[2:])
    from vramgui.cli import main as vramgui_main

    return vramgui_main()


if __name__ == "__main__":
    sys.exit(main())
