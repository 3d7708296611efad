"""The offload view: where each layer lives, what the GPU holds, how fast it decodes, and the flags.

It receives plain inputs through setters (``set_model``, ``set_budget``, ``set_bandwidths``) and
asks ``vramgui.core.offload`` for everything it shows. Chart items are created once and updated in
place; moving the GPU-layers slider re-places the model and redraws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg  # after PySide6, so that pyqtgraph binds to it
from PySide6.QtCore import QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QCursor, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from vramgui.core import launch, offload
from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
from vramgui.core.offload import CPU, DISK, Bandwidths, Placement, Throughput
from vramgui.core.units import GB, Unit, format_bytes
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import CatalogGpu
from vramgui.hardware.host import DEFAULT_DISK_READ_BYTES_PER_S, pcie_bytes_per_s
from vramgui.ui import palette
from vramgui.ui.charts import PowerOfTwoAxis

PLANNER_LABELS = {
    "llamacpp": "llama.cpp (-ngl)",
    "accelerate": "accelerate device_map",
    "streaming": "Layer streaming",
}
# Colour-blind safe (Okabe-Ito), matching the breakdown chart's palette.
DEVICE_COLOURS = {"gpu": "#0072B2", "gpu2": "#56B4E9", CPU: "#E69F00", DISK: "#D55E00"}
DEVICE_LABELS = {CPU: "CPU RAM", DISK: "Disk"}
KV_ALPHA = 110
RESOURCE_LABELS = {
    offload.GPU_MEMORY: "GPU memory bandwidth",
    offload.GPU_COMPUTE: "GPU compute",
    offload.CPU_MEMORY: "CPU RAM bandwidth",
    offload.CPU_COMPUTE: "CPU compute",
    offload.PCIE: "PCIe",
    offload.DISK_READ: "disk reads",
}


def bandwidths_for(
    gpu: CatalogGpu,
    *,
    gpu_flops: float | None = None,
    disk_bytes_per_s: float = DEFAULT_DISK_READ_BYTES_PER_S,
    cpu_ram_bytes_per_s: float = offload.DEFAULT_CPU_RAM_BYTES_PER_S,
    cpu_flops: float = offload.DEFAULT_CPU_FLOPS,
) -> Bandwidths:
    """The speed model's figures for a catalog GPU on a PCIe link of its generation.

    Where the catalog has no 16-bit TFLOPS for ``gpu`` and none is given, the rate is unknown
    (infinite: decode is never called compute-bound) until the user enters one.
    """
    if gpu_flops is None:
        tflops = gpu.bf16_tflops or gpu.fp16_tflops
        gpu_flops = math.inf if tflops is None else tflops * 1e12
    return Bandwidths(
        gpu_bytes_per_s=gpu.memory_bandwidth_bytes_per_s,
        pcie_bytes_per_s=pcie_bytes_per_s(gpu.pcie_gen or 4),
        cpu_ram_bytes_per_s=cpu_ram_bytes_per_s,
        disk_bytes_per_s=disk_bytes_per_s,
        gpu_flops=gpu_flops,
        cpu_flops=cpu_flops,
    )


def device_colour(device: str) -> str:
    if offload.is_gpu(device):
        return DEVICE_COLOURS["gpu" if device.endswith(":0") else "gpu2"]
    return DEVICE_COLOURS[device]


def device_label(device: str) -> str:
    if offload.is_gpu(device):
        return f"GPU {device.split(':')[1]}"
    return DEVICE_LABELS[device]


def _theme() -> tuple[QColor, QColor]:
    colours = QGuiApplication.palette()
    return colours.color(QPalette.ColorRole.Base), colours.color(QPalette.ColorRole.Text)


LEFT_AXIS_WIDTH = 64


def _style_axes(item: pg.PlotItem, text: QColor) -> None:
    for axis in ("bottom", "left"):
        item.getAxis(axis).setTextPen(text)
        item.getAxis(axis).setPen(text)
        # Major ticks only: laying out the minor levels' labels was most of a repaint.
        item.getAxis(axis).setStyle(maxTickLevel=0, maxTextLevel=0)
    # A fixed width: otherwise longer tick labels widen the axis, which lays the plot out and
    # paints it again, several times per change.
    left = item.getAxis("left")
    left.setStyle(autoExpandTextSpace=False)
    left.setWidth(LEFT_AXIS_WIDTH)


class UnitAxis(pg.AxisItem):
    """Unit names under the bars, thinned so that labels never overlap."""

    def __init__(self) -> None:
        super().__init__("bottom")
        self.names: tuple[str, ...] = ()

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:
        count = len(self.names)
        if not count:
            return []
        step = max(1, math.ceil(count * 48 / max(size, 1)))
        shown = sorted({0, count - 1, *range(1, count - 1, step)})
        return [(1.0, [float(i) for i in shown if minVal <= i <= maxVal])]

    def tickStrings(self, values: list, scale: float, spacing: float) -> list[str]:
        out = []
        for v in values:
            name = self.names[int(v)] if 0 <= int(v) < len(self.names) else ""
            out.append(
                {"embeddings": "emb", "output": "out"}.get(name, name.removeprefix("block "))
            )
        return out


class LayerChart(pg.PlotWidget):
    """One bar per unit, coloured by where its weights live, its KV cache stacked above."""

    def __init__(self, parent: QWidget | None = None) -> None:
        background, text = _theme()
        self.axis = UnitAxis()
        # No context menu: building pyqtgraph's menus costs more than the rest of the chart.
        super().__init__(
            parent, background=background, axisItems={"bottom": self.axis}, enableMenu=False
        )
        self._text = text
        self._unit: Unit = "GiB"
        self._placement: Placement | None = None
        self._axis_label = ""
        item = self.getPlotItem()
        item.setMouseEnabled(x=False, y=False)
        item.hideButtons()
        item.showGrid(x=False, y=True, alpha=0.25)
        _style_axes(item, text)
        self.weights = pg.BarGraphItem(x=[], height=[], width=0.8, pen=pg.mkPen(None))
        self.kv = pg.BarGraphItem(x=[], y0=[], height=[], width=0.8, pen=pg.mkPen(None))
        item.addItem(self.weights)
        item.addItem(self.kv)
        item.getAxis("left").enableAutoSIPrefix(False)
        self.legend = item.addLegend(offset=(-10, 5), colCount=5, labelTextColor=text)
        kv_colour = QColor(text)
        kv_colour.setAlpha(KV_ALPHA)
        self._samples = {
            device: pg.BarGraphItem(x=[], height=[], width=1, brush=device_colour(device))
            for device in ("gpu:0", "gpu:1", CPU, DISK)
        }
        self._samples["kv"] = pg.BarGraphItem(x=[], height=[], width=1, brush=kv_colour)
        self._legend_devices: tuple[str, ...] = ()
        self.scene().sigMouseMoved.connect(self._mouse_moved)
        self.hover_text = ""
        self.setMinimumHeight(200)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._redraw()

    def set_placement(self, placement: Placement | None) -> None:
        self._placement = placement
        self._redraw()

    def _redraw(self) -> None:
        placed = self._placement.units if self._placement else ()
        biggest = max((p.unit.bytes + p.unit.kv_cache_bytes for p in placed), default=0)
        # Layers of small models read better in MiB than in thousandths of a GiB.
        name, factor = _axis_unit(self._unit, biggest)
        xs = list(range(len(placed)))
        weights = [(p.gpu_bytes or p.unit.bytes) / factor for p in placed]
        kv = [p.unit.kv_cache_bytes / factor for p in placed]
        brushes = [pg.mkBrush(device_colour(p.device)) for p in placed]
        kv_brushes = []
        for p in placed:
            colour = QColor(device_colour(p.kv_device))
            colour.setAlpha(KV_ALPHA)
            kv_brushes.append(pg.mkBrush(colour))
        self.weights.setOpts(x=xs, height=weights, brushes=brushes)
        self.kv.setOpts(x=xs, y0=weights, height=kv, brushes=kv_brushes)
        names = tuple(p.unit.name for p in placed)
        item = self.getPlotItem()
        top = max((w + k for w, k in zip(weights, kv, strict=True)), default=1.0)
        item.setXRange(-0.8, max(len(placed), 1) - 0.2, padding=0)
        item.setYRange(0, top * 1.25 or 1.0, padding=0)
        # Each of these lays the plot out again: only when they change.
        label = f"per layer ({name})"
        if label != self._axis_label:
            self._axis_label = label
            item.getAxis("left").setLabel(label, color=self._text.name())
        self._show_legend({p.device for p in placed} | {p.kv_device for p in placed})
        if names != self.axis.names:
            self.axis.names = names
            self.axis.picture = None
            self.axis.update()

    def _show_legend(self, devices: set[str]) -> None:
        shown = tuple(d for d in ("gpu:0", "gpu:1", CPU, DISK) if d in devices)
        if shown == self._legend_devices:
            return
        self._legend_devices = shown
        self.legend.clear()
        for device in shown:
            self.legend.addItem(self._samples[device], device_label(device))
        self.legend.addItem(self._samples["kv"], "KV cache (lighter: same device)")

    def text_at(self, x: float) -> str:
        """The hover text for the bar at chart position ``x``: the unit, its device and sizes."""
        if self._placement is None:
            return ""
        index = round(x)
        if not 0 <= index < len(self._placement.units) or abs(x - index) > 0.4:
            return ""
        p = self._placement.units[index]
        unit = self._unit
        lines = [
            f"{p.unit.name}: {device_label(p.device)}",
            f"weights {format_bytes(p.unit.bytes, unit)} ({p.unit.bytes:,} bytes)",
        ]
        if p.gpu_bytes > p.unit.bytes:
            lines.append(f"on the GPU with the tied head copy: {format_bytes(p.gpu_bytes, unit)}")
        if p.unit.kv_cache_bytes:
            lines.append(
                f"KV cache {format_bytes(p.unit.kv_cache_bytes, unit)} in {device_label(p.kv_device)}"
            )
        return "\n".join(lines)

    def _mouse_moved(self, position: QPointF) -> None:
        point = self.getPlotItem().vb.mapSceneToView(position)
        self.hover_text = self.text_at(point.x())
        if self.hover_text:
            QToolTip.showText(QCursor.pos(), self.hover_text, self)


def _rate(tokens_per_second: float) -> str:
    """Tokens/s with the digits that matter, from 0.0035 to 12,000."""
    if tokens_per_second >= 100:
        return f"{tokens_per_second:,.0f}"
    if tokens_per_second >= 1:
        return f"{tokens_per_second:.1f}"
    return f"{tokens_per_second:.2g}"


def _axis_unit(unit: Unit, biggest: int) -> tuple[str, int]:
    """The axis unit for bars up to ``biggest`` bytes: the chosen unit, or its mebi / mega step."""
    big, small = (
        (("GiB", 1024**3), ("MiB", 1024**2)) if unit == "GiB" else (("GB", GB), ("MB", 10**6))
    )
    return big if biggest >= big[1] else small


class _LogAxis(pg.AxisItem):
    """A log axis labelled with plain numbers at 1, 2, 3, 5 x powers of ten."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:
        values = [
            m * 10**e
            for e in range(math.floor(minVal) - 1, math.ceil(maxVal) + 1)
            for m in (1, 2, 3, 5)
        ]
        shown = [math.log10(v) for v in values if minVal <= math.log10(v) <= maxVal]
        # Keep labels apart: at most one every ~50 pixels.
        step = max(1, math.ceil(len(shown) * 50 / max(size, 1)))
        return [(1.0, shown[::step])]

    def tickStrings(self, values: list, scale: float, spacing: float) -> list[str]:
        out = []
        for v in values:
            n = 10**v
            out.append(f"{n:,.0f}" if n >= 1 else f"{n:.2g}")
        return out


class ThroughputChart(pg.PlotWidget):
    """Decode tokens/s against batch size, with the batch where it turns compute-bound."""

    def __init__(self, parent: QWidget | None = None) -> None:
        background, text = _theme()
        super().__init__(
            parent,
            background=background,
            axisItems={"bottom": PowerOfTwoAxis("bottom"), "left": _LogAxis("left")},
            enableMenu=False,
        )
        self._text = text
        item = self.getPlotItem()
        item.hideButtons()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLogMode(x=True, y=True)
        _style_axes(item, text)
        colour = palette.COMPONENT_COLOURS["weights"]
        self.curve = item.plot(
            [], [], pen=pg.mkPen(colour, width=2), symbol="o", symbolSize=6, symbolBrush=colour
        )
        self.current = pg.ScatterPlotItem(
            size=13, brush=pg.mkBrush(0, 0, 0, 0), pen=pg.mkPen(text, width=2)
        )
        item.addItem(self.current)
        self.turn_line = pg.InfiniteLine(
            angle=90,
            movable=False,
            pen=pg.mkPen(palette.COMPONENT_COLOURS["activations"], width=2),
            label="",
            labelOpts={
                "position": 0.9,
                "color": palette.COMPONENT_COLOURS["activations"],
                "movable": False,
            },
        )
        item.addItem(self.turn_line, ignoreBounds=True)
        item.getAxis("bottom").setLabel("Batch size (sequences)", color=text.name())
        item.getAxis("left").setLabel("Decode tokens/s", color=text.name())
        self.setMinimumHeight(180)

    def set_curve(
        self, curve: Sequence[Throughput], current: Throughput | None, turn: int | None
    ) -> None:
        """Draw ``curve``, mark the current batch and the first compute-bound batch."""
        self.curve.setData([t.batch for t in curve], [t.tokens_per_second for t in curve])
        if current is not None:
            self.current.setData(
                [math.log10(current.batch)], [math.log10(current.tokens_per_second)]
            )
        else:
            self.current.setData([], [])
        if turn is None:
            self.turn_line.hide()
        else:
            self.turn_line.setPos(math.log10(turn))
            self.turn_line.label.setText(f"compute-bound from {turn:,}")
            self.turn_line.show()


class OffloadView(QWidget):
    """Per-layer placement, GPU-layers slider, tokens/s vs batch and launch settings.

    Feed it with ``set_model``, ``set_budget`` and ``set_bandwidths`` (or all at once with
    ``set_inputs``); it redraws by itself. ``placementChanged`` carries each new placement (or
    None when the settings do not apply). The charts may be made beforehand and handed in (the
    window makes each in an event-loop turn of its own).
    """

    placementChanged = Signal(object)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        layer_chart: LayerChart | None = None,
        throughput_chart: ThroughputChart | None = None,
    ) -> None:
        super().__init__(parent)
        self._spec: ModelSpec | None = None
        self._workload: Workload | None = None
        self._vram_bytes = 8 * 1024**3
        self._host_bytes: int | None = None
        self._bandwidths: Bandwidths | None = None
        self._unit: Unit = "GiB"
        self._ngl: int | None = None  # None: the most that fit
        # Sized once per model and settings, so that moving the slider only re-places.
        self._llamacpp: offload.LlamaCppModel | None = None
        self._floor_bytes: int | None = None
        self.placement: Placement | None = None
        self.throughput: Throughput | None = None
        self.compute_bound_batch: int | None = None
        self._settings: tuple[launch.LaunchSettings, ...] = ()

        self.planner = QComboBox()
        for name, label in PLANNER_LABELS.items():
            self.planner.addItem(label, name)
        self.planner.setToolTip(
            "llama.cpp: the last N blocks on the GPU. accelerate: GPUs first, then CPU RAM, then "
            "disk. Streaming: every layer visits the GPU when it runs (the one-layer floor)."
        )
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("llama.cpp -ngl: how many layers go to the GPU")
        self.slider_label = QLabel()
        self.slider_label.setMinimumWidth(130)
        self.auto_button = QPushButton("Most that fit")
        self.auto_button.setToolTip("Set -ngl to the most layers the GPU budget holds")
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Planner"))
        controls.addWidget(self.planner)
        controls.addSpacing(16)
        controls.addWidget(QLabel("GPU layers"))
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.slider_label)
        controls.addWidget(self.auto_button)

        self.summary = QLabel()
        self.summary.setWordWrap(True)
        # Room for three lines whatever the text: a summary one line longer or shorter would
        # otherwise lay out and repaint both charts on each change.
        self.summary.setMinimumHeight(3 * self.summary.fontMetrics().lineSpacing() + 4)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.layer_chart = layer_chart if layer_chart is not None else LayerChart()
        self.throughput_chart = (
            throughput_chart if throughput_chart is not None else ThroughputChart()
        )

        self.spins: dict[str, QDoubleSpinBox] = {}
        form = QFormLayout()
        for key, label, suffix in (
            ("gpu_bytes_per_s", "GPU memory", " GB/s"),
            ("pcie_bytes_per_s", "PCIe", " GB/s"),
            ("cpu_ram_bytes_per_s", "CPU RAM", " GB/s"),
            ("disk_bytes_per_s", "Disk read", " GB/s"),
            ("gpu_flops", "GPU", " TFLOPS"),
            ("cpu_flops", "CPU", " TFLOPS"),
        ):
            spin = QDoubleSpinBox()
            # The lowest value of the GPU's TFLOPS reads "unknown" and stands for no limit.
            spin.setRange(0.0 if key == "gpu_flops" else 0.01, 100_000)
            spin.setDecimals(2)
            spin.setSuffix(suffix)
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(self._bandwidth_edited)
            self.spins[key] = spin
            form.addRow(label, spin)
        self.spins["gpu_flops"].setSpecialValueText("unknown")
        speeds = QGroupBox("Speeds (editable)")
        speeds.setLayout(form)

        self.engine = QComboBox()
        self.launch_text = QPlainTextEdit()
        self.launch_text.setReadOnly(True)
        self.launch_text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.launch_text.setMaximumHeight(110)
        self.launch_notes = QLabel()
        self.launch_notes.setWordWrap(True)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy these settings to the clipboard")
        launch_row = QHBoxLayout()
        launch_row.addWidget(QLabel("Launch settings"))
        launch_row.addWidget(self.engine)
        launch_row.addStretch(1)
        launch_row.addWidget(self.copy_button)

        middle = QHBoxLayout()
        middle.addWidget(self.throughput_chart, 1)
        middle.addWidget(speeds)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.summary)
        layout.addWidget(self.layer_chart, 3)
        layout.addLayout(middle, 2)
        layout.addLayout(launch_row)
        layout.addWidget(self.launch_text)
        layout.addWidget(self.launch_notes)

        self.planner.currentIndexChanged.connect(self._planner_changed)
        self.slider.valueChanged.connect(self._slider_moved)
        self.auto_button.clicked.connect(self._auto_layers)
        self.engine.currentIndexChanged.connect(self._show_settings)
        self.copy_button.clicked.connect(self.copy_settings)
        # set_inputs(..., in_turns=True) draws the speeds and settings in the next turn.
        self._rest_due = QTimer(self)
        self._rest_due.setSingleShot(True)
        self._rest_due.setInterval(0)
        self._rest_due.timeout.connect(lambda: self._draw_rest(self.placement))
        self._refresh()

    # --- inputs -------------------------------------------------------------------------------

    def set_model(self, spec: ModelSpec | None, workload: Workload | None) -> None:
        """The model and settings to place; the planner follows a llama.cpp engine choice."""
        self.set_inputs(spec, workload)

    def set_budget(self, vram_bytes: int, host_ram_bytes: int | None = None) -> None:
        """GPU memory to place into, and host RAM for offloaded layers (None: no limit)."""
        self._take_budget(vram_bytes, host_ram_bytes)
        self._refresh()

    def set_bandwidths(self, bandwidths: Bandwidths) -> None:
        """The speeds of the roofline; the spin boxes show them for editing."""
        self._take_bandwidths(bandwidths)
        self._refresh()

    def set_inputs(
        self,
        spec: ModelSpec | None,
        workload: Workload | None,
        *,
        budget: tuple[int, int | None] | None = None,
        bandwidths: Bandwidths | None = None,
        in_turns: bool = False,
    ) -> None:
        """Model, settings and, when given, budget and speeds at once: the view places once.

        Args:
            spec: the model (None: nothing to place).
            workload: its settings.
            budget: ``(vram_bytes, host_ram_bytes)`` as for :meth:`set_budget`; None keeps it.
            bandwidths: as for :meth:`set_bandwidths`; None keeps them.
            in_turns: draw the placement now and the speeds, launch settings and summary in the
                next event-loop turn (``placementChanged`` then), so that neither turn is long.
        """
        if spec is not self._spec or workload != self._workload:
            # Sized once per model and settings: a new budget alone keeps them.
            self._llamacpp = None
            self._floor_bytes = None
        self._spec, self._workload = spec, workload
        self._ngl = None
        if workload is not None and workload.engine == "llamacpp":
            blocked = self.planner.blockSignals(True)
            self.set_planner("llamacpp")
            self.planner.blockSignals(blocked)
        if budget is not None:
            self._take_budget(*budget)
        if bandwidths is not None:
            self._take_bandwidths(bandwidths)
        if in_turns:
            self._draw_placement()
            self._rest_due.start()
        else:
            self._refresh()

    def _take_budget(self, vram_bytes: int, host_ram_bytes: int | None) -> None:
        self._vram_bytes, self._host_bytes = vram_bytes, host_ram_bytes
        self._ngl = None

    def _take_bandwidths(self, bandwidths: Bandwidths) -> None:
        self._bandwidths = bandwidths
        for key, spin in self.spins.items():
            value = getattr(bandwidths, key)
            blocked = spin.blockSignals(True)
            spin.setValue(
                0.0 if math.isinf(value) else value / (1e12 if key.endswith("flops") else GB)
            )
            spin.blockSignals(blocked)

    @property
    def bandwidths(self) -> Bandwidths | None:
        """The speeds in use, as set or edited."""
        return self._bandwidths

    def set_planner(self, planner: str) -> None:
        index = self.planner.findData(planner)
        if index < 0:
            raise ValueError(f"unknown planner {planner!r}")
        self.planner.setCurrentIndex(index)

    def set_unit(self, unit: Unit) -> None:
        """Show sizes in GiB or GB."""
        if unit == self._unit:
            return
        self._unit = unit
        self.layer_chart.set_unit(unit)
        self._refresh()

    def set_gpu_layers(self, n_gpu_layers: int | None) -> None:
        """llama.cpp's -ngl; None picks the most that fit."""
        self._ngl = n_gpu_layers
        self._refresh()

    def copy_settings(self) -> None:
        """Put the shown engine's command line or JSON on the clipboard (notes left out)."""
        index = self.engine.currentIndex()
        if 0 <= index < len(self._settings):
            QGuiApplication.clipboard().setText(self._settings[index].text)

    # --- slots --------------------------------------------------------------------------------

    def _planner_changed(self) -> None:
        self._ngl = None
        self._refresh()

    def _slider_moved(self, value: int) -> None:
        self._ngl = value
        self._refresh()

    def _auto_layers(self) -> None:
        self.set_gpu_layers(None)

    def _bandwidth_edited(self) -> None:
        values = {
            key: spin.value() * (1e12 if key.endswith("flops") else GB)
            for key, spin in self.spins.items()
        }
        values["gpu_flops"] = values["gpu_flops"] or math.inf
        self._bandwidths = Bandwidths(**values)
        self._refresh()

    # --- drawing ------------------------------------------------------------------------------

    def _place(self) -> Placement | None:
        if self._spec is None or self._workload is None:
            return None
        planner = self.planner.currentData()
        workload = self._workload.with_(mode="inference")
        if self._floor_bytes is None:
            self._floor_bytes = offload.min_vram_bytes(self._spec, workload)
        if planner != "llamacpp":
            return offload.plan(
                planner, self._spec, workload, self._vram_bytes, host_ram_bytes=self._host_bytes
            )
        if self._llamacpp is None:
            self._llamacpp = offload.llamacpp_model(self._spec, workload)
        return self._llamacpp.place(
            self._vram_bytes, host_ram_bytes=self._host_bytes, n_gpu_layers=self._ngl
        )

    def _refresh(self) -> None:
        self._draw_rest(self._draw_placement())

    def _draw_placement(self) -> Placement | None:
        """Place the layers and draw them; the speeds and settings are :meth:`_draw_rest`."""
        self._rest_due.stop()
        try:
            placement = self._place()
        except VramguiError as exc:
            placement = None
            self.summary.setStyleSheet(palette.ERROR_STYLE)
            self.summary.setText(str(exc))
        self.placement = placement
        self.layer_chart.set_placement(placement)
        self._update_slider(placement)
        return placement

    def _draw_rest(self, placement: Placement | None) -> None:
        self._draw_speed(placement)
        self._draw_settings(placement)
        if placement is not None:
            self._summarise(placement)
        elif self._spec is None:
            self.summary.setStyleSheet("")
            self.summary.setText("Choose a model to see where its layers go.")
        self.placementChanged.emit(placement)

    def _update_slider(self, placement: Placement | None) -> None:
        llamacpp = placement is not None and placement.planner == "llamacpp"
        blocked = self.slider.blockSignals(True)
        if placement is not None:
            self.slider.setRange(0, placement.blocks + 1)
            self.slider.setValue(placement.gpu_layers)
        self.slider.blockSignals(blocked)
        self.slider.setEnabled(llamacpp)
        self.auto_button.setEnabled(llamacpp and self._ngl is not None)
        if placement is None:
            self.slider_label.setText("")
        elif llamacpp:
            self.slider_label.setText(f"-ngl {placement.gpu_layers} of {placement.blocks + 1}")
        else:
            self.slider_label.setText(f"{placement.gpu_layers} of {placement.blocks} on GPU")

    def _summarise(self, p: Placement) -> None:
        unit = self._unit
        used, budget = p.gpu_bytes[0], p.vram_budget_bytes[0]
        verdict = "fits" if p.fits else "does NOT fit"
        parts = [
            f"<b>GPU {format_bytes(used, unit)}</b> of {format_bytes(budget, unit)} ({verdict})",
            f"host RAM {format_bytes(p.host_bytes, unit)}",
            f"disk {format_bytes(p.disk_bytes, unit)}",
        ]
        if self._floor_bytes is not None:
            parts.append(f"one-layer floor {format_bytes(self._floor_bytes, unit)}")
        if self.throughput is not None:
            t = self.throughput
            parts.append(
                f"<b>{_rate(t.tokens_per_second)} tokens/s</b> (bound by {RESOURCE_LABELS[t.bound]})"
            )
        if self.compute_bound_batch is not None:
            parts.append(f"compute-bound from batch {self.compute_bound_batch:,}")
        if self._bandwidths is not None:
            prefill = offload.prefill_seconds(p, self._bandwidths)
            parts.append(f"prefill of {p.workload.seq:,} tokens {prefill:,.2f} s")
        self.summary.setStyleSheet("" if p.fits else palette.WARNING_STYLE)
        notes = "".join(f"<br>{note}" for note in p.notes)
        self.summary.setText(" &nbsp;·&nbsp; ".join(parts) + f"<small>{notes}</small>")

    def _draw_speed(self, placement: Placement | None) -> None:
        if placement is None or self._bandwidths is None:
            self.throughput = self.compute_bound_batch = None
            self.throughput_chart.set_curve((), None, None)
            return
        bw = self._bandwidths
        self.throughput = offload.decode_throughput(placement, bw)
        curve = offload.throughput_curve(placement, bw)
        self.compute_bound_batch = offload.compute_bound_batch(placement, bw)
        self.throughput_chart.set_curve(curve, self.throughput, self.compute_bound_batch)

    def _draw_settings(self, placement: Placement | None) -> None:
        if placement is None or self._spec is None:
            self._settings = ()
        else:
            self._settings = launch.launch_settings(self._spec, placement.workload, placement)
        chosen = self.engine.currentText()
        blocked = self.engine.blockSignals(True)
        self.engine.clear()
        for settings in self._settings:
            self.engine.addItem(settings.engine)
        index = self.engine.findText(chosen)
        self.engine.setCurrentIndex(max(index, 0))
        self.engine.blockSignals(blocked)
        self._show_settings()

    def _show_settings(self) -> None:
        index = self.engine.currentIndex()
        if not 0 <= index < len(self._settings):
            self.launch_text.setPlainText("")
            self.launch_notes.setText("")
            self.copy_button.setEnabled(False)
            return
        settings = self._settings[index]
        self.launch_text.setPlainText(settings.text)
        self.launch_notes.setText(" ".join(settings.notes))
        self.copy_button.setEnabled(True)
