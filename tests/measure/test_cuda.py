"""The GPU path with a scripted allocator and NVML, run on the CPU (no GPU in CI).

What the allocator and the driver would say is scripted; the harness itself really runs a tiny
model, so the readings follow its real phases.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from vramgui.hardware.nvml import GpuProcess, GpuSnapshot, LocalGpu  # noqa: E402
from vramgui.measure import cuda  # noqa: E402
from vramgui.measure.request import MeasureError  # noqa: E402

TINY = json.loads(
    (Path(__file__).parents[1] / "data" / "families" / "tiny_configs.json").read_text()
)
INFERENCE = {"mode": "inference", "batch": 2, "seq": 16, "dtype": "fp32", "fake": False}
MiB = 2**20


class ScriptedAllocator:
    """Each phase's peak is 10 MiB above the last; reserved keeps 4 MiB more."""

    def __init__(self):
        self.readings = 0
        self.emptied = 0

    def synchronize(self):
        pass

    def max_memory_allocated(self):
        self.readings += 1
        return 100 * MiB + 10 * MiB * self.readings

    def max_memory_reserved(self):
        return 104 * MiB + 10 * MiB * self.readings

    def memory_allocated(self):
        return 0

    def memory_reserved(self):
        return 0 if self.emptied else 200 * MiB

    def reset_peak_memory_stats(self):
        pass

    def empty_cache(self):
        self.emptied += 1


def _gpu(used, processes):
    return LocalGpu(
        index=0, name="Fake GPU", uuid="GPU-abc", total_bytes=80 * 2**30, free_bytes=None,
        used_bytes=used, reserved_bytes=None, processes=processes, pcie_gen=None, pcie_width=None,
        mig_enabled=False, mig_instances=None,
    )  # fmt: skip


def _snapshots(used_values, own=True):
    values = iter(used_values)

    def snapshot():
        used = next(values)
        processes = (GpuProcess(pid=os.getpid(), used_bytes=used, name=None),) if own else ()
        return GpuSnapshot(gpus=(_gpu(1000 * MiB + used, processes),))

    return snapshot


def test_each_phase_is_read_and_the_last_window_reported():
    allocator = ScriptedAllocator()
    # baseline, context at start, one per phase end (setup, setup after reset, prefill,
    # decode), context at end
    view = cuda.DeviceView(_snapshots([0, 500 * MiB] + [700 * MiB] * 4 + [720 * MiB]), "abc")
    result = cuda.run_on_device(TINY["llama-gqa"], INFERENCE, torch.device("cpu"), allocator, view)
    figures = result["cuda"]
    assert set(figures["phases"]) >= {"prefill", "decode"}
    assert figures["load"]["max_memory_allocated"] == 110 * MiB  # the first reading: the build
    assert figures["max_memory_allocated"] == 100 * MiB + 10 * MiB * allocator.readings
    assert figures["max_memory_reserved"] == figures["max_memory_allocated"] + 4 * MiB
    assert figures["context_at_start_bytes"] == 500 * MiB - 200 * MiB
    assert figures["context_bytes"] == 720 * MiB - 200 * MiB  # NVML's figure less reserved
    assert figures["nvml_basis"] == "this process (NVML)"
    assert figures["freed"] == {"memory_allocated": 0, "memory_reserved": 0}
    assert allocator.emptied == 1
    assert result["peak_bytes"] > 0  # the live-bytes counter ran too


def test_without_this_process_in_nvml_the_device_figure_less_the_baseline():
    view = cuda.DeviceView(_snapshots([0, 300 * MiB], own=False), "abc")
    assert view.used_bytes() == 300 * MiB
    assert view.basis.startswith("the whole GPU")
    assert cuda.DeviceView(_snapshots([0, 0]), "other").used_bytes() is None


def test_running_out_of_memory_names_the_phase_and_frees_the_gpu():
    allocator = ScriptedAllocator()
    view = cuda.DeviceView(_snapshots([0] * 20), "abc")

    class RunsOut:
        def phase_started(self, ended, started):
            if started == "decode":
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")

        def window_started(self):
            pass

    with pytest.raises(MeasureError, match="ran out of memory during decode: CUDA out of memory"):
        cuda.run_on_device(
            TINY["llama-gqa"], INFERENCE, torch.device("cpu"), allocator, view,
            listeners=(RunsOut(),),
        )  # fmt: skip
    assert allocator.emptied == 1


def test_a_setup_the_estimate_says_does_not_fit_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: SimpleNamespace(name="Fake GPU")
    )
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (8 * 2**30, 24 * 2**30))
    monkeypatch.setattr(cuda, "NvmlProbe", lambda: SimpleNamespace(
        snapshot=GpuSnapshot, close=lambda: None))  # fmt: skip
    with pytest.raises(MeasureError, match=r"does not fit the 8\.00 GiB free on Fake GPU; --force"):
        cuda.measure_on_cuda(TINY["llama-gqa"], INFERENCE, required_bytes=9 * 2**30, force=False)
