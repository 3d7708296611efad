"""Work-arounds for defects of the Qt bindings, applied once by the application and the UI tests."""

from __future__ import annotations

import ctypes
import linecache
import sys

import PySide6

# PySide6 6.12 hands Python the result of every void method (None) and of every signal emit
# (True / False) without taking a reference to it. From Python 3.12 on these objects are immortal
# and nothing happens; on 3.11 each call takes one reference away, and after some tens of
# thousands of calls (minutes of use) the interpreter aborts with "none_dealloc: deallocating
# None" or "bool_dealloc". Giving them a reference count no session can exhaust makes them as good
# as immortal there too.
_RESERVE = 1 << 40
_SINGLETONS = (None, True, False)
# The PySide6 releases that drop those references, from the first up to (not including) the
# last: 6.12.0 does (200 void calls: None 200 references short, 200 emits: True 200 short);
# 6.10.3 and 6.11.3 do not. tests/ui/test_compat.py fails when the installed release behaves
# otherwise, so that the range follows PySide6's fixes and the reserve goes once none needs it.
DROPPING_RELEASES = ((6, 12), (6, 13))


def needs_reserve(
    pyside: tuple[int, ...] = PySide6.__version_info__[:2],
    python: tuple[int, ...] = sys.version_info[:2],
) -> bool:
    """Whether this PySide6 on this Python drops references to None, True and False."""
    first, end = DROPPING_RELEASES
    return python < (3, 12) and first <= pyside[:2] < end


def keep_singletons_alive() -> None:
    """Make None, True and False practically immortal where :func:`needs_reserve` says so."""
    if not needs_reserve():
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
