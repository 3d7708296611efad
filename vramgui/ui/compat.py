"""Work-arounds for defects of the Qt bindings, applied once by the application and the UI tests."""

from __future__ import annotations

import ctypes
import linecache
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


# PySide6 reads the source code of every module imported after it, to see whether the module uses
# its __feature__ switches (PYSIDE-2029: inspect.getsource in support/feature.py), and linecache
# keeps every line read for the life of the process. The window imports much after start-up (the
# Profiles tab's pyqtgraph and numpy, the Hub client, http and json machinery on the first
# search): in the first hundred actions of the soak test that was 10 MiB in 105,000 strings,
# kept only in case a traceback ever showed those lines (it reads them again if one does).
_FEATURE_MODULE = "PySide6.support.feature"


def forget_imported_sources() -> None:
    """Let PySide6 read a new module's source without linecache keeping it."""
    feature = sys.modules.get(_FEATURE_MODULE)
    check = getattr(feature, "_mod_uses_pyside", None)
    if check is None or getattr(check, "forgets_sources", False):
        return

    def uses_pyside(module: object) -> bool:
        before = set(linecache.cache)
        try:
            return bool(check(module))
        finally:
            for name in set(linecache.cache) - before:
                linecache.cache.pop(name, None)

    uses_pyside.forgets_sources = True  # type: ignore[attr-defined]
    feature._mod_uses_pyside = uses_pyside  # type: ignore[union-attr]
    linecache.clearcache()  # what start-up imports left there
