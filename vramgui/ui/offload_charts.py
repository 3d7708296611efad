"""The offload view's two charts: bytes per layer by device, and decode tokens/s against batch.

Painted with QPainter alone (``ui/plot.py``): they follow every input change while the
Offloading tab shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFontMetricsF,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
)
from PySide6.QtWidgets import QWidget

from vramgui.answers import placement as offload
from vramgui.answers.offload import best as fastest_that_fits
from vramgui.answers.placement import CPU, DISK, Placement, Throughput
from vramgui.core.units import GB, Unit, format_bytes, format_rate, format_wait
from vramgui.ui import palette
from vramgui.ui.axes import (
    log_bounds,
    log_ticks_within,
    nice_ceiling,
    nice_step,
    rate_label,
)
from vramgui.ui.plot import PAD, Chart, draw_capacity_line, log2_share, sentences

# Colour-blind safe (Okabe-Ito), matching the breakdown chart's palette.
DEVICE_COLOURS = {
    "gpu": "#0072B2",
    "gpu2": "#56B4E9",
    "gpu3": "#009E73",
    CPU: "#E69F00",
    DISK: "#D55E00",
}
DEVICE_LABELS = {CPU: "CPU RAM", DISK: "Disk"}
KV_ALPHA = 110
RESOURCE_LABELS = {
    offload.GPU_MEMORY: "GPU memory bandwidth",
    offload.GPU_COMPUTE: "GPU compute",
    offload.CPU_MEMORY: "CPU RAM bandwidth",
    offload.CPU_COMPUTE: "CPU compute",
    offload.PCIE: "PCIe",
    offload.DISK_READ: "disk reads",
    offload.SYNC: "hand-overs between devices",
}
BAR_WIDTH = 0.8  # of a unit's slot
_NAME_PX = 48.0  # at least this many pixels between unit names under the bars
_Y_TICK_PX = 40.0
_X_MARGIN = 0.35  # doublings of room each side of the batches


def device_colour(device: str) -> str:
    if offload.is_gpu(device):
        index = offload.gpu_index(device)
        return DEVICE_COLOURS[("gpu", "gpu2", "gpu3")[min(index, 2)]]
    return DEVICE_COLOURS[device]


def device_label(device: str) -> str:
    if offload.is_gpu(device):
        return f"GPU {device.split(':')[1]}"
    return DEVICE_LABELS[device]


def _axis_unit(unit: Unit, biggest: int) -> tuple[str, int]:
    """The axis unit for bars up to ``biggest`` bytes: the chosen unit, or its mebi / mega step."""
    big, small = (
        (("GiB", 1024**3), ("MiB", 1024**2)) if unit == "GiB" else (("GB", GB), ("MB", 10**6))
    )
    return big if biggest >= big[1] else small


def unit_runs(names: Sequence[str]) -> str:
    """Unit names with runs of consecutive blocks joined: "embeddings, blocks 0-13, output"."""
    out: list[str] = []
    run: list[int] = []

    def close() -> None:
        if run:
            out.append(f"block {run[0]}" if len(run) == 1 else f"blocks {run[0]}-{run[-1]}")
            run.clear()

    for name in names:
        index = name.removeprefix("block ")
        if index.isdigit() and (not run or int(index) == run[-1] + 1):
            run.append(int(index))
            continue
        close()
        if index.isdigit():
            run.append(int(index))
        else:
            out.append(name)
    close()
    return ", ".join(out)


def _on_own_device(p: offload.PlacedUnit) -> int:
    """Bytes of a unit on its own device (the tied head copy included)."""
    own = p.bytes_on(p.device)
    return own + max(p.gpu_bytes - p.unit.bytes, 0) if offload.is_gpu(p.device) else own


def _piece_words(piece: offload.Piece) -> str:
    """What a piece holds, in words: "routed experts", or its GGUF tensor kinds."""
    if piece.expert_bytes and piece.expert_bytes == piece.bytes:
        return "routed experts"
    kinds = sorted({name.split(".")[2] for name in piece.names if name.count(".") >= 2})
    return ", ".join(kinds[:4]) + (" ..." if len(kinds) > 4 else "")


def _short_name(name: str) -> str:
    return {"embeddings": "emb", "output": "out"}.get(name, name.removeprefix("block "))


class LayerChart(Chart):
    """One bar per unit, coloured by where its weights live, its KV cache stacked above."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, "Memory per layer by device")
        self._unit: Unit = "GiB"
        self._placement: Placement | None = None
        self.axis_unit = "GiB"
        self._factor = 1024**3
        self.top = 1.0  # the axis ends here, in the axis unit
        self.setMinimumHeight(200)

    def sizeHint(self) -> QSize:
        return QSize(800, 320)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self._rescale()

    def set_placement(self, placement: Placement | None) -> None:
        self._placement = placement
        self._rescale()

    @property
    def units(self) -> tuple[offload.PlacedUnit, ...]:
        return self._placement.units if self._placement is not None else ()

    def bar_colours(self) -> list[str]:
        """The colour of each weight bar, as drawn."""
        return [device_colour(p.device) for p in self.units]

    def legend(self) -> list[str]:
        """The legend's entries, as drawn: the devices shown, then the KV cache."""
        return [label for label, _colour in self._legend(QColor())]

    def _legend(self, text: QColor) -> list[tuple[str, QColor]]:
        placed = self.units
        if not placed:
            return []
        devices = {p.device for p in placed} | {p.kv_device for p in placed}
        devices |= {piece.device for p in placed for piece in p.pieces}
        gpus = sorted((d for d in devices if offload.is_gpu(d)), key=offload.gpu_index)
        entries = [
            (device_label(d), QColor(device_colour(d))) for d in (*gpus, CPU, DISK) if d in devices
        ]
        kv = QColor(text)
        kv.setAlpha(KV_ALPHA)
        return [*entries, ("KV cache (lighter: same device)", kv)]

    def _rescale(self) -> None:
        biggest = max((p.unit.bytes + p.unit.kv_cache_bytes for p in self.units), default=0)
        # Layers of small models read better in MiB than in thousandths of a GiB.
        self.axis_unit, self._factor = _axis_unit(self._unit, biggest)
        top = max(
            (
                p.unit.bytes + max(p.gpu_bytes - p.unit.bytes, 0) + p.unit.kv_cache_bytes
                for p in self.units
            ),
            default=0,
        )
        # A round end: nearby settings keep the same axis.
        self.top = nice_ceiling(top / self._factor * 1.1) if top else 1.0
        self.refresh()

    def describe(self) -> str:
        """Which units each device holds and their bytes, then where the KV cache is."""
        placed = self.units
        if not placed:
            return "No placement yet."
        unit = self._unit
        weights: dict[str, list[offload.PlacedUnit]] = {}
        kv: dict[str, int] = {}
        for p in placed:
            weights.setdefault(p.device, []).append(p)
            if p.unit.kv_cache_bytes:
                kv[p.kv_device] = kv.get(p.kv_device, 0) + p.unit.kv_cache_bytes
        held = "; ".join(
            f"{device_label(device)}: {unit_runs([p.unit.name for p in members])}, "
            f"{format_bytes(sum(_on_own_device(p) for p in members), unit)}"
            for device, members in weights.items()
        )
        moved: dict[str, int] = {}
        for p in placed:
            for piece in p.pieces:
                if piece.device != p.device:
                    moved[piece.device] = moved.get(piece.device, 0) + piece.bytes
        elsewhere = ", ".join(
            f"{format_bytes(b, unit)} in {device_label(d)}" for d, b in moved.items()
        )
        cache = ", ".join(f"{format_bytes(b, unit)} in {device_label(d)}" for d, b in kv.items())
        return sentences(
            f"Weights of {len(placed)} units by where they live: {held}.",
            f"Tensors kept apart from their layer (routed experts, row shares): {elsewhere}."
            if elsewhere
            else "",
            f"KV cache: {cache}." if cache else "",
        )

    def text_at(self, x: float) -> str:
        """The hover text for the bar at chart position ``x``: the unit, its device and sizes."""
        placed = self.units
        index = round(x)
        if not 0 <= index < len(placed) or abs(x - index) > BAR_WIDTH / 2:
            return ""
        p = placed[index]
        unit = self._unit
        lines = [
            f"{p.unit.name}: {device_label(p.device)}",
            f"weights {format_bytes(p.unit.bytes, unit)} ({p.unit.bytes:,} bytes)",
        ]
        if p.gpu_bytes > p.unit.bytes:
            lines.append(f"on the GPU with the tied head copy: {format_bytes(p.gpu_bytes, unit)}")
        for piece in p.pieces:
            what = _piece_words(piece)
            lines.append(
                f"{device_label(piece.device)}: {format_bytes(piece.bytes, unit)}"
                + (f" ({what})" if what else "")
            )
        if p.unit.kv_cache_bytes:
            lines.append(
                f"KV cache {format_bytes(p.unit.kv_cache_bytes, unit)} in {device_label(p.kv_device)}"
            )
        return "\n".join(lines)

    def _x(self, position: float, plot: QRectF) -> float:
        # Slots of one unit each, from -0.6 to n - 0.4.
        count = max(len(self.units), 1)
        return plot.left() + (position + 0.6) / (count + 0.2) * plot.width()

    def _y(self, value: float, plot: QRectF) -> float:
        return plot.bottom() - value / self.top * plot.height()

    def paintEvent(self, event: QPaintEvent) -> None:
        background, text, grid = self.colours()
        painter = QPainter(self)
        painter.fillRect(self.rect(), background)
        if not self.units:
            self.draw_empty(painter, text)
            painter.end()
            return
        metrics = QFontMetricsF(self.font())
        line = metrics.height()
        plot = self.plot_rect(top_rows=1, bottom_rows=1)
        step = nice_step(self.top, plot.height() / _Y_TICK_PX)
        ticks = [
            (self._y(i * step, plot), f"{i * step:g}")
            for i in range(1, int(self.top / step + 1e-9) + 1)
        ]
        self.draw_y_axis(
            painter, plot, ticks, f"per layer ({self.axis_unit})", text=text, grid=grid
        )

        # The legend on one row above the plot.
        x = plot.left()
        for label, colour in self._legend(text):
            painter.fillRect(QRectF(x, PAD + line * 0.2, line * 0.6, line * 0.6), colour)
            painter.setPen(QPen(text, 1))
            painter.drawText(QPointF(x + line * 0.9, PAD + metrics.ascent()), label)
            x += line * 0.9 + metrics.horizontalAdvance(label) + 18

        # The bars: weights from the axis up, the KV cache on top, lighter.
        half = BAR_WIDTH / 2
        for i, p in enumerate(self.units):
            left, right = self._x(i - half, plot), self._x(i + half, plot)
            # The layer's own device at the bottom with its KV cache (lighter), then what lives
            # elsewhere (experts in host RAM, rows on other GPUs) stacked above.
            own = p.bytes_on(p.device) + max(p.gpu_bytes - p.unit.bytes, 0)
            kv = QColor(device_colour(p.kv_device))
            kv.setAlpha(KV_ALPHA)
            segments = [(own, QColor(device_colour(p.device)))]
            if p.unit.kv_cache_bytes:
                segments.append((p.unit.kv_cache_bytes, kv))
            segments += [
                (piece.bytes, QColor(device_colour(piece.device)))
                for piece in p.parts
                if piece.device != p.device
            ]
            height = 0.0
            for size, colour in segments:
                low = self._y(height, plot)
                height += size / self._factor
                painter.fillRect(
                    QRectF(left, self._y(height, plot), right - left, low - self._y(height, plot)),
                    colour,
                )

        # Unit names under the bars, thinned so that they never overlap.
        painter.setPen(QPen(text, 1))
        for left, name in self.name_labels(plot, metrics):
            painter.drawText(QPointF(left, plot.bottom() + 4 + metrics.ascent()), name)
        painter.end()

    def name_labels(self, plot: QRectF, metrics: QFontMetricsF) -> list[tuple[float, str]]:
        """The unit names drawn under the bars, as (left x, text): the embeddings and the output
        first, then every few blocks, each kept only where it clears those already placed."""
        count = len(self.units)
        if not count:
            return []
        every = max(1, math.ceil(count * _NAME_PX / max(plot.width(), 1.0)))
        placed: list[tuple[float, float, str]] = []
        for i in (0, count - 1, *range(1, count - 1, every)):
            name = _short_name(self.units[i].unit.name)
            width = metrics.horizontalAdvance(name)
            left = self._x(i, plot) - width / 2
            gap = metrics.horizontalAdvance("  ")
            if all(left + width + gap <= a or b + gap <= left for a, b, _ in placed):
                placed.append((left, left + width, name))
        return [(left, name) for left, _right, name in sorted(placed)]

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        plot = self.plot_rect(top_rows=1, bottom_rows=1)
        count = max(len(self.units), 1)
        x = (event.position().x() - plot.left()) / plot.width() * (count + 0.2) - 0.6
        self.show_hover(event, self.text_at(x))


class ThroughputChart(Chart):
    """Decode tokens/s against batch size (log-log), with the batch where it turns compute-bound."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, "Decode tokens per second against batch size")
        self.curve: tuple[Throughput, ...] = ()
        self.current: Throughput | None = None
        self.turn: int | None = None
        self.x_range = (1.0, 1024.0)  # batches
        self.y_range = (1.0, 10.0)  # tokens/s
        self.setMinimumHeight(180)

    def sizeHint(self) -> QSize:
        return QSize(700, 240)

    def set_curve(
        self, curve: Sequence[Throughput], current: Throughput | None, turn: int | None
    ) -> None:
        """Draw ``curve``, mark the current batch and the first compute-bound batch."""
        self.curve, self.current, self.turn = tuple(curve), current, turn
        points = [*self.curve, *([current] if current is not None else [])]
        if points:
            batches = [t.batch for t in points]
            self.x_range = (float(min(batches)), float(max(batches)))
            rates = [t.tokens_per_second for t in points if 0 < t.tokens_per_second < math.inf]
            if rates:
                self.y_range = log_bounds(min(rates), max(rates))
        self.refresh()

    def describe(self) -> str:
        """Tokens/s at each batch, the current batch and its bound, where compute takes over."""
        if not self.curve:
            return "No throughput yet."
        points = ", ".join(
            f"{t.batch:,}: {format_rate(t.tokens_per_second)}"
            for t in self.curve
            if 0 < t.tokens_per_second < math.inf
        )
        current = self.current
        now = (
            f"At the current batch of {current.batch:,}: "
            f"{format_rate(current.tokens_per_second)} tokens/s, bound by "
            f"{RESOURCE_LABELS[current.bound]}."
            if current is not None and 0 < current.tokens_per_second < math.inf
            else ""
        )
        if self.turn is not None:
            turn = f"Compute-bound from a batch of {self.turn:,}."
        elif not any(t.compute_bound for t in self.curve):
            turn = "Bound by memory or copies at every batch shown."
        else:
            turn = ""
        return sentences(f"Decode tokens/s by batch size: {points}.", now, turn)

    def _x(self, batch: float, plot: QRectF) -> float:
        return plot.left() + log2_share(batch, *self.x_range, _X_MARGIN) * plot.width()

    def _y(self, rate: float, plot: QRectF) -> float:
        low, high = (math.log10(v) for v in self.y_range)
        share = (math.log10(rate) - low) / (high - low) if high > low else 0.5
        return plot.bottom() - share * plot.height()

    def _points(self, plot: QRectF) -> list[tuple[Throughput, QPointF]]:
        return [
            (t, QPointF(self._x(t.batch, plot), self._y(t.tokens_per_second, plot)))
            for t in self.curve
            if 0 < t.tokens_per_second < math.inf
        ]

    def paintEvent(self, event: QPaintEvent) -> None:
        background, text, grid = self.colours()
        painter = QPainter(self)
        painter.fillRect(self.rect(), background)
        if not self.curve:
            # No plan: the ranges of the last one would read as figures.
            self.draw_empty(painter, text)
            painter.end()
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        metrics = QFontMetricsF(self.font())
        plot = self.plot_rect(top_rows=0, bottom_rows=2)

        values = log_ticks_within(*self.y_range, most=plot.height() / 28)
        ticks = [(self._y(v, plot), rate_label(v)) for v in values]
        self.draw_y_axis(painter, plot, ticks, "Decode tokens/s", text=text, grid=grid)

        low, high = self.x_range
        self.draw_log2_x_axis(
            painter,
            plot,
            self.x_range,
            lambda batch: self._x(batch, plot),
            "Batch size (sequences)",
            text=text,
            grid=grid,
        )

        painter.setClipRect(plot.adjusted(-8, -8, 8, 8))
        if self.turn is not None and low <= self.turn <= high:
            colour = QColor(palette.COMPONENT_COLOURS["activations"])
            x = self._x(self.turn, plot)
            painter.setPen(QPen(colour, 2))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
            label = f"compute-bound from {self.turn:,}"
            width = metrics.horizontalAdvance(label)
            left = x + 6 if x + 6 + width <= plot.right() else x - 6 - width
            painter.drawText(QPointF(left, plot.top() + 4 + metrics.ascent()), label)

        colour = QColor(palette.COMPONENT_COLOURS["weights"])
        points = [point for _t, point in self._points(plot)]
        painter.setPen(QPen(colour, 2))
        if len(points) > 1:
            painter.drawPolyline(points)
        painter.setBrush(colour)
        for point in points:
            painter.drawEllipse(point, 3, 3)
        current = self.current
        if current is not None and 0 < current.tokens_per_second < math.inf:
            painter.setPen(QPen(text, 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            centre = QPointF(self._x(current.batch, plot), self._y(current.tokens_per_second, plot))
            painter.drawEllipse(centre, 6.5, 6.5)
        painter.end()

    def text_at(self, x: float, y: float) -> str:
        """The hover text for the point nearest pixel ``(x, y)`` (within 12 pixels), or ""."""
        plot = self.plot_rect(top_rows=0, bottom_rows=2)
        best, distance = None, 12.0
        for t, point in self._points(plot):
            d = math.hypot(point.x() - x, point.y() - y)
            if d <= distance:
                best, distance = t, d
        if best is None:
            return ""
        return (
            f"batch {best.batch:,}: {format_rate(best.tokens_per_second)} tokens/s,"
            f" bound by {RESOURCE_LABELS[best.bound]}"
        )

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        position = event.position()
        self.show_hover(event, self.text_at(position.x(), position.y()))


CURVE_COLOURS = {offload.LAYERS: "#0072B2", offload.EXPERTS: "#E69F00"}
CURVE_LABELS = {
    offload.LAYERS: "whole layers on the GPU (-ngl)",
    offload.EXPERTS: "experts in host RAM (--n-cpu-moe)",
}


DECODE, FIRST_TOKEN = "decode", "first token"
# What a memory chart draws of each placement: its title and its axis.
_QUANTITIES = {
    DECODE: ("Decode tokens per second against GPU memory", "Decode tokens/s"),
    FIRST_TOKEN: ("Time to the first token against GPU memory", "First token (s)"),
}


class MemorySpeedChart(Chart):
    """Decode tokens/s (or, as ``quantity`` says, the time to the first token) against GPU memory:
    whole layers (``-ngl`` 0 to all) beside every layer on the GPU with the experts of the first
    N layers in host RAM (``--n-cpu-moe`` 0 to all), the budget as a line and the current
    placement ringed. Filled points fit with the margin kept."""

    def __init__(self, parent: QWidget | None = None, quantity: str = DECODE) -> None:
        super().__init__(parent, _QUANTITIES[quantity][0])
        self.quantity = quantity
        self.series: dict[str, tuple[offload.CurvePoint, ...]] = {}
        self.current: tuple[int, float] | None = None  # GPU bytes, the quantity's value
        self.budget_bytes = 0
        self._unit: Unit = "GiB"
        self.x_top = 1.0
        self.y_top = 1.0
        self.setMinimumHeight(180)

    def sizeHint(self) -> QSize:
        return QSize(700, 240)

    def set_unit(self, unit: Unit) -> None:
        self._unit = unit
        self.refresh()

    def set_curves(
        self,
        layers: Sequence[offload.CurvePoint],
        experts: Sequence[offload.CurvePoint],
        *,
        budget_bytes: int,
        current: tuple[int, float] | None,
    ) -> None:
        """Draw both curves, the budget (all GPUs together) and the current point (its GPU
        memory and the quantity's value)."""
        self.series = {offload.LAYERS: tuple(layers), offload.EXPERTS: tuple(experts)}
        self.budget_bytes, self.current = budget_bytes, current
        points = [p for series in self.series.values() for p in series]
        gib = 1024**3 if self._unit == "GiB" else GB
        memory = [p.total_gpu_bytes for p in points] + [budget_bytes]
        if current is not None:
            memory.append(current[0])
        widest = max(memory)
        self.x_top = nice_ceiling(widest / gib * 1.05) if widest > 0 else 1.0
        values = [v for p in points if (v := self.value(p)) is not None]
        if current is not None and current[1] < math.inf:
            values.append(current[1])
        highest = max(values, default=0.0)
        self.y_top = nice_ceiling(highest * 1.1) if highest > 0 else 1.0
        self.refresh()

    def value(self, point: offload.CurvePoint) -> float | None:
        """What the chart draws of ``point`` (None: nothing to draw)."""
        v = point.tokens_per_second if self.quantity == DECODE else point.first_token_seconds
        return v if v is not None and v < math.inf else None

    def _reads(self, value: float) -> str:
        if self.quantity == DECODE:
            return f"{format_rate(value)} tokens/s"
        return f"first token after {format_wait(value)}"

    def _best(self, points: Sequence[offload.CurvePoint]) -> offload.CurvePoint | None:
        """The best point that fits: the most tokens/s, or the soonest first token."""
        if self.quantity == DECODE:
            return fastest_that_fits(points)
        timed = [(v, p) for p in points if p.fits and (v := self.value(p)) is not None]
        return min(timed, key=lambda vp: vp[0], default=(0.0, None))[1]

    def _scale(self) -> float:
        return 1024**3 if self._unit == "GiB" else GB

    def _x(self, size: float, plot: QRectF) -> float:
        return plot.left() + size / self._scale() / self.x_top * plot.width()

    def _y(self, rate: float, plot: QRectF) -> float:
        return plot.bottom() - rate / self.y_top * plot.height()

    def describe(self) -> str:
        """Each curve's fastest point that fits, and the current placement."""
        if not any(self.series.values()):
            return "No curves yet."
        parts = []
        for kind, points in self.series.items():
            best = self._best(points)
            value = None if best is None else self.value(best)
            if best is not None and value is not None:
                parts.append(
                    f"{CURVE_LABELS[kind].capitalize()}: the fastest that fits is {best.flag}, "
                    f"{format_bytes(best.total_gpu_bytes, self._unit)} of GPU memory, "
                    f"{self._reads(value)}."
                )
            elif points:
                parts.append(f"{CURVE_LABELS[kind].capitalize()}: no point fits.")
        if self.current is not None:
            parts.append(
                f"Now: {format_bytes(self.current[0], self._unit)}, {self._reads(self.current[1])}."
            )
        return sentences(*parts)

    def _points(self, plot: QRectF) -> list[tuple[offload.CurvePoint, QPointF]]:
        return [
            (p, QPointF(self._x(p.total_gpu_bytes, plot), self._y(v, plot)))
            for series in self.series.values()
            for p in series
            if (v := self.value(p)) is not None
        ]

    def paintEvent(self, event: QPaintEvent) -> None:
        background, text, grid = self.colours()
        painter = QPainter(self)
        painter.fillRect(self.rect(), background)
        if not any(self.series.values()) and self.current is None:
            self.draw_empty(painter, text)
            painter.end()
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        metrics = QFontMetricsF(self.font())
        line = metrics.height()
        plot = self.plot_rect(top_rows=1, bottom_rows=2)
        step = nice_step(self.y_top, plot.height() / (_Y_TICK_PX * 0.6))
        ticks = [
            (self._y(i * step, plot), rate_label(i * step))
            for i in range(1, int(self.y_top / step + 1e-9) + 1)
        ]
        self.draw_y_axis(painter, plot, ticks, _QUANTITIES[self.quantity][1], text=text, grid=grid)
        x_step = nice_step(self.x_top, plot.width() / 70)
        for i in range(0, int(self.x_top / x_step + 1e-9) + 1):
            x = self._x(i * x_step * self._scale(), plot)
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()))
            painter.setPen(QPen(text, 1))
            label = f"{i * x_step:g}"
            painter.drawText(
                QPointF(
                    x - metrics.horizontalAdvance(label) / 2, plot.bottom() + 4 + metrics.ascent()
                ),
                label,
            )
        painter.drawText(
            QRectF(plot.left(), plot.bottom() + 4 + line, plot.width(), line),
            Qt.AlignmentFlag.AlignHCenter,
            f"GPU memory ({self._unit}, all GPUs)",
        )
        # The legend above the plot.
        x = plot.left()
        for kind, label in CURVE_LABELS.items():
            if not self.series.get(kind):
                continue
            painter.fillRect(
                QRectF(x, PAD + line * 0.2, line * 0.6, line * 0.6), QColor(CURVE_COLOURS[kind])
            )
            painter.setPen(QPen(text, 1))
            painter.drawText(QPointF(x + line * 0.9, PAD + metrics.ascent()), label)
            x += line * 0.9 + metrics.horizontalAdvance(label) + 18
        painter.setClipRect(plot.adjusted(-8, -8, 8, 8))
        if self.budget_bytes:
            bx = self._x(self.budget_bytes, plot)
            draw_capacity_line(
                painter, QPointF(bx, plot.top()), QPointF(bx, plot.bottom()), QColor(palette.NO_FIT)
            )
        for kind in self.series:
            colour = QColor(CURVE_COLOURS[kind])
            drawn = [(p, pt) for p, pt in self._points(plot) if p.kind == kind]
            painter.setPen(QPen(colour, 2))
            if len(drawn) > 1:
                painter.drawPolyline([pt for _p, pt in drawn])
            for p, pt in drawn:
                painter.setBrush(colour if p.fits else QColor(background))
                painter.drawEllipse(pt, 3, 3)
        if self.current is not None and self.current[1] < math.inf:
            painter.setPen(QPen(text, 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            centre = QPointF(self._x(self.current[0], plot), self._y(self.current[1], plot))
            painter.drawEllipse(centre, 6.5, 6.5)
        painter.end()

    def text_at(self, x: float, y: float) -> str:
        """The hover text for the point nearest pixel ``(x, y)`` (within 12 pixels), or ""."""
        plot = self.plot_rect(top_rows=1, bottom_rows=2)
        best, distance = None, 12.0
        for p, point in self._points(plot):
            d = math.hypot(point.x() - x, point.y() - y)
            if d <= distance:
                best, distance = p, d
        if best is None:
            return ""
        verdict = "fits" if best.fits else "does not fit with the margin kept"
        value = self.value(best)
        assert value is not None  # only points with a value are drawn
        return (
            f"{best.flag}: {format_bytes(best.total_gpu_bytes, self._unit)} of GPU memory, "
            f"{self._reads(value)} ({verdict})"
        )

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        position = event.position()
        self.show_hover(event, self.text_at(position.x(), position.y()))
