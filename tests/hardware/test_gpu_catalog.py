"""The bundled GPU catalog: every entry valid, names unique, tolerant and strict matching."""

import json
import re

import pytest

from vramgui.core.units import GiB, MiB
from vramgui.hardware.errors import HardwareError
from vramgui.hardware.gpus import CatalogGpu, find_gpu, load_catalog, parse_catalog

REQUIRED_NAMES = [
    "H200 SXM", "H100 SXM", "H100 PCIe", "A100 SXM 40GB", "A100 SXM 80GB", "L40S", "L4", "A10", "T4",
    "V100 SXM2 16GB", "V100 SXM2 32GB", "RTX 6000 Ada", "RTX A6000", "RTX 5090", "RTX 4090", "RTX 4080",
    "RTX 4070 Ti", "RTX 4060 Ti 16GB", "RTX 3090", "RTX 3080 10GB", "RTX 3060 12GB",
    "Apple M2 Ultra 192GB", "Apple M3 Max 128GB", "Apple M4 Max 128GB",
    "Instinct MI300X", "Instinct MI250", "Radeon RX 7900 XTX",
]  # fmt: skip
# The cards people own and rent in 2026 (issue 38): each with a dated price and its source.
CARDS_2026 = [
    "RTX 5080", "RTX 5070 Ti", "RTX 5070", "RTX 5060 Ti 16GB", "RTX PRO 6000 Blackwell", "DGX Spark",
    "Ryzen AI Max+ 395 128GB", "Apple M3 Ultra 512GB", "Apple M4 Pro 64GB", "H20", "GH200 96GB",
    "B300", "Instinct MI325X", "Instinct MI355X", "Arc Pro B60", "RTX 3090 Ti", "RTX 4070 Ti Super",
    "RTX 4080 Super", "RTX 2080 Ti", "A40", "RTX A5000", "L20", "Jetson AGX Orin 64GB",
    "Jetson AGX Thor",
]  # fmt: skip
# No public rental rate or list price was found for these; their notes say so.
NO_PRICE_FOUND = {"Instinct MI355X", "L20"}
# Unified memory: the GPU may use a share of it, said in the entry's note.
UNIFIED = {
    "DGX Spark", "Ryzen AI Max+ 395 128GB", "Apple M3 Ultra 512GB", "Apple M4 Pro 64GB",
    "Jetson AGX Orin 64GB", "Jetson AGX Thor",
}  # fmt: skip


def test_catalog_has_the_gpus_people_ask_about():
    names = [gpu.name for gpu in load_catalog()]
    assert set(REQUIRED_NAMES) <= set(names)
    assert set(CARDS_2026) <= set(names)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("gpu", load_catalog(), ids=lambda gpu: gpu.name)
def test_every_entry_is_plausible(gpu: CatalogGpu):
    assert gpu.vendor in {"NVIDIA", "AMD", "Apple", "Intel"}
    # Whole GiB: vendors' "GB" of GPU memory are binary units.
    assert gpu.memory_bytes % GiB == 0
    assert 8 * GiB <= gpu.memory_bytes <= 512 * GiB
    assert 0 < gpu.capacity_bytes() <= gpu.memory_bytes
    if gpu.nvml_total_bytes is not None:
        # NVML's total: whole MiB, at most the marketed size, less at most ECC's sixteenth and
        # the driver's reserve; read from a cited nvidia-smi output.
        assert gpu.nvml and gpu.nvml_total_bytes % MiB == 0
        assert gpu.memory_bytes * 15 / 16 - 16 * MiB <= gpu.nvml_total_bytes <= gpu.memory_bytes
        assert (gpu.nvml_total_source or "").startswith("https://")
    assert 100 <= gpu.memory_bandwidth_gbps <= 10_000
    # Apple's GPUs have no tensor cores: their 16-bit rate is the ALU peak, a few TFLOPS.
    least = 5 if gpu.vendor == "Apple" else 10
    for tflops in (gpu.fp16_tflops, gpu.bf16_tflops, gpu.fp8_tflops):
        assert tflops is None or least <= tflops <= 10_000
    if gpu.fp8_tflops is not None and gpu.bf16_tflops is not None:
        assert gpu.fp8_tflops == pytest.approx(
            2 * gpu.bf16_tflops, rel=0.03
        )  # fp8 runs at twice bf16
    assert gpu.pcie_gen is None or 3 <= gpu.pcie_gen <= 6
    assert gpu.typical_price_usd is None or 100 <= gpu.typical_price_usd <= 100_000
    assert gpu.sources
    assert all(source.startswith("https://") for source in gpu.sources)
    assert gpu.interconnect


def test_non_nvidia_entries_are_flagged_as_not_nvml():
    for gpu in load_catalog():
        if gpu.nvml:
            assert gpu.vendor == "NVIDIA", gpu.name
        elif gpu.vendor == "NVIDIA":
            # NVML reports no memory for NVIDIA's unified-memory systems (GB10, Jetson)
            assert gpu.name in UNIFIED and "NVML" in (gpu.notes or ""), gpu.name


@pytest.mark.parametrize("name", CARDS_2026)
def test_every_2026_card_has_every_figure_and_a_dated_price(name):
    gpu = find_gpu(name)
    assert gpu.name == name
    assert gpu.memory_bytes and gpu.memory_bandwidth_gbps and gpu.architecture and gpu.interconnect
    assert gpu.sources and all(source.startswith("https://") for source in gpu.sources)
    if gpu.vendor == "Apple":
        # no tensor cores: the ALU's 16-bit peak, with how it was read; no bf16 rate
        assert gpu.fp16_tflops and gpu.bf16_tflops is None and "ALU peak" in (gpu.notes or "")
    elif name != "Jetson AGX Thor":
        assert gpu.fp16_tflops and (gpu.bf16_tflops or gpu.architecture == "Turing")
    else:
        # the Thor publishes no dense 16-bit rate: no speed, said in the note
        assert gpu.bf16_tflops is None and "no" in (gpu.notes or "").lower()
    date = re.compile(r"^20\d\d-[01]\d-[0-3]\d$")
    if gpu.rent_usd_per_hour is not None:
        assert 0.1 <= gpu.rent_usd_per_hour <= 20
        assert (gpu.rent_source or "").startswith("https://") and date.match(gpu.rent_date or "")
    elif gpu.typical_price_usd is not None:
        # a street, list or launch price, labelled as such
        assert gpu.price_kind and (gpu.price_source or "").startswith("https://")
        assert date.match(gpu.price_date or "")
    elif gpu.price_kind:
        # only another configuration's price was found: given, labelled, never ranked
        assert gpu.price_kind.startswith("not this configuration's") and "$" in gpu.price_kind
        assert (gpu.price_source or "").startswith("https://") and date.match(gpu.price_date or "")
    else:
        assert name in NO_PRICE_FOUND
        assert re.search(r"No (public|dated) rental rate or list price was found", gpu.notes or "")


@pytest.mark.parametrize("name", sorted(UNIFIED))
def test_unified_memory_counts_the_gpu_share_only(name):
    gpu = find_gpu(name)
    assert gpu.interconnect.startswith("unified memory") and gpu.pcie_gen is None
    # the note names the limit and where it comes from
    assert gpu.usable_memory_bytes is not None and gpu.capacity_bytes() < gpu.memory_bytes
    assert re.search(r"recommendedMaxWorkingSetSize|GTT|gpu-memory-utilization", gpu.notes or "")


def test_apple_gpus_refuse_the_cuda_servers():
    from vramgui.hardware.gpus import engine_notes

    for gpu in load_catalog():
        engines = dict(gpu.engines_unavailable)
        assert set(engines) == ({"vllm", "sglang"} if gpu.vendor == "Apple" else set()), gpu.name
    (note,) = engine_notes("vllm", ["M3 Ultra", "RTX 4090"])
    assert note.startswith("vLLM does not run on Apple M3 Ultra 512GB: vLLM has no Metal backend")
    assert engine_notes("llamacpp", ["M3 Ultra"]) == []


def test_figures_of_well_known_cards():
    rtx4090 = find_gpu("RTX 4090")
    assert rtx4090.memory_bytes == 25769803776
    # a local RTX 4090 reports 24564 MiB to NVML: the catalog's is held against the same
    assert rtx4090.capacity_bytes() == 24564 * MiB
    # ECC on an L4, A10, L40S or T4 keeps a sixteenth of its GDDR for check bits
    assert find_gpu("L4").capacity_bytes() == 23034 * MiB < 24 * GiB
    assert find_gpu("T4").capacity_bytes() == 15360 * MiB
    assert find_gpu("L40S").capacity_bytes() == 46068 * MiB
    assert find_gpu("A10").capacity_bytes() == 23028 * MiB
    # HBM's ECC costs no capacity: the PCIe H100 reports what the SXM one does
    assert find_gpu("H100 PCIe").capacity_bytes() == find_gpu("H100 SXM").capacity_bytes()
    assert find_gpu("H100 PCIe").capacity_bytes() == 81559 * MiB
    # workstation cards ship with ECC off: nearly the full 48 GiB, not the L40S's ECC-on 46068 MiB
    assert find_gpu("RTX A6000").capacity_bytes() == 49140 * MiB
    assert find_gpu("RTX 6000 Ada").capacity_bytes() == 49140 * MiB
    assert find_gpu("RTX 4060 Ti 16GB").capacity_bytes() == 16380 * MiB
    # no published output found: the marketed size
    assert find_gpu("RTX 4080").nvml_total_bytes is None
    assert find_gpu("RTX 4080").capacity_bytes() == 16 * GiB
    assert rtx4090.memory_bandwidth_bytes_per_s == 1_008_000_000_000
    assert find_gpu("H100 SXM").memory_bytes == 80 * GiB
    assert find_gpu("T4").bf16_tflops is None  # Turing has no bf16
    # Apple's GPU may wire only ~75% of unified memory by default.
    m2 = find_gpu("M2 Ultra")
    assert m2.capacity_bytes() == 144 * GiB < m2.memory_bytes


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("4090", "RTX 4090"),
        ("rtx 4090", "RTX 4090"),
        ("RTX-4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("H100", "H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("h100 pcie", "H100 PCIe"),
        ("A100 80GB", "A100 SXM 80GB"),
        ("a100 80 gb", "A100 SXM 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("4060 Ti", "RTX 4060 Ti 16GB"),
        ("4070 ti", "RTX 4070 Ti"),
        ("3080", "RTX 3080 10GB"),
        ("a6000", "RTX A6000"),
        ("RTX 6000", "RTX 6000 Ada"),
        ("Tesla T4", "T4"),
        ("A10", "A10"),
        ("mi300x", "Instinct MI300X"),
        ("7900 XTX", "Radeon RX 7900 XTX"),
        ("m4 max", "Apple M4 Max 128GB"),
        ("NVIDIA GeForce RTX 5070 Ti", "RTX 5070 Ti"),
        ("5070", "RTX 5070"),
        ("4070 Ti Super", "RTX 4070 Ti Super"),
        ("NVIDIA GeForce RTX 4080 SUPER", "RTX 4080 Super"),
        ("4080", "RTX 4080"),
        ("3090 Ti", "RTX 3090 Ti"),
        ("rtx pro 6000", "RTX PRO 6000 Blackwell"),
        ("GB10", "DGX Spark"),
        ("gh200", "GH200 96GB"),
        ("m3 ultra", "Apple M3 Ultra 512GB"),
        ("jetson thor", "Jetson AGX Thor"),
    ],
)
def test_find_gpu_is_tolerant(query, name):
    assert find_gpu(query).name == name


@pytest.mark.parametrize(
    ("query", "candidates"),
    [("A100", ["A100 SXM 40GB", "A100 SXM 80GB"]), ("V100", ["V100 SXM2 16GB", "V100 SXM2 32GB"])],
)
def test_ambiguous_names_list_the_candidates(query, candidates):
    with pytest.raises(HardwareError, match="ambiguous") as info:
        find_gpu(query)
    for candidate in candidates:
        assert candidate in str(info.value)


@pytest.mark.parametrize(
    ("query", "hint"),
    [("4070", "RTX 4070 Ti"), ("rtx 409", "RTX 4090"), ("GTX 1080", None), ("  ", None)],
)
def test_unknown_names_fail_with_a_hint(query, hint):
    with pytest.raises(HardwareError) as info:
        find_gpu(query)
    if hint:
        assert f"Did you mean '{hint}'" in str(info.value)
    # A suffix is part of the model: "4070" must not silently become the 4070 Ti.
    assert "ambiguous" not in str(info.value)


def _document(**overrides):
    entry = {
        "name": "Test GPU",
        "vendor": "NVIDIA",
        "memory_bytes": 8 * GiB,
        "memory_bandwidth_gbps": 500,
        "interconnect": "PCIe 4.0 x16",
        "nvml": True,
    }
    entry.update(overrides)
    return json.dumps({"format_version": 1, "gpus": [entry]})


def test_parse_accepts_a_minimal_entry():
    (gpu,) = parse_catalog(_document())
    assert gpu.bf16_tflops is None
    assert gpu.capacity_bytes(use_free=True) == 8 * GiB


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"gpus": "nope"}),
        _document(memory_bytes="24 GB"),
        _document(memory_bytes=True),
        _document(nvml_total_bytes="22 GB"),
        _document(nvml_total_bytes=9 * GiB),  # more than the card carries
        _document(nvml="yes"),
        _document(bf16_tflops="fast"),
        _document(aliases="4090"),
        _document(name=None),
    ],
)
def test_parse_rejects_malformed_catalogs(text):
    with pytest.raises(HardwareError):
        parse_catalog(text)


def test_parse_rejects_a_name_used_twice():
    entry = json.loads(_document())["gpus"][0]
    twin = {**entry, "name": "Other GPU", "aliases": ["test gpu"]}
    with pytest.raises(HardwareError, match="names both"):
        parse_catalog(json.dumps({"gpus": [entry, twin]}))


def test_each_nvidia_gpu_has_a_generation_the_estimate_knows():
    from vramgui.core.workload import GPU_ARCHS
    from vramgui.hardware.gpus import _ARCHITECTURES, architecture_of

    for gpu in load_catalog():
        arch = architecture_of(gpu.name)
        if gpu.vendor != "NVIDIA":
            assert arch == "auto", gpu.name
            continue
        assert arch in GPU_ARCHS, gpu.name
        # the product patterns, used for names the catalog lacks, agree with the catalog
        assert next(a for a, p in _ARCHITECTURES if p.search(gpu.name)) == arch, gpu.name
    for nvml_name, arch in (
        ("NVIDIA H100 80GB HBM3", "hopper"),
        ("NVIDIA A100-SXM4-80GB", "ampere"),
        ("NVIDIA GeForce RTX 4090", "ada"),
        ("Tesla V100-SXM2-16GB", "volta"),
        ("NVIDIA B200", "blackwell"),
        ("GPU 0: NVIDIA GeForce RTX 3090", "ampere"),
    ):
        assert architecture_of(nvml_name) == arch, nvml_name
