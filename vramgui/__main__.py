"""``python -m vramgui``: the same as the ``vramgui`` command."""

import sys

from vramgui.cli import main

sys.exit(main())
