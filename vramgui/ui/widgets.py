"""Small reusable widgets: a slider paired with a spin box, a combo box of named choices, a label
that shortens its text to its width."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QPainter, QPaintEvent, QStandardItemModel, QValidator
from PySide6.QtWidgets import (
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSlider,
    QSpinBox,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QWidget,
)

# Slider steps per doubling: sizes span 1 to 1M, so the slider moves on a log scale and the spin
# box takes the exact value.
_STEPS_PER_OCTAVE = 8


class ClampingSpinBox(QSpinBox):
    """A spin box that takes a number typed past its maximum as the maximum and says so
    (``clamped`` with the number typed).

    QSpinBox refuses the keystroke that crosses the maximum: 99999999 typed into a box of at
    most 4,096 silently read 999.
    """

    clamped = Signal(object)  # any size of number can be typed

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        result = super().validate(text, pos)
        typed = self._typed(text)
        if typed is not None and typed > self.maximum():
            return (QValidator.State.Intermediate, text, pos)  # fixed up when editing ends
        return result

    def fixup(self, text: str) -> str:
        typed = self._typed(text)
        if typed is not None and typed > self.maximum():
            self.clamped.emit(typed)
            return self.textFromValue(self.maximum())
        return text

    def _typed(self, text: str) -> int | None:
        """The whole number typed (group separators allowed), or None."""
        digits = text.strip().replace(self.locale().groupSeparator(), "")
        return int(digits) if digits.isdigit() else None


class SliderSpin(QWidget):
    """A log-scale slider and a spin box that show one integer; ``valueChanged`` on user edits,
    ``clamped`` (the number typed, the maximum) when a number past the maximum was typed."""

    valueChanged = Signal(int)
    clamped = Signal(object, int)

    def __init__(self, minimum: int, maximum: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.spin = ClampingSpinBox()
        self.spin.clamped.connect(lambda typed: self.clamped.emit(typed, self.spin.maximum()))
        self.spin.setKeyboardTracking(False)
        self.spin.setGroupSeparatorShown(True)
        self.spin.setMinimumWidth(90)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.spin)
        self.set_range(minimum, maximum)
        self.slider.valueChanged.connect(self._slider_moved)
        self.spin.valueChanged.connect(self._spin_changed)

    def set_range(self, minimum: int, maximum: int) -> None:
        """Allowed values; the current value is clamped without emitting."""
        maximum = max(minimum, maximum)
        if (minimum, maximum) == (self.spin.minimum(), self.spin.maximum()):
            return  # a new range re-lays out the panel: only when it really changes
        blocked = self.blockSignals(True)
        self.spin.setRange(minimum, maximum)
        self.slider.setRange(_to_slider(minimum), _to_slider(maximum))
        self.slider.setPageStep(_STEPS_PER_OCTAVE)
        self._sync_slider(self.spin.value())
        self.blockSignals(blocked)

    def value(self) -> int:
        return self.spin.value()

    def set_value(self, value: int) -> None:
        """Show ``value`` without emitting ``valueChanged``."""
        if value == self.spin.value():
            return  # a spin box repaints on every setValue, even of the value it shows
        blocked = self.blockSignals(True)
        self.spin.setValue(value)
        self._sync_slider(self.spin.value())
        self.blockSignals(blocked)

    def _sync_slider(self, value: int) -> None:
        blocked = self.slider.blockSignals(True)
        self.slider.setValue(_to_slider(value))
        self.slider.blockSignals(blocked)

    def _slider_moved(self, position: int) -> None:
        value = _from_slider(position)
        value = min(max(value, self.spin.minimum()), self.spin.maximum())
        blocked = self.spin.blockSignals(True)
        self.spin.setValue(value)
        self.spin.blockSignals(blocked)
        self.valueChanged.emit(value)

    def _spin_changed(self, value: int) -> None:
        self._sync_slider(value)
        self.valueChanged.emit(value)


def _to_slider(value: int) -> int:
    return round(math.log2(max(value, 1)) * _STEPS_PER_OCTAVE)


def _from_slider(position: int) -> int:
    value = 2 ** (position / _STEPS_PER_OCTAVE)
    # Round to a figure people type: powers of two stay exact, others to two significant bits.
    if value >= 64:
        step = 2 ** (int(math.log2(value)) - 3)
        return int(round(value / step) * step)
    return round(value)


SHORT_TEXT_ROLE = Qt.ItemDataRole.UserRole + 1


class ChoiceCombo(QComboBox):
    """A combo box of ``(value, label)`` choices, read and set by value.

    The closed box shows an item's ``SHORT_TEXT_ROLE`` text when it has one (else its label without
    the popup's indentation), cut with an ellipsis where it is too wide; the popup shows labels whole.
    """

    def __init__(
        self,
        choices: Sequence[tuple[str, str]],
        parent: QWidget | None = None,
        *,
        short: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(parent)
        # Long labels (quantization schemes) must not widen the side panel; the popup shows them whole.
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(10)
        for value, label in choices:
            self.addItem(label, value)
            if short and value in short:
                self.setItemData(self.count() - 1, short[value], SHORT_TEXT_ROLE)

    def value(self) -> str:
        return str(self.currentData())

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox,
            option,
            QStyle.SubControl.SC_ComboBoxEditField,
            self,
        )
        short = self.currentData(SHORT_TEXT_ROLE)
        text = str(short) if short else option.currentText.strip()
        option.currentText = option.fontMetrics.elidedText(
            text, Qt.TextElideMode.ElideRight, field.width() - 4
        )
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)

    def set_value(self, value: str) -> None:
        """Select ``value`` without emitting; unknown values leave the selection unchanged."""
        index = self.findData(value)
        if index >= 0:
            blocked = self.blockSignals(True)
            self.setCurrentIndex(index)
            self.blockSignals(blocked)


def set_tooltip(widget: QWidget, text: str) -> None:
    """Set ``widget``'s tooltip only when it changes (panels refresh theirs on every estimate)."""
    if widget.toolTip() != text:
        widget.setToolTip(text)


class _WheelGuard(QObject):
    """Hands the mouse wheel to the scrolling panel unless the control under it has the focus."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        wheel = event.type() == QEvent.Type.Wheel
        if wheel and isinstance(watched, QWidget) and not watched.hasFocus():
            # Ignored and filtered: Qt then offers the wheel to the parents, the scroll area.
            event.ignore()
            return True
        return False


_WHEEL_GUARD = _WheelGuard()


def guard_wheel(panel: QWidget) -> None:
    """Let the wheel scroll ``panel`` instead of turning the combo box or spin box under the
    pointer: such a control takes the wheel only once clicked (or tabbed) into."""
    for kind in (QComboBox, QAbstractSpinBox, QAbstractSlider):
        for control in panel.findChildren(kind):
            control.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            control.installEventFilter(_WHEEL_GUARD)


class FittedLabel(QLabel):
    """A one-line label that shows the longest of its texts its width holds.

    ``set_texts(full, shorter)`` gives the text (what ``text()`` returns) and a shorter way to say
    it; where even that is too wide, it ends in "…". The tooltip holds the whole text whenever
    less of it shows.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self._shorter = ""

    def set_texts(self, full: str, shorter: str = "") -> None:
        self._shorter = shorter
        self.setText(full)

    def shown_text(self) -> str:
        """What the label paints at its width now."""
        width = self.contentsRect().width()
        metrics = self.fontMetrics()
        for text in (self.text(), self._shorter):
            if text and metrics.horizontalAdvance(text) <= width:
                return text
        return metrics.elidedText(self._shorter or self.text(), Qt.TextElideMode.ElideRight, width)

    def paintEvent(self, _event: QPaintEvent) -> None:
        shown = self.shown_text()
        tip = "" if shown == self.text() else self.text()
        if self.toolTip() != tip:
            self.setToolTip(tip)
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(self.alignment().value), shown)


def allow_choice(combo: ChoiceCombo, index: int, reason: str | None, hint: str) -> None:
    """Enable choice ``index`` of ``combo``, or disable it with ``reason`` as its tooltip."""
    model = combo.model()
    assert isinstance(model, QStandardItemModel)
    item = model.item(index)
    # Set only on a change: each set makes the popup's model report a change.
    if item.isEnabled() != (reason is None):
        item.setEnabled(reason is None)
    text = reason or hint
    if item.toolTip() != text:
        item.setToolTip(text)
