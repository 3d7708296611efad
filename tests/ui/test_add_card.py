"""The GPU panel's "Add a card…": a GPU by its memory and bandwidth, kept in the settings."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from vramgui.core.units import GiB
from vramgui.hardware import GpuSnapshot
from vramgui.hardware.gpus import custom_gpu, find_gpu, load_catalog
from vramgui.ui import add_card
from vramgui.ui.gpu_panel import GpuPanel

from .test_offload_tab import show_tab

NAME = "Custom 20 GiB, 500 GB/s"


def _panel(qtbot, **kwargs) -> GpuPanel:
    panel = GpuPanel(lambda: GpuSnapshot(reason="no driver"), load_catalog(), (), 0, **kwargs)
    qtbot.addWidget(panel)
    return panel


def _fill(dialog, memory, bandwidth, tflops=0.0, name=""):
    dialog.memory.setValue(memory)
    dialog.bandwidth.setValue(bandwidth)
    dialog.tflops.setValue(tflops)
    dialog.name.setText(name)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()


def test_a_card_added_in_the_dialog_is_listed_checked_and_held_to_its_memory(qtbot):
    panel = _panel(qtbot)
    assert panel.cards_group.isHidden()
    panel.add_button.click()
    dialog = panel.dialog
    assert dialog is not None and dialog.isVisible()
    # the name it will get unless one is typed
    dialog.memory.setValue(20)
    dialog.bandwidth.setValue(500)
    assert dialog.name.placeholderText() == NAME
    with qtbot.waitSignals([panel.cards_changed, panel.capacities_changed]):
        _fill(dialog, 20, 500)
    assert not dialog.isVisible()
    assert not panel.cards_group.isHidden()
    assert [card.name for card in panel.cards()] == [NAME]
    assert (NAME, 20 * GiB) in panel.capacities()
    assert panel.checked_catalog() == [NAME]
    item = panel.cards_group.child(0)
    assert item.text(1) == "20"
    assert "500 GB/s" in item.toolTip(0) and "no speed" in item.toolTip(0)


def test_the_dialog_refuses_a_name_already_listed_and_stays_open(qtbot):
    panel = _panel(qtbot)
    dialog = panel.open_add_dialog()
    _fill(dialog, 24, 1008, name="RTX 4090")
    assert dialog.isVisible()
    assert "already in the list" in dialog.error.text() and dialog.error.isVisibleTo(dialog)
    assert panel.cards() == []
    _fill(dialog, 24, 1008, 165.2, name="My 4090")
    assert [card.name for card in panel.cards()] == ["My 4090"]
    assert panel.cards()[0].bf16_tflops == 165.2


def test_a_card_is_removed_from_its_context_action(qtbot):
    card = custom_gpu(12, 360)
    panel = _panel(qtbot, cards=[card])
    assert panel.cards() == [card]
    item = panel.cards_group.child(0)
    panel.tree.setCurrentItem(item)
    with qtbot.waitSignal(panel.cards_changed) as changed:
        panel.remove_action.trigger()
    assert changed.args == [[]]
    assert panel.cards() == [] and panel.cards_group.isHidden()
    assert all(name != card.name for name, _ in panel.capacities())
    # catalog GPUs have no remove action
    panel.tree.setCurrentItem(panel.catalog_group.child(0))
    panel.remove_action.trigger()
    assert panel.catalog_group.childCount() == len(load_catalog())


def test_cards_survive_the_settings_and_bad_entries_are_left_out():
    cards = [custom_gpu(20, 500), custom_gpu(48, 900, 120, "Lab box")]
    text = add_card.cards_to_settings(cards)
    assert add_card.cards_from_settings(text) == cards
    broken = json.dumps(
        [
            {"name": "ok", "memory_gib": 8, "bandwidth_gbps": 300, "tflops": None},
            {"name": "negative", "memory_gib": -8},
            {"name": "text", "memory_gib": "8"},
            {"memory_gib": 8},
            "not an entry",
            {"name": "ok", "memory_gib": 16},  # the same name twice: the first is kept
        ]
    )
    (kept,) = add_card.cards_from_settings(broken)
    assert kept.name == "ok" and kept.memory_bytes == 8 * GiB
    assert add_card.cards_from_settings("{not json") == []
    assert add_card.cards_from_settings(None) == []


def test_an_apple_gpus_tooltip_says_vllm_does_not_run_there(qtbot):
    panel = _panel(qtbot)
    m3 = next(
        panel.catalog_group.child(i)
        for i in range(panel.catalog_group.childCount())
        if panel.catalog_group.child(i).text(0) == find_gpu("M3 Ultra").name
    )
    assert "vLLM does not run here: vLLM has no Metal backend" in m3.toolTip(0)


def test_the_window_keeps_a_card_and_times_the_estimate_on_it(make_window, settings, qtbot):
    window = make_window()
    panel = window.gpu_panel
    for name, _ in panel.capacities():
        panel.set_checked(name, False)
    dialog = panel.open_add_dialog()
    _fill(dialog, 20, 500, 100)
    qtbot.waitUntil(lambda: window.controller.capacities == ((NAME, 20 * GiB),))
    rates = window.controller.rates_for(NAME, "bf16")
    assert rates is not None
    assert rates.hardware.memory_bytes_per_s == 500e9 and rates.hardware.flops == 100e12
    assert json.loads(settings.value(add_card.SETTINGS_KEY))[0]["name"] == NAME
    window.close()
    again = make_window()
    assert [card.name for card in again.gpu_panel.cards()] == [NAME]
    item = again.gpu_panel.cards_group.child(0)
    assert item.checkState(0) == Qt.CheckState.Checked


def test_the_window_notes_that_vllm_does_not_run_on_an_apple_gpu(make_window, qtbot):
    window = make_window()
    apple = find_gpu("M3 Ultra").name
    window.gpu_panel.set_checked(apple)
    qtbot.waitUntil(lambda: any(name == apple for name, _ in window.controller.capacities))
    window.controller.update(engine="vllm")
    window.controller.recompute_now()
    expected = f"vLLM does not run on {apple}: vLLM has no Metal backend"
    qtbot.waitUntil(lambda: expected in window.notes.text())
    window.controller.update(engine="transformers")
    window.controller.recompute_now()
    qtbot.waitUntil(lambda: "does not run on" not in window.notes.text())


def _offloading_with_only(make_window, qtbot, card):
    """A window whose only GPU is ``card``, added by hand, on its Offloading tab once the tab
    plans for it."""
    window = make_window()
    panel = window.gpu_panel
    for name, _ in panel.capacities():
        panel.set_checked(name, False)
    panel.add_card(card)
    capacity = card.capacity_bytes()
    qtbot.waitUntil(lambda: window.controller.capacities == ((card.name, capacity),))
    show_tab(window, "Offloading")
    tab = window.extra_tabs["Offloading"]
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    view = tab.view()
    qtbot.waitUntil(lambda: [g.name for g in view._gpus] == [card.name], timeout=5000)
    return window, view


def test_the_offloading_tab_plans_a_card_with_its_own_bandwidth(make_window, qtbot):
    from vramgui.answers.offload import bandwidths_for

    card = custom_gpu(20, 500, 100)
    window, view = _offloading_with_only(make_window, qtbot, card)
    # its own speeds, not the fallback GPU's (the RTX 4090's 1,008 GB/s)
    assert view._gpus[0].bandwidths == bandwidths_for(card, window.controller.host)


def test_the_offloading_tab_says_which_speeds_of_a_card_are_assumed(make_window, qtbot):
    _, view = _offloading_with_only(make_window, qtbot, custom_gpu(24, 900))  # no tensor rate
    # Its own bandwidth; the tensor rate and the PCIe generation the fallback GPU's, said so.
    assert view.bandwidths.gpu_flops == 165.2e12
    assert view.assumed.isVisibleTo(view)
    assert view.assumed.text() == (
        "Custom 24 GiB, 900 GB/s: speeds assumed, the RTX 4090's (16-bit tensor rate "
        "165.2 TFLOPS, PCIe 4.0). Set its own above."
    )


def test_the_offloading_tab_says_a_local_gpu_the_catalog_lacks_has_assumed_speeds(
    make_window, probe, qtbot
):
    from vramgui.hardware import LocalGpu

    probe.snapshot_value = GpuSnapshot(
        gpus=(
            LocalGpu(0, "NVIDIA Example X1", "GPU-1", 16 * GiB, 15 * GiB, GiB, None, (), 4, 16,
                     False, None),
        ),
        driver_version="550.54",
    )  # fmt: skip
    window = make_window()
    local = "GPU 0: NVIDIA Example X1"
    qtbot.waitUntil(lambda: window.controller.capacities[0] == (local, 16 * GiB), timeout=5000)
    for name, _ in window.gpu_panel.capacities():
        if name != local:
            window.gpu_panel.set_checked(name, False)
    show_tab(window, "Offloading")
    tab = window.extra_tabs["Offloading"]
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    view = tab.view()
    qtbot.waitUntil(lambda: [g.name for g in view._gpus] == [local], timeout=5000)
    # Before, the RTX 4090's speeds, silently.
    assert view.assumed.isVisibleTo(view)
    assert view.assumed.text() == (
        f"{local}: speeds assumed, the RTX 4090's (memory bandwidth 1,008 GB/s, 16-bit tensor "
        "rate 165.2 TFLOPS, PCIe 4.0). Set its own above."
    )
