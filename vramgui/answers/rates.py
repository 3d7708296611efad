"""What timing and pricing work on one GPU model needs: its catalog entry, its speeds as the
speed model sees them, the price of a GPU-hour and the utilization it is timed with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vramgui.core.engines import engine
from vramgui.core.errors import WorkloadError
from vramgui.core.speed import ATTENTION_SHARE, Hardware, Price, Utilization
from vramgui.core.workload import Workload
from vramgui.hardware.errors import HardwareError
from vramgui.hardware.gpus import CatalogGpu, find_gpu
from vramgui.hardware.rates import rental_price, speed_hardware


@dataclass(frozen=True, slots=True)
class Rates:
    """One GPU model's figures for timing and pricing.

    Attributes:
        gpu: the catalog entry (its bandwidths time an offload plan).
        hardware: the GPU as ``core.speed`` sees it.
        price: one GPU-hour's price (the catalog's, or the user's), or None.
        utilization: the shares of peak to time with (a measured one where there is one).
    """

    gpu: CatalogGpu
    hardware: Hardware
    price: Price | None
    utilization: Utilization


@dataclass(frozen=True, slots=True)
class NoRates(Exception):
    """A GPU that cannot be timed: ``gpu`` as named, and why (``reason``)."""

    gpu: str
    reason: str

    def __str__(self) -> str:
        return self.reason


# (GPU name, compute dtype) -> its rates, or None where the GPU cannot be timed.
RatesFor = Callable[[str, str], "Rates | None"]


def timing_dtype(workload: Workload) -> str:
    """The dtype ``workload`` is timed at: its engine's products' (llama.cpp multiplies in
    fp16 whatever the checkpoint's dtype, so a GPU without bf16, a T4, still times it), else
    its own."""
    return engine(workload.engine).timing_dtype(workload.dtype)


def set_utilization(matmul: float, detail: str) -> Utilization:
    """The shares for a matrix-product utilization the user set (``detail`` says where).

    Raises:
        WorkloadError: a share outside (0, 1].
    """
    if not 0 < matmul <= 1:
        raise WorkloadError(f"the matrix-product utilization must be in (0, 1], got {matmul}")
    return Utilization(
        matmul=matmul, attention=matmul * ATTENTION_SHARE, source="set", detail=detail
    )


def rates_for(
    name: str,
    dtype: str,
    *,
    catalog: Sequence[CatalogGpu] | None = None,
    price: Price | None = None,
    utilization: Utilization | None = None,
    measured: Callable[[str], Utilization | None] = lambda _name: None,
) -> Rates:
    """The rates of GPU ``name`` (a local GPU by its NVML name) computing in ``dtype``: its
    datasheet peaks, ``price`` or the catalog's rental price, and ``utilization``, else the one
    ``measured`` on that GPU model, else its architecture's default.

    Raises:
        NoRates: the catalog does not know the GPU, or has no rate for it in ``dtype``.
    """
    gpus = None if catalog is None else tuple(catalog)
    try:
        # A card added by hand is known by its own name, never taken for another.
        own = next((g for g in gpus or () if g.name == name), None)
        gpu = own or find_gpu(name.split(": ", 1)[-1], gpus)
        hardware = speed_hardware(gpu, dtype)
    except HardwareError:
        raise NoRates(
            name, f"{name} is not in the GPU catalog (its peak rates are unknown)"
        ) from None
    except WorkloadError as exc:
        raise NoRates(name, str(exc)) from None
    chosen = utilization or measured(gpu.name) or Utilization.default_for(gpu.architecture)
    return Rates(gpu, hardware, price if price is not None else rental_price(gpu), chosen)


def catalog_rates(
    catalog: Sequence[CatalogGpu] | Callable[[], Sequence[CatalogGpu]],
    measured: Callable[[str], Utilization | None] = lambda _name: None,
) -> RatesFor:
    """Rates for the GPUs of ``catalog``, None for a GPU that cannot be timed. ``catalog`` may
    be a function that gives the GPUs known now (the catalog and the cards added by hand)."""
    fixed = () if callable(catalog) else tuple(catalog)
    current = catalog if callable(catalog) else lambda: fixed

    def rates(name: str, dtype: str) -> Rates | None:
        try:
            return rates_for(name, dtype, catalog=tuple(current()), measured=measured)
        except NoRates:
            return None

    return rates
