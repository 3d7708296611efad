"""The Offloading and Profiles tabs: built separately, fed from the window's controller.

Each is imported on demand, so that the window still opens in a build without one of them; the
tab then says so.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget

from vramgui.hardware import CatalogGpu, HardwareError, find_gpu
from vramgui.ui.controller import EstimateController, LoadedModel


def _optional(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"vramgui.ui.{module}")
    except ModuleNotFoundError as exc:
        if exc.name != f"vramgui.ui.{module}":
            raise
        return None


def placeholder() -> QWidget:
    """What a tab shows when its view is not part of this build."""
    label = QLabel("Not available in this build.")
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    return label


class OffloadFeed(QObject):
    """Keeps the offload view on the controller's model, settings and target GPU.

    Args:
        view: the ``OffloadView``.
        controller: the window's controller.
        catalog: GPUs whose bandwidth and FLOPS the speed model uses for the target GPU.
        host_ram_bytes: RAM available for offloaded layers (None: no limit).
        fallback_gpu: the catalog GPU assumed when the target matches none.
    """

    def __init__(
        self,
        view: QWidget,
        controller: EstimateController,
        catalog: Sequence[CatalogGpu],
        host_ram_bytes: int | None,
        fallback_gpu: str | None,
    ) -> None:
        super().__init__(view)
        self._view = view
        self._controller = controller
        self._catalog = tuple(catalog)
        self._host_ram_bytes = host_ram_bytes
        self._fallback = fallback_gpu
        self._module = importlib.import_module("vramgui.ui.offload_view")
        self._stale = True
        controller.model_changed.connect(self._changed)
        controller.workload_changed.connect(self._changed)
        controller.capacities_changed.connect(self._changed)
        view.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._view and event.type() == QEvent.Type.Show and self._stale:
            self._feed()
        return False

    def _changed(self, _what: object = None) -> None:
        # Placing every layer costs milliseconds: only a visible view follows each change.
        self._stale = True
        if self._view.isVisible():
            self._feed()

    def _feed(self) -> None:
        self._stale = False
        self._capacities(self._controller.capacities)
        self._view.set_model(self._controller.spec, self._controller.workload)  # type: ignore[attr-defined]

    def _capacities(self, capacities: tuple[tuple[str, int], ...]) -> None:
        if not capacities:
            return
        name, capacity = capacities[0]
        gpu = self._catalog_gpu(name)
        if gpu is not None:
            self._view.set_bandwidths(self._module.bandwidths_for(gpu))  # type: ignore[attr-defined]
        self._view.set_budget(capacity, self._host_ram_bytes)  # type: ignore[attr-defined]

    def _catalog_gpu(self, name: str) -> CatalogGpu | None:
        # A local GPU is named "GPU 0: NVIDIA GeForce RTX 4090"; the catalog knows the model.
        for candidate in (name.split(": ", 1)[-1], self._fallback):
            if not candidate:
                continue
            try:
                return find_gpu(candidate, self._catalog)
            except HardwareError:
                continue
        return None


def offload_view(
    controller: EstimateController,
    catalog: Sequence[CatalogGpu],
    host_ram_bytes: int | None,
    fallback_gpu: str | None,
) -> QWidget:
    """The Offloading tab, fed from ``controller``; a placeholder when not built in."""
    module = _optional("offload_view")
    if module is None:
        return placeholder()
    view: QWidget = module.OffloadView()
    OffloadFeed(view, controller, catalog, host_ram_bytes, fallback_gpu)
    return view


def profiles_view(
    controller: EstimateController, load_model: Callable[[str], LoadedModel]
) -> QWidget:
    """The Profiles tab over the user's profile folder; a placeholder when not built in."""
    module = _optional("profiles_view")
    if module is None:
        return placeholder()
    view: QWidget = module.ProfilesView(controller, load_model=load_model)
    return view
