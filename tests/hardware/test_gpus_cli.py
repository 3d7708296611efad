"""`vramgui gpus`: JSON for machines, a table for people, exit 0 with or without GPUs."""

import json

import pynvml  # noqa: TID251 - the fakes reuse its real error classes and codes
import pytest

from vramgui.cli import gpus as gpus_cli
from vramgui.cli import main
from vramgui.hardware.nvml import NvmlProbe

MiB = 1024**2


@pytest.fixture
def use_nvml(monkeypatch):
    """Point the command at a probe over the given fake module."""

    def install(nvml):
        monkeypatch.setattr(gpus_cli, "probe_factory", lambda: NvmlProbe(nvml=nvml))
        return nvml

    return install


def test_json_without_a_driver(use_nvml, fake_nvml, capsys):
    nvml = use_nvml(fake_nvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert main(["gpus", "--json"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["schema"] == "vramgui.gpus/1"
    assert document["gpus"] == []
    assert "not running" in document["reason"]
    assert err == ""
    assert nvml.calls["nvmlShutdown"] == 0


def test_json_with_gpus(use_nvml, fake_nvml, fake_device, capsys):
    nvml = use_nvml(
        fake_nvml(
            [fake_device(processes=[(9, 100 * MiB, "python")]), pynvml.NVML_ERROR_GPU_IS_LOST]
        )
    )
    assert main(["gpus", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    first, lost = document["gpus"]
    assert first["total_bytes"] == 24564 * MiB
    assert first["processes"] == [{"pid": 9, "used_bytes": 100 * MiB, "name": "python"}]
    assert first["mig_instances"] == []
    assert lost["error"] == "GPU is lost"
    assert document["driver_version"] == "550.54.15"
    assert document["cuda_version"] == "12.4"
    assert "GPU 1" in document["reason"]
    # The command releases NVML when done.
    assert (nvml.calls["nvmlInit"], nvml.calls["nvmlShutdown"]) == (1, 1)


def test_table_for_people(use_nvml, fake_nvml, fake_device, capsys):
    mig = fake_device(name="NVIDIA A100-SXM4-80GB MIG 1g.10gb", total=9728 * MiB)
    use_nvml(
        fake_nvml(
            [
                fake_device(),
                fake_device(name="NVIDIA A100-SXM4-80GB", mig_mode=1, mig_devices={0: mig}),
            ]
        )
    )
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert "Driver 550.54.15, CUDA 12.4" in out
    assert "NVIDIA GeForce RTX 4090" in out
    assert "23.99 GiB" in out  # 24564 MiB, as NVML reports a 24 GiB card
    assert "gen4 x16" in out
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert list(rows) == ["0", "1", "1.0"]  # a MIG device is listed under its GPU
    assert "MIG 1g.10gb" in rows["1.0"]
    assert "9.50 GiB" in rows["1.0"]


def test_table_without_gpus_says_why(use_nvml, fake_nvml, capsys):
    use_nvml(fake_nvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert main(["gpus"]) == 0
    assert capsys.readouterr().out.startswith("No NVIDIA GPUs. No NVIDIA driver found")


def test_real_pynvml_on_this_machine(capsys):
    assert main(["gpus", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "vramgui.gpus/1"
    assert isinstance(document["gpus"], list)
    if not document["gpus"]:
        assert document["reason"]


def test_catalog_json_and_table(capsys):
    assert main(["gpus", "--catalog", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "vramgui.gpu-catalog/1"
    by_name = {gpu["name"]: gpu for gpu in document["gpus"]}
    assert by_name["RTX 4090"]["memory_bytes"] == 25769803776
    assert by_name["RTX 4090"]["capacity_bytes"] == by_name["RTX 4090"]["nvml_total_bytes"]
    assert by_name["L4"]["nvml_total_source"].startswith("https://github.com/")
    assert by_name["Instinct MI300X"]["nvml"] is False
    assert main(["gpus", "--catalog"]) == 0
    table = capsys.readouterr().out
    assert "RTX 4090" in table
    assert "24.00 GiB" in table  # marketed
    assert "23.99 GiB" in table  # NVML's total
    assert "$1,599" in table
    # unified memory: the share the GPU may use beside the whole
    (m3,) = [line for line in table.splitlines() if line.startswith("Apple M3 Ultra 512GB")]
    assert "512.00 GiB" in m3 and "384.00 GiB" in m3
    assert by_name["Apple M3 Ultra 512GB"]["engines_unavailable"]["vllm"].startswith("vLLM has no")
    assert by_name["RTX 5070 Ti"]["price_kind"] == "launch MSRP"
    assert by_name["RTX 5070 Ti"]["price_date"] == "2025-01-06"
