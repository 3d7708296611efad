"""The llama.cpp planner against llama.cpp's own accounting: the model, KV cache and compute
buffers it printed per device for small GGUFs of several architectures (recorded by
``benchmarks/llamacpp_buffers.py`` in benchmarks/data/llamacpp_buffers.json, with the build that
printed them). The GGUF headers are rebuilt here from the same definitions; no llama.cpp runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import llamacpp_buffers
from vramgui.core import activations
from vramgui.core.units import MiB
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llamacpp_buffers.json"
RECORDED = json.loads(DATA.read_text())
CASES = {c.name: c for c in llamacpp_buffers.CASES}
# Cases whose GGUF is quantized by llama-quantize: its types are the file's, not rebuilt here.
F16 = [r for r in RECORDED if r["quant"] is None]


def _estimate(tmp_path: Path, name: str) -> llamacpp_buffers.Buffers:
    case = CASES[name]
    return llamacpp_buffers.estimate_for(llamacpp_buffers.header_spec(tmp_path, case), case)


def test_every_case_of_the_benchmark_was_recorded():
    assert {r["case"] for r in RECORDED} == set(CASES)
    assert all(r["llama_cpp_build"] != "unknown" for r in RECORDED)
    assert len(F16) >= 15


@pytest.mark.parametrize("record", F16, ids=[r["case"] for r in F16])
def test_buffers_per_device_match_what_llama_cpp_printed(tmp_path, record):
    estimated = _estimate(tmp_path, record["case"])
    for row in record["rows"]:
        kind, device, measured = row["kind"], row["device"], row["measured_bytes"]
        table = {"model": estimated.model, "KV": estimated.kv, "compute": estimated.compute}[kind]
        got = table.get(device, 0)
        tolerance = 0.04 if kind == "compute" else 0.001
        assert got == pytest.approx(measured, rel=tolerance), (kind, device)


# MLA cases but --cpu-moe (the graph keeps the experts on the GPU, as CUDA runs them): the graph
# walked through ggml's allocator, on one device or several.
MLA = [r for r in F16 if r["model"].startswith("deepseek2") and not CASES[r["case"]].cpu_moe]


@pytest.mark.parametrize("record", MLA, ids=[r["case"] for r in MLA])
def test_the_mla_compute_buffer_is_that_of_its_graph(tmp_path, record):
    estimated = _estimate(tmp_path, record["case"])
    rows = [r for r in record["rows"] if r["kind"] == "compute"]
    assert rows
    for row in rows:
        # llama.cpp prints MiB to two decimals: the estimate is exact to that rounding.
        got = estimated.compute[row["device"]]
        assert abs(got - row["measured_bytes"]) <= 0.005 * MiB, row["device"]


def test_a_device_llama_cpp_left_empty_is_empty_in_the_estimate(tmp_path):
    # -ngl 6 of 9 on two devices: the host keeps the first three blocks and their cache.
    estimated = _estimate(tmp_path, "dense, 2 devices, -ngl 6")
    assert estimated.kv["cpu"] > 0 and estimated.model["cpu"] > estimated.model["gpu:0"] // 2


def test_a_published_micro_batch_of_1024_sizes_the_block_gpus_buffers():
    """llama.cpp build 5331 (33eff402), DeepSeek-V3-0324 UD-Q2_K_XL over four GPUs with -ngl 99,
    -c 16384, -fa, -ub 1024 and the routed experts of each GPU's layers overridden to it or to
    the CPU: "CUDA1 compute buffer size = 788.00 MiB", CUDA2 788.00, CUDA3 788.01 (the GPUs
    running blocks without the output layer; ikawrakow/ik_llama.cpp pull request 394, comment of
    2025-05-10). The first GPU's 3,285 MiB holds the copies of host experts, from the file's own
    types, which this test does not rebuild."""
    facts = find("deepseek-v3").spec().facts
    w = Workload(engine="llamacpp", seq=16384, ubatch_size=1024)
    for blocks in ((12, 17), (17, 27), (27, 61)):
        buffer = activations.llamacpp_compute_buffer(
            facts,
            w.batch,
            w.seq,
            flash_attention=activations.llamacpp_flash_attention(w),
            ubatch=activations.llamacpp_ubatch(w),
            output=False,
            blocks=blocks,
        )
        assert buffer / MiB == pytest.approx(788.0, abs=0.02)
