"""The inference engines, one module each, behind one interface (``base.Engine``).

``engine(key)`` is the engine a workload names (``Workload.engine``, ``--engine``); ``ENGINES``
lists them in the order the front ends offer them; ``planner(key)`` is an offload planner
(``--planner``) with the engine it loads the model with. The registry is the modules of this
package: adding an engine is adding a module that defines ``ENGINE`` (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import TypeVar

from vramgui.core.engines.base import Engine, Planner, StartUp
from vramgui.core.errors import WorkloadError

_T = TypeVar("_T")

__all__ = [
    "ENGINES",
    "ENGINE_KEYS",
    "PLANNERS",
    "PLANNER_KEYS",
    "Engine",
    "Planner",
    "StartUp",
    "default_planner",
    "engine",
    "planner",
    "planner_engine",
]

# Modules of the package that are not an engine.
_NOT_ENGINES = frozenset({"base"})


def _discover() -> tuple[Engine, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_ENGINES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        one = getattr(module, "ENGINE", None)
        if not isinstance(one, Engine):
            raise TypeError(f"{module.__name__} defines no ENGINE")
        found.append(one)
    return tuple(sorted(found, key=lambda e: e.order))


ENGINES: tuple[Engine, ...] = _discover()
ENGINE_KEYS: tuple[str, ...] = tuple(e.key for e in ENGINES)
_BY_KEY = {e.key: e for e in ENGINES}
PLANNERS: tuple[Planner, ...] = tuple(
    sorted((p for e in ENGINES for p in e.planners), key=lambda p: p.order)
)
PLANNER_KEYS: tuple[str, ...] = tuple(p.key for p in PLANNERS)
_PLANNER_BY_KEY = {p.key: p for p in PLANNERS}


def engine(key: str) -> Engine:
    """The engine ``key`` names.

    Raises:
        WorkloadError: no engine is called so.
    """
    return _named(_BY_KEY, "engine", key)


def planner(key: str) -> Planner:
    """The offload planner ``key`` names.

    Raises:
        WorkloadError: no planner is called so.
    """
    return _named(_PLANNER_BY_KEY, "planner", key)


def _named(table: Mapping[str, _T], what: str, key: str) -> _T:
    try:
        return table[key]
    except KeyError:
        raise WorkloadError(f"{what} must be one of {', '.join(table)}; got {key!r}") from None


def planner_engine(key: str) -> Engine:
    """The engine the offload planner ``key`` names loads the model with.

    Raises:
        WorkloadError: no planner is called so.
    """
    return engine(planner(key).engine)


def default_planner(key: str) -> Planner:
    """The planner that places a model served by the engine ``key``: its own first, else the
    first of an engine that runs the model's PyTorch code (accelerate's ``device_map``).

    Raises:
        WorkloadError: no engine is called so.
    """
    own = engine(key).planners
    if own:
        return min(own, key=lambda p: p.order)
    return next(p for p in PLANNERS if planner_engine(p.key).eager_pytorch)
