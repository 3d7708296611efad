"""The speed model's calibration on a GPU model: solving, storing, reading back, using it."""

import datetime as dt
import json
from dataclasses import replace

import pytest

from vramgui.core.families import spec_from_config
from vramgui.core.speed import Hardware, Utilization, training_speed
from vramgui.core.workload import Workload
from vramgui.hardware import calibration
from vramgui.hardware.errors import HardwareError

LLAMA = {
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
    "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
    "vocab_size": 32000, "max_position_embeddings": 4096,
}  # fmt: skip
A100 = Hardware("A100 SXM 80GB", 312e12, 2039e9, 300e9, 25e9, architecture="Ampere")
WORK = Workload(mode="training", batch=8, seq=2048, attention="sdpa")
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(LLAMA, "tiny-llama")


def _at(spec, matmul):
    u = Utilization(matmul=matmul, attention=matmul * 0.75)
    return training_speed(spec, WORK, A100, u).tokens_per_second


def test_the_solved_share_reproduces_the_measured_speed(spec):
    measured = _at(spec, 0.41)
    solved = calibration.solve_matmul(spec, WORK, A100, measured)
    assert solved == pytest.approx(0.41, abs=1e-3)
    assert _at(spec, solved) == pytest.approx(measured, rel=1e-3)


def test_a_run_faster_than_the_peak_allows_is_refused(spec):
    with pytest.raises(HardwareError, match="faster than the speed model allows"):
        calibration.solve_matmul(spec, WORK, A100, 2 * _at(spec, 1.0))


@pytest.mark.parametrize(
    "changes, bound",
    [({"method": "lora", "precision": "pure", "batch": 1, "seq": 16}, "launch"),
     ({"batch": 1, "seq": 16}, "optimizer")],
)  # fmt: skip
def test_a_run_not_bound_by_the_products_does_not_calibrate(spec, changes, bound):
    small = WORK.with_(**changes)
    assert training_speed(spec, small, A100).bound == bound
    slow = training_speed(spec, small, A100).tokens_per_second / 3
    with pytest.raises(HardwareError, match=f"bound by {bound}, not by the GPU's products"):
        calibration.solve_matmul(spec, small, A100, slow)


def test_a_calibration_is_stored_per_gpu_and_read_back(spec, tmp_path):
    path = tmp_path / "calibration.json"
    first = calibration.calibrate(
        spec, WORK, A100, tokens_per_second=_at(spec, 0.5), device="NVIDIA A100-SXM4-80GB", now=NOW
    )
    assert first.matmul == pytest.approx(0.5, abs=1e-3)
    assert first.default_tokens_per_second == pytest.approx(
        training_speed(spec, WORK, A100).tokens_per_second, rel=1e-3
    )
    calibration.save(first, path)
    other = (
        calibration.Calibration(**{**first.__dict__, "gpu": "H100 SXM", "matmul": 0.3})
        if hasattr(first, "__dict__")
        else None
    )

    other = replace(first, gpu="H100 SXM", matmul=0.3)
    calibration.save(other, path)
    again = replace(first, matmul=0.45, date="2026-12-02T00:00:00+00:00")
    calibration.save(again, path)
    stored = calibration.load(path)
    assert set(stored) == {"A100 SXM 80GB", "H100 SXM"}
    assert stored["A100 SXM 80GB"].matmul == 0.45  # the latest run of a GPU wins
    u = calibration.measured_utilization("A100 SXM 80GB", path)
    assert (u.source, u.matmul) == ("measured", 0.45)
    assert "NVIDIA A100-SXM4-80GB" in u.detail and "2026-12-02" in u.detail
    assert calibration.measured_utilization("RTX 4090", path) is None


def test_the_store_lives_in_the_user_data_folder(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMGUI_HOME", str(tmp_path))
    result = calibration.calibrate(
        spec, WORK, A100, tokens_per_second=_at(spec, 0.5), device="x", now=NOW
    )
    assert calibration.save(result) == tmp_path / "data" / "calibration.json"
    assert calibration.load()["A100 SXM 80GB"].matmul == result.matmul


@pytest.mark.parametrize(
    "content",
    ["{not json", json.dumps({"format": "other"}), json.dumps([1, 2]),
     json.dumps({"format": calibration.FORMAT, "gpus": {"A100 SXM 80GB": {"gpu": "A100 SXM 80GB"}}})],
)  # fmt: skip
def test_an_unreadable_store_is_ignored_and_never_overwritten(spec, tmp_path, content):
    path = tmp_path / "calibration.json"
    path.write_text(content)
    assert calibration.load(path) == {}
    result = calibration.calibrate(
        spec, WORK, A100, tokens_per_second=_at(spec, 0.5), device="x", now=NOW
    )
    with pytest.raises(HardwareError, match="cannot be read"):
        calibration.save(result, path)
    assert path.read_text() == content


def test_a_stored_share_outside_zero_to_one_is_left_out(tmp_path):
    path = tmp_path / "calibration.json"
    entry = {"gpu": "A100 SXM 80GB", "matmul": 3.0, "measured_tokens_per_second": 1.0,
             "default_tokens_per_second": 1.0, "model": "m", "settings": {}, "device": "d",
             "date": "2026-12-01"}  # fmt: skip
    path.write_text(json.dumps({"format": calibration.FORMAT, "gpus": {"A100 SXM 80GB": entry}}))
    assert calibration.load(path) == {}
