"""The speed model calibrated on the user's GPU: the share of peak measured steps imply, kept
per GPU model and used by every estimate for that GPU from then on.

`vramgui measure --device cuda` times the steps and stores the result here; the window and
`vramgui estimate` read it. A calibration is the matrix-product utilization at which ``core.speed`` reproduces the tokens per
second a timed run reached (``timing.py``), found by bisection (the throughput rises with it). A
run whose step the model says is bound by kernel launches or memory traffic is refused: its
speed says little of the products' share.

The store is one JSON file in the user data folder (``calibration.json``): a format name and
version, and one entry per catalog GPU name, the latest run winning. It is written whole or not
at all and read tolerantly: a file that cannot be read is reported once and ignored, never
overwritten until a new calibration is stored.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vramgui.core.errors import VramguiError
from vramgui.core.model import ModelSpec
from vramgui.core.speed import (
    ATTENTION,
    ATTENTION_SHARE,
    MATMUL,
    Hardware,
    Utilization,
    training_speed,
)
from vramgui.core.workload import Workload
from vramgui.files import read_regular, write_atomic
from vramgui.hardware.errors import HardwareError
from vramgui.paths import user_dir

log = logging.getLogger(__name__)

FORMAT = "vramgui.calibration"
FORMAT_VERSION = 1
FILE_NAME = "calibration.json"
MAX_FILE_BYTES = 4 * 1024 * 1024
# The bisection's range and how close it gets.
LOWEST, HIGHEST = 0.02, 1.0
TOLERANCE = 1e-4


@dataclass(frozen=True, slots=True)
class Calibration:
    """One GPU model's measured utilization.

    Attributes:
        gpu: the catalog GPU's name.
        matmul: the share of the 16-bit tensor peak the products reached.
        measured_tokens_per_second: what the timed steps trained.
        default_tokens_per_second: what the default utilization predicted for the same run.
        model: the model the run trained.
        settings: the run's estimate options.
        device: the device's own name (PyTorch's).
        date: when (ISO 8601, UTC).
    """

    gpu: str
    matmul: float
    measured_tokens_per_second: float
    default_tokens_per_second: float
    model: str
    settings: dict[str, Any]
    device: str
    date: str

    def utilization(self) -> Utilization:
        """The utilization estimates for this GPU use from now on."""
        day = self.date[:10]
        return Utilization(
            matmul=self.matmul,
            attention=min(1.0, self.matmul * ATTENTION_SHARE),
            source="measured",
            detail=f"{self.device}, {self.model}, {day}",
        )


def solve_matmul(
    spec: ModelSpec, workload: Workload, hardware: Hardware, tokens_per_second: float
) -> float:
    """The matrix-product share at which the speed model trains ``tokens_per_second``.

    Raises:
        HardwareError: the run cannot calibrate: bound by launches or memory, or faster than
            the GPU's peak allows.
    """

    def speed(matmul: float) -> float:
        u = Utilization(
            matmul=matmul, attention=min(1.0, matmul * ATTENTION_SHARE), source="measured"
        )
        return training_speed(spec, workload, hardware, u).tokens_per_second

    if speed(HIGHEST) < tokens_per_second:
        raise HardwareError(
            f"the run trained {tokens_per_second:,.0f} tokens/s, faster than the speed model "
            f"allows at {hardware.name}'s peak ({speed(HIGHEST):,.0f}): not stored"
        )
    low, high = LOWEST, HIGHEST
    if speed(low) >= tokens_per_second:
        high = low
    while high - low > TOLERANCE:
        middle = (low + high) / 2
        if speed(middle) < tokens_per_second:
            low = middle
        else:
            high = middle
    # The products must bound the step, at the share found and at the default: where launches or
    # memory traffic do, any share would do as well.
    solved = Utilization(matmul=high, attention=min(1.0, high * ATTENTION_SHARE))
    bounds = {
        training_speed(spec, workload, hardware, solved).bound,
        training_speed(spec, workload, hardware).bound,
    }
    bound = next((b for b in bounds if b not in (MATMUL, ATTENTION)), None)
    if bound is not None:
        raise HardwareError(
            f"the measured step is bound by {bound.replace('_', ' ')}, not by the GPU's "
            "products, so its speed does not measure them: calibrate with a larger batch, "
            "sequence or model (not stored)"
        )
    return high


def calibrate(
    spec: ModelSpec,
    workload: Workload,
    hardware: Hardware,
    *,
    tokens_per_second: float,
    device: str,
    now: dt.datetime | None = None,
) -> Calibration:
    """The calibration a timed run on ``hardware`` gives.

    Raises:
        HardwareError: the run cannot calibrate (see ``solve_matmul``).
    """
    default = training_speed(spec, workload, hardware).tokens_per_second
    matmul = solve_matmul(spec, workload, hardware, tokens_per_second)
    when = (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
    return Calibration(
        gpu=hardware.name,
        matmul=round(matmul, 4),
        measured_tokens_per_second=round(tokens_per_second, 1),
        default_tokens_per_second=round(default, 1),
        model=spec.name,
        settings=workload.to_dict(),
        device=device,
        date=when,
    )


def store_path() -> Path:
    """Where calibrations are kept (the user data folder; tests redirect it)."""
    return user_dir("data", create=False) / FILE_NAME


def load(path: Path | None = None) -> dict[str, Calibration]:
    """Every stored calibration by catalog GPU name; {} when there is none or the file is
    unreadable (logged, left as it is)."""
    path = store_path() if path is None else path
    try:
        raw = json.loads(read_regular(path, MAX_FILE_BYTES))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("The GPU calibrations in %s cannot be read (%s); defaults are used", path, exc)
        return {}
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        log.warning("%s is not a vramgui calibration file; defaults are used", path)
        return {}
    out = {}
    for name, entry in (raw.get("gpus") or {}).items():
        try:
            calibration = Calibration(**entry)
            calibration.utilization()  # a share out of (0, 1] is refused here
        except (TypeError, ValueError, ArithmeticError, VramguiError) as exc:
            log.warning("Calibration of %s in %s ignored: %s", name, path, exc)
            continue
        out[name] = calibration
    return out


def save(calibration: Calibration, path: Path | None = None) -> Path:
    """Store ``calibration`` for its GPU, replacing that GPU's earlier one; the others stay.

    An unreadable store is not overwritten.

    Raises:
        HardwareError: the store cannot be written, or is there but cannot be read.
    """
    path = store_path() if path is None else path
    if path.exists() and not load(path) and path.stat().st_size:
        raise HardwareError(
            f"{path} is there but cannot be read as calibrations; move it away to store new ones"
        )
    entries = {name: asdict(c) for name, c in load(path).items()}
    entries[calibration.gpu] = asdict(calibration)
    document = {"format": FORMAT, "format_version": FORMAT_VERSION, "gpus": entries}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(document, indent=2) + "\n").encode())
    except OSError as exc:
        raise HardwareError(f"cannot store the calibration in {path}: {exc}") from None
    return path


def measured_utilization(gpu: str, path: Path | None = None) -> Utilization | None:
    """The utilization measured on catalog GPU ``gpu``, or None."""
    calibration = load(path).get(gpu)
    return None if calibration is None else calibration.utilization()
