"""ggml's graph allocator as core/ggml_alloc.py walks it, and llama.cpp's MLA graph through it
(the measured buffers are held in test_llamacpp_buffers.py)."""

from __future__ import annotations

import dataclasses

from vramgui.core import activations, llamacpp_mla
from vramgui.core.ggml_alloc import Graph, Tensor, buffer_size
from vramgui.sources.catalog import find

U = 1 << 20  # one unit: 1 MiB of f32
W = Tensor("NONE", (1,), external=True)


def _t(op: str, units: int, *srcs: Tensor) -> Tensor:
    return Tensor(op, (units * U // 4,), 4, srcs)


def test_an_elementwise_op_writes_over_an_input_nothing_else_reads():
    x = Tensor("NONE", (U // 4,), is_input=True)
    a = _t("MUL_MAT", 1, W, x)
    b = _t("MUL", 1, a, W)  # in place on a
    c = _t("ADD", 1, b, x)  # in place on b
    g = Graph()
    g.expand(c)
    assert buffer_size(g, [x]) == 2 * U
    # The same ops out of place (a matrix product never runs in place): c2 goes where a was.
    b2 = _t("MUL_MAT", 1, W, a)
    c2 = _t("MUL_MAT", 1, b2, x)
    g2 = Graph()
    g2.expand(c2)
    assert buffer_size(g2, [x]) == 3 * U


def test_a_tensor_too_large_for_the_freed_hole_goes_to_the_end():
    x = Tensor("NONE", (U // 4,), is_input=True)
    a = _t("MUL_MAT", 1, W, x)
    b = _t("MUL_MAT", 1, W, a)  # a is freed after b: a 1-unit hole at offset 1
    c = Tensor("MUL_MAT", (2 * U // 4,), 4, (b, x))
    g = Graph()
    g.expand(c)
    # x, b and c are alive at the end (4 units), but c sits past the hole: 5 units.
    assert buffer_size(g, [x]) == 5 * U


def test_an_output_is_never_freed():
    def run(output: bool) -> int:
        x = Tensor("NONE", (U // 4,), is_input=True)
        o = _t("MUL_MAT", 1, W, x)
        o.is_output = output
        p = _t("MUL_MAT", 1, W, o)
        q = _t("MUL_MAT", 1, W, p)  # p goes where x was, q where o was unless o is an output
        g = Graph()
        g.expand(q)
        return buffer_size(g, [x])

    assert run(False) == 2 * U
    assert run(True) == 3 * U


def test_a_view_keeps_its_base_alive_until_its_last_reader():
    x = Tensor("NONE", (U // 4,), is_input=True)
    a = _t("MUL_MAT", 2, W, x)
    view = Tensor("VIEW", (U // 4,), 4, (a,), view_of=a)
    b = _t("MUL_MAT", 1, W, x)  # a is still read through the view: b goes after it
    c = Tensor("MUL_MAT", (U // 4,), 4, (view, b))  # where x was
    g = Graph()
    g.expand(c)
    assert buffer_size(g, [x]) == 4 * U


def test_the_mla_graph_holds_every_heads_scores_without_flash_attention():
    facts = find("deepseek-v3").spec().facts
    ub, ctx = 512, 16384
    scores = facts.num_heads * ub * ctx * 4
    no_fa = llamacpp_mla.compute_buffer(facts, ub, ctx, flash_attention=False)
    fa = llamacpp_mla.compute_buffer(facts, ub, ctx, flash_attention=True)
    # The scores, their f32 mask and the cached latent copied out transposed, at least.
    assert scores + ub * ctx * 4 + ctx * facts.kv_lora_rank * 2 < no_fa < 1.2 * scores
    # The logits of every token of the micro-batch, beside the final hidden state, at least.
    assert fa > ub * (facts.vocab_size + facts.hidden_size) * 4


def test_the_mla_graph_runs_without_a_query_rank_or_experts():
    lite = find("deepseek-v2-lite").spec().facts
    assert lite.q_lora_rank is None
    with_experts = llamacpp_mla.compute_buffer(lite, 512, 4096, flash_attention=True)
    dense = dataclasses.replace(
        lite, num_experts=0, experts_per_token=0, moe_layers=(False,) * lite.num_layers
    )
    assert llamacpp_mla.compute_buffer(dense, 512, 4096, flash_attention=True) > 0
    assert with_experts > 512 * lite.vocab_size * 4


def test_llama_cpp_s_compute_buffer_walks_each_gpu_s_part_of_the_mla_graph():
    facts = find("deepseek-v3").spec().facts
    ub, ctx = 512, 8192
    whole = activations.llamacpp_compute_buffer(facts, 1, ctx)
    assert whole == llamacpp_mla.compute_buffer(facts, ub, ctx, flash_attention=True)
    part = activations.llamacpp_compute_buffer(facts, 1, ctx, output=False, blocks=(0, 30))
    assert part == llamacpp_mla.compute_buffer(
        facts, ub, ctx, flash_attention=True, blocks=(0, 30), output=False
    )
    assert 0 < part != whole
    # Pipelined over several GPUs, four copies of what the GPU receives stay for the whole graph:
    # the positions, cache slots and mask three times more at least.
    piped = activations.llamacpp_compute_buffer(
        facts, 1, ctx, output=False, blocks=(0, 30), pipeline_copies=4
    )
    assert piped >= part + 3 * (ub * 4 + ub * 8 + ctx * ub * 2)
