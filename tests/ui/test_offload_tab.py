"""The window's lazy tabs: nothing built before a tab is shown, built in slices, fed when visible."""

from __future__ import annotations

import itertools
from collections.abc import Generator
from types import ModuleType

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QWidget

from vramgui.ui import extra_views
from vramgui.ui.extra_views import FEED_DELAY_MS, LazyTab, view_of


def show_tab(window, title: str) -> None:
    window.tabs.setCurrentIndex(
        next(i for i in range(window.tabs.count()) if window.tabs.tabText(i) == title)
    )


class FakeView(QLabel):
    def __init__(self) -> None:
        super().__init__("the view")
        self.units: list[str] = []
        self.saved = 0

    def set_unit(self, unit: str) -> None:
        self.units.append(unit)

    def save_current(self) -> None:
        self.saved += 1


def test_neither_tab_is_built_until_it_is_shown(make_window, qtbot) -> None:
    window = make_window()
    offload, profiles = window.extra_tabs["Offloading"], window.extra_tabs["Profiles"]
    assert isinstance(offload, LazyTab) and isinstance(profiles, LazyTab)
    qtbot.wait(100)
    assert not offload.is_built and not profiles.is_built

    show_tab(window, "Offloading")
    qtbot.waitUntil(lambda: offload.is_built, timeout=10000)
    view = offload.view()
    qtbot.waitUntil(lambda: view.isVisible() and view.placement is not None, timeout=5000)
    assert view.placement.units  # the controller's model, placed
    assert view._spec is window.controller.spec
    assert not profiles.is_built


def test_slices_run_in_separate_event_loop_turns(qtbot) -> None:
    turns = {"count": 0}
    ticker = QTimer()
    ticker.setInterval(0)
    ticker.timeout.connect(lambda: turns.__setitem__("count", turns["count"] + 1))
    ticker.start()
    seen: list[int] = []
    modules: list[ModuleType] = []

    def build(module: ModuleType) -> Generator[None, None, QWidget]:
        modules.append(module)
        for _ in range(3):
            seen.append(turns["count"])
            yield
        seen.append(turns["count"])
        return FakeView()

    tab = LazyTab("json", build)
    qtbot.addWidget(tab)
    tab.show()
    qtbot.waitUntil(lambda: tab.is_built, timeout=5000)
    ticker.stop()
    assert modules[0].__name__ == "json"  # imported on a worker and handed over
    assert len(seen) == 4
    assert all(a < b for a, b in itertools.pairwise(seen)), seen
    assert isinstance(tab.view(), FakeView) and tab.view().isVisible()


def test_unit_and_save_reach_the_view_built_late_or_early(qtbot) -> None:
    def build(_module: ModuleType) -> Generator[None, None, QWidget]:
        yield
        return FakeView()

    tab = LazyTab("json", build)
    qtbot.addWidget(tab)
    tab.set_unit("GB")
    assert not tab.is_built
    tab.save_current()  # File > Save profile before the tab was ever opened
    view = tab.view()
    assert view.units == ["GB"] and view.saved == 1
    tab.set_unit("GiB")
    assert view.units == ["GB", "GiB"]
    assert view_of(tab) is view
    plain = QLabel()
    assert view_of(plain) is plain


def test_a_module_that_fails_to_import_is_said_in_the_tab(qtbot) -> None:
    tab = LazyTab("vramgui.ui.no_such_view", lambda _m: iter(()))  # type: ignore[arg-type]
    qtbot.addWidget(tab)
    tab.show()
    label = tab.findChild(QLabel)
    qtbot.waitUntil(lambda: "could not be loaded" in label.text(), timeout=5000)
    assert not tab.is_built


def test_the_offload_view_follows_a_burst_of_changes_once_and_only_when_visible(
    make_window, qtbot
) -> None:
    window = make_window()
    show_tab(window, "Offloading")
    tab = window.extra_tabs["Offloading"]
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    view = tab.view()
    qtbot.waitUntil(lambda: view.isVisible() and view.placement is not None, timeout=5000)
    placements: list[object] = []
    view.placementChanged.connect(placements.append)

    controller = window.controller
    for seq in (1024, 2048, 4096):
        controller.update(seq=seq)
    controller.update(batch=2)
    qtbot.waitUntil(lambda: len(placements) == 1, timeout=5000)
    qtbot.wait(FEED_DELAY_MS * 3)
    assert len(placements) == 1
    assert view.placement.workload.seq == 4096 and view.placement.workload.batch == 2

    show_tab(window, "Estimate")
    controller.update(seq=8192)
    qtbot.wait(FEED_DELAY_MS * 3)
    assert len(placements) == 1  # hidden: no placing
    show_tab(window, "Offloading")
    qtbot.waitUntil(lambda: len(placements) == 2, timeout=5000)
    assert view.placement.workload.seq == 8192


def test_a_build_without_the_view_says_so(monkeypatch, make_window) -> None:
    real = extra_views._built_in
    monkeypatch.setattr(
        extra_views,
        "_built_in",
        lambda module: module != extra_views.PROFILES_MODULE and real(module),
    )
    window = make_window()
    assert isinstance(window.extra_tabs["Profiles"], QLabel)
    assert not window.action_save_profile.isEnabled()


def test_the_tab_and_the_time_cost_line_share_host_ram_placement_and_speed(
    make_window, qtbot
) -> None:
    from vramgui.answers.host import SET, THIS_MACHINE
    from vramgui.answers.timing import OFFLOAD
    from vramgui.core.units import GiB
    from vramgui.core.workload import Workload
    from vramgui.sources.resolve import load_model

    window = make_window()
    c = window.controller
    panel = window.gpu_panel
    for name, _ in panel.capacities():
        panel.set_checked(name, False)
    panel.set_checked("RTX 3060 12GB", True)
    c.set_model(load_model("qwen3-30b-a3b"), "qwen3-30b-a3b")
    c.set_workload(Workload(engine="llamacpp", quant="Q4_K_M", seq=40960))
    show_tab(window, "Offloading")
    tab = window.extra_tabs["Offloading"]
    qtbot.waitUntil(lambda: tab.is_built, timeout=10000)
    view = tab.view()
    assert c.host.ram_source == THIS_MACHINE and view.ram.value() == 0
    assert view.ram.specialValueText().startswith("this machine")

    view.ram.setValue(64)  # the user's other machine
    c.recompute_now()
    assert (c.host.ram_bytes, c.host.ram_source) == (64 * GiB, SET)
    qtbot.waitUntil(lambda: view.answer is not None and view.host.ram_bytes == 64 * GiB)
    speed = c.analysis.speed
    assert speed.placement.kind == OFFLOAD and speed.placement.host.ram_bytes == 64 * GiB
    # One figure: the line and the tab time the same placement.
    assert speed.placement.flags == view.answer.flags
    assert round(speed.tokens_per_second, 1) == round(view.answer.throughput.tokens_per_second, 1)
    assert view.answer.flags in window.speed_line.text.text()

    # The advisor's offload placement, applied, moves the tab's sliders and the line.
    qtbot.waitUntil(
        lambda: c.outlook is not None and any(s.placement for s in c.outlook.suggestions),
        timeout=30000,
    )
    layers = next(s for s in c.outlook.suggestions if s.placement and s.placement[1] == 0)
    c.apply_suggestion(layers)
    c.recompute_now()
    qtbot.waitUntil(
        lambda: view.placement is not None and view.placement.gpu_layers == layers.placement[0]
    )
    assert c.analysis.speed.placement.flags == f"-ngl {layers.placement[0]}"
    c.update(seq=32768)  # new inputs: the tab keeps the placement the line times
    c.recompute_now()
    qtbot.waitUntil(lambda: view.answer is not None and view.answer.placement.workload.seq == 32768)
    assert view.placement.gpu_layers == layers.placement[0]
    assert c.analysis.speed.placement.flags == view.answer.flags

    view.op_offload.setChecked(False)  # --no-op-offload: the line times it too
    c.recompute_now()
    assert "--no-op-offload" in c.analysis.speed.placement.flags
    assert c.offload.op_offload is False  # what a profile saved now keeps

    view.ram.setValue(0)  # back to this machine's
    assert c.host.ram_source == THIS_MACHINE


def test_the_offload_view_checks_the_settings_with_the_draft_model_once_read(
    make_window, qtbot
) -> None:
    """The Estimate tab estimates speculative decoding with the draft model it has read; the
    Offloading tab asks the same question, so it gets the draft too once it arrives."""
    window = make_window()
    offload = window.extra_tabs["Offloading"]
    show_tab(window, "Offloading")
    qtbot.waitUntil(lambda: offload.is_built, timeout=10000)
    view = offload.view()
    qtbot.waitUntil(lambda: view.placement is not None, timeout=5000)
    assert view.draft is None
    c = window.controller
    c.update(engine="vllm", speculative="draft", draft_model="llama-3.2-1b")
    qtbot.waitUntil(lambda: c.draft is not None, timeout=10000)
    qtbot.waitUntil(lambda: view.draft is c.draft, timeout=5000)
    assert view.draft.name == "meta-llama/Llama-3.2-1B"
