"""`vramgui estimate --vram-gib X --gpu-gbps Y [--gpu-tflops Z]`: a card the catalog lacks."""

import json

import pytest

from tests.configs import LLAMA
from tests.nvml_fakes import one_gpu_probe
from vramgui.cli import main
from vramgui.cli.estimate import vram_budgets
from vramgui.core.errors import WorkloadError
from vramgui.core.units import GiB


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    return path


def _doc(capsys, *args):
    assert main(["estimate", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_card_given_by_memory_and_bandwidth_is_fitted_by_its_name(capsys, config_path):
    doc = _doc(capsys, config_path, "--vram-gib", 20, "--gpu-gbps", 500)
    (row,) = doc["fit"]
    assert row["gpu"] == "Custom 20 GiB, 500 GB/s"
    assert row["capacity_bytes"] == 20 * GiB
    assert row["headroom_bytes"] == 20 * GiB - doc["per_gpu"]["total_bytes"]
    assert row["fits"]
    largest = doc["largest_fitting"]["Custom 20 GiB, 500 GB/s"]
    assert largest["seq"] == LLAMA["max_position_embeddings"] and largest["batch"] >= 1
    assert doc["custom_gpus"] == [
        {
            "name": "Custom 20 GiB, 500 GB/s",
            "memory_bytes": 20 * GiB,
            "memory_bandwidth_gbps": 500.0,
            "tflops_16bit": None,
        }
    ]
    # no tensor rate: no speed, and the document says which flag gives one
    assert "serving" not in doc or doc["serving"] is None
    assert any("--gpu-tflops" in note for note in doc["notes"])


def test_a_smaller_card_holds_a_smaller_batch(capsys, config_path):
    big = _doc(capsys, config_path, "--vram-gib", 40)["largest_fitting"]["Custom 40 GiB"]
    small = _doc(capsys, config_path, "--vram-gib", 16)["largest_fitting"]["Custom 16 GiB"]
    assert big["batch"] > small["batch"]


def test_a_card_with_the_4090s_figures_decodes_as_fast_as_the_catalogs(capsys, config_path):
    catalog = _doc(capsys, config_path, "--gpu", "RTX 4090")["serving"]
    custom = _doc(capsys, config_path, "--vram-gib", 24, "--gpu-gbps", 1008, "--gpu-tflops", 165.2)[
        "serving"
    ]
    assert custom["gpu"] == "Custom 24 GiB, 1008 GB/s"
    # decoding one sequence reads the weights once a token: the bandwidth decides
    assert catalog["bound"] == custom["bound"] == "memory"
    assert custom["tokens_per_second"] == pytest.approx(catalog["tokens_per_second"], rel=1e-6)


def test_several_figures_give_one_card_each_beside_catalog_gpus(capsys, config_path):
    doc = _doc(capsys, config_path, "--gpu", "L4", "--vram-gib", "12,8", "--gpu-gbps", 360)
    assert [row["gpu"] for row in doc["fit"]] == [
        "L4",
        "Custom 12 GiB, 360 GB/s",
        "Custom 8 GiB, 360 GB/s",
    ]
    assert not doc["fit"][2]["fits"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpu-gbps", "500"], "give its --vram-gib"),
        (["--vram-gib", "lots"], "--vram-gib takes GiB"),
        (["--vram-gib", "-3"], "--vram-gib must be a positive number"),
        (["--vram-gib", "20", "--gpu-gbps", "-1"], "--gpu-gbps must be a positive number"),
        (["--vram-gib", "20", "--gpu-tflops", "0"], "--gpu-tflops must be a positive number"),
        (["--vram-gib", "5e6"], "--vram-gib must be a positive number"),
    ],
)
def test_bad_card_figures_exit_2_with_the_flag_named(capsys, config_path, args, needle):
    assert main(["estimate", str(config_path), *args]) == 2
    out, err = capsys.readouterr()
    assert not out and needle in err and len(err.strip().splitlines()) == 1


def test_plan_and_estimate_read_vram_gib_with_one_parser():
    from vramgui.cli import plan

    assert plan.vram_budgets is vram_budgets
    assert vram_budgets("24,12.5") == [24 * GiB, round(12.5 * GiB)]
    assert vram_budgets(None) == []
    with pytest.raises(WorkloadError, match="one per GPU"):
        vram_budgets("24;12")


def test_vllm_on_an_apple_gpu_is_noted(capsys, config_path):
    doc = _doc(capsys, config_path, "--engine", "vllm", "--gpu", "M3 Ultra")
    assert any(
        note.startswith("vLLM does not run on Apple M3 Ultra 512GB: vLLM has no Metal backend")
        for note in doc["notes"]
    )
    llamacpp = _doc(capsys, config_path, "--gpu", "M3 Ultra", "--quant", "Q4_K_M")
    assert not any("does not run on" in note for note in llamacpp["notes"])


def _plan(capsys, *args):
    assert main(["plan", *map(str, args), "--engine", "llamacpp", "--quant", "Q4_K_M"]) == 0
    return capsys.readouterr().out


def test_plan_names_a_card_by_its_figures_and_says_which_speeds_are_assumed(capsys, config_path):
    text = _plan(capsys, config_path, "--vram-gib", 24, "--gpu-gbps", 900)
    assert "(Custom 24 GiB, 900 GB/s speeds)" in text.splitlines()[0]
    assert "RTX 4090 speeds" not in text
    assert "assumed speeds, the RTX 4090's: 16-bit tensor rate 165.2 TFLOPS" in text
    doc = json.loads(_plan(capsys, config_path, "--vram-gib", 24, "--gpu-gbps", 900, "--json"))
    assert doc["gpu"] == "Custom 24 GiB, 900 GB/s"
    assert doc["assumed_speeds"] == [
        {
            "gpu": "Custom 24 GiB, 900 GB/s",
            "assumed": {"tflops": "165.2 TFLOPS", "pcie": "4.0"},
            "stand_in": "RTX 4090",
        }
    ]
    # Every figure given: nothing but the PCIe generation is assumed.
    given = ("--vram-gib", 24, "--gpu-gbps", 900, "--gpu-tflops", 100, "--pcie-gbps", 25)
    doc = json.loads(_plan(capsys, config_path, *given, "--json"))
    assert doc["assumed_speeds"] == [] and not any("assumed" in n for n in doc["notices"])


def test_plan_and_estimate_time_a_card_given_by_hand_alike(capsys, config_path):
    # The card is costed as a card of its own kind in both: before, the plan took the RTX 4090's
    # (a GeForce: fp16-accumulate products twice as fast) and read the prompt in 0.27 s, the
    # estimate in 0.59 s.
    card = ("--vram-gib", 24, "--gpu-gbps", 900, "--gpu-tflops", 100)
    plan = json.loads(_plan(capsys, config_path, *card, "--json"))
    estimate = _doc(capsys, config_path, *card, "--engine", "llamacpp", "--quant", "Q4_K_M")
    serving = estimate["serving"]
    assert round(plan["tokens_per_second"], 1) == serving["tokens_per_second"]
    assert round(plan["prefill_seconds"], 2) == round(serving["time_to_first_token_seconds"], 2)


# Stands in for NvmlProbe: one 16 GiB GPU the catalog does not know.
_UnknownLocalGpu = one_gpu_probe("NVIDIA Example Accelerator X1", 16, 1)


def test_plan_on_a_local_gpu_the_catalog_lacks_says_its_speeds_are_assumed(
    capsys, config_path, monkeypatch
):
    monkeypatch.setattr("vramgui.hardware.nvml.NvmlProbe", _UnknownLocalGpu)
    doc = json.loads(_plan(capsys, config_path, "--gpu", "local", "--json"))
    (assumed,) = doc["assumed_speeds"]
    assert assumed["gpu"].endswith("NVIDIA Example Accelerator X1")
    assert set(assumed["assumed"]) == {"bandwidth", "tflops", "pcie"}
    assert assumed["stand_in"] == "RTX 4090"
    assert any("assumed speeds" in n and "--gpu-gbps" in n for n in doc["notices"])


def test_plan_on_several_cards_given_by_hand(capsys, config_path):
    doc = json.loads(_plan(capsys, config_path, "--vram-gib", 12, "--gpus", 2, "--json"))
    assert doc["gpus"] == ["Custom 12 GiB", "Custom 12 GiB"]
    assert doc["vram_budget_bytes"] == [12 * GiB, 12 * GiB]
    # No bandwidth given: each card's assumed, once.
    (assumed,) = doc["assumed_speeds"]
    assert set(assumed["assumed"]) == {"bandwidth", "tflops", "pcie"}
