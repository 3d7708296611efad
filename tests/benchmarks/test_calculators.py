"""llm-analysis' answers kept in benchmarks/data/calculators.json against the published rows
they answer (benchmarks/data/llama_bench.json, serving_published.json), and the section of
docs/performance.md that quotes them."""

import datetime
import math
from collections import defaultdict
from pathlib import Path

import pytest

from benchmarks import calculators
from benchmarks.calculators import LLAMA_BENCH, SERVING

DATA = calculators.load()
PUBLISHED = {
    calculators._key_id(table, calculators.key(table, row)): (table, row)
    for table, row in calculators.published()
}
DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def _published(stored):
    return PUBLISHED.get(calculators._key_id(stored["table"], stored["key"]))


@pytest.fixture(scope="module")
def compared():
    return calculators.compare(DATA)


def test_the_data_names_the_tool_its_version_settings_and_mapping():
    about = DATA["about"]
    assert DATA["format_version"] == 1
    assert about["tool"].startswith("llm-analysis") and about["version"] == "0.2.2"
    assert "flops_efficiency 1" in about["settings"]
    assert "hbm_memory_efficiency 1" in about["settings"]
    assert datetime.date.fromisoformat(about["run_on"]) <= datetime.date.today()
    for what in ("llama_bench", "serving_published", "quantization", "gpus", "models"):
        assert about[what] == calculators.MAPPING[what]
    assert all(n > 0 for n in about["left_out"].values())


def test_every_stored_key_names_one_published_row_once():
    seen = set()
    for stored in DATA["rows"]:
        assert tuple(stored["key"]) == calculators.KEYS[stored["table"]], stored["key"]
        assert _published(stored) is not None, stored["key"]
        key_id = calculators._key_id(stored["table"], stored["key"])
        assert key_id not in seen, stored["key"]
        seen.add(key_id)
    tables = {stored["table"] for stored in DATA["rows"]}
    assert tables == {LLAMA_BENCH, SERVING}


def test_each_answer_is_the_figure_its_row_measured_and_positive():
    for stored in DATA["rows"]:
        table, row = _published(stored)
        if "refused" in stored:
            assert stored["refused"]
            continue
        if table == SERVING:
            expected = {"decode_tps", "output_tps"}
        else:
            expected = {"decode_tps"} if row["test"].startswith("tg") else {"prefill_tps"}
        figures = {name: value for name, value in stored.items() if name.endswith("_tps")}
        assert set(figures) == expected, stored["key"]
        assert all(math.isfinite(v) and v > 0 for v in figures.values()), stored["key"]


def test_no_row_is_answered_that_the_mapping_leaves_out():
    for stored in DATA["rows"]:
        table, row = _published(stored)
        assert calculators.left_out(table, row) is None, stored["key"]


def test_rows_put_to_it_alike_got_one_answer():
    """-ub, -fa and the source have no counterpart in llm-analysis: rows that differ only in
    them were the same question and must carry the same figure."""
    figures = defaultdict(set)
    for stored in DATA["rows"]:
        if stored["table"] == LLAMA_BENCH and "refused" not in stored:
            k = stored["key"]
            setup = (k["gpu"], k["model"], k["quant"], k["test"], k["depth"])
            figures[setup].add(stored.get("decode_tps") or stored["prefill_tps"])
    assert any(len(f) == 1 for f in figures.values())
    assert not {setup: f for setup, f in figures.items() if len(f) > 1}


def test_the_document_quotes_the_summary_the_script_prints(compared, capsys):
    calculators.main([])
    printed = capsys.readouterr().out
    doc = DOC.read_text()
    lines = calculators.summary_lines(compared)
    assert len(lines) == 9
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
    assert len(cells) == sum("refused" not in s for s in DATA["rows"])
    missing = [cell for cell in cells if cell not in doc]
    assert not missing, "re-run `python -m benchmarks.calculators`"
