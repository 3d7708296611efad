"""The published vLLM and SGLang serving rows (benchmarks/data/serving_published.json) against
the serving estimate: every row resolves, the benchmark runs played at the fitted step read the
measured decode rates (and output rates) within issue 41's bounds, the step's figures are what
the fit on the training rows gives, the estimate says which GPUs published runs cover, and
docs/performance.md lists every row as estimated now."""

from itertools import pairwise
from pathlib import Path

import pytest

from benchmarks import serving_published
from vramgui.core import serving_steps, speed
from vramgui.core.engines import ENGINE_KEYS, engine
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

ROWS = serving_published.load_rows()
# The rows beyond 50 %, each with its cause (docs/performance.md, "vLLM and SGLang serving"):
# a 0.5B model's step is the host's time, and these two runs' hosts are 2.1 GHz Xeons whose
# step is 4.5-5.2 ms whatever the GPU, where the fit takes one time for every host.
HOST_BOUND = {("RTX 5090", "qwen2.5-0.5b"), ("H200 SXM", "qwen2.5-0.5b")}


@pytest.fixture(scope="module")
def results():
    return serving_published.evaluate_all(ROWS)


def _label(r: serving_published.Result) -> str:
    row = r.row
    return f"{row['engine']} {row['version']} {row['model']} x {row['concurrency']} on {row['gpu']}"


def test_every_row_names_a_catalog_gpu_and_model_and_its_source():
    assert len(ROWS) >= 20
    for row in ROWS:
        assert find_gpu(row["gpu"]) is not None, row["gpu"]
        assert catalog.find(row["model"]) is not None, row["model"]
        assert row["source"].startswith("https://") and row["version"] and row["note"]
        assert row["concurrency"] >= 1 and row["set"] in ("train", "check")
        assert row.get("tpot_ms") or row.get("output_tps"), "a row measures something"
        assert "anomalous" not in row or len(row["anomalous"]) > 40, "the evidence"
    assert sum(row["engine"] == "sglang" for row in ROWS) >= 3
    assert len({row["gpu"] for row in ROWS}) >= 10


def test_the_counted_rows_hold_issue_41s_bounds(results):
    s = serving_published.summary(results)
    assert s["all"]["rows"] >= 70
    assert s["all"]["within"] >= 0.8 and s["held_out"]["within"] >= 0.8
    far = [r for r in results if r.counted and abs(r.error) > serving_published.FAR]
    unexplained = [_label(r) for r in far if (r.row["gpu"], r.row["model"]) not in HOST_BOUND]
    assert not unexplained
    assert s["held_out"]["beyond_far"] == 0
    # The played run's output rate (prefill included), where the row gives one.
    assert s["output_rate"]["rows"] >= 30 and s["output_rate"]["within"] >= 0.8
    assert s["output_rate"]["worst"] <= serving_published.FAR


def test_the_previous_roofline_read_every_tpot_row_of_the_a100_series_high(results):
    """What the step model replaces: the roofline read dennislee22's A100 rows 18 % to 97 % high
    (+17.6 % the least), the fitted step reads them within 20 %."""
    series = [r for r in results if "dennislee22" in r.row["source"]]
    assert len(series) == 12
    for r in series:
        assert serving_published.previous_estimate(r.row) / r.measured - 1 >= 0.17
        assert abs(r.error) <= serving_published.CLOSE, _label(r)


@pytest.mark.parametrize("source", ["dennislee22", "ld-singh", "ai.wmx.dev"])
def test_the_estimate_rises_with_the_concurrency_as_measured(results, source):
    """One model on one GPU at 1 to 256 requests: both decode rates rise together."""
    series = sorted(
        (r.row["concurrency"], r.estimate, r.measured)
        for r in results
        if source in r.row["source"] and r.counted and "Test 4" not in r.row["note"]
        and r.row["model"] != "qwen2.5-32b"
    )  # fmt: skip
    assert len(series) >= 5
    for (_, est_a, meas_a), (_, est_b, meas_b) in pairwise(series):
        assert est_b > est_a and meas_b > meas_a


def test_the_step_figures_are_what_the_fit_on_the_training_rows_gives():
    fitted = serving_published.fit(ROWS, serving_published.CURRENT)
    figures = serving_steps.VLLM
    assert fitted["rows"] >= 14
    for name in ("weight_share", "kv_share", "step_seconds", "sequence_seconds"):
        assert fitted[name] == pytest.approx(getattr(figures, name), rel=0.05), name


def test_the_gpus_said_measured_are_those_of_counted_rows():
    covered: dict[str, set[str]] = {}
    for row in ROWS:
        current = serving_published.generation(row) == serving_published.CURRENT
        if current and "anomalous" not in row:
            covered.setdefault(row["engine"], set()).add(row["gpu"])
    assert covered == {e: set(engine(e).serving_runs_on) for e in covered}
    assert not [e for e in ENGINE_KEYS if e not in covered and engine(e).serving_runs_on]


def _served(engine: str, gpu: str, model: str = "llama-3.1-8b", batch: int = 8):
    spec = catalog.find(model).spec()
    w = Workload(mode="inference", engine=engine, batch=batch, seq=2048)
    return speed.serving_speed(spec, w, speed_hardware(find_gpu(gpu), "bf16"))


def test_vllm_and_sglang_say_where_their_step_was_measured():
    measured = _served("vllm", "H100 SXM")
    assert measured.basis == "measured"
    assert any("published serving runs" in n and "H100 SXM" in n for n in measured.notes)
    extrapolated = _served("vllm", "L40S")
    assert extrapolated.basis == "extrapolated"
    assert any("extrapolated" in n and "L40S" in n for n in extrapolated.notes)
    sglang = _served("sglang", "H100 SXM")
    assert sglang.basis == "extrapolated"
    assert any("SGLang takes vLLM's step figures" in n for n in sglang.notes)
    # A 0.5B model: the fixed step rules, and the estimate says the host sets it.
    small = _served("vllm", "H100 SXM", model="qwen2.5-0.5b", batch=1)
    assert small.bound == serving_steps.HOST and measured.bound == serving_steps.MEMORY
    assert any("host's CPU" in n for n in small.notes)
    assert not any("host's CPU" in n for n in measured.notes)


def test_other_engines_keep_the_roofline_and_say_it_is_unchecked():
    served = _served("transformers", "H100 SXM")
    assert served.basis == "roofline"
    assert speed.ROOFLINE_SERVING_NOTE in served.notes


def test_the_document_lists_every_row_with_its_current_estimate(results):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    before = serving_published.previous_estimate
    missing = [
        line for line in (serving_published.markdown_row(r, before(r.row)) for r in results)
        if line not in doc
    ]  # fmt: skip
    assert not missing, "re-run `python -m benchmarks.serving_published --markdown`"


def test_the_first_token_holds_on_long_prompts_and_is_what_the_fit_gives():
    """The first token of one request against the published ones: long prompts (the products
    set it) within 15 % on at least 8 of 11, the shipped figures the fit's; short prompts are
    the engine's own time per request, which follows the host, so only listed."""
    checks = serving_published.first_tokens(ROWS)
    counted = [t for t in checks if t.estimate is not None]
    long = [t for t in counted if serving_published.lengths(t.row)[0] >= 1024]
    assert len(long) == 11
    assert sum(abs(t.error) <= 0.15 for t in long) >= 8
    # one row is faster than the prompt's products at the GPU's peak: shown, not counted
    assert [t.row["model"] for t in checks if t.estimate is None] == ["qwen2.5-7b"]
    fitted = serving_published.fit_first_token(ROWS)
    assert fitted.prefill_scale == pytest.approx(serving_steps.FIRST_TOKEN.prefill_scale)
    assert fitted.request_seconds == pytest.approx(
        serving_steps.FIRST_TOKEN.request_seconds, rel=0.05
    )


def test_vllm_and_sglang_give_a_first_token_and_say_how_far_to_trust_it():
    served = _served("vllm", "H100 SXM")
    assert served.prefill_seconds is not None and served.prefill_seconds > 0.02
    assert any(n.startswith("first token approximate") for n in served.notes)
    longer = speed.serving_speed(
        catalog.find("llama-3.1-8b").spec(),
        Workload(mode="inference", engine="vllm", batch=8, seq=16384),
        speed_hardware(find_gpu("H100 SXM"), "bf16"),
    )
    assert longer.prefill_seconds > 4 * served.prefill_seconds  # 16k prompt against 2k
    assert _served("transformers", "H100 SXM").prefill_seconds is None


def test_the_document_quotes_the_first_tokens_summary():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    first = serving_published.first_token_lines(serving_published.first_tokens(ROWS))[0]
    assert first in doc, "re-run `python -m benchmarks.serving_published`"
