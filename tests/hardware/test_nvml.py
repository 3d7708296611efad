"""NvmlProbe against scripted NVML scenarios: nothing raises, failures degrade one field or GPU."""

import ctypes.util
import subprocess
import sys
import threading
import time

import pynvml  # noqa: TID251 - the fakes reuse its real error classes and codes
import pytest

from vramgui.hardware.nvml import GpuSnapshot, NvmlProbe

MiB = 1024**2


def test_two_gpus_read_in_full(fake_nvml, fake_device):
    nvml = fake_nvml(
        [
            fake_device(processes=[(4242, 3000 * MiB, "python")]),
            fake_device(
                name="NVIDIA GeForce RTX 3090",
                uuid="GPU-11111111-1111-1111-1111-111111111111",
                total=24576 * MiB,
                free=24000 * MiB,
                used=0,
                reserved=576 * MiB,
                pcie_gen=3,
                pcie_width=8,
            ),
        ]
    )
    snapshot = NvmlProbe(nvml=nvml).snapshot()

    assert snapshot.reason is None
    assert snapshot.driver_version == "550.54.15"
    assert snapshot.cuda_version == "12.4"
    first, second = snapshot.gpus
    assert (first.index, first.name) == (0, "NVIDIA GeForce RTX 4090")
    assert first.uuid == "GPU-00000000-0000-0000-0000-000000000000"
    # The v2 API reports the driver's reservation apart from what processes use.
    assert (first.total_bytes, first.free_bytes, first.used_bytes, first.reserved_bytes) == (
        24564 * MiB,
        20000 * MiB,
        4000 * MiB,
        564 * MiB,
    )
    assert (first.pcie_gen, first.pcie_width) == (4, 16)
    assert first.mig_enabled is False
    assert first.mig_instances == ()
    assert first.error is None
    assert second.name == "NVIDIA GeForce RTX 3090"
    assert (second.pcie_gen, second.pcie_width) == (3, 8)
    assert second.processes == ()
    assert snapshot.capacities() == (
        ("GPU 0: NVIDIA GeForce RTX 4090", 24564 * MiB),
        ("GPU 1: NVIDIA GeForce RTX 3090", 24576 * MiB),
    )
    assert snapshot.capacities(use_free=True)[0] == ("GPU 0: NVIDIA GeForce RTX 4090", 20000 * MiB)
    assert first.capacity_bytes(use_free=True) == 20000 * MiB


def test_a_not_supported_field_becomes_none_and_nothing_else(fake_nvml, fake_device):
    broken = fake_device(
        fail={
            "nvmlDeviceGetUUID": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetMaxPcieLinkGeneration": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NO_PERMISSION,
        }
    )
    snapshot = NvmlProbe(nvml=fake_nvml([fake_device(), broken])).snapshot()

    assert len(snapshot.gpus) == 2
    gpu = snapshot.gpus[1]
    assert gpu.uuid is None
    assert gpu.pcie_gen is None
    assert gpu.processes is None
    assert gpu.pcie_width == 16
    assert gpu.name == "NVIDIA GeForce RTX 4090"
    assert gpu.total_bytes == 24564 * MiB
    assert gpu.error is None
    assert snapshot.reason is None
    assert snapshot.gpus[0].uuid is not None


def test_a_lost_gpu_stays_in_the_list_with_an_error(fake_nvml, fake_device):
    nvml = fake_nvml([fake_device(), pynvml.NVML_ERROR_GPU_IS_LOST, fake_device(name="NVIDIA L4")])
    snapshot = NvmlProbe(nvml=nvml).snapshot()

    assert [gpu.index for gpu in snapshot.gpus] == [0, 1, 2]
    lost = snapshot.gpus[1]
    assert lost.error == "GPU is lost"
    assert lost.name is None
    assert lost.total_bytes is None
    assert snapshot.gpus[2].name == "NVIDIA L4"
    assert "GPU 1" in snapshot.reason
    assert "GPU is lost" in snapshot.reason
    # A GPU of unknown size cannot be offered to a fit.
    assert [name for name, _ in snapshot.capacities()] == [
        "GPU 0: NVIDIA GeForce RTX 4090",
        "GPU 2: NVIDIA L4",
    ]


def test_a_gpu_lost_while_being_read_is_marked(fake_nvml, fake_device):
    lost = fake_device(
        fail={
            "nvmlDeviceGetMemoryInfo_v2": pynvml.NVML_ERROR_GPU_IS_LOST,
            "nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_GPU_IS_LOST,
        }
    )
    snapshot = NvmlProbe(nvml=fake_nvml([lost])).snapshot()

    (gpu,) = snapshot.gpus
    assert gpu.name == "NVIDIA GeForce RTX 4090"
    assert gpu.total_bytes is None
    assert gpu.error == "GPU is lost"
    assert snapshot.capacities() == ()


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "No NVIDIA driver found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "not running"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "Reboot"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "permissions"),
        (pynvml.NVML_ERROR_UNKNOWN, "Could not query the NVIDIA driver"),
    ],
)
def test_no_driver_is_an_empty_snapshot_with_a_reason(fake_nvml, code, words):
    nvml = fake_nvml(init_error=code)
    probe = NvmlProbe(nvml=nvml)

    snapshot = probe.snapshot()

    assert snapshot.gpus == ()
    assert words in snapshot.reason
    assert snapshot.driver_version is None
    # A failed init is retried by the next refresh, and there is nothing to shut down.
    probe.snapshot()
    probe.close()
    assert nvml.calls["nvmlInit"] == 2
    assert nvml.calls["nvmlShutdown"] == 0


def test_errors_and_constants_are_the_modules_own(fake_nvml, fake_device):
    # A binding whose classes and codes differ from today's pynvml: the probe follows it.
    class DriverGone(pynvml.NVMLError):
        def __new__(cls, *args):
            return Exception.__new__(cls)

        def __init__(self) -> None:
            self.value = 999

        def __str__(self) -> str:
            return "gone"

    nvml = fake_nvml(init_error=pynvml.NVML_ERROR_UNKNOWN)
    nvml.NVMLError_DriverNotLoaded = DriverGone

    def init() -> None:
        raise DriverGone()

    nvml.nvmlInit = init
    assert "not running" in NvmlProbe(nvml=nvml).snapshot().reason

    # MIG "on" is whatever value the module names NVML_DEVICE_MIG_ENABLE.
    nvml = fake_nvml([fake_device(mig_mode=7, mig_devices={})])
    nvml.NVML_DEVICE_MIG_ENABLE = 7
    gpu = NvmlProbe(nvml=nvml).snapshot().gpus[0]
    assert gpu.mig_enabled is True


def test_driver_without_gpus(fake_nvml):
    snapshot = NvmlProbe(nvml=fake_nvml([])).snapshot()
    assert snapshot.gpus == ()
    assert snapshot.reason == "The NVIDIA driver reports no GPUs."
    assert snapshot.driver_version == "550.54.15"


def test_device_count_failure_is_a_reason(fake_nvml, fake_device):
    snapshot = NvmlProbe(
        nvml=fake_nvml([fake_device()], count_error=pynvml.NVML_ERROR_UNKNOWN)
    ).snapshot()
    assert snapshot.gpus == ()
    assert "did not list its GPUs" in snapshot.reason


def test_v2_memory_missing_from_the_binding_falls_back_to_v1(fake_nvml, fake_device):
    nvml = fake_nvml([fake_device()], v2=False)
    (gpu,) = NvmlProbe(nvml=nvml).snapshot().gpus
    assert nvml.calls["nvmlDeviceGetMemoryInfo_v2"] == 0
    assert (gpu.total_bytes, gpu.free_bytes) == (24564 * MiB, 20000 * MiB)
    # v1 cannot tell the reservation apart: it is in used, and reserved is unknown.
    assert gpu.used_bytes == 4564 * MiB
    assert gpu.reserved_bytes is None


@pytest.mark.parametrize(
    "code",
    [
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    ],
)
def test_v2_memory_missing_from_the_driver_falls_back_to_v1(fake_nvml, fake_device, code):
    nvml = fake_nvml([fake_device()], v2_error=code)
    (gpu,) = NvmlProbe(nvml=nvml).snapshot().gpus
    assert nvml.calls["nvmlDeviceGetMemoryInfo_v2"] == 1
    assert nvml.calls["nvmlDeviceGetMemoryInfo"] == 1
    assert gpu.total_bytes == 24564 * MiB
    assert gpu.reserved_bytes is None


def test_old_binding_without_the_version_argument_falls_back_to_v1(fake_nvml, fake_device):
    class OldBinding(fake_nvml):
        def nvmlDeviceGetMemoryInfo(self, handle):
            return super().nvmlDeviceGetMemoryInfo(handle)

    (gpu,) = NvmlProbe(nvml=OldBinding([fake_device()])).snapshot().gpus
    assert gpu.total_bytes == 24564 * MiB
    assert gpu.used_bytes == 4564 * MiB


def test_mig_instances_are_listed_and_offered_to_fits(fake_nvml, fake_device):
    a100 = fake_device(
        name="NVIDIA A100-SXM4-80GB",
        total=81920 * MiB,
        mig_mode=1,
        mig_devices={
            0: fake_device(
                name="NVIDIA A100-SXM4-80GB MIG 3g.40gb",
                uuid="MIG-a",
                total=40192 * MiB,
                free=40000 * MiB,
                used=192 * MiB,
            ),
            3: fake_device(
                name="NVIDIA A100-SXM4-80GB MIG 1g.10gb",
                uuid="MIG-b",
                total=9728 * MiB,
                free=9700 * MiB,
                used=28 * MiB,
            ),
        },
    )
    snapshot = NvmlProbe(nvml=fake_nvml([a100])).snapshot()

    (gpu,) = snapshot.gpus
    assert gpu.mig_enabled is True
    assert [(mig.index, mig.uuid, mig.total_bytes) for mig in gpu.mig_instances] == [
        (0, "MIG-a", 40192 * MiB),
        (3, "MIG-b", 9728 * MiB),
    ]
    assert gpu.mig_instances[1].free_bytes == 9700 * MiB
    assert gpu.mig_instances[0].name.endswith("3g.40gb")
    # A process runs inside one MIG device, so fits see the instances, not the whole card.
    assert snapshot.capacities() == (
        ("GPU 0: NVIDIA A100-SXM4-80GB MIG 0", 40192 * MiB),
        ("GPU 0: NVIDIA A100-SXM4-80GB MIG 3", 9728 * MiB),
    )


def test_mig_disabled_and_unsupported_read_as_off(fake_nvml, fake_device):
    gpus = (
        NvmlProbe(nvml=fake_nvml([fake_device(mig_mode=0), fake_device(mig_mode=None)]))
        .snapshot()
        .gpus
    )
    assert [(gpu.mig_enabled, gpu.mig_instances) for gpu in gpus] == [(False, ()), (False, ())]


def test_mig_slot_failure_becomes_an_instance_with_an_error(fake_nvml, fake_device):
    gpu_spec = fake_device(
        mig_mode=1,
        mig_slots=1,
        fail={"nvmlDeviceGetMigDeviceHandleByIndex": pynvml.NVML_ERROR_UNKNOWN},
    )
    (gpu,) = NvmlProbe(nvml=fake_nvml([gpu_spec])).snapshot().gpus
    (mig,) = gpu.mig_instances
    assert mig.error
    assert mig.total_bytes is None


def test_processes_with_hidden_names_and_sizes(fake_nvml, fake_device):
    device = fake_device(
        processes=[
            (100, 2048 * MiB, "/usr/bin/python3"),
            (200, None, pynvml.NVML_ERROR_NO_PERMISSION),
        ]
    )
    (gpu,) = NvmlProbe(nvml=fake_nvml([device])).snapshot().gpus
    assert [(p.pid, p.used_bytes, p.name) for p in gpu.processes] == [
        (100, 2048 * MiB, "/usr/bin/python3"),
        (200, None, None),
    ]


def test_old_driver_processes_fall_back_to_the_v2_call(fake_nvml, fake_device):
    class OldDriver(fake_nvml):
        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            raise pynvml.NVMLLibraryMismatchError("use a versioned function")

        def nvmlDeviceGetComputeRunningProcesses_v2(self, handle):
            return super().nvmlDeviceGetComputeRunningProcesses(handle)

    device = fake_device(processes=[(7, 1024 * MiB, "llama-server")])
    (gpu,) = NvmlProbe(nvml=OldDriver([device])).snapshot().gpus
    assert [(p.pid, p.name) for p in gpu.processes] == [(7, "llama-server")]


def test_bytes_strings_from_old_bindings_are_decoded(fake_nvml, fake_device):
    class BytesBinding(fake_nvml):
        def nvmlDeviceGetName(self, handle):
            return super().nvmlDeviceGetName(handle).encode()

        def nvmlSystemGetDriverVersion(self):
            return b"470.256.02"

    snapshot = NvmlProbe(nvml=BytesBinding([fake_device()])).snapshot()
    assert snapshot.gpus[0].name == "NVIDIA GeForce RTX 4090"
    assert snapshot.driver_version == "470.256.02"


def test_init_once_shutdown_once(fake_nvml, fake_device):
    nvml = fake_nvml([fake_device()])
    probe = NvmlProbe(nvml=nvml)
    assert nvml.calls["nvmlInit"] == 0  # lazy: nothing happens before the first snapshot

    for _ in range(3):
        probe.snapshot()
    probe.close()
    probe.close()

    assert nvml.calls["nvmlInit"] == 1
    assert nvml.calls["nvmlShutdown"] == 1
    # A refresh after close initialises again rather than reading a shut-down library.
    probe.snapshot()
    assert nvml.calls["nvmlInit"] == 2


def test_concurrent_snapshots_initialise_once(fake_nvml, fake_device):
    class SlowInit(fake_nvml):
        def nvmlInit(self):
            time.sleep(0.02)  # widen the window in which a second thread could init too
            super().nvmlInit()

    nvml = SlowInit([fake_device()])
    probe = NvmlProbe(nvml=nvml)
    results: list[GpuSnapshot] = []
    threads = [threading.Thread(target=lambda: results.append(probe.snapshot())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert nvml.calls["nvmlInit"] == 1
    assert [len(snapshot.gpus) for snapshot in results] == [1, 1, 1, 1]


def test_nothing_raises_from_a_broken_library(fake_nvml, fake_device):
    class Broken(fake_nvml):
        def nvmlDeviceGetCount(self):
            raise RuntimeError("segfault avoided")

        def nvmlSystemGetDriverVersion(self):
            raise OSError("gone")

    snapshot = NvmlProbe(nvml=Broken([fake_device()])).snapshot()
    assert snapshot.gpus == ()
    assert "segfault avoided" in snapshot.reason
    assert snapshot.driver_version is None

    # A module with none of NVML's functions at all.
    empty = NvmlProbe(nvml=object())
    assert empty.snapshot().reason
    empty.close()


def test_shutdown_failure_is_swallowed(fake_nvml, fake_device):
    class FailingShutdown(fake_nvml):
        def nvmlShutdown(self):
            super().nvmlShutdown()
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    nvml = FailingShutdown([fake_device()])
    probe = NvmlProbe(nvml=nvml)
    probe.snapshot()
    probe.close()
    probe.close()
    assert nvml.calls["nvmlShutdown"] == 1


def test_importing_the_hardware_layer_loads_no_nvml():
    code = "import sys, vramgui.hardware; vramgui.hardware.NvmlProbe(); assert 'pynvml' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_real_pynvml_never_raises():
    snapshot = NvmlProbe().snapshot()
    if sys.platform.startswith("linux") and ctypes.util.find_library("nvidia-ml") is None:
        assert snapshot.gpus == ()
        assert "No NVIDIA driver found" in snapshot.reason
    else:
        assert snapshot.gpus or snapshot.reason
