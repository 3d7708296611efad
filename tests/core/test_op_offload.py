"""llama.cpp's op offload: experts kept in host memory are multiplied on the first GPU for
micro-batches of 32 tokens or more, each expert matrix copied into its compute buffer first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import llamacpp_buffers
from vramgui.core import activations, launch, llamacpp_mla, offload
from vramgui.core.families import spec_from_config
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.units import GiB, MiB
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find

Q4_8K = Workload(quant="Q4_K_M", engine="llamacpp", seq=8192)


def _spec(name: str):
    entry = find(name)
    assert entry is not None, name
    return spec_from_config(entry.config, name)


@pytest.fixture(scope="module")
def v3():
    return offload.llamacpp_model(_spec("deepseek-v3"), Q4_8K)


def test_the_mla_graph_holds_one_host_expert_copy_at_a_time():
    f = find("deepseek-v3").spec().facts
    ub, ctx = 512, 8192
    plain = llamacpp_mla.compute_buffer(f, ub, ctx, flash_attention=True)
    copy = 2000 * MiB
    moe = [il for il, m in enumerate(f.moe_layers) if m]
    one = llamacpp_mla.compute_buffer(
        f, ub, ctx, flash_attention=True, host_experts=((moe[0], (copy, copy, copy)),)
    )
    every = llamacpp_mla.compute_buffer(
        f, ub, ctx, flash_attention=True, host_experts=tuple((il, (copy,) * 3) for il in moe)
    )
    # The copy sits beside the block's activations (the experts' outputs at least), and the
    # buffer does not grow with the number of copies: each is freed after its product.
    k_h = f.experts_per_token * f.hidden_size * ub * 4
    assert one >= copy + k_h > plain
    assert every < one + 64 * MiB
    # A larger down matrix (Q6_K beside Q4_K gate / up) is the one that sizes the buffer.
    mixed = llamacpp_mla.compute_buffer(
        f, ub, ctx, flash_attention=True, host_experts=((moe[0], (copy, copy, 2 * copy)),)
    )
    assert mixed >= one + copy


def test_the_formula_adds_the_copy_moment_only_where_it_outgrows_the_others():
    f = find("qwen3-30b-a3b").spec().facts
    plain = activations.llamacpp_compute_buffer(f, 1, 4096)
    small = ((0, (10 * MiB, 10 * MiB, 10 * MiB)),)
    assert activations.llamacpp_compute_buffer(f, 1, 4096, host_experts=small) == plain
    big = ((0, (GiB, GiB, GiB)),)
    with_copy = activations.llamacpp_compute_buffer(f, 1, 4096, host_experts=big)
    # The copy beside the experts' outputs at least.
    assert with_copy >= GiB + 512 * 4 * f.experts_per_token * f.hidden_size
    # Below 32 tokens a micro-batch runs the host experts on the CPU: no copy.
    assert activations.llamacpp_compute_buffer(f, 1, 16, host_experts=big) == (
        activations.llamacpp_compute_buffer(f, 1, 16)
    )


def test_cpu_moe_puts_the_largest_expert_copy_in_the_gpu_compute_buffer(v3):
    on = v3.place(80 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(cpu_moe=True))
    off = v3.place(80 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(cpu_moe=True, op_offload=False))
    whole = v3.place(80 * GiB, n_gpu_layers=99)
    # Without op offload the experts run on the host: the buffer is the graph's alone.
    assert off.shares[0].buffers_bytes == whole.shares[0].buffers_bytes
    largest = max(
        p.bytes / 3
        for u in on.units
        for p in u.pieces
        if p.device == "cpu" and p.expert_bytes == p.bytes
    )
    assert on.shares[0].buffers_bytes > off.shares[0].buffers_bytes + 0.9 * largest
    assert any("op offload" in n for n in on.notes)
    assert not any("op offload" in n for n in off.notes)
    # The GPU memory counts it.
    grew = on.shares[0].buffers_bytes - off.shares[0].buffers_bytes
    assert on.gpu_bytes[0] - off.gpu_bytes[0] >= grew


def test_only_the_first_gpu_takes_the_host_experts(v3):
    layout = LlamaCppLayout(n_cpu_moe=30)
    two = v3.place([80 * GiB, 80 * GiB], n_gpu_layers=99, layout=layout)
    plain = v3.place(
        [80 * GiB, 80 * GiB], n_gpu_layers=99, layout=LlamaCppLayout(n_cpu_moe=30, op_offload=False)
    )
    assert two.shares[0].buffers_bytes > plain.shares[0].buffers_bytes + GiB
    assert two.shares[1].buffers_bytes == plain.shares[1].buffers_bytes


def test_no_op_offload_is_on_the_launch_line_and_slows_prompt_processing(v3):
    spec = _spec("deepseek-v3")
    layout = LlamaCppLayout(cpu_moe=True, op_offload=False)
    off = v3.place(80 * GiB, n_gpu_layers=99, layout=layout)
    on = v3.place(80 * GiB, n_gpu_layers=99, layout=LlamaCppLayout(cpu_moe=True))
    assert "--no-op-offload" in launch.llamacpp_settings(spec, off).text
    assert "--no-op-offload" not in launch.llamacpp_settings(spec, on).text
    bw = offload.Bandwidths(288e9, 25e9, 53.76e9, 3.5e9, 25.4e12, 0.5e12)
    assert offload.prefill_seconds(off, bw, 4096) != offload.prefill_seconds(on, bw, 4096)


# llama.cpp's own accounting with op offload: the cases with host experts, on RPC devices given
# ggml-cuda's offload_op (benchmarks/llamacpp_buffers.py --op-offload).
DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
RECORDED = json.loads((DATA / "llamacpp_op_offload.json").read_text())
WITHOUT = {r["case"]: r for r in json.loads((DATA / "llamacpp_buffers.json").read_text())}
CASES = {c.name: c for c in llamacpp_buffers.OP_OFFLOAD_CASES}
F16 = [r for r in RECORDED if r["quant"] is None]


def _estimate(tmp_path: Path, name: str) -> llamacpp_buffers.Buffers:
    case = CASES[name]
    return llamacpp_buffers.estimate_for(llamacpp_buffers.header_spec(tmp_path, case), case)


def test_every_op_offload_case_was_recorded():
    assert {r["case"] for r in RECORDED} == set(CASES)
    assert all(CASES[name].op_offload for name in CASES)


@pytest.mark.parametrize("record", F16, ids=[r["case"] for r in F16])
def test_the_gpu_buffers_with_host_expert_copies_match_llama_cpp(tmp_path, record):
    estimated = _estimate(tmp_path, record["case"])
    mla = record["model"].startswith("deepseek2")
    for row in record["rows"]:
        kind, device, measured = row["kind"], row["device"], row["measured_bytes"]
        table = {"model": estimated.model, "KV": estimated.kv, "compute": estimated.compute}[kind]
        got = table.get(device, 0)
        if kind != "compute":
            assert got == pytest.approx(measured, rel=0.001), (kind, device)
        elif mla:
            # The graph walked through the allocator, copies included: exact to the 0.01 MiB
            # llama.cpp prints.
            assert abs(got - measured) <= 0.005 * MiB, device
        else:
            assert got == pytest.approx(measured, rel=0.04), device


def test_the_copies_are_what_grows_the_buffer():
    # The same loads without op offload (llamacpp_buffers.json): where a copy outgrows the
    # logits, llama.cpp's buffer more than doubles.
    grown = 0
    for record in F16:
        before = WITHOUT[record["case"].removesuffix(", op offload")]
        old = {(r["kind"], r["device"]): r["measured_bytes"] for r in before["rows"]}
        for row in record["rows"]:
            if (
                row["kind"] == "compute"
                and row["measured_bytes"] > 1.8 * old[("compute", row["device"])]
            ):
                grown += 1
    assert grown >= 2
