"""The bundled GPU catalog (``resources/gpus.json``): what-if GPUs for fits and the speed model.

Names match tolerantly: "4090", "rtx 4090" and NVML's "NVIDIA GeForce RTX 4090" all find the same
entry. "H100" alone means the SXM part (the one cloud providers rent; both have 80 GB). A name that
fits several entries ("A100", "V100") is refused with the candidates rather than guessed.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from vramgui.core.errors import Command, Message
from vramgui.core.workload import ENGINE_NAMES
from vramgui.hardware.errors import CardFigureError, HardwareError
from vramgui.paths import bundled


@dataclass(frozen=True, slots=True)
class CatalogGpu:
    """One GPU model as its vendor specifies it.

    ``memory_bytes`` is the marketed capacity in binary units (a "24 GB" card is 24 GiB);
    ``nvml_total_bytes`` what NVML reports as its total where a published nvidia-smi output shows
    it (``nvml_total_source``: the driver's reserve, ECC's check bits on GDDR data-center cards);
    ``usable_memory_bytes`` is what one device can use where that is less (Apple's GPU wiring
    limit, one die of a two-die board). TFLOPS are dense tensor rates with FP32 accumulate; a
    None means the GPU lacks the format or the vendor publishes no figure. ``nvml`` is False for
    GPUs NVML cannot query (Apple, AMD, Intel, NVIDIA's unified-memory systems).
    ``price_kind``, ``price_source`` and ``price_date`` say what ``typical_price_usd`` is (a launch
    MSRP, a reported street price), where it was read and when. ``engines_unavailable`` names the
    engines that do not run on the GPU, each with why. ``memory_type`` is its memory ("HBM3",
    "GDDR6X", "LPDDR5"...; "" where unknown): llama.cpp's kernels reach different shares of
    HBM's and GDDR's bandwidth.
    """

    name: str
    vendor: str
    memory_bytes: int
    memory_bandwidth_gbps: float
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    interconnect: str
    pcie_gen: int | None
    typical_price_usd: int | None
    nvml: bool
    aliases: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    usable_memory_bytes: int | None = None
    notes: str | None = None
    interconnect_gbps: float | None = None
    rent_usd_per_hour: float | None = None
    rent_date: str | None = None
    rent_source: str | None = None
    architecture: str = ""
    nvml_total_bytes: int | None = None
    nvml_total_source: str | None = None
    price_kind: str | None = None
    price_source: str | None = None
    price_date: str | None = None
    engines_unavailable: tuple[tuple[str, str], ...] = ()
    memory_type: str = ""

    @property
    def memory_bandwidth_bytes_per_s(self) -> int:
        """Peak memory bandwidth in bytes per second."""
        return round(self.memory_bandwidth_gbps * 1e9)

    def capacity_bytes(self, use_free: bool = False) -> int:
        """Memory a fit check may count on for one device of this kind: what one device can use,
        else the total NVML reports (what a local GPU of this kind is held against), else the
        marketed size.

        ``use_free`` exists for symmetry with local GPUs; a catalog GPU is assumed empty.
        """
        del use_free
        for known in (self.usable_memory_bytes, self.nvml_total_bytes):
            if known is not None:
                return known
        return self.memory_bytes


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "vendor": str,
    "memory_bytes": int,
    "memory_bandwidth_gbps": (int, float),
    "interconnect": str,
    "nvml": bool,
}
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "fp16_tflops": (int, float),
    "bf16_tflops": (int, float),
    "fp8_tflops": (int, float),
    "pcie_gen": int,
    "typical_price_usd": int,
    "usable_memory_bytes": int,
    "notes": str,
    "interconnect_gbps": (int, float),
    "rent_usd_per_hour": (int, float),
    "rent_date": str,
    "rent_source": str,
    "architecture": str,
    "nvml_total_bytes": int,
    "nvml_total_source": str,
    "price_kind": str,
    "price_source": str,
    "price_date": str,
}


def _entry(raw: Any) -> CatalogGpu:
    if not isinstance(raw, dict):
        raise HardwareError(f"GPU catalog entry is not an object: {raw!r}")
    label = raw.get("name", raw)
    for key, kind in _REQUIRED.items():
        value = raw.get(key)
        # bool is an int subclass: a true/false memory size is a typo, not a size.
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise HardwareError(f"GPU catalog entry {label!r}: {key} is missing or not {kind}")
    for key, kind in _OPTIONAL.items():
        value = raw.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise HardwareError(f"GPU catalog entry {label!r}: {key} is not {kind}")
    if (raw.get("nvml_total_bytes") or 0) > raw["memory_bytes"]:
        raise HardwareError(f"GPU catalog entry {label!r}: nvml_total_bytes exceeds memory_bytes")
    engines = raw.get("engines_unavailable", {})
    if not isinstance(engines, dict) or not all(
        isinstance(key, str) and isinstance(why, str) for key, why in engines.items()
    ):
        raise HardwareError(f"GPU catalog entry {label!r}: engines_unavailable is not a mapping")
    lists = {key: raw.get(key, []) for key in ("aliases", "sources")}
    for key, value in lists.items():
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise HardwareError(f"GPU catalog entry {label!r}: {key} is not a list of strings")
    return CatalogGpu(
        name=raw["name"],
        vendor=raw["vendor"],
        memory_bytes=raw["memory_bytes"],
        memory_bandwidth_gbps=float(raw["memory_bandwidth_gbps"]),
        fp16_tflops=_float_or_none(raw.get("fp16_tflops")),
        bf16_tflops=_float_or_none(raw.get("bf16_tflops")),
        fp8_tflops=_float_or_none(raw.get("fp8_tflops")),
        interconnect=raw["interconnect"],
        pcie_gen=raw.get("pcie_gen"),
        typical_price_usd=raw.get("typical_price_usd"),
        nvml=raw["nvml"],
        aliases=tuple(lists["aliases"]),
        sources=tuple(lists["sources"]),
        usable_memory_bytes=raw.get("usable_memory_bytes"),
        notes=raw.get("notes"),
        interconnect_gbps=_float_or_none(raw.get("interconnect_gbps")),
        rent_usd_per_hour=_float_or_none(raw.get("rent_usd_per_hour")),
        rent_date=raw.get("rent_date"),
        rent_source=raw.get("rent_source"),
        architecture=raw.get("architecture") or "",
        nvml_total_bytes=raw.get("nvml_total_bytes"),
        nvml_total_source=raw.get("nvml_total_source"),
        price_kind=raw.get("price_kind"),
        price_source=raw.get("price_source"),
        price_date=raw.get("price_date"),
        engines_unavailable=tuple(engines.items()),
        memory_type=raw.get("memory_type") or "",
    )


def _float_or_none(value: int | float | None) -> float | None:
    return None if value is None else float(value)


def parse_catalog(text: str) -> tuple[CatalogGpu, ...]:
    """Parse the text of a GPU catalog file.

    Raises:
        HardwareError: the text is not a catalog (bad JSON, a wrong field, a repeated name).
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HardwareError(f"GPU catalog is not valid JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("gpus"), list):
        raise HardwareError("GPU catalog has no 'gpus' list")
    gpus = tuple(_entry(raw) for raw in document["gpus"])
    seen: dict[str, str] = {}
    for gpu in gpus:
        for key in (gpu.name, *gpu.aliases):
            normalized = " ".join(_tokens(key))
            if seen.setdefault(normalized, gpu.name) != gpu.name:
                raise HardwareError(
                    f"GPU catalog: {key!r} names both {seen[normalized]!r} and {gpu.name!r}"
                )
    return gpus


@functools.cache
def load_catalog() -> tuple[CatalogGpu, ...]:
    """The bundled GPU catalog, read once.

    Raises:
        HardwareError: the bundled file is malformed.
    """
    resource = bundled() / "gpus.json"
    return parse_catalog(resource.read_text(encoding="utf-8"))


# Words that vendors and NVML put around model names and that no one types to tell GPUs apart.
_NOISE = frozenset(
    {"nvidia", "geforce", "tesla", "amd", "radeon", "instinct", "apple", "generation"}
)


def _tokens(text: str) -> tuple[str, ...]:
    """Lower-case words of a GPU name, with "16 GB" as "16gb" and "4070 Ti" as "4070ti"."""
    text = re.sub(r"[-_/,()]", " ", text.lower())
    text = re.sub(r"\b(\d+)\s*(?:gib|gb|g)\b", r"\1gb", text)
    # A suffix makes another card ("4070" is not "4070 Ti", nor "4070 Ti" "4070 Ti Super"), so
    # the suffixes are glued to their number.
    text = re.sub(
        r"\b(\d{3,4})((?:\s+(?:ti|super|xtx|xt)\b)+)",
        lambda m: m.group(1) + m.group(2).replace(" ", ""),
        text,
    )
    return tuple(word for word in text.split() if word not in _NOISE)


def find_gpu(name: str, catalog: tuple[CatalogGpu, ...] | None = None) -> CatalogGpu:
    """The catalog GPU a person or NVML means by ``name``.

    An exact name or alias wins; otherwise the entries whose names contain every word typed
    ("4090" -> "RTX 4090"), which must be exactly one.

    Raises:
        HardwareError: no entry matches, or several do (the message lists them).
    """
    gpus = load_catalog() if catalog is None else catalog
    wanted = _tokens(name)
    if not wanted:
        raise HardwareError(f"not a GPU name: {name!r}")
    joined = " ".join(wanted)
    for gpu in gpus:
        if any(" ".join(_tokens(key)) == joined for key in (gpu.name, *gpu.aliases)):
            return gpu
    matches = [
        gpu
        for gpu in gpus
        if set(wanted) <= {word for key in (gpu.name, *gpu.aliases) for word in _tokens(key)}
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(gpu.name for gpu in matches)
        raise HardwareError(
            f"GPU {name!r} is ambiguous: it matches {names}. Use one of these names."
        )
    # "4070" names no entry, but it starts "4070 Ti": suggest by word prefix, then by spelling.
    # The shortest names first: they add the least to what was typed.
    suggestions = sorted(
        (
            gpu.name
            for gpu in gpus
            if all(any(word.startswith(w) for word in _tokens(gpu.name)) for w in wanted)
        ),
        key=len,
    )
    if not suggestions:
        by_key = {" ".join(_tokens(gpu.name)): gpu.name for gpu in gpus}
        suggestions = [by_key[key] for key in difflib.get_close_matches(joined, list(by_key), n=3)]
    hint = (" Did you mean " + " or ".join(map(repr, suggestions[:3])) + "?") if suggestions else ""
    raise HardwareError(
        Message(
            "unknown GPU {name!r}.{hint} {catalog} lists the known GPUs.",
            name=name,
            hint=hint,
            catalog=Command("gpus", "--catalog"),
        )
    )


# NVIDIA product names (catalog or NVML) to their generation, as ``core.workload.GPU_ARCHS``
# names them; the first pattern that matches wins.
_ARCHITECTURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "blackwell",
        re.compile(
            r"\b(?:gb?[12]\d0|b[123]\d0a?|gb10|dgx spark|jetson agx thor|rtx\s*50[5-9]0|"
            r"rtx pro \d+ blackwell|blackwell)\b",
            re.I,
        ),
    ),
    ("hopper", re.compile(r"\b(?:gh200|h[12]00|h[28]00|h20|hopper)\b", re.I)),
    ("ada", re.compile(r"\b(?:rtx\s*40\d0|l40s?|l4|l20|rtx\s*\d+\s*ada|ada)\b", re.I)),
    (
        "ampere",
        re.compile(
            r"\b(?:a100|a800|a40|a30|a16|a10g?|a2|rtx\s*a\d+|rtx\s*30\d0|jetson agx orin)\b", re.I
        ),
    ),
    ("turing", re.compile(r"\b(?:t4|rtx\s*20\d0|quadro rtx|titan rtx|gtx\s*16\d0)\b", re.I)),
    ("volta", re.compile(r"\b(?:v100|titan v)\b", re.I)),
)


def architecture_of(name: str) -> str:
    """The NVIDIA generation a GPU name belongs to ("hopper" for "H100 SXM" or NVML's "NVIDIA
    H100 80GB HBM3"), or "auto" where the name says none (another vendor, an unknown card).

    A catalog GPU's own ``architecture`` decides; a name the catalog does not know is read by
    the product patterns above.
    """
    try:
        gpu = find_gpu(name)
    except HardwareError:
        gpu = None
    if gpu is not None and gpu.vendor == "NVIDIA" and gpu.architecture:
        return gpu.architecture.split()[0].lower()
    for arch, pattern in _ARCHITECTURES:
        if pattern.search(name):
            return arch
    return "auto"


CUSTOM_VENDOR = "Custom"
# Bounds on what a person types for a card: far past any GPU sold, short of typing mistakes.
_CUSTOM_LIMITS = {"memory": 1 << 20, "bandwidth": 1e6, "tflops": 1e6}


def custom_gpu(
    memory_gib: float,
    bandwidth_gbps: float | None = None,
    tflops: float | None = None,
    name: str = "",
) -> CatalogGpu:
    """A card described by hand: its memory in GiB, its peak memory bandwidth in GB/s and,
    optionally, its dense 16-bit tensor TFLOPS and a name (default "Custom 20 GiB, 500 GB/s").

    The card is held to its whole memory (no driver reserve is known), and is timed only where
    it has a bandwidth and a tensor rate.

    Raises:
        CardFigureError: a figure that is not a positive number within reason (which one, in
            ``figure``).
    """
    for what, value in (("memory", memory_gib), ("bandwidth", bandwidth_gbps), ("tflops", tflops)):
        if value is not None and not 0 < value <= _CUSTOM_LIMITS[what]:
            raise CardFigureError(what, value)
    label = f"Custom {memory_gib:g} GiB" + (f", {bandwidth_gbps:g} GB/s" if bandwidth_gbps else "")
    return CatalogGpu(
        name=name.strip() or label,
        vendor=CUSTOM_VENDOR,
        memory_bytes=round(memory_gib * (1 << 30)),
        memory_bandwidth_gbps=float(bandwidth_gbps or 0),
        fp16_tflops=tflops,
        bf16_tflops=tflops,
        fp8_tflops=None,
        interconnect="unknown",
        pcie_gen=None,
        typical_price_usd=None,
        nvml=False,
        notes="Added by hand"
        + ("" if bandwidth_gbps else "; no bandwidth: no speed")
        + ("" if tflops else "; no tensor rate: no speed"),
    )


def engine_notes(engine: str, gpu_names: list[str] | tuple[str, ...]) -> list[str]:
    """Why ``engine`` cannot run on each of ``gpu_names`` the catalog knows it does not run on
    ("vLLM does not run on Apple M4 Max 128GB: ...")."""
    notes = []
    for name in dict.fromkeys(gpu_names):
        try:
            gpu = find_gpu(name)
        except HardwareError:
            continue
        why = dict(gpu.engines_unavailable).get(engine)
        if why:
            notes.append(f"{ENGINE_NAMES.get(engine, engine)} does not run on {gpu.name}: {why}.")
    return notes
