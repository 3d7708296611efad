"""The rules of thumb reproduce their published worked examples."""

import pytest

from vramgui.core import rules
from vramgui.core.units import GB, GiB


@pytest.mark.parametrize(("bits", "expected_gb"), [(32, 26.075), (16, 13.04), (8, 6.52), (4, 3.26)])
def test_params_x_bytes_for_llama2_7b(bits, expected_gb):
    # The note's arithmetic: 7e9 parameters x bytes, in 1024**3-byte "GB".
    assert rules.weights_rule(7e9, bits) / GiB == pytest.approx(expected_gb, abs=0.005)


def test_serving_rule_adds_twenty_percent():
    assert rules.serving_rule(7e9, 16) == round(rules.weights_rule(7e9, 16) * 1.2)


def test_hamel_lora_rule_example():
    # (14 + 0.5 x 16/8 x 4) x 1.2 = 21.6 GB
    assert rules.lora_rule(14 * GB, 0.5e9, 16) == pytest.approx(21.6 * GB)


def test_one_layer_floor_opt_175b():
    # 2 x 175e9 / 96 = 3.65 GB
    assert rules.one_layer_floor(175e9, 96, 16) / GB == pytest.approx(3.65, abs=0.005)


def test_training_bytes_per_parameter():
    assert rules.training_bytes_per_parameter(7e9, 18) == 126 * GB
