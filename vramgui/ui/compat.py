"""Work-arounds for defects of the Qt bindings, applied once by the application and the UI tests."""

from __future__ import annotations

import ctypes
import sys

# PySide6 6.12 hands Python the result of every void method (None) and of every signal emit
# (True / False) without taking a reference to it. From Python 3.12 on these objects are immortal
# and nothing happens; on 3.11 each call takes one reference away, and after some tens of
# thousands of calls (minutes of use) the interpreter aborts with "none_dealloc: deallocating
# None" or "bool_dealloc". Giving them a reference count no session can exhaust makes them as good
# as immortal there too.
_RESERVE = 1 << 40
_SINGLETONS = (None, True, False)


def keep_singletons_alive() -> None:
    """Make None, True and False practically immortal on Python < 3.12 (a no-op from 3.12 on)."""
    if sys.version_info >= (3, 12):
        return
    for obj in _SINGLETONS:
        if sys.getrefcount(obj) < _RESERVE:
            # ob_refcnt is the first field of every PyObject in release builds of CPython.
            ctypes.c_ssize_t.from_address(id(obj)).value += _RESERVE
