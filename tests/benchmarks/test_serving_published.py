"""The published vLLM serving rows (benchmarks/data/serving_published.json) resolve to catalog
GPUs and models, and the printout gives an estimate for each."""

from benchmarks import serving_published
from vramgui.hardware.gpus import find_gpu
from vramgui.sources import catalog

ROWS = serving_published.load_rows()


def test_every_row_names_a_catalog_gpu_and_model_and_its_source():
    assert len(ROWS) >= 5
    for row in ROWS:
        assert find_gpu(row["gpu"]) is not None, row["gpu"]
        assert catalog.find(row["model"]) is not None, row["model"]
        assert row["source"].startswith("https://") and row["version"]
        assert row["output_tps"] > 0 and row["concurrency"] >= 1


def test_every_row_gets_an_estimate():
    assert all(serving_published.estimate(row) > 0 for row in ROWS)
