"""The small things a new user trips on: search results that read alike when cut, a number typed
past a box's maximum, one model listed twice among the recent ones, an exported chart that does
not say what it shows, a help page of tables, an offline message run together."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPalette

from tests.fakehub.files import TINY_LLAMA_CONFIG
from tests.ui.test_model_panel import painted_id
from tests.ui.waiting import settled
from vramgui.sources.hub import HubModel
from vramgui.sources.resolve import SearchResult
from vramgui.ui.model_panel import ModelPanel, shorten_id
from vramgui.ui.wording import as_sentence

SIMILAR = ("nvidia/DeepSeek-V3.1-NVFP4", "nvidia/Llama-3.1-NVFP4", "nvidia/Qwen3-32B-NVFP4")


def test_a_cut_repo_id_keeps_what_tells_it_from_the_others():
    def fits(width):
        return lambda text: len(text) <= width

    # Cut in the middle, the first two read "nvidia/…1-NVFP4" alike.
    assert shorten_id(SIMILAR[0], SIMILAR, fits(40)) == SIMILAR[0]  # it fits: whole
    assert shorten_id(SIMILAR[0], SIMILAR, fits(24)) == "…/DeepSeek-V3.1-NVFP4"  # shared owner
    assert shorten_id(SIMILAR[0], SIMILAR, fits(18)) == "…/DeepSeek-V3.1…"  # suffix all share
    assert shorten_id(SIMILAR[1], SIMILAR, fits(16)) == "…/Llama-3.1…"
    # An owner others do not share is kept as long as it can be.
    mixed = ("bartowski/Llama-3.1-8B-GGUF", "unsloth/Llama-3.1-8B-GGUF")
    assert shorten_id(mixed[0], mixed, fits(26)) == "bartowski/Llama-3.1-8B…"


def test_search_results_are_drawn_distinct_with_the_whole_id_in_the_tooltip(qtbot):
    panel = ModelPanel(lambda _q: SearchResult(tuple(HubModel(i, None) for i in SIMILAR)))
    qtbot.addWidget(panel)
    panel.results_model.set_results([HubModel(i, None) for i in SIMILAR])
    width = panel.results.fontMetrics().horizontalAdvance("…/DeepSeek-V3.1…") + 20
    shown = [painted_id(panel, row, width) for row in range(len(SIMILAR))]
    for row, repo in enumerate(SIMILAR):
        assert repo in panel.results_model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
    assert shown[0].startswith("…/DeepSeek") and shown[1].startswith("…/Llama-3.1")
    assert len(set(shown)) == 3


def test_a_context_typed_past_the_models_maximum_is_set_to_it_and_said(
    make_window, qtbot, tmp_path
):
    window = make_window()
    path = tmp_path / "small.json"
    path.write_text(json.dumps(TINY_LLAMA_CONFIG))  # a context of 512
    window.controller.load_source(str(path))
    qtbot.waitUntil(lambda: window.workload_panel.seq.spin.maximum() == 512, timeout=10000)
    spin = window.workload_panel.seq.spin
    spin.setFocus()
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin, "99999999")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    settled(qtbot, window, seq=512)  # not 999, where QSpinBox stopped the typing
    qtbot.waitUntil(lambda: "99,999,999" in window.banner.text(), timeout=5000)
    assert "Context 99,999,999 is longer than this model takes, 512 tokens: set to 512." in (
        window.banner.text()
    )


def test_one_model_is_listed_once_among_the_recent_ones(make_window, qtbot):
    window = make_window()
    for source in ("llama-3.1-8b", "Llama-3.1-8B", "qwen2.5-7b", "llama-3.1-8b"):
        window.controller.load_source(source)
        qtbot.waitUntil(lambda s=source: window.controller.source == s, timeout=10000)
    recent = window.model_panel.recent
    shown = [recent.itemText(i) for i in range(recent.count())]
    assert shown[:2] == ["llama-3.1-8b", "qwen2.5-7b"]
    assert [s.lower() for s in shown].count("llama-3.1-8b") == 1


def test_a_recent_entry_saved_before_identities_were_kept_is_not_listed_twice(
    make_window, qtbot, settings
):
    settings.setValue("models/recent", ["meta-llama/Llama-3.1-8B", "qwen2.5-7b"])
    window = make_window()
    window.controller.load_source("llama-3.1-8b")
    qtbot.waitUntil(lambda: window.controller.source == "llama-3.1-8b", timeout=10000)
    recent = window.model_panel.recent
    assert [recent.itemText(i) for i in range(recent.count())] == ["llama-3.1-8b", "qwen2.5-7b"]


def test_an_exported_chart_is_titled_with_the_model_and_setup(make_window, tmp_path):
    window = make_window()
    chart = window.breakdown_chart
    target = tmp_path / "chart.png"
    assert window.export_chart(chart, str(target))
    image = QImage(str(target))
    plain = chart.grab().toImage()
    assert image.height() > plain.height()  # a title band above the chart
    band = image.copy(0, 0, image.width(), image.height() - plain.height())
    text = window.palette().color(QPalette.ColorRole.WindowText).rgb()
    inked = sum(band.pixel(x, y) == text for x in range(band.width()) for y in range(band.height()))
    assert inked > 100  # the title's letters
    analysis = window.controller.analysis
    from vramgui.ui import report

    title = report.title_lines(analysis, window.unit)
    assert title[0].startswith("meta-llama/Llama-3.1-8B: inference")
    assert title[1].startswith("Peak per GPU: ")


def test_f1_explains_how_an_estimate_is_made_before_any_table(make_window):
    window = make_window()
    window.action_method.trigger()
    browser = window._help.browser
    text = browser.toPlainText()
    assert text.startswith("How estimates are made")
    assert text.index("KV cache") < text.index("accuracy tables")
    assert "|---" not in text and "%" not in text.split("How good the numbers are")[0]
    window._help.close()


def test_the_offline_message_is_two_sentences(qtbot):
    notice = (
        "cannot reach the Hub at https://huggingface.co: its name cannot be looked up (no "
        "network, or no DNS server answers); showing models from the bundled catalog"
    )
    panel = ModelPanel(lambda _q: SearchResult((), notice))
    qtbot.addWidget(panel)
    qtbot.keyClicks(panel.query, "zzqx")
    qtbot.waitUntil(lambda: "No models match" in panel.status.text(), timeout=5000)
    assert panel.status.text() == (
        "Cannot reach the Hub at https://huggingface.co: its name cannot be looked up (no "
        "network, or no DNS server answers); showing models from the bundled catalog. "
        "No models match."
    )


def test_a_message_made_a_sentence_keeps_the_names_it_starts_with():
    assert as_sentence("cannot reach the Hub") == "Cannot reach the Hub."
    assert as_sentence("llama.cpp runs it") == "llama.cpp runs it."
    assert (
        as_sentence("tiny.Q8_0 is estimated as it is stored.")
        == "tiny.Q8_0 is estimated as it is stored."
    )


def test_advice_cards_tell_a_preallocated_pool_apart_from_memory_freed(qtbot):
    from vramgui.core.fit import Suggestion
    from vramgui.core.units import GiB
    from vramgui.ui.advisor import AdvisorPanel

    panel = AdvisorPanel()
    qtbot.addWidget(panel)
    pooled = Suggestion(
        "FP8 KV cache", {"kv_dtype": "fp8"}, GiB, "accuracy", True, 0, None, 4 * GiB, 200_000
    )
    freed = Suggestion("q8_0 KV cache", {"kv_dtype": "q8_0"}, 2 * GiB, "quality", True, 0)
    panel.show_outlook(
        ("H100 SXM", 80 * GiB),
        fits=False,
        headroom_bytes=-GiB,
        largest={},
        suggestions=[pooled, freed],
        unit="GiB",
        seq_word="context",
    )
    first, second = (card.text.text() for card in panel._cards[:2])
    assert "KV pool 4.00 GiB (200,000 tokens), 1.00 GiB more room" in first
    assert "frees" not in first and "saves" not in first
    assert "frees 2.00 GiB" in second
