from __future__ import annotations

from vramgui.ui import sweep_slot
from vramgui.ui.sweep_slot import SweepSlot

GIB = 1 << 30


def test_data_given_before_the_chart_loads_is_drawn_once_it_does(qtbot):
    slot = SweepSlot()
    qtbot.addWidget(slot)
    slot.set_unit("GB")
    slot.set_data(
        "seq",
        (1024, 2048, 4096),
        totals_bytes=(10 * GIB, 12 * GIB, 16 * GIB),
        capacities=(("RTX 4090", 24 * GIB),),
        largest=4096,
        current=2048,
    )
    assert slot.chart is None
    with qtbot.waitSignal(slot.loaded, timeout=20000):
        slot.show()  # the first paint starts the load
    xs, ys = slot.chart.curve.getData()
    assert [round(10**x) for x in xs] == [1024, 2048, 4096]  # a log axis
    assert ys[0] == 10 * GIB / 1e9  # in GB, as set before the chart existed
    assert slot.chart.largest_line.isVisible()


def test_a_chart_that_cannot_load_says_so(qtbot, monkeypatch):
    monkeypatch.setattr(sweep_slot, "CHART_MODULE", "vramgui.ui.no_such_module")
    slot = SweepSlot()
    qtbot.addWidget(slot)
    slot.load()
    qtbot.waitUntil(lambda: "could not be loaded" in slot.note.text(), timeout=5000)
    assert slot.chart is None
