"""Scripted stand-ins for the pynvml module, by scenario (after gpustat's test_gpustat.py).

The fake carries pynvml's real error classes and constants (importing pynvml loads no library);
its functions answer from a list of FakeDevice records, and a device can be told to fail any
function with any NVML return code.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml  # noqa: TID251 - the fakes reuse its real error classes and codes
import pytest

MiB = 1024**2


@dataclass
class FakeDevice:
    name: str = "NVIDIA GeForce RTX 4090"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    total: int = 24564 * MiB
    free: int = 20000 * MiB
    used: int = 4000 * MiB
    reserved: int = 564 * MiB
    pcie_gen: int = 4
    pcie_width: int = 16
    # (pid, used bytes or None, process name or an NVML error code when the name is hidden)
    processes: list[tuple[int, int | None, str | int]] = field(default_factory=list)
    mig_mode: int | None = None  # None: MIG not supported (NotSupported), else 0/1
    mig_slots: int = 7
    mig_devices: dict[int, FakeDevice] = field(default_factory=dict)
    fail: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code


class FakeNvml:
    """Quacks like the pynvml module over scripted devices; counts every call."""

    def __init__(
        self,
        devices: list[FakeDevice | int] = (),
        *,
        init_error: int | None = None,
        v2: bool = True,
        v2_error: int | None = None,
        driver: str = "550.54.15",
        cuda: int = 12040,
        count_error: int | None = None,
    ) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVMLError", "NVML_")):
                setattr(self, name, getattr(pynvml, name))
        # An int in the device list is the error code its handle lookup raises (a lost GPU).
        self.devices = list(devices)
        self.init_error = init_error
        self.v2_error = v2_error
        self.driver = driver
        self.cuda = cuda
        self.count_error = count_error
        self.calls: Counter[str] = Counter()
        if v2:
            self.nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def _check(self, device: FakeDevice, function: str) -> None:
        self.calls[function] += 1
        if function in device.fail:
            raise pynvml.NVMLError(device.fail[function])

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        if self.count_error is not None:
            raise pynvml.NVMLError(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        device = self.devices[index]
        if isinstance(device, int):
            raise pynvml.NVMLError(device)
        return device

    def nvmlDeviceGetName(self, handle: FakeDevice) -> str:
        self._check(handle, "nvmlDeviceGetName")
        return handle.name

    def nvmlDeviceGetUUID(self, handle: FakeDevice) -> str:
        self._check(handle, "nvmlDeviceGetUUID")
        return handle.uuid

    def nvmlDeviceGetMemoryInfo(
        self, handle: FakeDevice, version: int | None = None
    ) -> SimpleNamespace:
        if version is None:
            self._check(handle, "nvmlDeviceGetMemoryInfo")
            # v1 counts the driver's reservation as used.
            return SimpleNamespace(
                total=handle.total, free=handle.free, used=handle.used + handle.reserved
            )
        self._check(handle, "nvmlDeviceGetMemoryInfo_v2")
        if self.v2_error is not None:
            raise pynvml.NVMLError(self.v2_error)
        return SimpleNamespace(
            version=version,
            total=handle.total,
            free=handle.free,
            used=handle.used,
            reserved=handle.reserved,
        )

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeDevice) -> list[SimpleNamespace]:
        self._check(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used, _ in handle.processes]

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        for device in self.devices:
            for known, _, name in getattr(device, "processes", ()):
                if known == pid:
                    if isinstance(name, int):
                        raise pynvml.NVMLError(name)
                    return name
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeDevice) -> int:
        self._check(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
        return handle.pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeDevice) -> int:
        self._check(handle, "nvmlDeviceGetMaxPcieLinkWidth")
        return handle.pcie_width

    def nvmlDeviceGetMigMode(self, handle: FakeDevice) -> list[int]:
        self._check(handle, "nvmlDeviceGetMigMode")
        if handle.mig_mode is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [handle.mig_mode, handle.mig_mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeDevice) -> int:
        self._check(handle, "nvmlDeviceGetMaxMigDeviceCount")
        return handle.mig_slots

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeDevice, index: int) -> FakeDevice:
        self._check(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        if index not in handle.mig_devices:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return handle.mig_devices[index]


@pytest.fixture
def fake_nvml():
    """The FakeNvml class, for tests to script a scenario."""
    return FakeNvml


@pytest.fixture
def fake_device():
    """The FakeDevice class."""
    return FakeDevice
