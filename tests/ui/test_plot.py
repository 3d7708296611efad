"""What the charts share (ui/plot.py): the log-2 axis, and the words a screen reader reads."""

from __future__ import annotations

import itertools
import math

import pytest

from vramgui.answers.host import UNKNOWN_HOST
from vramgui.answers.offload import bandwidths_for as host_bandwidths
from vramgui.core import offload
from vramgui.core.families import spec_from_config
from vramgui.core.units import GiB
from vramgui.core.units import format_rate as rate_text
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.sources.catalog import find
from vramgui.ui.breakdown_chart import BreakdownChart, MeasuredMark
from vramgui.ui.offload_charts import LayerChart, ThroughputChart, unit_runs
from vramgui.ui.plot import LOG2_LABEL_PX, log2_share, log2_ticks
from vramgui.ui.sweep_chart import SweepChart


def bandwidths_for(gpu, **overrides):
    """The speeds of a catalog GPU, the host unknown (default disk, no RAM limit)."""
    return host_bandwidths(gpu, UNKNOWN_HOST, **overrides)


@pytest.fixture(scope="module")
def placement():
    spec = spec_from_config(find("llama-2-7b").config, "llama-2-7b")
    q4 = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)
    return offload.llamacpp_model(spec, q4).place(4 * GiB, host_ram_bytes=16 * GiB)


@pytest.mark.parametrize("width", [120, 300, 800, 2000])
def test_log2_axis_labels_every_power_that_has_room(width):
    ticks = log2_ticks(256, 1 << 20, width)
    assert ticks[0] == 256 and all(math.log2(t).is_integer() for t in ticks)
    steps = {math.log2(b) - math.log2(a) for a, b in itertools.pairwise(ticks)}
    assert len(steps) <= 1  # evenly thinned
    # Labels at least LOG2_LABEL_PX apart over the span of 12 doublings...
    pixels_per_doubling = width / 12
    assert all(step * pixels_per_doubling >= LOG2_LABEL_PX for step in steps)
    # ...and no more thinned than that needs.
    assert len(log2_ticks(256, 1 << 20, 10_000)) == 13


def test_log2_positions_keep_their_margin():
    assert log2_share(256, 256, 4096, 0.0) == 0.0
    assert log2_share(4096, 256, 4096, 0.0) == 1.0
    assert log2_share(1024, 256, 4096, 0.0) == 0.5
    assert 0 < log2_share(256, 256, 4096, 0.5) < log2_share(4096, 256, 4096, 0.5) < 1


def test_the_breakdown_chart_says_its_total_components_and_room(qtbot):
    chart = BreakdownChart()
    qtbot.addWidget(chart)
    assert chart.accessibleName()
    chart.set_data(
        {"weights": 8 * GiB, "kv_cache": 2 * GiB},
        [("RTX 4090", 24 * GiB, True, 14 * GiB), ("RTX 3060", 8 * GiB, False, -2 * GiB)],
    )
    text = chart.accessibleDescription()
    assert text.startswith("Total per GPU 10.00 GiB: Weights 8.00 GiB, KV cache 2.00 GiB.")
    assert "RTX 4090 24.00 GiB: fits, 14.00 GiB free." in text
    assert "RTX 3060 8.00 GiB: does not fit, 2.00 GiB short." in text
    chart.set_measured([MeasuredMark("measured peak", 9 * GiB, "tip")])
    assert "measured peak: 9.00 GiB." in chart.accessibleDescription()
    chart.set_unit("GB")
    assert "Weights 8.59 GB" in chart.accessibleDescription()


def test_the_sweep_chart_says_every_point_the_current_and_the_largest(qtbot):
    chart = SweepChart()
    qtbot.addWidget(chart)
    assert chart.accessibleName()
    assert chart.accessibleDescription() == ""
    chart.set_data(
        "seq",
        (1024, 2048),
        totals_bytes=(10 * GiB, 30 * GiB),
        capacities=(("RTX 4090", 24 * GiB),),
        largest=1500,
        current=2048,
    )
    assert chart.accessibleDescription() == (
        "Memory per GPU by context length: 1,024: 10.00 GiB, 2,048: 30.00 GiB. "
        "The current context length, 2,048, is circled. "
        "Largest context length that fits: 1,500. GPU capacities: RTX 4090 24.00 GiB."
    )
    chart.set_data("batch", (), totals_bytes=(), capacities=(), largest=None, current=1)
    assert chart.accessibleDescription() == "No sweep yet."


def test_the_layer_chart_says_which_device_holds_which_layers(qtbot, placement):
    chart = LayerChart()
    qtbot.addWidget(chart)
    assert chart.accessibleName()
    chart.set_placement(placement)
    text = chart.accessibleDescription()
    on_gpu = [p.unit.name for p in placement.units if offload.is_gpu(p.device)]
    assert text.startswith(f"Weights of {len(placement.units)} units by where they live: ")
    assert f"GPU 0: {unit_runs(on_gpu)}," in text
    assert "CPU RAM: embeddings, blocks 0-" in text
    assert "KV cache: " in text
    chart.set_placement(None)
    assert chart.accessibleDescription() == "No placement yet."


def test_unit_runs_join_consecutive_blocks():
    names = ["embeddings", "block 0", "block 1", "block 2", "block 5", "output"]
    assert unit_runs(names) == "embeddings, blocks 0-2, block 5, output"
    assert unit_runs(["block 3", "block 4", "output"]) == "blocks 3-4, output"


def test_the_throughput_chart_says_each_batch_and_its_bound(qtbot, placement):
    chart = ThroughputChart()
    qtbot.addWidget(chart)
    assert chart.accessibleName()
    bw = bandwidths_for(find_gpu("RTX 3060"))
    curve = offload.throughput_curve(placement, bw)
    current = offload.decode_throughput(placement, bw)
    chart.set_curve(curve, current, 64)
    text = chart.accessibleDescription()
    assert f"1: {rate_text(curve[0].tokens_per_second)}, 2: " in text
    assert f"At the current batch of {current.batch:,}: " in text
    assert "bound by " in text
    assert text.endswith("Compute-bound from a batch of 64.")
    chart.set_curve((), None, None)
    assert chart.accessibleDescription() == "No throughput yet."
