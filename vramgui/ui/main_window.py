"""The main window: assembles the panels around one :class:`EstimateController`.

The window wires signals to slots and formats; it holds no arithmetic. ``build_window`` is the one
place that turns a :class:`Services` bundle (real in ``app.py``, fakes in tests) into a window.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QEvent, QObject, QRect, QSettings, Qt, QTimer, QUrl
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDesktopServices,
    QDragEnterEvent,
    QDropEvent,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QPalette,
    QPixmap,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QStyle,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vramgui import __version__
from vramgui.answers.advice import shortfall_text
from vramgui.answers.estimate import POOLED_PHASE, Outlook
from vramgui.answers.host import this_machine
from vramgui.answers.rates import Utilization, catalog_rates
from vramgui.answers.setup import checkpoint_kv, converts_stored, stored_format
from vramgui.core.dtypes import SCHEMES, Scheme
from vramgui.core.errors import VramguiError, WorkloadError
from vramgui.core.model import Inventory, ModelSpec
from vramgui.core.units import Unit, format_bytes
from vramgui.core.workload import Workload
from vramgui.hardware import CatalogGpu, GpuSnapshot
from vramgui.ui import add_card, extra_views, palette, report, timing
from vramgui.ui.advisor import AdvisorPanel
from vramgui.ui.breakdown import EXPLANATIONS, SHORT_EXPLANATIONS, BreakdownModel
from vramgui.ui.breakdown_chart import BreakdownChart
from vramgui.ui.controller import Analysis, EstimateController, disabled_reasons
from vramgui.ui.gpu_panel import REFRESH_MS, GpuPanel
from vramgui.ui.help import ONLINE_DOCS, HelpWindow, docs_folder
from vramgui.ui.log_view import LogView, is_log_file
from vramgui.ui.model_panel import MAX_RECENT, ModelPanel, droppable_path
from vramgui.ui.precision_panel import PrecisionPanel
from vramgui.ui.sweep_chart import SweepChart
from vramgui.ui.verify import VerifyBar
from vramgui.ui.widgets import FittedLabel, guard_wheel
from vramgui.ui.wording import as_sentence, in_window
from vramgui.ui.workload_panel import WorkloadPanel

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel

DOCS_URL = "https://github.com/vramgui/vramgui#readme"
SAVE_INPUTS_MS = 1000
CELL_PADDING_PX = 12
# Room for search hits' repo ids beside their sizes, even where the controls need less.
LEFT_PANEL_MIN_PX = 290
# What the badge beside the total says of each kind of inventory, and how it looks.
BADGES = {
    Inventory.EXACT: (
        "Exact model",
        "Every tensor built from config.json as transformers builds this family.",
        palette.BADGE_STYLES["exact"],
    ),
    Inventory.FROM_HEADERS: (
        "Weights from file headers",
        "The tensors come from the checkpoint's headers; the KV cache and activations from a "
        "modelled family.",
        palette.BADGE_STYLES["headers"],
    ),
    Inventory.APPROXIMATE: (
        "APPROXIMATE",
        "Part of the model was guessed: the estimate may be off, by more than its figures suggest."
        " Verify runs the model's own code for the exact figure.",
        palette.BADGE_STYLES["approximate"],
    ),
}


# How each kind of thing Verify says looks (verify.KINDS).
_VERIFY_STYLES = {
    "match": palette.OK_STYLE,
    "mismatch": palette.WARNING_STYLE,
    "error": palette.ERROR_STYLE,
    "warning": palette.WARNING_STYLE,
    "info": palette.INFO_STYLE,
}


@dataclass(frozen=True, slots=True)
class Services:
    """What the window needs from the world, as plain callables and data.

    Attributes:
        load_model: source text -> ``ResolvedModel``; may block (runs on a worker thread).
        search_models: query -> ``SearchResult``; may block (runs on a worker thread).
        probe: -> ``GpuSnapshot`` of the local GPUs; never raises.
        gpu_catalog: GPUs to compare against.
        default_source: the model shown on first run (a catalog name: no network needed).
        default_gpus: catalog GPUs checked on first run.
        gpu_refresh_ms: how often the local GPUs are read; 0 reads them once.
        schemes: quantization schemes by name, in display order.
        host_ram_bytes: RAM available for offloaded layers (None: unknown).
        measured_utilization: catalog GPU name -> the speed model's utilization measured on it
            by `vramgui measure --device cuda`, or None (the default then applies).
        explain_log: (log text, model name, GPU name, quantization, unit) -> the log's
            explanation, its sentences in the unit; may block (runs on a worker thread).
    """

    load_model: Callable[[str], ResolvedModel]
    search_models: Callable[[str], Any]
    probe: Callable[[], GpuSnapshot]
    gpu_catalog: Sequence[CatalogGpu]
    default_source: str | None
    default_gpus: tuple[str, ...] = ()
    gpu_refresh_ms: int = REFRESH_MS
    schemes: Mapping[str, Scheme] = field(default_factory=lambda: SCHEMES)
    host_ram_bytes: int | None = None
    measured_utilization: Callable[[str], Utilization | None] = lambda _name: None
    explain_log: Callable[[str, str, str, str, Unit], Any] = field(
        default_factory=lambda: explain_log
    )


def explain_log(text: str, model: str, gpu: str, quant: str, unit: Unit = "GiB") -> Any:
    """``answers.explain`` of a pasted log, imported when first used."""
    from vramgui.answers.explain import explain_text

    return explain_text(text, model_name=model, gpu=gpu, quant=quant, unit=unit)


def build_window(services: Services, settings: QSettings) -> MainWindow:
    """Build the window from ``services``, restore the last session from ``settings``, start."""
    workload = _restored_workload(settings)
    checked = settings.value("gpus/catalog")
    gpu_panel = GpuPanel(
        services.probe,
        services.gpu_catalog,
        _string_list(checked) if checked is not None else services.default_gpus,
        services.gpu_refresh_ms,
        cards=add_card.cards_from_settings(settings.value(add_card.SETTINGS_KEY)),
    )
    # Cards added by hand are kept at once: a crash loses none.
    gpu_panel.cards_changed.connect(
        lambda cards: settings.setValue(add_card.SETTINGS_KEY, add_card.cards_to_settings(cards))
    )
    controller = EstimateController(
        services.load_model,
        workload,
        rates=catalog_rates(gpu_panel.gpus, services.measured_utilization),
        host=this_machine(services.host_ram_bytes),
        catalog=tuple((g.name, g.capacity_bytes()) for g in services.gpu_catalog if g.nvml),
        cards=gpu_panel.cards,
    )
    model_panel = ModelPanel(services.search_models, _string_list(settings.value("models/recent")))
    fallback_gpu = services.default_gpus[0] if services.default_gpus else None
    extra = {
        "Serving": extra_views.serving_view(controller),
        "Offloading": extra_views.offload_view(controller, gpu_panel.gpus, fallback_gpu),
        "Profiles": extra_views.profiles_view(controller, services.load_model),
    }
    window = MainWindow(
        controller,
        model_panel,
        PrecisionPanel(services.schemes),
        gpu_panel,
        settings,
        extra_tabs=extra,
        explain_log=services.explain_log,
    )
    source = settings.value("models/last") or services.default_source
    if source:
        controller.load_source(str(source))
    gpu_panel.refresh()
    return window


class _MessageArea(QStackedWidget):
    """The subline and rules, or a message in their place: one fixed height either way."""

    def hasHeightForWidth(self) -> bool:
        # A wrapped message would make the whole estimate tab height-for-width, and the scroll
        # area around it would then size it by preferred heights: a scroll bar would come and go
        # with each message, resizing every chart.
        return False


class MainWindow(QMainWindow):
    """Model, precision and workload on the left; charts, table and advice in the middle; GPUs right."""

    def __init__(
        self,
        controller: EstimateController,
        model_panel: ModelPanel,
        precision_panel: PrecisionPanel,
        gpu_panel: GpuPanel,
        settings: QSettings,
        *,
        extra_tabs: Mapping[str, QWidget],
        explain_log: Callable[[str, str, str, str, Unit], Any] | None = None,
    ) -> None:
        super().__init__()
        self._explain_log = explain_log
        self.log_view: LogView | None = None
        self.controller = controller
        self.settings = settings
        self.model_panel = model_panel
        self.precision_panel = precision_panel
        self.gpu_panel = gpu_panel
        self.workload_panel = WorkloadPanel()
        self.extra_tabs = dict(extra_tabs)
        self.unit: Unit = "GB" if settings.value("view/unit") == "GB" else "GiB"
        self.setWindowTitle("vramgui")
        self.setAcceptDrops(True)

        self.headline = FittedLabel("Pick a model")
        font = self.headline.font()
        font.setPointSizeF(font.pointSizeF() * 1.5)
        font.setBold(True)
        self.headline.setFont(font)
        # How the estimate was built, beside its total: an approximate one must not pass for exact.
        self.badge = QLabel()
        self.badge.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        self.badge.hide()
        self.speed_line = timing.SpeedLine()
        self.subline = QLabel()
        self.subline.setTextFormat(Qt.TextFormat.RichText)
        self.rules = QLabel()
        self.rules.setStyleSheet("color: gray;")
        # Two lines: the rules of thumb of a training estimate are long for a laptop screen.
        self.rules.setWordWrap(True)
        # One line each, whatever the text: a new estimate then repaints the labels without
        # laying out the charts below them again.
        for label, lines in ((self.headline, 1), (self.subline, 1), (self.rules, 2)):
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
            label.setFixedHeight(lines * label.fontMetrics().lineSpacing() + 4)
            label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.rules.setToolTip("The classic rules of thumb for the same setup, for comparison")
        # Messages take the place of the subline and the rules, in the same height: showing or
        # dismissing one must not move (and so lay out and repaint) the charts below.
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet(palette.ERROR_STYLE)
        self.banner.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.banner.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner_close = QPushButton("Dismiss")
        self.banner_close.setFlat(True)
        # The whole of a message longer than the banner's lines (the commands to install the
        # measure extra, a failed run's output), in a window to read and copy from.
        self.banner_details = QPushButton("Details…")
        self.banner_details.setFlat(True)
        self.banner_details.hide()
        self._details = ""
        # What the banner shows: "" (nothing), "error", "estimate" (an estimate that failed),
        # "notice" (a change the window made by itself) or "verify" (what Verify found or why it
        # could not run). Notices of one turn are shown together.
        self.banner_kind = ""
        self._notices: list[str] = []
        self._notice_due = QTimer(self)
        self._notice_due.setSingleShot(True)
        self._notice_due.setInterval(0)
        self._notice_due.timeout.connect(self._show_notices)
        self.message_area = _MessageArea()
        self.breakdown_chart = BreakdownChart()
        self.verify_bar = VerifyBar(controller, self.breakdown_chart)
        self.sweep_chart = SweepChart()
        self.sweep_field = QComboBox()
        self.sweep_field.addItem("Context / sequence length", "seq")
        self.sweep_field.addItem("Batch size", "batch")
        self.breakdown_model = BreakdownModel()
        self.breakdown_table = QTableView()
        self.breakdown_table.setModel(self.breakdown_model)
        self.breakdown_table.verticalHeader().hide()
        # Rows as tall as a line of text: the whole breakdown shows on a laptop screen.
        self.breakdown_table.verticalHeader().setDefaultSectionSize(
            self.breakdown_table.fontMetrics().height() + 8
        )
        self.breakdown_table.setWordWrap(False)
        # Always as tall as its rows and no wider than its pane (the sentences go first): the
        # scroll bars would only hide a row.
        for bar in (
            self.breakdown_table.setHorizontalScrollBarPolicy,
            self.breakdown_table.setVerticalScrollBarPolicy,
        ):
            bar(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.breakdown_table.horizontalHeader()
        # Fixed widths: measuring every cell on each estimate would cost more than drawing it.
        # Wide enough for the longest component name and figure; the sentences take the rest
        # (cut with an ellipsis when narrow; each cell's tooltip holds the whole sentence).
        metrics = self.breakdown_table.fontMetrics()
        longest = max(
            (palette.component_label(name) for name in EXPLANATIONS), key=metrics.horizontalAdvance
        )
        for column, sample in ((0, longest), (1, "99,999.99 GiB"), (2, "100.0%")):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(column, metrics.horizontalAdvance(sample) + CELL_PADDING_PX)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        # Without the sentences, the last column shown fills the table's width.
        header.setStretchLastSection(True)
        # Where the table is too narrow for the sentences, they go (each row's tooltip keeps
        # its own): a column of ellipses would say nothing.
        self._explanations_from = sum(header.sectionSize(c) for c in range(3)) + max(
            metrics.horizontalAdvance(text) + CELL_PADDING_PX
            for text in SHORT_EXPLANATIONS.values()
        )
        self.breakdown_table.installEventFilter(self)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: gray;")
        self.notes.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # As tall as its wrapped text: the notes change only with the method, not on every estimate.
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        policy.setHeightForWidth(True)
        self.notes.setSizePolicy(policy)
        self.notes.installEventFilter(self)
        self.advisor = AdvisorPanel()

        self._save_inputs = QTimer(self)
        self._save_inputs.setSingleShot(True)
        self._save_inputs.setInterval(SAVE_INPUTS_MS)
        self._save_inputs.timeout.connect(self._save_workload)

        self._help: HelpWindow | None = None
        self._build_layout()
        self._build_menus()
        self._connect()
        self._restore_geometry()
        self._show_workload(controller.workload)
        self.statusBar().showMessage("Ready")

    # ----------------------------------------------------------------------------- layout
    def _build_layout(self) -> None:
        left = QWidget()
        column = QVBoxLayout(left)
        for title, panel in (
            ("Model", self.model_panel),
            ("Precision", self.precision_panel),
            ("Workload", self.workload_panel),
        ):
            box = QGroupBox(title)
            QVBoxLayout(box).addWidget(panel)
            # The height the column can spare goes to the model panel's lists.
            column.addWidget(box, 1 if panel is self.model_panel else 0)
        left_scroll = QScrollArea()
        left_scroll.setWidgetResizable(True)
        left_scroll.setWidget(left)
        left_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # As wide as the panels need, no wider: the centre takes the rest.
        scrollbar = left_scroll.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        left_scroll.setMinimumWidth(
            max(left.minimumSizeHint().width(), LEFT_PANEL_MIN_PX) + scrollbar + 4
        )
        # The wheel scrolls the panel; a control takes it only once clicked into.
        guard_wheel(left)

        lines = QWidget()
        lines_layout = QVBoxLayout(lines)
        lines_layout.setContentsMargins(0, 0, 0, 0)
        # Each line keeps 4 pixels of its own: no spacing between them (a laptop's height).
        lines_layout.setSpacing(0)
        # The time / cost line first, under the headline.
        lines_layout.addWidget(self.speed_line)
        lines_layout.addWidget(self.subline)
        lines_layout.addWidget(self.rules)
        message = QWidget()
        message_layout = QHBoxLayout(message)
        message_layout.setContentsMargins(0, 0, 0, 0)
        message_layout.addWidget(self.banner, 1)
        buttons = QVBoxLayout()
        buttons.setSpacing(0)
        buttons.addWidget(self.banner_close)
        buttons.addWidget(self.banner_details)
        buttons.addStretch(1)
        message_layout.addLayout(buttons)
        self.message_area.addWidget(lines)
        self.message_area.addWidget(message)
        # Room for a message of three lines (two notices of one change), and for the subline.
        three_lines = 3 * self.banner.fontMetrics().lineSpacing() + 14
        self.message_area.setFixedHeight(max(lines.sizeHint().height(), three_lines))

        sweep = QWidget()
        sweep_layout = QVBoxLayout(sweep)
        sweep_layout.setContentsMargins(0, 0, 0, 0)
        sweep_header = QHBoxLayout()
        sweep_header.addWidget(QLabel("Memory against"))
        sweep_header.addWidget(self.sweep_field)
        sweep_header.addStretch(1)
        sweep_layout.addLayout(sweep_header)
        sweep_layout.addWidget(self.sweep_chart, 1)

        table = QWidget()
        table_layout = QVBoxLayout(table)
        table_layout.setContentsMargins(0, 0, 0, 0)
        table_layout.addWidget(self.breakdown_table, 1)
        table_layout.addWidget(self.notes)
        # Below short tables: the pane's spare height, so the table itself ends at its last row.
        table_layout.addStretch(0)
        advice = QGroupBox("Fit advisor")
        QVBoxLayout(advice).addWidget(self.advisor)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(table)
        bottom.addWidget(advice)
        bottom.setStretchFactor(0, 1)
        # The advice at the width its cards need, the table the rest.
        bottom.setSizes([720, advice.minimumSizeHint().width()])

        self.centre_split = QSplitter(Qt.Orientation.Vertical)
        self.centre_split.addWidget(self.breakdown_chart)
        self.centre_split.addWidget(sweep)
        self.centre_split.addWidget(bottom)
        self.centre_split.setSizes([210, 250, 330])

        estimate_tab = QWidget()
        centre = QVBoxLayout(estimate_tab)
        centre.setContentsMargins(6, 4, 6, 6)
        centre.setSpacing(4)
        top = QHBoxLayout()
        top.addWidget(self.headline, 1)
        top.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignVCenter)
        top.addWidget(self.verify_bar, 0)
        centre.addLayout(top)
        centre.addWidget(self.message_area)
        centre.addWidget(self.centre_split, 1)

        # In a scroll area: a small window scrolls the charts instead of squashing them, and a
        # new text in a label lays out this tab only, not the tab widget (which repaints whole).
        estimate_scroll = QScrollArea()
        estimate_scroll.setWidgetResizable(True)
        estimate_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        estimate_scroll.setWidget(estimate_tab)
        self.tabs = QTabWidget()
        self.tabs.addTab(estimate_scroll, "Estimate")
        for title, view in self.extra_tabs.items():
            # Scrolled when wider than the window: a wide tab must not set the window's minimum.
            holder = QScrollArea()
            holder.setWidgetResizable(True)
            holder.setFrameShape(QScrollArea.Shape.NoFrame)
            holder.setWidget(view)
            self.tabs.addTab(holder, title)

        gpus = QGroupBox("GPUs")
        QVBoxLayout(gpus).addWidget(self.gpu_panel)
        # No minimum of its own: the GPU list asks for the width its names and badges need.

        self.main_split = QSplitter(Qt.Orientation.Horizontal)
        self.main_split.addWidget(left_scroll)
        self.main_split.addWidget(self.tabs)
        self.main_split.addWidget(gpus)
        # A wider window widens the side column too (its model names), the centre the most.
        self.main_split.setStretchFactor(0, 1)
        self.main_split.setStretchFactor(1, 4)
        # The side panels at the width they need, the centre the rest (a laptop screen too).
        self.main_split.setSizes([left_scroll.minimumWidth(), 860, gpus.minimumSizeHint().width()])
        self.setCentralWidget(self.main_split)

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.action_open_file = _action(self, "&Open model file…", QKeySequence.StandardKey.Open)
        self.action_open_folder = _action(self, "Open model &folder…", "Ctrl+Shift+O")
        self.action_paste_log = _action(self, "Paste a &log…", "Ctrl+L")
        self.action_save_profile = _action(self, "&Save profile…", QKeySequence.StandardKey.Save)
        self.action_export_breakdown = _action(self, "&Export breakdown chart as PNG…", "Ctrl+E")
        self.action_export_sweep = _action(self, "Export &sweep chart as PNG…", "Ctrl+Shift+E")
        self.action_quit = _action(self, "&Quit", QKeySequence.StandardKey.Quit)
        for action in (self.action_open_file, self.action_open_folder):
            file_menu.addAction(action)
        file_menu.addAction(self.action_paste_log)
        if self._explain_log is None:
            self.action_paste_log.setEnabled(False)
        file_menu.addSeparator()
        file_menu.addAction(self.action_save_profile)
        file_menu.addSeparator()
        file_menu.addAction(self.action_export_breakdown)
        file_menu.addAction(self.action_export_sweep)
        file_menu.addSeparator()
        file_menu.addAction(self.action_quit)
        saver = getattr(self.extra_tabs.get("Profiles"), "save_current", None)
        if callable(saver):
            self.action_save_profile.triggered.connect(saver)
        else:
            self.action_save_profile.setEnabled(False)
            self.action_save_profile.setToolTip("Profiles are not available in this build.")

        edit_menu = bar.addMenu("&Edit")
        self.action_copy_text = _action(self, "&Copy estimate as text", "Ctrl+Shift+C")
        self.action_copy_json = _action(self, "Copy estimate as &JSON", "Ctrl+Shift+J")
        self.action_find = _action(self, "&Find model…", QKeySequence.StandardKey.Find)
        for action in (self.action_copy_text, self.action_copy_json, self.action_find):
            edit_menu.addAction(action)

        view_menu = bar.addMenu("&View")
        units = QActionGroup(self)
        self.action_gib = _action(self, "Binary units (Gi&B)", "Ctrl+1")
        self.action_gb = _action(self, "Decimal units (&GB)", "Ctrl+2")
        for action, unit in ((self.action_gib, "GiB"), (self.action_gb, "GB")):
            action.setCheckable(True)
            action.setChecked(self.unit == unit)
            units.addAction(action)
            view_menu.addAction(action)
            action.triggered.connect(lambda _checked=False, u=unit: self.set_unit(u))
        view_menu.addSeparator()
        self.action_inference = _action(self, "&Inference", "Ctrl+I")
        self.action_training = _action(self, "&Training", "Ctrl+T")
        for action, mode in (
            (self.action_inference, "inference"),
            (self.action_training, "training"),
        ):
            view_menu.addAction(action)
            action.triggered.connect(lambda _checked=False, m=mode: self.change({"mode": m}))

        help_menu = bar.addMenu("&Help")
        self.action_method = _action(self, "&How estimates are made", "F1")
        self.action_docs = _action(self, "&Documentation", None)
        self.action_about = _action(self, "&About vramgui", None)
        for action in (self.action_method, self.action_docs, self.action_about):
            help_menu.addAction(action)

    def _connect(self) -> None:
        c = self.controller
        c.model_changed.connect(self._show_model)
        c.workload_changed.connect(self._show_workload)
        c.estimate_changed.connect(self._show_analysis)
        c.estimate_failed.connect(self._show_estimate_error)
        c.outlook_changed.connect(self._show_outlook)
        c.bits_changed.connect(self.precision_panel.set_bits)
        c.loading_changed.connect(self.model_panel.show_loading)
        c.message.connect(self.show_message)
        c.notice.connect(self.show_notice)
        self.model_panel.source_chosen.connect(c.load_source)
        self.precision_panel.changed.connect(self.change)
        self.workload_panel.changed.connect(self.change)
        self.workload_panel.notice.connect(self.show_notice)
        self.gpu_panel.capacities_changed.connect(c.set_capacities)
        self.advisor.apply_requested.connect(lambda s: self.change(s.changes))
        self.speed_line.tokens_changed.connect(c.set_train_tokens)
        self.speed_line.price_changed.connect(c.set_price_per_hour)
        self.sweep_field.currentIndexChanged.connect(
            lambda: c.set_sweep_field(self.sweep_field.currentData())
        )
        self.banner_close.clicked.connect(self._hide_banner)
        self.banner_details.clicked.connect(self.show_details)
        self.verify_bar.said.connect(self._show_verify)
        self.action_open_file.triggered.connect(self.model_panel.open_file.click)
        self.action_open_folder.triggered.connect(self.model_panel.open_folder.click)
        self.action_export_breakdown.triggered.connect(
            lambda: self._export_chart(self.breakdown_chart, "breakdown")
        )
        self.action_export_sweep.triggered.connect(
            lambda: self._export_chart(self.sweep_chart, "sweep")
        )
        self.action_paste_log.triggered.connect(lambda _checked=False: self.show_log_view())
        self.action_quit.triggered.connect(self.close)
        self.action_copy_text.triggered.connect(self.copy_text)
        self.action_copy_json.triggered.connect(self.copy_json)
        self.action_find.triggered.connect(self.model_panel.query.setFocus)
        self.action_method.triggered.connect(lambda: self.open_docs("estimates.md"))
        self.action_docs.triggered.connect(lambda: QDesktopServices.openUrl(QUrl(DOCS_URL)))
        self.action_about.triggered.connect(self._about)

    # ----------------------------------------------------------------------------- slots
    def set_unit(self, unit: Unit) -> None:
        """Show every figure in GiB or GB."""
        self.unit = unit
        self.action_gib.setChecked(unit == "GiB")
        self.action_gb.setChecked(unit == "GB")
        self.gpu_panel.set_unit(unit)
        self.model_panel.set_unit(unit)
        for view in self.extra_tabs.values():
            set_view_unit = getattr(view, "set_unit", None)
            if callable(set_view_unit):
                set_view_unit(unit)
        self.breakdown_chart.set_unit(unit)
        self.sweep_chart.set_unit(unit)
        if self.log_view is not None:
            self.log_view.set_unit(unit)
        if self.controller.analysis is not None:
            self._show_analysis(self.controller.analysis)
        if self.controller.outlook is not None:
            self._show_outlook(self.controller.outlook)

    def change(self, changes: Mapping[str, Any]) -> None:
        """The user changed settings: what the window said of the previous ones is stale (a
        failed estimate's message stays until an estimate succeeds)."""
        self._notices.clear()
        if self.banner_kind in ("notice", "error", "verify"):
            self._hide_banner()
        self.controller.update(**changes)

    def show_message(self, text: str) -> None:
        """Show what went wrong (a source, the hardware or the core) in the banner, in red."""
        self._banner("error", text, palette.ERROR_STYLE)

    def show_notice(self, text: str) -> None:
        """Tell of a change the window made by itself (an engine switched, a recipe applied).

        Notices of one event-loop turn show together, in the warning colours.
        """
        if text not in self._notices:
            self._notices.append(text)
        self._notice_due.start()

    def open_docs(self, document: str) -> None:
        """Open one of the bundled documents (docs/) in a window; online when none is bundled."""
        folder = docs_folder()
        if folder is None:
            QDesktopServices.openUrl(QUrl(f"{ONLINE_DOCS}/{document}"))
            self.statusBar().showMessage("Opening the documentation online", 4000)
            return
        if self._help is None:
            self._help = HelpWindow(folder, document, self)
        self._help.browser.setSource(
            QUrl.fromLocalFile(str(folder / document)), QTextDocument.ResourceType.MarkdownResource
        )
        self._help.show()
        self._help.raise_()

    def _show_notices(self) -> None:
        # Each a sentence: a source's notices ("read from the Hugging Face cache") have no stop.
        text, self._notices = " ".join(as_sentence(n) for n in self._notices), []
        if text:
            self._banner("notice", text, palette.WARNING_STYLE)

    def show_details(self) -> None:
        """The whole of the banner's message, selectable, in a window of its own."""
        box = QMessageBox(QMessageBox.Icon.Information, "Details", self._details, parent=self)
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.open()

    def _show_verify(self, text: str, kind: str, details: str) -> None:
        """What Verify has to say, in the message area under the total (the marks it draws are
        on the chart below): the result, an error, or what to install first."""
        self._banner("verify", text, _VERIFY_STYLES[kind], details)

    def _banner(self, kind: str, text: str, style: str, details: str = "") -> None:
        self.banner_kind = kind
        if self.banner.styleSheet() != style:
            self.banner.setStyleSheet(style)
        self.banner.setText(text)
        self.banner.setToolTip(details or text)
        self._details = details if details and details != text else ""
        self.banner_details.setVisible(bool(self._details))
        self.message_area.setCurrentIndex(1)
        self.statusBar().showMessage(text, 10000)

    def copy_text(self) -> None:
        analysis = self.controller.analysis
        if analysis is not None:
            QGuiApplication.clipboard().setText(report.as_text(analysis, self.unit))
            self.statusBar().showMessage("Estimate copied as text", 4000)

    def copy_json(self) -> None:
        """The ``vramgui estimate --json`` document of the setup shown, on the clipboard."""
        try:
            document = self.controller.document()
        except VramguiError as exc:
            self.show_message(f"Nothing copied: {in_window(exc)}")
            return
        if document is not None:
            QGuiApplication.clipboard().setText(report.as_json(document))
            self.statusBar().showMessage("Estimate copied as JSON", 4000)

    def _hide_banner(self) -> None:
        self.banner_kind = ""
        self.message_area.setCurrentIndex(0)
        self.statusBar().clearMessage()  # it showed the banner's text

    def _show_model(self, loaded: ResolvedModel) -> None:
        # What was said of the previous model (a failed load, an error, a notice) is stale now.
        self._notices.clear()
        self._hide_banner()
        source = self.controller.source or ""
        self.model_panel.show_model(loaded.spec, loaded.spec.source or source, loaded.notices)
        self._show_workload(self.controller.workload)
        self.setWindowTitle(f"{loaded.spec.name} — vramgui")
        self._show_badge(loaded.spec, ())
        # One entry a model: "llama-3.1-8b" and "meta-llama/Llama-3.1-8B" are one model. Each
        # entry's identity is kept beside it (entries saved before have their source as one).
        sources = _string_list(self.settings.value("models/recent"))
        identities = _string_list(self.settings.value("models/recent_ids"))
        identities += sources[len(identities) :]
        mine, name = model_identity(loaded), loaded.spec.name.lower()
        kept = [
            (s, i)
            for s, i in zip(sources, identities, strict=False)
            if s != source and i != mine and s.lower() != name  # an entry typed as its name
        ]
        recent = [(source, mine), *kept][:MAX_RECENT]
        self.settings.setValue("models/recent", [s for s, _ in recent])
        self.settings.setValue("models/recent_ids", [i for _, i in recent])
        self.settings.setValue("models/last", source)
        self.model_panel.set_recent([s for s, _ in recent])

    def _show_workload(self, workload: Workload) -> None:
        reasons = disabled_reasons(workload, self.controller.spec)
        self.workload_panel.set_workload(
            workload, reasons, self.controller.max_seq, self.controller.rope_original
        )
        self.precision_panel.set_values(
            workload.dtype,
            workload.quant,
            workload.kv_dtype,
            reasons,
            stored_format(self.controller.spec, workload.dtype),
            converted=converts_stored(self.controller.spec, workload.quant),
            checkpoint_kv=checkpoint_kv(self.controller.spec, workload),
        )
        # Saved once the inputs rest: writing the settings file on every step of a slider
        # would cost the redraw more than the estimate does.
        self._save_inputs.start()

    def _show_analysis(self, analysis: Analysis) -> None:
        est = analysis.estimate
        unit = self.unit
        w = est.workload
        per = "per GPU" if w.gpus > 1 else ""
        about = "≈ " if analysis.spec.inventory is Inventory.APPROXIMATE else ""
        total = f"{about}{format_bytes(est.total_bytes, unit)} {per}".strip()
        # A narrow window drops the organisation first: the figure must always show whole.
        self.headline.set_texts(
            f"{total} · {est.model_name}", f"{total} · {est.model_name.rsplit('/', 1)[-1]}"
        )
        self._show_badge(analysis.spec, est.notes)
        self.speed_line.show_summary(analysis.speed, self.controller.train_tokens)
        verdicts = [
            f"<span style='color:{palette.FIT if row.fits else palette.NO_FIT}'>"
            f"{'fits' if row.fits else 'does not fit'} {row.gpu}</span>"
            for row in analysis.fit[:3]
        ]
        phase = est.phase
        if phase == POOLED_PHASE and analysis.fit and len(analysis.fit) > 1:
            # The bar is the target's pool; every other GPU is held against a pool of its own.
            phase = f"serving (KV pool pre-allocated on {analysis.fit[0].gpu}; each GPU its own)"
        self.subline.setText(", ".join([f"peak at {phase}", *verdicts]))
        shown = {name: size for name, size in est.components.items() if size}
        self.breakdown_chart.set_data(
            shown,
            [(r.gpu, r.capacity_bytes, r.fits, r.headroom_bytes) for r in analysis.fit],
        )
        self.breakdown_model.set_components(shown, unit)
        self._fit_table_height()
        self._fit_component_column(shown)
        notes = "\n".join(in_window(n) for n in (*est.notes, *analysis.engine_notes))
        if notes != self.notes.text():  # a new text lays the table's pane out again
            self.notes.setText(notes)
            self.notes.setToolTip(notes)
            self._fit_notes_height()
        self.gpu_panel.show_fit(analysis.fit)
        if self.banner_kind == "estimate":
            self._hide_banner()

    def _fit_component_column(self, shown: Mapping[str, int]) -> None:
        """The names column as wide as the longest name shown: more room for the rest."""
        metrics = self.breakdown_table.fontMetrics()
        names = ["Total per GPU", *(palette.component_label(name) for name in shown)]
        width = max(metrics.horizontalAdvance(name) for name in names) + CELL_PADDING_PX
        header = self.breakdown_table.horizontalHeader()
        if header.sectionSize(0) != width:  # a new width lays the table out again
            header.resizeSection(0, width)

    def _fit_notes_height(self) -> None:
        """The notes as tall as their text wrapped at their width: a splitter or a short window
        otherwise gives them less, and the last rows of the table are drawn over."""
        height = self.notes.heightForWidth(self.notes.width()) if self.notes.text() else 0
        if self.notes.minimumHeight() != height:
            self.notes.setMinimumHeight(height)

    def _fit_table_height(self) -> None:
        table = self.breakdown_table
        rows = max(self.breakdown_model.rowCount(), 1)
        height = (
            table.horizontalHeader().height()
            + rows * table.verticalHeader().defaultSectionSize()
            + 2 * table.frameWidth()
        )
        # Set only on a change: a new height lays the pane out again. As tall as its rows, never
        # less: a short window scrolls the tab rather than hide part of the breakdown.
        if table.maximumHeight() != height:
            table.setMaximumHeight(height)
            table.setMinimumHeight(height)

    def _show_estimate_error(self, text: str) -> None:
        """The settings have no estimate: every figure of the last one goes (the tab must never
        show numbers of a setup that is no longer the one set), the reason in the banner."""
        self.headline.set_texts("No estimate for these settings")
        spec = self.controller.spec
        if spec is not None:  # the model's own doubts; the estimate's notes went with it
            self._show_badge(spec, ())
        self.speed_line.clear("No speed or cost: these settings have no estimate.")
        self.subline.setText("")
        self.rules.setText("")
        self.breakdown_chart.set_data({}, [])
        self.breakdown_model.set_components({}, self.unit)
        self._fit_table_height()
        if self.notes.text():
            self.notes.setText("")
            self.notes.setToolTip("")
            self._fit_notes_height()
        self.gpu_panel.show_fit(())
        self.sweep_chart.set_data(
            self.controller.sweep_field, (), totals_bytes=(), capacities=(), largest=None, current=0
        )
        self.advisor.clear("No estimate, so no advice.")
        self._banner("estimate", text, palette.ERROR_STYLE)

    def _show_outlook(self, outlook: Outlook) -> None:
        analysis = self.controller.analysis
        workload = self.controller.workload
        rules = " · ".join(
            f"{palette.rule_label(name)}: {format_bytes(size, self.unit)}"
            for name, size in outlook.rules.items()
        )
        # The classic rules size the whole model; beside per-GPU figures they must say so.
        gpus = workload.gpus
        whole = f" (whole model, not per GPU of {gpus})" if gpus > 1 else ""
        self.rules.setText(f"Rules of thumb{whole}: {rules}" if rules else "")
        self.sweep_chart.set_data(
            outlook.field,
            outlook.values,
            totals_bytes=outlook.totals_bytes,
            capacities=self.controller.capacities,
            largest=outlook.largest.get(outlook.field),
            current=getattr(workload, outlook.field),
        )
        row = analysis.fit[0] if analysis and analysis.fit else None
        self.advisor.show_outlook(
            outlook.target,
            fits=row.fits if row else None,
            headroom_bytes=row.headroom_bytes if row else 0,
            largest=outlook.largest,
            suggestions=outlook.suggestions,
            unit=self.unit,
            seq_word="context" if workload.mode == "inference" else "sequence length",
            shortfall=(
                shortfall_text(row, workload.seq, partial(format_bytes, unit=self.unit))
                if row and not row.fits
                else ""
            ),
        )
        self.advisor.show_ranking(
            outlook.ranked, outlook.ranked_by_time, workload.mode, self.controller.train_tokens
        )

    def _show_badge(self, spec: ModelSpec, notes: Sequence[str]) -> None:
        """The badge of how the estimate was built, with what is uncertain in its tooltip."""
        text, meaning, style = BADGES[spec.inventory]
        doubts = list(dict.fromkeys(in_window(n) for n in (*spec.warnings, *notes)))
        tip = meaning + "".join(f"\n• {doubt}" for doubt in doubts)
        if self.badge.text() != text:
            self.badge.setText(text)
            self.badge.setStyleSheet(style)
        if self.badge.toolTip() != tip:
            self.badge.setToolTip(tip)
        self.badge.show()

    def _export_chart(self, chart: QWidget, name: str) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export chart", f"vramgui-{name}.png", "PNG images (*.png)"
        )
        if path:
            self.export_chart(chart, path)

    def export_chart(self, chart: QWidget, path: str) -> bool:
        """Save ``chart`` as a PNG image at ``path``, titled with the model, the setup and the
        peak (an image shared alone says what it shows)."""
        analysis = self.controller.analysis
        title = report.title_lines(analysis, self.unit) if analysis is not None else []
        saved = titled(chart.grab(), title, chart.palette()).save(path, "PNG")
        if not saved:
            self.show_message(f"Could not write {path}")
        return saved

    def _about(self) -> None:
        QMessageBox.about(
            self,
            "About vramgui",
            f"<b>vramgui {__version__}</b><p>How much GPU memory does a model need to serve or "
            "fine-tune, does it fit your GPUs, and what to change if it does not.</p>"
            f"<p><a href='{DOCS_URL}'>Documentation</a> (Help &gt; How estimates are made opens "
            "the documents bundled with the app)</p>",
        )

    # ----------------------------------------------------------------------------- events
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.breakdown_table and event.type() == QEvent.Type.Resize:
            narrow = self.breakdown_table.width() < self._explanations_from
            header = self.breakdown_table.horizontalHeader()
            if header.isSectionHidden(3) != narrow:
                header.setSectionHidden(3, narrow)
        elif watched is self.notes and event.type() == QEvent.Type.Resize:
            self._fit_notes_height()
        return super().eventFilter(watched, event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if droppable_path(urls) or self._dropped_log(urls):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        urls = event.mimeData().urls()
        path = droppable_path(urls)
        if path:
            event.acceptProposedAction()
            self.controller.load_source(path)
        elif log := self._dropped_log(urls):
            event.acceptProposedAction()
            self.show_log_view(log)

    def _dropped_log(self, urls: Sequence[QUrl]) -> str | None:
        """The first dropped local log file (.log, .txt...), when logs can be explained."""
        if self._explain_log is None:
            return None
        for url in urls:
            if url.isLocalFile() and is_log_file(url.toLocalFile()):
                return url.toLocalFile()
        return None

    def show_log_view(self, path: str | None = None) -> LogView | None:
        """Open the log view (one per window), explaining ``path`` when one is given."""
        if self._explain_log is None:
            return None
        if self.log_view is None:
            self.log_view = LogView(self._explain_log, self.unit, self)
            self.log_view.resize(1280, 720)
        self.log_view.show()
        self.log_view.raise_()
        if path:
            self.log_view.open_file(path)
        return self.log_view

    def _save_workload(self) -> None:
        self._save_inputs.stop()
        # The user's settings: a model's own format is its own, and comes back with the model.
        workload = self.controller.chosen_workload
        self.settings.setValue("session/workload", json.dumps(workload.to_dict()))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.gpu_panel.stop()
        self.verify_bar.shutdown()
        self._save_workload()
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("window/main_split", self.main_split.saveState())
        self.settings.setValue("window/centre_split", self.centre_split.saveState())
        self.settings.setValue("view/unit", self.unit)
        self.settings.setValue("gpus/catalog", self.gpu_panel.checked_catalog())
        self.settings.sync()
        super().closeEvent(event)

    def _restore_geometry(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and self.restoreGeometry(geometry):
            for key, splitter in (
                ("window/main_split", self.main_split),
                ("window/centre_split", self.centre_split),
            ):
                state = self.settings.value(key)
                if isinstance(state, QByteArray):
                    splitter.restoreState(state)
            state = self.settings.value("window/state")
            if isinstance(state, QByteArray):
                self.restoreState(state)
        else:
            # The first run: a roomy window, but never larger than the screen.
            room = self.screen().availableGeometry()
            self.resize(min(1500, room.width()), min(940, room.height()))
        self.set_unit(self.unit)


def _action(parent: QWidget, text: str, shortcut: QKeySequence.StandardKey | str | None) -> QAction:
    action = QAction(text, parent)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    return action


def _restored_workload(settings: QSettings) -> Workload:
    raw = settings.value("session/workload")
    if not isinstance(raw, str):
        return Workload()
    try:
        return Workload.from_dict(json.loads(raw))
    except (ValueError, WorkloadError):
        return Workload()


def titled(image: QPixmap, lines: Sequence[str], colors: QPalette) -> QPixmap:
    """``image`` below ``lines`` of text (wrapped to its width), on the window's background."""
    if not lines:
        return image
    ratio = image.devicePixelRatio()
    width = round(image.width() / ratio)
    font = QFont()
    font.setBold(True)
    metrics = QFontMetrics(font)
    pad = metrics.height() // 2
    flags = int(Qt.TextFlag.TextWordWrap)
    boxes = [metrics.boundingRect(QRect(pad, 0, width - 2 * pad, 10**4), flags, t) for t in lines]
    band = 2 * pad + sum(box.height() for box in boxes)
    out = QPixmap(round(width * ratio), round((band + image.height() / ratio) * ratio))
    out.setDevicePixelRatio(ratio)
    out.fill(colors.color(QPalette.ColorRole.Window))
    painter = QPainter(out)
    painter.setFont(font)
    painter.setPen(colors.color(QPalette.ColorRole.WindowText))
    top = pad
    for text, box in zip(lines, boxes, strict=True):
        painter.drawText(QRect(pad, top, width - 2 * pad, box.height()), flags, text)
        top += box.height()
    painter.drawPixmap(0, band, image)
    painter.end()
    return out


def model_identity(loaded: ResolvedModel) -> str:
    """What makes two loads the same model, whatever was typed: the file or folder for one
    opened here, else the model's name (the catalog's name, a Hub id or its alias all read as
    the repo id) and the file chosen in a Hub repo."""
    ref = loaded.ref
    if ref.kind in ("local", "config", "ollama"):
        return f"{ref.kind}:{ref.id}"
    return f"{loaded.spec.name.lower()}|{ref.file or ''}"


def _string_list(value: object) -> list[str]:
    # QSettings hands back a str for one-element lists in INI files, and None when absent.
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return []
