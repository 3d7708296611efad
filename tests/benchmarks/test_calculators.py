"""Other calculators' answers kept in benchmarks/data/calculators.json against the published
rows they answer (benchmarks/data/llama_bench.json, serving_published.json), and the section of
docs/performance.md that quotes them."""

import datetime
import math
from collections import defaultdict
from pathlib import Path

import pytest

from benchmarks import calculators
from benchmarks.calculators import CALCULATORS, LLAMA_BENCH, SERVING

DATA = calculators.load()
PUBLISHED = {
    calculators._key_id(table, calculators.key(table, row)): (table, row)
    for table, row in calculators.published()
}
DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def _published(stored):
    return PUBLISHED.get(calculators._key_id(stored["table"], stored["key"]))


def _stored(calc):
    return DATA["calculators"][calc.name]["rows"]


@pytest.fixture(scope="module")
def compared():
    return calculators.compare(DATA)


@pytest.mark.parametrize("calc", CALCULATORS, ids=lambda c: c.name)
def test_the_data_names_the_tool_its_version_settings_and_mapping(calc):
    stored = DATA["calculators"][calc.name]
    assert DATA["format_version"] == 1
    assert stored["tool"] == calc.tool
    assert calc.package == f"{calc.name}=={stored['version']}"
    assert "1" in stored["settings"] and "default" in stored["settings"]
    assert datetime.date.fromisoformat(stored["run_on"]) <= datetime.date.today()
    for what, text in calc.mapping.items():
        assert stored[what] == text, what
    assert all(n > 0 for n in stored["left_out"].values())


@pytest.mark.parametrize("calc", CALCULATORS, ids=lambda c: c.name)
def test_every_stored_key_names_one_published_row_once(calc):
    seen = set()
    for stored in _stored(calc):
        assert tuple(stored["key"]) == calculators.KEYS[stored["table"]], stored["key"]
        assert _published(stored) is not None, stored["key"]
        key_id = calculators._key_id(stored["table"], stored["key"])
        assert key_id not in seen, stored["key"]
        seen.add(key_id)
    assert {stored["table"] for stored in _stored(calc)} == {LLAMA_BENCH, SERVING}


@pytest.mark.parametrize("calc", CALCULATORS, ids=lambda c: c.name)
def test_each_answer_is_the_figure_its_row_measured_and_positive(calc):
    for stored in _stored(calc):
        table, row = _published(stored)
        if "refused" in stored:
            assert stored["refused"]
            continue
        if table == SERVING:
            expected = {"decode_tps", "output_tps"} if calc.serving_output else {"decode_tps"}
        else:
            expected = {"decode_tps"} if row["test"].startswith("tg") else {"prefill_tps"}
        figures = {name: value for name, value in stored.items() if name.endswith("_tps")}
        assert set(figures) == expected, stored["key"]
        assert all(math.isfinite(v) and v > 0 for v in figures.values()), stored["key"]


@pytest.mark.parametrize("calc", CALCULATORS, ids=lambda c: c.name)
def test_no_row_is_answered_that_the_mapping_leaves_out(calc):
    for stored in _stored(calc):
        assert calc.left_out(*_published(stored)) is None, stored["key"]


@pytest.mark.parametrize("calc", CALCULATORS, ids=lambda c: c.name)
def test_rows_put_to_it_alike_got_one_answer(calc):
    """-ub, -fa and the source have no counterpart in either tool: rows that differ only in
    them were the same question and must carry the same figure."""
    figures = defaultdict(set)
    for stored in _stored(calc):
        if stored["table"] == LLAMA_BENCH and "refused" not in stored:
            k = stored["key"]
            setup = (k["gpu"], k["gpus"], k["model"], k["quant"], k["test"], k["depth"])
            figures[setup].add(stored.get("decode_tps") or stored["prefill_tps"])
    assert any(len(f) == 1 for f in figures.values())
    assert not {setup: f for setup, f in figures.items() if len(f) > 1}


def test_the_document_quotes_the_summary_the_script_prints(compared, capsys):
    calculators.main([])
    printed = capsys.readouterr().out
    doc = DOC.read_text()
    lines = calculators.summary_lines(compared)
    assert sum(line.startswith("    vramgui on the same rows") for line in lines) >= 7
    assert all(line in printed for line in lines)
    missing = [line for line in lines if line not in doc]
    assert not missing, "re-run `python -m benchmarks.calculators`"


def test_the_document_lists_every_answer(compared):
    doc = DOC.read_text()
    cells = [
        calculators.llama_markdown_cells(c)[0]
        if c.table == LLAMA_BENCH
        else calculators.serving_markdown_cells(c)[0]
        for c in compared
    ]
    answered = {
        calculators._key_id(s["table"], s["key"])
        for calc in CALCULATORS
        for s in _stored(calc)
        if "refused" not in s
    }
    assert len(cells) == len(answered)
    missing = [cell for cell in cells if cell not in doc]
    assert not missing, "re-run `python -m benchmarks.calculators`"
