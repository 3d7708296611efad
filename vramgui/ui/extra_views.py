"""The Serving, Offloading and Profiles tabs: built when first shown, fed from the window's
controller.

Neither view costs anything before the window first paints: each tab holds a light
:class:`LazyTab` that builds its view the first time it is shown. The view's module (for the
Profiles tab with pyqtgraph and numpy, most of a second) is imported on a worker thread; the view
is then built on the GUI thread one slice per event-loop turn (charts, first feed), so that no
turn keeps the window from answering for long. A build without one of the views still opens; the tab then says so.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Generator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from vramgui.answers.offload import CardSpeeds, bandwidths_for, card_speeds
from vramgui.core.units import Unit
from vramgui.hardware import CatalogGpu, HardwareError, find_gpu
from vramgui.profiles import OffloadSettings
from vramgui.ui.controller import EstimateController
from vramgui.ui.workers import Worker, submit

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel

# Building a view from its imported module: each ``next`` is one slice, run in its own
# event-loop turn; the generator returns the view.
BuildSteps = Generator[None, None, QWidget]
OFFLOAD_MODULE = "vramgui.ui.offload_view"
SERVING_MODULE = "vramgui.ui.capacity_view"
PROFILES_MODULE = "vramgui.ui.profiles_view"
# The offload view is placed this long after the last change (or after its tab is shown): a
# slider drag places once, and never in the event-loop turn that redraws the estimate.
FEED_DELAY_MS = 50


def _built_in(module: str) -> bool:
    # Finds the module without importing it: the import is part of the deferred build.
    return importlib.util.find_spec(module) is not None


def placeholder() -> QWidget:
    """What a tab shows when its view is not part of this build."""
    label = QLabel("Not available in this build.")
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    return label


class LazyTab(QWidget):
    """Stands in for a tab's view and builds it when the tab is first shown.

    The window sees one widget that answers ``set_unit`` (kept and handed on once the view
    exists) and, for the Profiles tab, ``save_current``. :meth:`view` builds the view at once
    when something needs it before it is shown.

    Args:
        module: the view's module, imported on a worker thread.
        build: the module -> the generator of the building slices (see ``BuildSteps``).

    Signals:
        built(QWidget): the view exists and is in place.
    """

    built = Signal(QWidget)

    def __init__(
        self,
        module: str,
        build: Callable[[ModuleType], BuildSteps],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._module_name = module
        self._build = build
        self._importing: Worker | None = None
        self._steps: BuildSteps | None = None
        self._view: QWidget | None = None
        self._unit: Unit | None = None
        self._loading = QLabel("Loading…")
        self._loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = self._column = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._loading)
        # One slice per turn: the tab shows its "Loading…" at once and the input stays live.
        self._next_slice = QTimer(self)
        self._next_slice.setSingleShot(True)
        self._next_slice.setInterval(0)
        self._next_slice.timeout.connect(self._run_slice)

    @property
    def is_built(self) -> bool:
        """Whether the view exists yet."""
        return self._view is not None

    def view(self) -> QWidget:
        """The view, built now (all remaining slices at once) if it does not exist yet."""
        self._next_slice.stop()
        if self._importing is not None:
            self._importing.cancel()
            self._importing = None
        if self._steps is None and self._view is None:
            self._steps = self._build(importlib.import_module(self._module_name))
        while self._view is None:
            self._advance()
        return self._view

    def set_unit(self, unit: Unit) -> None:
        """Show sizes in GiB or GB (handed on to the view, now or once it is built)."""
        self._unit = unit
        if self._view is not None:
            _set_unit(self._view, unit)

    def save_current(self) -> None:
        """The view's ``save_current`` (File > Save profile works before the tab is opened)."""
        saver = getattr(self.view(), "save_current", None)
        if callable(saver):
            saver()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._view is None and self._steps is None and self._importing is None:
            name = self._module_name
            self._importing = submit(
                lambda: importlib.import_module(name), self._imported, self._import_failed
            )

    def _imported(self, module: ModuleType) -> None:
        self._importing = None
        if self._steps is None and self._view is None:
            self._steps = self._build(module)
            self._next_slice.start()

    def _import_failed(self, exc: Exception) -> None:
        self._importing = None
        self._loading.setText(f"This tab could not be loaded: {type(exc).__name__}: {exc}")

    def _run_slice(self) -> None:
        self._advance()
        if self._view is None:
            self._next_slice.start()

    def _advance(self) -> None:
        steps = self._steps
        if steps is None:
            return
        try:
            next(steps)
        except StopIteration as done:
            self._install(done.value)

    def _install(self, view: QWidget) -> None:
        self._view = view
        self._steps = None
        if self._unit is not None:
            _set_unit(view, self._unit)
        layout = self._column
        layout.removeWidget(self._loading)
        self._loading.deleteLater()
        layout.addWidget(view)
        self.built.emit(view)


def _set_unit(view: QWidget, unit: Unit) -> None:
    set_view_unit = getattr(view, "set_unit", None)
    if callable(set_view_unit):
        set_view_unit(unit)


def view_of(tab: QWidget) -> QWidget:
    """The real view behind a tab of the window (built now if it is a :class:`LazyTab`)."""
    return tab.view() if isinstance(tab, LazyTab) else tab


class OffloadFeed(QObject):
    """Keeps the offload view on the controller's model, settings and target GPU.

    Only a visible view follows the controller; a burst of changes (a model and its settings, a
    slider drag) is placed once, ``FEED_DELAY_MS`` after the last.

    Args:
        view: the ``OffloadView``.
        controller: the window's controller.
        catalog: gives the GPUs whose bandwidth and FLOPS the speed model uses for the target GPU
            (the catalog and the cards added by hand, as they are now).
        fallback_gpu: the catalog GPU whose speeds stand in for those a card the catalog lacks
            does not have (said under the speeds).
    """

    def __init__(
        self,
        view: QWidget,
        controller: EstimateController,
        catalog: Callable[[], Sequence[CatalogGpu]],
        fallback_gpu: str | None,
    ) -> None:
        super().__init__(view)
        self._view = view
        self._controller = controller
        self._catalog = catalog
        self._fallback = fallback_gpu
        self._module = importlib.import_module(OFFLOAD_MODULE)
        self._stale = True
        self._due = QTimer(self)
        self._due.setSingleShot(True)
        self._due.setInterval(FEED_DELAY_MS)
        self._due.timeout.connect(self._feed_if_visible)
        controller.model_changed.connect(self._changed)
        controller.workload_changed.connect(self._changed)
        # A draft model is read after the settings that name it: the estimate follows it.
        controller.estimate_changed.connect(self._draft_read)
        controller.estimate_failed.connect(self._draft_read)
        controller.capacities_changed.connect(self._changed)
        controller.host_changed.connect(self._changed)
        # The tab's host RAM, disk and placement time the setup everywhere in the window.
        view.hostEdited.connect(self._host_edited)  # type: ignore[attr-defined]
        view.placementChosen.connect(controller.set_placement)  # type: ignore[attr-defined]
        controller.placement_changed.connect(self._placement_changed)
        view.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._view and event.type() == QEvent.Type.Show and self._stale:
            # After the tab has painted: showing it and placing the model are two turns.
            self._due.start()
        return False

    def feed(self) -> None:
        """Place the controller's current model and settings now."""
        self._due.stop()
        self._stale = False
        self._view.set_inputs(  # type: ignore[attr-defined]
            self._controller.spec,
            self._controller.workload,
            gpus=self._choices(self._controller.capacities),
            host=self._controller.host,
            draft=self._controller.draft,
            in_turns=True,
        )
        if self._controller.placement is not None:
            # New inputs reset the tab's -ngl: the placement the window times is set again.
            self._placement_changed(self._controller.placement)

    def _placement_changed(self, placement: OffloadSettings | None) -> None:
        # Advice applied, a profile opened: the tab shows the placement the window times.
        saved = placement or OffloadSettings()
        self._view.set_llamacpp_placement(  # type: ignore[attr-defined]
            saved.n_gpu_layers, saved.cpu_moe, saved.n_cpu_moe, saved.op_offload
        )

    def _host_edited(self, ram_bytes: int | None, disk_bytes_per_s: float) -> None:
        disk = self._controller.machine_host.disk_bytes_per_s
        self._controller.set_host(ram_bytes, None if disk_bytes_per_s == disk else disk_bytes_per_s)

    def _draft_read(self, _what: object = None) -> None:
        if self._controller.draft is not self._view.draft:  # type: ignore[attr-defined]
            self._changed()

    def _changed(self, _what: object = None) -> None:
        # Placing every layer costs milliseconds: only a visible view follows each change.
        self._stale = True
        if self._view.isVisible():
            self._due.start()

    def _feed_if_visible(self) -> None:
        if self._stale and self._view.isVisible():
            self.feed()

    def _choices(self, capacities: tuple[tuple[str, int], ...]) -> list[object]:
        """Every checked GPU, with the speeds of its catalog entry; a card the catalog lacks
        (added by hand, a local GPU it does not know) with its own figures and the fallback
        GPU's for those it lacks, said under the speeds."""
        stand_in = self._catalog_gpu(self._fallback) if self._fallback else None
        choices = []
        for name, capacity in capacities:
            gpu = self._catalog_gpu(name)
            if stand_in is None:
                speeds = None if gpu is None else CardSpeeds(gpu)
            else:
                speeds = card_speeds(name, gpu, stand_in)
            bandwidths = (
                None if speeds is None else bandwidths_for(speeds.gpu, self._controller.host)
            )
            assumed = "" if speeds is None else assumed_text(speeds)
            choices.append(self._module.GpuChoice(name, capacity, bandwidths, assumed))
        return choices

    def _catalog_gpu(self, name: str) -> CatalogGpu | None:
        gpus = tuple(self._catalog())
        # A card added by hand is known by its own name, never taken for another.
        own = next((gpu for gpu in gpus if gpu.name == name), None)
        if own is not None:
            return own
        # A local GPU is named "GPU 0: NVIDIA GeForce RTX 4090"; the catalog knows the model.
        try:
            return find_gpu(name.split(": ", 1)[-1], gpus)
        except HardwareError:
            return None


def assumed_text(speeds: CardSpeeds) -> str:
    """The speeds assumed for a card the catalog lacks, as the window says it; "" if none."""
    if not speeds.assumed:
        return ""
    words = {"bandwidth": "memory bandwidth", "tflops": "16-bit tensor rate", "pcie": "PCIe"}
    figures = ", ".join(f"{words[figure]} {value}" for figure, value in speeds.assumed)
    return (
        f"{speeds.gpu.name}: speeds assumed, the {speeds.stand_in}'s ({figures}). "
        "Set its own above."
    )


def _offload_steps(
    module: ModuleType,
    controller: EstimateController,
    catalog: Callable[[], Sequence[CatalogGpu]],
    fallback_gpu: str | None,
) -> BuildSteps:
    layer_chart = module.LayerChart()
    yield
    throughput_chart = module.ThroughputChart()
    yield
    view: QWidget = module.OffloadView(layer_chart=layer_chart, throughput_chart=throughput_chart)
    feed = OffloadFeed(view, controller, catalog, fallback_gpu)
    yield
    # Placed before it is shown: its first paint already has the model.
    feed.feed()
    return view


def _profiles_steps(
    module: ModuleType, controller: EstimateController, load_model: Callable[[str], ResolvedModel]
) -> BuildSteps:
    # Imported with the profiles view, on the worker.
    compare_view = importlib.import_module("vramgui.ui.compare_view")
    chart = compare_view.CompareChart()
    yield
    compare = compare_view.CompareView(chart=chart)
    yield
    view: QWidget = module.ProfilesView(controller, load_model=load_model, compare_view=compare)
    return view


def offload_view(
    controller: EstimateController,
    catalog: Callable[[], Sequence[CatalogGpu]],
    fallback_gpu: str | None,
) -> QWidget:
    """The Offloading tab, fed from ``controller``; a placeholder when not built in."""
    if not _built_in(OFFLOAD_MODULE):
        return placeholder()
    return LazyTab(
        OFFLOAD_MODULE,
        lambda module: _offload_steps(module, controller, catalog, fallback_gpu),
    )


def _serving_steps(module: ModuleType, controller: EstimateController) -> BuildSteps:
    chart = module.ServingChart()
    yield
    view: QWidget = module.CapacityView(controller, chart)
    return view


def serving_view(controller: EstimateController) -> QWidget:
    """The Serving tab: vLLM's start-up on every chosen GPU; a placeholder when not built in."""
    if not _built_in(SERVING_MODULE):
        return placeholder()
    return LazyTab(SERVING_MODULE, lambda module: _serving_steps(module, controller))


def profiles_view(
    controller: EstimateController, load_model: Callable[[str], ResolvedModel]
) -> QWidget:
    """The Profiles tab over the user's profile folder; a placeholder when not built in."""
    if not _built_in(PROFILES_MODULE):
        return placeholder()
    return LazyTab(PROFILES_MODULE, lambda module: _profiles_steps(module, controller, load_model))
