"""The NVIDIA GPUs in this machine, read through NVML (the ``pynvml`` module of nvidia-ml-py).

A machine without a driver, without the library, or without NVIDIA GPUs is a normal state: the
snapshot is then empty and says why. One field NVML cannot answer becomes ``None``; a GPU that
stops answering stays in the list with an ``error``. Nothing raises out of :class:`NvmlProbe`.

NVML's errors and constants are the module's own (``NVMLError_GpuIsLost``,
``NVML_DEVICE_MIG_ENABLE``...), read from the module the probe was given, never copied here.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding memory on a GPU. ``used_bytes`` is None where the OS hides it (WDDM)."""

    pid: int
    used_bytes: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG device of a GPU in MIG mode: the memory a process placed on it can use."""

    index: int
    name: str | None
    uuid: str | None
    total_bytes: int | None
    free_bytes: int | None
    used_bytes: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LocalGpu:
    """One NVIDIA GPU as NVML sees it now. Any field NVML could not answer is None.

    ``reserved_bytes`` is the memory the driver keeps for itself (NVML's v2 memory API only).
    ``pcie_gen`` and ``pcie_width`` are the fastest link this GPU and slot can train to; the
    current link drops to a slower generation while idle to save power, so it would understate
    transfer speed. ``processes`` is None when the list could not be read, empty when none.
    """

    index: int
    name: str | None
    uuid: str | None
    total_bytes: int | None
    free_bytes: int | None
    used_bytes: int | None
    reserved_bytes: int | None
    processes: tuple[GpuProcess, ...] | None
    pcie_gen: int | None
    pcie_width: int | None
    mig_enabled: bool | None
    mig_instances: tuple[MigInstance, ...] | None
    error: str | None = None

    @property
    def label(self) -> str:
        """A name unique within this machine, e.g. "GPU 0: NVIDIA GeForce RTX 4090"."""
        return f"GPU {self.index}: {self.name or 'unknown NVIDIA GPU'}"

    def capacity_bytes(self, use_free: bool = False) -> int | None:
        """Memory a fit check may count on: all of it, or only what is free right now.

        Returns None when NVML could not read it (a lost GPU).
        """
        return self.free_bytes if use_free else self.total_bytes


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """Every NVIDIA GPU of this machine at one moment, and why there are none when none.

    ``reason`` explains an empty list or a degraded GPU in words a person can act on; it is None
    when everything could be read.
    """

    gpus: tuple[LocalGpu, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    reason: str | None = None

    def capacities(self, use_free: bool = False) -> tuple[tuple[str, int], ...]:
        """``(name, capacity_bytes)`` pairs for the fit logic of ``vramgui.core.fit``.

        A GPU in MIG mode contributes its MIG devices, since a process runs inside one of them
        and can never use the whole card. GPUs whose memory is unknown are left out.
        """
        pairs: list[tuple[str, int]] = []
        for gpu in self.gpus:
            if gpu.mig_enabled and gpu.mig_instances:
                for mig in gpu.mig_instances:
                    capacity = mig.free_bytes if use_free else mig.total_bytes
                    if capacity is not None:
                        pairs.append((f"{gpu.label} MIG {mig.index}", capacity))
                continue
            capacity = gpu.capacity_bytes(use_free)
            if capacity is not None:
                pairs.append((gpu.label, capacity))
        return tuple(pairs)


class _Field:
    """Calls into NVML for one GPU, turning each failure into None and remembering a lost GPU."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self.lost: str | None = None

    def __call__(self, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except Exception as exc:  # NVML raises NVMLError subclasses and, for ABI gaps, others.
            self.failed(exc)
            return None

    def failed(self, exc: BaseException) -> None:
        """Record a failure that was handled elsewhere, in case it means the GPU is gone."""
        if isinstance(exc, self._nvml.NVMLError_GpuIsLost):
            self.lost = _text(exc)


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ itself calls into the library.
        text = ""
    return text or type(exc).__name__


def _process_name(nvml: Any, pid: int) -> str:
    return _str(nvml.nvmlSystemGetProcessName(pid))


def _device_text(read: Callable[[Any], Any], handle: Any) -> str:
    """A device's name or UUID (``read`` is the NVML call)."""
    return _str(read(handle))


def _str(value: Any) -> str:
    """NVML strings arrive as str from current nvidia-ml-py and as bytes from old releases."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _init_failure_reason(exc: BaseException, nvml: Any) -> str:
    if isinstance(exc, nvml.NVMLError_LibraryNotFound):
        if sys.platform == "darwin":
            return "macOS has no NVIDIA driver, so there are no local GPUs to read. Pick a GPU from the catalog."
        return (
            "No NVIDIA driver found (libnvidia-ml could not be loaded). "
            "Install the NVIDIA driver, or pick a GPU from the catalog."
        )
    if isinstance(exc, nvml.NVMLError_DriverNotLoaded):
        return (
            "The NVIDIA driver is installed but not running (its kernel module is not loaded). "
            "Reboot or load it (sudo modprobe nvidia), or pick a GPU from the catalog."
        )
    if isinstance(exc, nvml.NVMLError_LibRmVersionMismatch):
        return (
            "The NVIDIA driver library and kernel module have different versions, usually after a "
            "driver update. Reboot to finish the update."
        )
    if isinstance(exc, nvml.NVMLError_NoPermission):
        return "This user may not query the NVIDIA driver (insufficient permissions)."
    return f"Could not query the NVIDIA driver: {_text(exc)}. Pick a GPU from the catalog."


class NvmlProbe:
    """Reads :class:`GpuSnapshot` objects from NVML; safe to call from a worker thread.

    NVML is initialised on the first :meth:`snapshot` (never at import) and stays initialised
    until :meth:`close`, which shuts it down once. A failed initialisation is retried on the next
    snapshot, so a driver loaded later is picked up by the next refresh.

    Args:
        nvml: a module with pynvml's functions; None imports ``pynvml`` on first use. Tests pass
            scripted fakes.
    """

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        self._nvml = nvml
        self._initialized = False
        self._lock = threading.Lock()

    def snapshot(self) -> GpuSnapshot:
        """The GPUs as they are now. Never raises."""
        with self._lock:
            try:
                return self._snapshot()
            except Exception as exc:  # A library bug must not take the app down with it.
                return GpuSnapshot(
                    reason=f"Reading the NVIDIA GPUs failed unexpectedly: {_text(exc)}"
                )

    def close(self) -> None:
        """Shut NVML down if this probe initialised it. Never raises; a later snapshot re-initialises."""
        with self._lock:
            if not self._initialized or self._nvml is None:
                return
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # Shutting down a driver that went away has nothing left to release.
                return

    def _snapshot(self) -> GpuSnapshot:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                return GpuSnapshot(
                    reason="The nvidia-ml-py package is missing, so local NVIDIA GPUs cannot be "
                    "read. Install it (pip install nvidia-ml-py), or pick a GPU from the catalog."
                )
            self._nvml = pynvml
        nvml = self._nvml
        if not self._initialized:
            try:
                nvml.nvmlInit()
            except Exception as exc:
                return GpuSnapshot(reason=_init_failure_reason(exc, nvml))
            self._initialized = True

        field = _Field(nvml)
        driver = field(lambda: _str(nvml.nvmlSystemGetDriverVersion()))
        cuda = field(lambda: _cuda_version(nvml))
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            return GpuSnapshot(
                driver_version=driver,
                cuda_version=cuda,
                reason=f"The NVIDIA driver did not list its GPUs: {_text(exc)}.",
            )
        if count == 0:
            return GpuSnapshot(
                driver_version=driver,
                cuda_version=cuda,
                reason="The NVIDIA driver reports no GPUs.",
            )
        gpus = tuple(_read_gpu(nvml, index) for index in range(count))
        broken = [gpu for gpu in gpus if gpu.error]
        reason = None
        if broken:
            reason = (
                "; ".join(f"GPU {gpu.index} could not be read ({gpu.error})" for gpu in broken)
                + "."
            )
        return GpuSnapshot(gpus=gpus, driver_version=driver, cuda_version=cuda, reason=reason)


def _cuda_version(nvml: Any) -> str:
    """The CUDA version the driver supports, as "12.4" (NVML encodes it as 12040)."""
    get = (
        getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None)
        or nvml.nvmlSystemGetCudaDriverVersion
    )
    version = int(get())
    return f"{version // 1000}.{version % 1000 // 10}"


def _read_gpu(nvml: Any, index: int) -> LocalGpu:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:
        return LocalGpu(
            index=index,
            name=None,
            uuid=None,
            total_bytes=None,
            free_bytes=None,
            used_bytes=None,
            reserved_bytes=None,
            processes=None,
            pcie_gen=None,
            pcie_width=None,
            mig_enabled=None,
            mig_instances=None,
            error=_text(exc),
        )
    field = _Field(nvml)
    name = field(lambda: _str(nvml.nvmlDeviceGetName(handle)))
    uuid = field(lambda: _str(nvml.nvmlDeviceGetUUID(handle)))
    memory = field(lambda: _memory(nvml, handle)) or (None, None, None, None)
    processes = field(lambda: _processes(nvml, handle))
    pcie_gen = field(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)))
    pcie_width = field(lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)))
    mig_enabled, mig_instances = _mig(nvml, handle, field)
    return LocalGpu(
        index=index,
        name=name,
        uuid=uuid,
        total_bytes=memory[0],
        free_bytes=memory[1],
        used_bytes=memory[2],
        reserved_bytes=memory[3],
        processes=processes,
        pcie_gen=pcie_gen,
        pcie_width=pcie_width,
        mig_enabled=mig_enabled,
        mig_instances=mig_instances,
        error=field.lost,
    )


def _memory(nvml: Any, handle: Any) -> tuple[int, int, int, int | None]:
    """(total, free, used, reserved) bytes: the v2 API where driver and binding have it, else v1.

    v1 counts the driver's reservation as used; v2 reports it apart, so ``used`` is what
    processes hold.
    """
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            return int(info.total), int(info.free), int(info.used), int(info.reserved)
        except (TypeError, AttributeError):
            pass  # an old binding without the version argument or the reserved field
        except (
            nvml.NVMLError_FunctionNotFound,
            nvml.NVMLError_NotSupported,
            nvml.NVMLError_ArgumentVersionMismatch,
        ):
            pass  # a driver without the v2 call
    info = nvml.nvmlDeviceGetMemoryInfo(handle)
    return int(info.total), int(info.free), int(info.used), None


def _processes(nvml: Any, handle: Any) -> tuple[GpuProcess, ...]:
    try:
        running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        # The unversioned call maps to _v3, which drivers older than R510 lack.
        fallback = getattr(nvml, "nvmlDeviceGetComputeRunningProcesses_v2", None)
        if fallback is None:
            raise
        running = fallback(handle)
    processes = []
    for proc in running:
        pid = int(proc.pid)
        used = getattr(proc, "usedGpuMemory", None)
        name = _Field(nvml)(partial(_process_name, nvml, pid))
        processes.append(
            GpuProcess(pid=pid, used_bytes=None if used is None else int(used), name=name)
        )
    return tuple(processes)


def _mig(
    nvml: Any, handle: Any, field: _Field
) -> tuple[bool | None, tuple[MigInstance, ...] | None]:
    """Whether MIG is on, and its devices. GPUs without MIG answer NotSupported: that is "off"."""
    try:
        current = nvml.nvmlDeviceGetMigMode(handle)[0]
    except nvml.NVMLError_NotSupported:
        return False, ()
    except Exception as exc:
        field.failed(exc)
        return None, None
    if current != nvml.NVML_DEVICE_MIG_ENABLE:
        return False, ()
    count = field(lambda: int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)))
    if count is None:
        return True, None
    instances = []
    for slot in range(count):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nvml.NVMLError_NotFound:
            continue  # an empty slot: fewer instances were created than the GPU allows
        except Exception as exc:
            instances.append(MigInstance(slot, None, None, None, None, None, error=_text(exc)))
            continue
        mig_field = _Field(nvml)
        memory = mig_field(partial(_memory, nvml, mig)) or (None, None, None, None)
        instances.append(
            MigInstance(
                index=slot,
                name=mig_field(partial(_device_text, nvml.nvmlDeviceGetName, mig)),
                uuid=mig_field(partial(_device_text, nvml.nvmlDeviceGetUUID, mig)),
                total_bytes=memory[0],
                free_bytes=memory[1],
                used_bytes=memory[2],
                error=mig_field.lost,
            )
        )
    return True, tuple(instances)
