"""The offload view: where each layer lives, what the GPU holds, how fast it decodes, and the flags.

It receives plain inputs through setters (``set_model``, ``set_gpus``, ``set_budget``,
``set_bandwidths``) and asks ``vramgui.core.offload`` for everything it shows (the charts are in
``offload_charts``); moving the GPU-layers slider re-places the model and redraws.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import shiboken6
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSlider,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vramgui.answers import offload as answers
from vramgui.answers import placement as offload
from vramgui.answers.estimate import Refusal, refusal
from vramgui.answers.host import SET, THIS_MACHINE, UNKNOWN_HOST, HostSettings
from vramgui.answers.offload import OffloadAnswer, plan_offload
from vramgui.answers.placement import Bandwidths, FitResult, LlamaCppLayout, Placement, Throughput
from vramgui.core import engines
from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
from vramgui.core.units import GB, GiB, Unit, format_bytes, format_rate, format_wait
from vramgui.core.workload import EngineConflictError, Workload, adjusted, served_family
from vramgui.ui import palette, wording
from vramgui.ui.offload_charts import (
    FIRST_TOKEN,
    RESOURCE_LABELS,
    LayerChart,
    MemorySpeedChart,
    ThroughputChart,
)
from vramgui.ui.widgets import guard_wheel
from vramgui.ui.workers import Worker, submit

PLANNER_LABELS = {p.key: p.label for p in engines.PLANNERS}
PLANNER_HINT = (
    "llama.cpp: the last N blocks on the GPU. accelerate: GPUs first, then CPU RAM, then disk. "
    "Streaming: every layer visits the GPU when it runs (the one-layer floor)."
)
GGUF_PLANNER_REASON = (
    "GGUF weights are placed by llama.cpp: accelerate and streaming load through transformers, "
    "which dequantizes GGUF to 16 bits."
)
SPEED_HINTS = {
    "gpu": f"{offload.GPU_MEMORY_EFFICIENCY:.0%} of the GPU's peak bandwidth: what decoding "
    "reached in the llama.cpp measurements of docs/offload.md (the peak overrates it by 19-46 %).",
    "ram": f"{offload.HOST_MEMORY_EFFICIENCY:.0%} of host RAM's peak bandwidth (dual-channel "
    "DDR5-4800 unless you enter yours), as measured in docs/offload.md.",
    "box": "The speeds the estimate assumes. Memory speeds are the shares of the peaks that "
    "decoding reaches; PCIe and disk are practical figures; FLOP rates are peaks.",
}


_SPEED_FIELDS = (
    ("gpu_bytes_per_s", "GPU memory", " GB/s"),
    ("pcie_bytes_per_s", "PCIe", " GB/s"),
    ("cpu_ram_bytes_per_s", "CPU RAM", " GB/s"),
    ("disk_bytes_per_s", "Disk read", " GB/s"),
    ("gpu_flops", "GPU", " TFLOPS"),
    ("cpu_flops", "CPU", " TFLOPS"),
)


@dataclass(frozen=True, slots=True)
class GpuChoice:
    """A GPU the offload view can plan for.

    Attributes:
        name: as the GPUs panel names it.
        capacity_bytes: its memory.
        bandwidths: its speeds, or None when the catalog does not know the GPU.
        assumed: which of those speeds are assumed (a card the catalog lacks), said under the
            speeds; "" when none is.
    """

    name: str
    capacity_bytes: int
    bandwidths: Bandwidths | None = None
    assumed: str = ""


class OffloadView(QWidget):
    """Per-layer placement, GPU-layers slider, tokens/s vs batch and launch settings.

    Feed it with ``set_model``, ``set_budget`` and ``set_bandwidths``, or the GPUs to choose from
    with ``set_gpus`` (or all at once with ``set_inputs``); it redraws by itself.
    ``placementChanged`` carries each new placement (or None when the settings do not apply).
    The charts may be made beforehand and handed in (the window makes each in an event-loop turn
    of its own).
    """

    placementChanged = Signal(object)
    # The user's host RAM and disk speed: (RAM bytes or None for this machine's, disk bytes/s).
    hostEdited = Signal(object, float)
    # The user's llama.cpp placement: (-ngl or None for the fastest, --n-cpu-moe, --cpu-moe,
    # op offload).
    placementChosen = Signal(object, int, bool, bool)

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
        self._host: HostSettings = UNKNOWN_HOST
        # This machine's available RAM, what the host RAM box returns to at "this machine".
        self._machine_ram: int | None = None
        self.answer: OffloadAnswer | None = None
        self._bandwidths: Bandwidths | None = None
        # The GPU memory speed its box shows from the last plan (GB/s; NaN: the one given).
        self._gpu_memory_shown = math.nan
        self._gpus: tuple[GpuChoice, ...] = ()
        self._unit: Unit = "GiB"
        self._ngl: int | None = None  # None: the most that fit
        # Sized once per model and settings, so that moving the slider only re-places.
        self._llamacpp: offload.LlamaCppModel | None = None
        self._floor_bytes: int | None = None
        self._adjustments: tuple[str, ...] = ()
        # Why the Estimate tab refuses the settings given (None: it does not), with the draft
        # model of speculative decoding it estimates with.
        self.refusal: Refusal | None = None
        self._draft: ModelSpec | None = None
        self.placement: Placement | None = None
        self.throughput: Throughput | None = None
        self.compute_bound_batch: int | None = None
        self._settings: tuple[answers.LaunchSettings, ...] = ()
        # Several GPUs: the indices (into the GPU list) of the GPUs that join the first, in order;
        # the same index twice is two cards of that kind.
        self._extra: list[int] = []
        self._n_cpu_moe = 0  # layers whose routed experts stay in host RAM (llama.cpp)
        self._fit: FitResult | None = None  # llama.cpp's --fit, until a control is moved
        self._curves_job: Worker | None = None
        self._fit_job: Worker | None = None
        self.curves: tuple[tuple[offload.CurvePoint, ...], tuple[offload.CurvePoint, ...]] = (
            (),
            (),
        )

        self.gpu = QComboBox()
        self.gpu.setToolTip("The GPU to plan for: one of those checked in the GPUs panel")
        # As wide as a GPU's name, whatever the longest: the tab fits a laptop screen.
        self.gpu.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.gpu.setMinimumContentsLength(18)
        self.gpu.setMaximumWidth(self.gpu.fontMetrics().horizontalAdvance("x" * 48))
        self.more_gpus = QToolButton()
        self.more_gpus.setText("+ GPUs")
        self.more_gpus.setToolTip(
            "Spread the model over several GPUs (CUDA0, CUDA1... in this order): the first is "
            "chosen on the left, the others here; a GPU checked twice is two of those cards"
        )
        self.more_gpus.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more_gpus.setMenu(QMenu(self.more_gpus))
        self.split_mode = QComboBox()
        self.split_mode.addItem("layers", "layer")
        self.split_mode.addItem("rows", "row")
        self.split_mode.setToolTip(
            "llama.cpp --split-mode: whole layers per GPU, each with its KV cache (layer), or every "
            "matrix shared out by rows with the KV cache on the first GPU (row)"
        )
        self.planner = QComboBox()
        for name, label in PLANNER_LABELS.items():
            self.planner.addItem(label, name)
        self.planner.setToolTip(PLANNER_HINT)
        self.margin = QDoubleSpinBox()
        self.margin.setRange(0.0, 64.0)
        self.margin.setSingleStep(0.25)
        self.margin.setDecimals(2)
        self.margin.setSuffix(" GiB")
        self.margin.setValue(offload.DEFAULT_MARGIN_BYTES / GiB)
        self.margin.setKeyboardTracking(False)
        self.margin.setToolTip(
            "GPU memory the most that fit leave free, for the driver, the desktop and what the "
            "engine allocates later (llama.cpp's own fitting keeps 1 GiB: --fit-target 1024)"
        )
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("llama.cpp -ngl: how many layers go to the GPU")
        self.slider_label = QLabel()
        self.slider_label.setMinimumWidth(
            self.slider_label.fontMetrics().horizontalAdvance("-ngl 888 of 888") + 8
        )
        self.auto_button = QPushButton("Most that fit")
        self.auto_button.setToolTip(
            "Set -ngl to the most layers the GPU holds with the safety margin kept free"
        )
        self.experts_slider = QSlider(Qt.Orientation.Horizontal)
        self.experts_slider.setToolTip(
            "llama.cpp --n-cpu-moe: the routed experts of the first N layers stay in host RAM "
            "(all of them: --cpu-moe); the attention, router, shared experts and KV cache stay "
            "on the GPU"
        )
        self.op_offload = QCheckBox("Op offload")
        self.op_offload.setChecked(True)  # llama.cpp's default
        self.op_offload.setToolTip(
            "On (llama.cpp's default): for prompt batches of 32 tokens or more the GPU runs the "
            "products of the experts kept in host RAM, copying each expert matrix into its "
            "compute buffer first. Off (--no-op-offload): the CPU runs them; the GPU needs less "
            "memory and prompt processing is slower"
        )
        self.experts_label = QLabel()
        self.experts_label.setMinimumWidth(
            self.experts_label.fontMetrics().horizontalAdvance("--n-cpu-moe 888 of 888") + 8
        )
        self.fit_button = QPushButton("Fit like llama.cpp")
        self.fit_button.setToolTip(
            "Choose the GPU layers, the split and the layers whose experts stay in host RAM the "
            "way llama.cpp's --fit does, keeping the margin free on every GPU"
        )
        self.experts_title = QLabel("Experts in host RAM")
        choices = QHBoxLayout()
        # The GPU's name takes the row's spare width: local GPUs have long names.
        choices.addWidget(QLabel("GPU"))
        choices.addWidget(self.gpu, 1)
        choices.addWidget(self.more_gpus)
        self.split_label = QLabel("split by")
        choices.addWidget(self.split_label)
        choices.addWidget(self.split_mode)
        # The planner on a row of its own: beside the GPU it made the tab wider than the window
        # leaves it at 1280 x 720, and the tab scrolled sideways.
        planning = QHBoxLayout()
        planning.addWidget(QLabel("Planner"))
        planning.addWidget(self.planner)
        planning.addStretch(1)
        planning.addWidget(self.fit_button)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("GPU layers"))
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.slider_label)
        controls.addWidget(self.auto_button)
        controls.addSpacing(12)
        controls.addWidget(QLabel("Keep free"))
        controls.addWidget(self.margin)
        experts = QHBoxLayout()
        experts.addWidget(self.experts_title)
        experts.addWidget(self.experts_slider, 1)
        experts.addWidget(self.experts_label)
        experts.addWidget(self.op_offload)

        # The plan is the planner's engine's: the Estimate tab's refusal of the settings given
        # (vLLM's scheduler, training) is said above it, never left unsaid.
        self.refused = QLabel()
        self.refused.setWordWrap(True)
        self.refused.setStyleSheet(palette.WARNING_STYLE)
        self.refused.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refused.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.refused.hide()
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        # Room for three lines whatever the text: a summary one line longer or shorter would
        # otherwise lay out and repaint both charts on each change.
        # The height takes the padding and border of the warning and error styles too.
        self.summary.setMinimumHeight(3 * self.summary.fontMetrics().lineSpacing() + 16)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Wrapped to the view's width, whatever the summary's length: never wider than the tab.
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.layer_chart = layer_chart if layer_chart is not None else LayerChart()
        self.throughput_chart = (
            throughput_chart if throughput_chart is not None else ThroughputChart()
        )

        self.spins: dict[str, QDoubleSpinBox] = {}
        form = QFormLayout()
        for key, label, suffix in _SPEED_FIELDS:
            spin = QDoubleSpinBox()
            # The lowest value of the GPU's TFLOPS reads "unknown" and stands for no limit.
            spin.setRange(0.0 if key == "gpu_flops" else 0.01, 100_000)
            spin.setDecimals(2)
            spin.setSuffix(suffix)
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(self._bandwidth_edited)
            self.spins[key] = spin
            form.addRow(label, spin)
        self.ram = QDoubleSpinBox()
        self.ram.setRange(0.0, 1 << 20)
        self.ram.setDecimals(1)
        self.ram.setSuffix(" GiB")
        self.ram.setKeyboardTracking(False)
        self.ram.setToolTip(
            "Host RAM for the weights the GPUs do not hold (beyond it llama.cpp reads them from "
            "disk). 0: the RAM available on this machine now; enter another machine's to plan "
            "for it. A profile keeps it."
        )
        self.ram.valueChanged.connect(self._host_edited)
        form.insertRow(0, "Host RAM", self.ram)
        # Reads "this machine: ..." before any host is given, never a bare "0.0 GiB".
        self._take_host(self._host)
        self.spins["disk_bytes_per_s"].setToolTip(
            "Read speed of the disk holding what host RAM does not (default: a PCIe 4.0 NVMe "
            "drive, 3.5 GB/s). A profile keeps it."
        )
        self.spins["gpu_flops"].setSpecialValueText("unknown")
        self.spins["gpu_bytes_per_s"].setToolTip(SPEED_HINTS["gpu"])
        self.spins["cpu_ram_bytes_per_s"].setToolTip(SPEED_HINTS["ram"])
        # Which speeds of a card the catalog lacks are assumed (hidden when none is).
        self.assumed = QLabel()
        self.assumed.setWordWrap(True)
        self.assumed.setVisible(False)
        form.addRow(self.assumed)
        speeds = QGroupBox("Host and speeds (editable)")
        speeds.setToolTip(SPEED_HINTS["box"])
        speeds.setLayout(form)

        self.engine = QComboBox()
        self.launch_text = QPlainTextEdit()
        self.launch_text.setReadOnly(True)
        self.launch_text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.launch_text.setMaximumHeight(90)
        self.launch_notes = QLabel()
        self.launch_notes.setWordWrap(True)
        self.launch_notes.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy these settings to the clipboard")
        launch_row = QHBoxLayout()
        launch_row.addWidget(QLabel("Launch settings"))
        launch_row.addWidget(self.engine)
        launch_row.addStretch(1)
        launch_row.addWidget(self.copy_button)

        self.memory_chart = MemorySpeedChart()
        self.first_token_chart = MemorySpeedChart(quantity=FIRST_TOKEN)
        self.speed_tabs = QTabWidget()
        self.speed_tabs.addTab(self.memory_chart, "Tokens/s vs GPU memory")
        self.speed_tabs.addTab(self.first_token_chart, "First token vs GPU memory")
        self.speed_tabs.addTab(self.throughput_chart, "Tokens/s vs batch")
        self.speed_tabs.setDocumentMode(True)
        middle = QHBoxLayout()
        middle.addWidget(self.speed_tabs, 1)
        middle.addWidget(speeds)
        layout = QVBoxLayout(self)
        layout.addLayout(choices)
        layout.addLayout(planning)
        layout.addLayout(controls)
        layout.addLayout(experts)
        layout.addWidget(self.refused)
        layout.addWidget(self.summary)
        layout.addWidget(self.layer_chart, 3)
        layout.addLayout(middle, 2)
        layout.addLayout(launch_row)
        layout.addWidget(self.launch_text)
        layout.addWidget(self.launch_notes)
        # The wheel scrolls the tab; a control takes it only once clicked into.
        guard_wheel(self)

        self.gpu.currentIndexChanged.connect(self._gpu_chosen)
        self.split_mode.currentIndexChanged.connect(lambda _i: self._layout_changed())
        self.experts_slider.valueChanged.connect(self._experts_moved)
        self.op_offload.toggled.connect(lambda _on: self._layout_changed())
        self.fit_button.clicked.connect(self.fit_like_llamacpp)
        self.planner.currentIndexChanged.connect(self._planner_changed)
        self.margin.valueChanged.connect(lambda _value: self._planner_changed())
        self.slider.valueChanged.connect(self._slider_moved)
        self.auto_button.clicked.connect(self._auto_layers)
        self.engine.currentIndexChanged.connect(self._show_settings)
        self.copy_button.clicked.connect(self.copy_settings)
        # set_inputs(..., in_turns=True) draws the speeds and settings in the next turn.
        self._rest_due = QTimer(self)
        self._rest_due.setSingleShot(True)
        self._rest_due.setInterval(0)
        self._rest_due.timeout.connect(lambda: self._draw_rest(self.placement))
        self._show_gpus()
        self._refresh()

    # --- inputs -------------------------------------------------------------------------------

    def set_model(self, spec: ModelSpec | None, workload: Workload | None) -> None:
        """The model and settings to place; the planner follows the engine (see set_inputs)."""
        self.set_inputs(spec, workload)

    def set_gpus(self, gpus: Sequence[GpuChoice], host_ram_bytes: int | None = None) -> None:
        """The GPUs to choose from (the one chosen before stays chosen) and the host RAM."""
        self._take_gpus(gpus, host_ram_bytes)
        self._check_setup()
        self._refresh()

    @property
    def draft(self) -> ModelSpec | None:
        """The draft model the settings were last checked with (``set_inputs``)."""
        return self._draft

    @property
    def margin_bytes(self) -> int:
        """GPU memory the most that fit leave free."""
        return round(self.margin.value() * GiB)

    @property
    def gpu_name(self) -> str:
        """The GPU planned for, as the summary names it."""
        index = self.gpu.currentIndex()
        return self._gpus[index].name if 0 <= index < len(self._gpus) else "GPU"

    def set_budget(self, vram_bytes: int, host_ram_bytes: int | None = None) -> None:
        """GPU memory to place into, and host RAM for offloaded layers (None: no limit)."""
        self._take_budget(vram_bytes, host_ram_bytes)
        self._refresh()

    @property
    def host(self) -> HostSettings:
        """The host RAM and disk speed the plan uses."""
        return self._host

    def set_host(self, host: HostSettings) -> None:
        """Plan with ``host``: its RAM, and its disk speed in the speeds."""
        self._take_host(host)
        self._refresh()

    def _take_host(self, host: HostSettings) -> None:
        self._host = host
        if host.ram_source != SET:
            self._machine_ram = host.ram_bytes
        machine = "unknown" if self._machine_ram is None else f"{self._machine_ram / GiB:.1f} GiB"
        blocked = self.ram.blockSignals(True)
        self.ram.setSpecialValueText(f"this machine: {machine}")
        self.ram.setValue(host.ram_bytes / GiB if host.ram_source == SET and host.ram_bytes else 0)
        self.ram.blockSignals(blocked)
        if (
            self._bandwidths is not None
            and self._bandwidths.disk_bytes_per_s != host.disk_bytes_per_s
        ):
            self._take_bandwidths(
                dataclasses.replace(self._bandwidths, disk_bytes_per_s=host.disk_bytes_per_s)
            )

    def _host_edited(self) -> None:
        ram = round(self.ram.value() * GiB) if self.ram.value() > 0 else None
        self._host = dataclasses.replace(
            self._host,
            ram_bytes=ram if ram is not None else self._machine_ram,
            ram_source=SET if ram is not None else THIS_MACHINE,
        )
        self.hostEdited.emit(ram, self._host.disk_bytes_per_s)
        self._ngl = None
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
        gpus: Sequence[GpuChoice] | None = None,
        host_ram_bytes: int | None = None,
        host: HostSettings | None = None,
        draft: ModelSpec | None = None,
        in_turns: bool = False,
    ) -> None:
        """Model, settings and, when given, budget and speeds at once: the view places once.

        The planner follows the engine when it changes (llama.cpp's for llama.cpp, accelerate's
        otherwise); GGUF weights are placed by llama.cpp only (transformers would dequantize
        them), so the other planners are then offered disabled, with the reason.

        Args:
            spec: the model (None: nothing to place).
            workload: its settings.
            budget: ``(vram_bytes, host_ram_bytes)`` as for :meth:`set_budget`; None keeps it.
            bandwidths: as for :meth:`set_bandwidths`; None keeps them.
            gpus: the GPUs to choose from, as for :meth:`set_gpus`; None keeps them.
            host_ram_bytes: host RAM with ``gpus`` (None: no limit).
            host: the host RAM and disk to plan with (this machine's, or as the user set them);
                None keeps them.
            draft: the draft model of speculative decoding the settings name, once read: the
                estimate's refusal of the settings is asked with it.
            in_turns: draw the placement now and the speeds, launch settings and summary in the
                next event-loop turn (``placementChanged`` then), so that neither turn is long.
        """
        if spec is not self._spec or workload != self._workload:
            # Sized once per model and settings: a new budget alone keeps them.
            self._llamacpp = None
            self._floor_bytes = None
            if spec is not self._spec:
                self._n_cpu_moe = 0
        self._fit = None
        engine_before = self._workload.engine if self._workload is not None else None
        gpus_before = self._workload.gpus if self._workload is not None else None
        self._spec, self._workload, self._draft = spec, workload, draft
        self._ngl = None
        self._follow_engine(engine_before)
        lost = False
        if gpus is not None:
            spanned = len(self.chosen_gpus)
            self._take_gpus(gpus, host_ram_bytes if host is None else host.ram_bytes)
            # GPUs added before that the new list lacks (another GPU picked in the window).
            lost = len(self.chosen_gpus) < spanned
        if workload is not None and (workload.gpus != (gpus_before or 1) or lost) and self._gpus:
            # "GPUs in total" changed, or the GPUs added are gone: that many of the GPU chosen,
            # as the estimate counts them.
            self._extra = [self.gpu.currentIndex()] * (workload.gpus - 1)
            self._show_more_gpus()
        if host is not None:
            self._take_host(host)
        if budget is not None:
            self._take_budget(*budget)
        if bandwidths is not None:
            self._take_bandwidths(bandwidths)
        self._check_setup()
        if in_turns:
            self._draw_placement()
            self._rest_due.start()
        else:
            self._refresh()

    def _check_setup(self) -> None:
        """Ask whether the estimate refuses the settings given on the GPUs given, as the
        Estimate tab does (the plan itself is the planner's engine's)."""
        spec, workload = self._spec, self._workload
        capacities = [(g.name, g.capacity_bytes) for g in self._gpus]
        self.refusal = (
            None
            if spec is None or workload is None
            else refusal(spec, workload, capacities, draft=self._draft)
        )

    def _follow_engine(self, engine_before: str | None) -> None:
        """Pick the planner of a new engine; offer only llama.cpp's for GGUF weights."""
        spec, workload = self._spec, self._workload
        if workload is None:
            return
        gguf = served_family(workload.quant, spec.quantization if spec else None) == "gguf"
        model = self.planner.model()
        assert isinstance(model, QStandardItemModel)
        for index in range(self.planner.count()):
            item = model.item(index)
            usable = not gguf or engines.planner_engine(self.planner.itemData(index)).loads("gguf")
            item.setEnabled(usable)
            item.setToolTip("" if usable else GGUF_PLANNER_REASON)
        wanted = None
        if gguf:
            wanted = next(p.key for p in engines.PLANNERS if engines.planner_engine(p.key).ggml)
        elif engines.engine(workload.engine).ggml or workload.engine != engine_before:
            wanted = engines.default_planner(workload.engine).key
        if wanted is not None and self.planner.currentData() != wanted:
            blocked = self.planner.blockSignals(True)
            self.set_planner(wanted)
            self.planner.blockSignals(blocked)

    def _take_gpus(self, gpus: Sequence[GpuChoice], host_ram_bytes: int | None) -> None:
        chosen = self.gpu_name
        extra = [self._gpus[i].name for i in self._extra if i < len(self._gpus)]
        self._gpus = tuple(gpus)
        self._host = dataclasses.replace(self._host, ram_bytes=host_ram_bytes)
        names = [gpu.name for gpu in self._gpus]
        self._extra = [names.index(name) for name in extra if name in names]
        self._show_gpus(chosen)
        self._take_gpu()

    def _show_gpus(self, chosen: str = "") -> None:
        names = [gpu.name for gpu in self._gpus]
        blocked = self.gpu.blockSignals(True)
        self.gpu.clear()
        for gpu in self._gpus:
            size = format_bytes(gpu.capacity_bytes, self._unit, 1).replace(".0 ", " ")
            self.gpu.addItem(f"{gpu.name} ({size})")
        if not names:
            self.gpu.addItem("Check a GPU in the GPUs panel")
        self.gpu.setCurrentIndex(names.index(chosen) if chosen in names else 0)
        self.gpu.setEnabled(len(names) > 1)
        self.gpu.blockSignals(blocked)
        self._show_more_gpus()

    def _show_more_gpus(self) -> None:
        """The "+ GPUs" menu: every GPU of the list, checkable, in the order they join."""
        menu = self.more_gpus.menu()
        assert menu is not None
        menu.clear()
        first = self.gpu.currentIndex()
        for index, gpu in enumerate(self._gpus):
            size = format_bytes(gpu.capacity_bytes, self._unit, 1).replace(".0 ", " ")
            label = f"{'another ' if index == first else ''}{gpu.name} ({size})"
            action = menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(index in self._extra)
            action.toggled.connect(lambda on, i=index: self._toggle_gpu(i, on))
        self._show_gpu_count()

    def _show_gpu_count(self) -> None:
        count = len(self.chosen_gpus)
        self.more_gpus.setText(
            f"+ {count - 1} GPU{'s' if count > 2 else ''}" if count > 1 else "+ GPUs"
        )
        self.more_gpus.setEnabled(bool(self._gpus))
        self.split_mode.setVisible(count > 1)
        self.split_label.setVisible(count > 1)
        said = dict.fromkeys(g.assumed for g in self.chosen_gpus if g.assumed)
        self.assumed.setText("\n".join(said))
        self.assumed.setVisible(bool(said))

    def _toggle_gpu(self, index: int, on: bool) -> None:
        if on and index not in self._extra:
            self._extra.append(index)
        elif not on and index in self._extra:
            self._extra.remove(index)
        # The menu stays as it is: this runs inside one of its actions' signals.
        self._show_gpu_count()
        self._layout_changed()

    @property
    def chosen_gpus(self) -> tuple[GpuChoice, ...]:
        """The GPUs the model spans, in order: the one chosen, then those added."""
        first = self.gpu.currentIndex()
        if not 0 <= first < len(self._gpus):
            return ()
        return (self._gpus[first], *(self._gpus[i] for i in self._extra))

    @property
    def budgets(self) -> tuple[int, ...]:
        """Each chosen GPU's memory (the budget set last for the first)."""
        return (self._vram_bytes, *(g.capacity_bytes for g in self.chosen_gpus[1:]))

    def _all_bandwidths(self) -> Bandwidths | None:
        """The speeds, with those of the added GPUs (their catalog's, else the first's)."""
        bw = self._bandwidths
        extra = self.chosen_gpus[1:]
        if bw is None or not extra:
            return bw
        others = tuple(
            (g.bandwidths.gpu_bytes_per_s, g.bandwidths.gpu_flops)
            if g.bandwidths is not None
            else (bw.gpu_bytes_per_s, bw.gpu_flops)
            for g in extra
        )
        return dataclasses.replace(bw, other_gpus=others)

    def _take_gpu(self) -> None:
        index = self.gpu.currentIndex()
        if not 0 <= index < len(self._gpus):
            return
        gpu = self._gpus[index]
        self._take_budget(gpu.capacity_bytes, self._host.ram_bytes)
        if gpu.bandwidths is not None:
            self._take_bandwidths(
                dataclasses.replace(gpu.bandwidths, disk_bytes_per_s=self._host.disk_bytes_per_s)
            )

    def _gpu_chosen(self) -> None:
        self._take_gpu()
        self._show_more_gpus()
        self._refresh()

    def _layout_changed(self) -> None:
        self._fit = None
        self._ngl = None
        self._refresh()
        self._placement_chosen()

    def _experts_moved(self, value: int) -> None:
        self._n_cpu_moe = value
        self._fit = None
        self._refresh()
        self._placement_chosen()

    def _ggml_planner(self) -> bool:
        """Whether the planner chosen places llama.cpp's layers (``-ngl``, ``--fit``)."""
        return engines.planner_engine(self.planner.currentData()).ggml

    def fit_like_llamacpp(self) -> None:
        """Place as llama.cpp's --fit would (on a worker; the view follows when it is done)."""
        spec, workload = self._spec, self._workload
        if spec is None or workload is None or not self._ggml_planner():
            return
        if self._fit_job is not None:
            self._fit_job.cancel()
        base = LlamaCppLayout(
            split_mode=self.split_mode.currentData(), op_offload=self.op_offload.isChecked()
        )
        budgets, margin, host = self.budgets, self.margin_bytes, self._host
        self.fit_button.setEnabled(False)
        self._fit_job = submit(
            lambda: answers.fit_like_llamacpp(
                spec, workload, budgets, margin_bytes=margin, host=host, layout=base
            ),
            self._fit_done,
            self._fit_failed,
        )

    def _fit_done(self, result: FitResult) -> None:
        if not shiboken6.isValid(self):
            return  # the view went while the worker ran
        self._fit_job = None
        self.fit_button.setEnabled(True)
        self._fit = result
        self._ngl = result.placement.gpu_layers
        self._refresh()

    def _fit_failed(self, exc: Exception) -> None:
        if not shiboken6.isValid(self):
            return
        self._fit_job = None
        self.fit_button.setEnabled(True)
        self._show_error(wording.in_window(exc))

    def _take_budget(self, vram_bytes: int, host_ram_bytes: int | None) -> None:
        self._vram_bytes = vram_bytes
        if host_ram_bytes != self._host.ram_bytes:
            self._host = dataclasses.replace(self._host, ram_bytes=host_ram_bytes)
        self._ngl = None

    def _take_bandwidths(self, bandwidths: Bandwidths) -> None:
        self._bandwidths = bandwidths
        self._gpu_memory_shown = math.nan
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
        self.memory_chart.set_unit(unit)
        self.first_token_chart.set_unit(unit)
        self._show_gpus(self.gpu_name)
        self._refresh()

    def set_gpu_layers(self, n_gpu_layers: int | None) -> None:
        """llama.cpp's -ngl; None picks the most that fit."""
        self._ngl = n_gpu_layers
        self._refresh()

    def set_llamacpp_placement(
        self, n_gpu_layers: int | None, cpu_moe: bool, n_cpu_moe: int, op_offload: bool = True
    ) -> None:
        """llama.cpp's -ngl (None: the fastest that fits), experts in host RAM and op offload,
        as set elsewhere (advice, a profile)."""
        last = self._last_expert_layer()
        moved = last + 1 if cpu_moe and last >= 0 else n_cpu_moe
        now = (self._ngl, self._n_cpu_moe, self.op_offload.isChecked())
        if (n_gpu_layers, moved, op_offload) == now:
            return
        self._ngl, self._n_cpu_moe, self._fit = n_gpu_layers, moved, None
        blocked = self.op_offload.blockSignals(True)
        self.op_offload.setChecked(op_offload)
        self.op_offload.blockSignals(blocked)
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
        self._placement_chosen()

    def _placement_chosen(self) -> None:
        """Say the user's llama.cpp placement (the window times the setup with it)."""
        layout = self.llamacpp_layout
        self.placementChosen.emit(self._ngl, layout.n_cpu_moe, layout.cpu_moe, layout.op_offload)

    def _auto_layers(self) -> None:
        self._n_cpu_moe = 0
        self.set_gpu_layers(None)
        self._placement_chosen()

    def _bandwidth_edited(self) -> None:
        values = {
            key: spin.value() * (1e12 if key.endswith("flops") else GB)
            for key, spin in self.spins.items()
        }
        values["gpu_flops"] = values["gpu_flops"] or math.inf
        before = self._bandwidths
        if before is not None and math.isclose(
            self.spins["gpu_bytes_per_s"].value(), self._gpu_memory_shown, rel_tol=1e-9
        ):
            # The box shows the speed the plan was timed at, not a speed typed in.
            values["gpu_bytes_per_s"] = before.gpu_bytes_per_s
        # The other GPUs' speeds (several GPUs) are the catalog's; the boxes edit GPU 0's.
        others = before.other_gpus if before is not None else ()
        # llama.cpp's measured kernels time the GPU's layers while its speeds stay as they
        # were; a GPU speed typed in asks for the roofline at that speed.
        same_gpu = before is not None and all(
            math.isclose(values[key], getattr(before, key), rel_tol=1e-3)
            for key in ("gpu_bytes_per_s", "gpu_flops")
        )
        self._bandwidths = dataclasses.replace(
            Bandwidths(
                values["gpu_bytes_per_s"],
                values["pcie_bytes_per_s"],
                values["cpu_ram_bytes_per_s"],
                values["disk_bytes_per_s"],
                values["gpu_flops"],
                values["cpu_flops"],
            ),
            other_gpus=others,
            kernels=before.kernels if same_gpu and before is not None else (),
        )
        if values["disk_bytes_per_s"] != self._host.disk_bytes_per_s:
            self._host = dataclasses.replace(
                self._host, disk_bytes_per_s=values["disk_bytes_per_s"], disk_source=SET
            )
            self.hostEdited.emit(
                self._host.ram_bytes if self._host.ram_source == SET else None,
                self._host.disk_bytes_per_s,
            )
        self._refresh()

    # --- drawing ------------------------------------------------------------------------------

    def _place(self) -> Placement | None:
        """Place and time the model (``answers.offload.plan_offload``, as ``vramgui plan``):
        under llama.cpp with the slider at "most that fit" and no experts moved, the fastest
        placement that fits."""
        spec = self._spec
        self.answer = None
        if spec is None or self._workload is None:
            return None
        planner = self.planner.currentData()
        # Served by the planner's engine: what it does not run is reset, and the summary says so.
        workload, resets = adjusted(
            self._workload,
            {"mode": "inference", "engine": engines.planner(planner).engine},
            spec.quantization,
        )
        self._adjustments = tuple(wording.reset_notice(r, spec.name) for r in resets)
        if self._floor_bytes is None:
            self._floor_bytes = answers.one_layer_floor(spec, workload)
        layout = None
        ggml = engines.planner_engine(planner).ggml
        if ggml:
            if self._llamacpp is None or self._llamacpp.workload != workload:
                self._llamacpp = answers.llamacpp_model(spec, workload)
            layout = self.llamacpp_layout
        fit = (
            self._fit
            if self._fit is not None and self._fit.placement.workload == workload
            else None
        )
        bandwidths = self._all_bandwidths()
        if bandwidths is None:
            # No speeds known for this GPU: placed, not timed.
            return answers.place_untimed(
                spec,
                workload,
                planner,
                self.budgets,
                host=self._host,
                margin_bytes=self.margin_bytes,
                n_gpu_layers=self._ngl,
                layout=layout,
                fit=fit,
                model=self._llamacpp,
            )
        self.answer = plan_offload(
            spec,
            workload,
            planner,
            self.budgets,
            bandwidths=bandwidths,
            host=self._host,
            n_gpu_layers=self._ngl,
            layout=layout,
            margin_bytes=self.margin_bytes,
            fit=fit,
            model=self._llamacpp,
        )
        return self.answer.placement

    @property
    def llamacpp_layout(self) -> LlamaCppLayout:
        """llama.cpp's experts in host RAM and split across GPUs, as the controls say."""
        moe = self._llamacpp.moe_blocks if self._llamacpp is not None else 0
        last = self._last_expert_layer()
        every = bool(moe) and self._n_cpu_moe >= last + 1
        return LlamaCppLayout(
            cpu_moe=every,
            n_cpu_moe=0 if every else self._n_cpu_moe,
            split_mode=self.split_mode.currentData() if len(self.chosen_gpus) > 1 else "layer",
            op_offload=self.op_offload.isChecked(),
        )

    def _last_expert_layer(self) -> int:
        model = self._llamacpp
        if model is None or not model.moe_blocks:
            return -1
        return max(u.index for u in model.units if u.expert_bytes) - 1

    def _refresh(self) -> None:
        self._draw_rest(self._draw_placement())

    def _draw_placement(self) -> Placement | None:
        """Place the layers and draw them; the speeds and settings are :meth:`_draw_rest`."""
        self._rest_due.stop()
        try:
            placement = self._place()
        except EngineConflictError as exc:
            placement = None
            self._show_error(wording.refusal(exc.conflict, self._spec.name if self._spec else ""))
        except VramguiError as exc:
            placement = None
            self._show_error(wording.in_window(exc))
        self.placement = placement
        self.layer_chart.set_placement(placement)
        self._update_slider(placement)
        return placement

    def _show_error(self, text: str) -> None:
        self.summary.setStyleSheet(palette.ERROR_STYLE)
        self.summary.setText(text)

    def _draw_rest(self, placement: Placement | None) -> None:
        self._draw_speed(placement)
        self._draw_settings(placement)
        refused = self.refusal if placement is not None else None
        self.refused.setVisible(refused is not None)
        if refused is not None:
            planned = engines.planner(self.planner.currentData()).engine
            self.refused.setText(wording.refused_elsewhere(planned, refused))
        if placement is not None:
            self._summarise(placement)
        elif self._spec is None:
            self.summary.setStyleSheet("")
            self.summary.setText("Choose a model to see where its layers go.")
        self.placementChanged.emit(placement)

    def _update_slider(self, placement: Placement | None) -> None:
        llamacpp = placement is not None and engines.planner_engine(placement.planner).ggml
        blocked = self.slider.blockSignals(True)
        if placement is not None:
            self.slider.setRange(0, placement.blocks + 1)
            self.slider.setValue(placement.gpu_layers)
        else:
            self.slider.setRange(0, 0)  # no plan: no layer count left over from the last one
        self.slider.blockSignals(blocked)
        self.slider.setEnabled(llamacpp)
        self.auto_button.setEnabled(llamacpp and self._ngl is not None)
        if placement is None:
            self.slider_label.setText("")
        elif llamacpp:
            self.slider_label.setText(f"-ngl {placement.gpu_layers} of {placement.blocks + 1}")
        else:
            self.slider_label.setText(f"{placement.gpu_layers} of {placement.blocks} on GPU")
        self._update_experts(placement if llamacpp else None)

    def _update_experts(self, placement: Placement | None) -> None:
        """The experts slider: shown for a mixture of experts under llama.cpp."""
        last = self._last_expert_layer()
        shown = placement is not None and last >= 0
        for widget in (
            self.experts_title,
            self.experts_slider,
            self.experts_label,
            self.op_offload,
        ):
            widget.setVisible(shown)
        self.fit_button.setEnabled(self._fit_job is None and self._ggml_planner())
        if not shown or placement is None:
            return
        layout = placement.layout
        moved = 0
        if layout is not None:
            moved = last + 1 if layout.cpu_moe else min(layout.n_cpu_moe, last + 1)
        if self._fit is not None:
            moved = self._fit.expert_layers_on_cpu
        blocked = self.experts_slider.blockSignals(True)
        self.experts_slider.setRange(0, last + 1)
        self.experts_slider.setValue(moved)
        self.experts_slider.blockSignals(blocked)
        if self._fit is not None:
            text = f"{moved} layers (fitted)"
        elif layout is not None and layout.cpu_moe:
            text = "--cpu-moe (all)"
        else:
            text = f"--n-cpu-moe {moved} of {last + 1}"
        self.experts_label.setText(text)

    def _summarise(self, p: Placement) -> None:
        unit = self._unit
        verdict = "fits" if p.fits else "does NOT fit"
        kept = f", {format_bytes(p.margin_bytes, unit)} kept free" if p.margin_bytes else ""
        names = [g.name for g in self.chosen_gpus] or [self.gpu_name]
        gpus = [
            f"<b>{escape(name)}: {format_bytes(used, unit)}</b> of {format_bytes(budget, unit)}"
            for name, used, budget in zip(names, p.gpu_bytes, p.vram_budget_bytes, strict=False)
        ]
        host = self._host
        ram = "no limit" if host.ram_bytes is None else format_bytes(host.ram_bytes, unit)
        where = "set" if host.ram_source == SET else host.ram_source
        parts = [
            " + ".join(gpus) + f" ({verdict}{kept})",
            f"host RAM {format_bytes(p.host_bytes, unit)} of {ram} ({where})",
            f"disk {format_bytes(p.disk_bytes, unit)}",
        ]
        if self.answer is not None and self.answer.chosen == "fastest" and self.answer.flags:
            parts.append(f"fastest that fits: {self.answer.flags}")
        if self._floor_bytes is not None:
            parts.append(f"one-layer floor {format_bytes(self._floor_bytes, unit)}")
        if self.throughput is not None:
            t = self.throughput
            parts.append(
                f"<b>{format_rate(t.tokens_per_second)} tokens/s</b> (bound by {RESOURCE_LABELS[t.bound]})"
            )
        if self.compute_bound_batch is not None:
            parts.append(f"compute-bound from batch {self.compute_bound_batch:,}")
        if self.answer is not None:
            prompt = self.answer.prompt_tokens or p.workload.seq
            parts.append(
                f"first token after {format_wait(self.answer.prefill_seconds)} "
                f"({prompt:,}-token prompt)"
            )
        self.summary.setStyleSheet("" if p.fits else palette.WARNING_STYLE)
        notes = "".join(
            f"<br>{escape(wording.in_window(n))}" for n in (*self._adjustments, *p.notes)
        )
        self.summary.setText(" &nbsp;·&nbsp; ".join(parts) + f"<small>{notes}</small>")

    def _show_gpu_memory(self, rate: answers.GpuMemoryRate) -> None:
        """The GPU memory speed the plan was timed at, in its box (llama.cpp's measured share
        of the peak for the weights, or the roofline's speed), and its basis in the tooltip."""
        spin = self.spins["gpu_bytes_per_s"]
        blocked = spin.blockSignals(True)
        spin.setValue(rate.weights_bytes_per_s / GB)
        spin.blockSignals(blocked)
        self._gpu_memory_shown = spin.value()
        tip = f"Decoding reads the weights at this speed: {rate.basis}."
        if rate.cache_bytes_per_s != rate.weights_bytes_per_s:
            tip += f" The KV cache reads at {format_rate(rate.cache_bytes_per_s / GB)} GB/s."
        if rate.peak_bytes_per_s is not None:
            tip += (
                f" Peak {format_rate(rate.peak_bytes_per_s / GB)} GB/s. A speed typed in is "
                "taken as it is, with the roofline."
            )
        spin.setToolTip(tip)

    def _show_given_gpu_memory(self) -> None:
        """No plan: the GPU memory box goes back to the speed given (the speed a plan was timed
        at belongs to that plan)."""
        spin = self.spins["gpu_bytes_per_s"]
        if self._bandwidths is not None and not math.isnan(self._gpu_memory_shown):
            blocked = spin.blockSignals(True)
            spin.setValue(self._bandwidths.gpu_bytes_per_s / GB)
            spin.blockSignals(blocked)
        self._gpu_memory_shown = math.nan
        spin.setToolTip(SPEED_HINTS["gpu"])

    def _draw_speed(self, placement: Placement | None) -> None:
        bw = self._all_bandwidths()
        if placement is None or bw is None:
            self.throughput = self.compute_bound_batch = None
            self.throughput_chart.set_curve((), None, None)
            self._draw_curves(placement, None)
            self._show_given_gpu_memory()
            return
        answer = self.answer
        assert answer is not None  # timed with the placement whenever there are speeds
        self._show_gpu_memory(answer.gpu_memory)
        self.throughput = answer.throughput
        self.compute_bound_batch = answer.compute_bound_batch
        self.throughput_chart.set_curve(answer.curve, self.throughput, self.compute_bound_batch)
        self._draw_curves(placement, bw)

    def _draw_curves(self, placement: Placement | None, bw: Bandwidths | None) -> None:
        """Tokens/s against GPU memory, whole layers beside experts in host RAM: computed on a
        worker (a hundred placements), drawn when done; the current placement at once."""
        if self._curves_job is not None:
            self._curves_job.cancel()
            self._curves_job = None
        model = self._llamacpp
        if (
            placement is None
            or bw is None
            or not engines.planner_engine(placement.planner).ggml
            or model is None
        ):
            self.curves = ((), ())
            self._set_memory_curves(placement, 0)
            return
        budgets, margin, host = self.budgets, self.margin_bytes, self._host
        layout = self.llamacpp_layout
        for chart, now in zip(self._memory_charts, self._now(placement), strict=True):
            chart.current = now
            chart.refresh()
        if self.answer is not None and self.answer.layers:
            # The plan already walked both curves to find the fastest placement.
            self.curves = (self.answer.layers, self.answer.experts)
            self._set_memory_curves(placement, sum(budgets))
            return

        def work() -> tuple[tuple[offload.CurvePoint, ...], tuple[offload.CurvePoint, ...]]:
            return answers.llamacpp_curves(
                model, budgets, bw, layout=layout, host=host, margin_bytes=margin
            )

        def done(
            result: tuple[tuple[offload.CurvePoint, ...], tuple[offload.CurvePoint, ...]],
        ) -> None:
            if not shiboken6.isValid(self.memory_chart):
                return  # the view went while the worker ran
            self._curves_job = None
            self.curves = result
            self._set_memory_curves(placement, sum(budgets))

        def failed(exc: Exception) -> None:
            self._curves_job = None

        self._curves_job = submit(work, done, failed)

    @property
    def _memory_charts(self) -> tuple[MemorySpeedChart, MemorySpeedChart]:
        return self.memory_chart, self.first_token_chart

    def _now(self, placement: Placement | None) -> tuple[tuple[int, float] | None, ...]:
        """The current placement on each memory chart: its GPU memory, its decode speed and
        its time to the first token (None where it is not timed)."""
        if placement is None:
            return None, None
        used = sum(placement.gpu_bytes)
        decode = None if self.throughput is None else (used, self.throughput.tokens_per_second)
        first = None if self.answer is None else (used, self.answer.prefill_seconds)
        return decode, first

    def _set_memory_curves(self, placement: Placement | None, budget_bytes: int) -> None:
        """Both memory charts: the curves of ``self.curves``, the budget and the placement."""
        for chart, now in zip(self._memory_charts, self._now(placement), strict=True):
            chart.set_curves(*self.curves, budget_bytes=budget_bytes, current=now)

    def _draw_settings(self, placement: Placement | None) -> None:
        if placement is None or self._spec is None:
            self._settings = ()
        else:
            self._settings = answers.launch_lines(self._spec, placement)
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
        self.launch_notes.setText(" ".join(wording.in_window(n) for n in settings.notes))
        self.copy_button.setEnabled(True)
