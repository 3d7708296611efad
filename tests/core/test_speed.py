"""The training speed model (core/speed.py, core/training/work.py): what it counts, how setups
compare, time and cost.

Accuracy against published measurements is benchmarks/throughput.py's job; these tests check the
arithmetic and the directions every setting must move the figure in.
"""

import dataclasses
import math

import pytest

from tests.configs import LLAMA
from vramgui.core import serving_speed, speed
from vramgui.core.errors import WorkloadError
from vramgui.core.families import spec_from_config
from vramgui.core.training import work
from vramgui.core.workload import Workload

A100 = speed.Hardware(
    name="A100 SXM 80GB", flops=312e12, memory_bytes_per_s=2039e9, link_bytes_per_s=300e9,
    pcie_bytes_per_s=25e9, architecture="Ampere",
)  # fmt: skip
PCIE_A100 = speed.Hardware(
    name="A100 on PCIe", flops=312e12, memory_bytes_per_s=2039e9, link_bytes_per_s=32e9,
    pcie_bytes_per_s=25e9, architecture="Ampere",
)  # fmt: skip


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(LLAMA, "llama-7b")


def training(**changes):
    base = {"mode": "training", "batch": 4, "seq": 2048, "attention": "flash"}
    return Workload(**{**base, **changes})


def test_full_fine_tune_counts_six_flops_per_weight_and_lora_four(spec):
    weights = sum(t.numel for t in spec.tensors if t.is_matrix)
    full = work.model_flops_per_token(spec, training(method="full"))
    lora = work.model_flops_per_token(spec, training(method="lora", precision="pure"))
    attention = full - 6 * weights
    # Causal attention at 2,048 tokens: ~3.5 forwards of 4 x layers x hidden x 1,024 FLOPs.
    assert attention == pytest.approx(3.5 * 4 * 32 * 4096 * 1024.5, rel=1e-6)
    adapters = lora - 4 * weights - attention
    # rank 16 on q, k, v, o: A (16 x 4096) and B (4096 x 16), six FLOPs per weight
    assert adapters == pytest.approx(6 * 16 * (4096 + 4096) * 4 * 32)


def test_checkpointing_recomputes_the_forward_and_slows_the_step(spec):
    plain = speed.training_speed(spec, training(), A100)
    checkpointed = speed.training_speed(spec, training(grad_checkpointing=True), A100)
    ratio = checkpointed.step_seconds / plain.step_seconds
    assert 1.2 < ratio < 1.4  # one forward more on top of forward + backward (~3 forwards)
    assert checkpointed.mfu < plain.mfu  # same model FLOPs, more time


def test_lora_is_faster_than_a_full_fine_tune_and_qlora_slower_than_lora(spec):
    full = speed.training_speed(spec, training(grad_checkpointing=True), A100)
    lora = speed.training_speed(
        spec, training(method="lora", precision="pure", grad_checkpointing=True), A100
    )
    qlora = speed.training_speed(
        spec, training(method="qlora", quant="nf4", grad_checkpointing=True), A100
    )
    assert full.tokens_per_second < qlora.tokens_per_second < lora.tokens_per_second


def test_dequantization_weighs_most_on_small_batches(spec):
    def slowdown(batch):
        w = training(batch=batch, seq=512, grad_checkpointing=True)
        lora = speed.training_speed(spec, w.with_(method="lora", precision="pure"), A100)
        qlora = speed.training_speed(spec, w.with_(method="qlora", quant="nf4"), A100)
        return qlora.step_seconds / lora.step_seconds

    assert slowdown(1) > slowdown(16) > 1.0


def test_tokens_per_step_and_throughput_follow_the_data_parallel_ranks(spec):
    lora = training(method="lora", precision="pure", grad_accum=2)
    one = speed.training_speed(spec, lora, A100)
    four = speed.training_speed(spec, lora.with_(gpus=4), A100)
    assert one.tokens_per_step == 4 * 2048 * 2
    assert four.tokens_per_step == 4 * one.tokens_per_step
    # LoRA's gradients are small: the all-reduce hides behind the backward.
    assert four.tokens_per_second == pytest.approx(4 * one.tokens_per_second, rel=0.01)
    assert four.tokens_per_second_per_gpu == pytest.approx(four.tokens_per_second / 4)


def test_fsdp_gathers_cost_time_over_pcie_not_over_nvlink(spec):
    w = training(gpus=8, fsdp=True, batch=1, seq=1024)
    nvlink = speed.training_speed(spec, w, A100)
    pcie = speed.training_speed(spec, w, PCIE_A100)
    assert speed.COMMUNICATION not in nvlink.seconds_by_part
    assert pcie.seconds_by_part[speed.COMMUNICATION] > 0
    assert pcie.tokens_per_second < nvlink.tokens_per_second


def test_many_gpus_span_machines_and_say_so(spec):
    w = training(gpus=16, zero=3, batch=1)
    result = speed.training_speed(spec, w, A100)
    assert any("span machines" in note for note in result.notes)


def test_tensor_parallelism_adds_its_all_reduces(spec):
    w = training(gpus=2, tp=2)
    result = speed.training_speed(spec, w, A100)
    assert result.seconds_by_part[speed.COMMUNICATION] > 0


def test_pipeline_bubble_shrinks_with_more_micro_batches(spec):
    few = speed.training_speed(spec, training(gpus=4, pp=4, grad_accum=4), A100)
    many = speed.training_speed(spec, training(gpus=4, pp=4, grad_accum=32), A100)
    assert few.seconds_by_part[speed.PIPELINE_BUBBLE] / few.step_seconds > (
        many.seconds_by_part[speed.PIPELINE_BUBBLE] / many.step_seconds
    )


def test_tiny_batches_are_bound_by_kernel_launches(spec):
    w = training(method="lora", precision="pure", lora_targets=("all-linear",), batch=1, seq=64)
    assert speed.training_speed(spec, w, A100).bound == speed.LAUNCH


def test_optimizer_step_of_a_full_fine_tune_is_memory_bound_work(spec):
    adamw = speed.training_speed(spec, training(), A100)
    fused = speed.training_speed(spec, training(optimizer="adamw-fused"), A100)
    assert fused.seconds_by_part[speed.OPTIMIZER] < adamw.seconds_by_part[speed.OPTIMIZER]
    trainable = spec.parameters
    expected = trainable * 4 * (speed.OPTIMIZER_PASSES["adamw"] + speed.CLIPPING_PASSES)
    assert adamw.seconds_by_part[speed.OPTIMIZER] == pytest.approx(
        expected / (A100.memory_bytes_per_s * speed.MEMORY_UTILIZATION)
    )


def test_utilization_defaults_follow_the_architecture():
    ampere = speed.Utilization.default_for("Ampere")
    assert ampere.matmul == speed.MATMUL_UTILIZATION_BY_ARCHITECTURE["Ampere"]
    assert ampere.source == "default"
    unknown = speed.Utilization.default_for("CDNA 3")
    assert unknown.source == "unmeasured"
    assert unknown.matmul == speed.UNMEASURED_MATMUL_UTILIZATION


def test_an_unmeasured_architecture_is_said_to_be_a_guess(spec):
    other = speed.Hardware("MI300X", 1307e12, 5300e9, 64e9, 25e9, architecture="CDNA 3")
    result = speed.training_speed(spec, training(), other)
    assert any("is a guess" in note and "CDNA 3" in note for note in result.notes)


def test_a_measured_utilization_scales_the_compute_shares_only():
    base = speed.Utilization.default_for("Ampere")
    faster = base.scaled(1.2, "measured", "A100 on 2026-01-02")
    assert faster.matmul == pytest.approx(base.matmul * 1.2)
    assert faster.attention == pytest.approx(base.attention * 1.2)
    assert faster.memory == base.memory
    assert base.scaled(5.0, "measured", "").matmul == 1.0  # never above the peak


@pytest.mark.parametrize(
    "field, value", [("matmul", 0.0), ("matmul", 1.5), ("attention", -0.1), ("link", 2.0)]
)
def test_utilizations_outside_zero_to_one_are_refused(field, value):
    with pytest.raises(WorkloadError, match="utilization must be in"):
        speed.Utilization(**{field: value})


def test_inference_has_no_training_speed(spec):
    with pytest.raises(WorkloadError, match="--mode training"):
        speed.training_speed(spec, Workload(), A100)


def test_a_run_costs_its_gpu_hours_at_the_price(spec):
    result = speed.training_speed(spec, training(gpus=2), A100)
    price = speed.Price(2.0, "USD", "test", "2026-01-01")
    run = speed.run_cost(result, 2, 10**9, price)
    assert run.time_seconds == pytest.approx(1e9 / result.tokens_per_second)
    assert run.gpu_hours == pytest.approx(2 * run.time_seconds / 3600)
    assert run.cost == pytest.approx(run.gpu_hours * 2.0)
    assert speed.run_cost(result, 2, 10**9, None).cost is None
    with pytest.raises(WorkloadError, match="at least 1"):
        speed.run_cost(result, 2, 0, price)


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_price_must_be_a_finite_amount(bad):
    with pytest.raises(WorkloadError, match="price per GPU-hour"):
        speed.Price(bad)


def test_the_speed_block_has_the_documented_keys(spec):
    result = speed.training_speed(spec, training(), A100).to_dict()
    assert {"tokens_per_second", "step_seconds", "mfu", "bound", "utilization"} <= set(result)
    assert sum(result["seconds_by_part"].values()) == pytest.approx(result["step_seconds"], 1e-3)


def test_decoding_is_memory_bound_alone_and_compute_bound_at_high_concurrency(spec):
    one = serving_speed.serving_speed(spec, Workload(batch=1, seq=512), A100)
    many = serving_speed.serving_speed(spec, Workload(batch=512, seq=64), A100)
    assert one.bound == speed.MEMORY and many.bound == speed.MATMUL
    # Alone: one read of the 16-bit weights (and a little cache) per token.
    weights = 2 * spec.parameters
    assert one.tokens_per_second == pytest.approx(
        A100.memory_bytes_per_s * speed.MEMORY_UTILIZATION / weights, rel=0.05
    )
    assert many.tokens_per_second > 50 * one.tokens_per_second


def test_tensor_parallel_decoding_pays_its_all_reduces(spec):
    w = Workload(batch=8, seq=1024, gpus=2, tp=2)
    nvlink = serving_speed.serving_speed(spec, w, A100)
    pcie = serving_speed.serving_speed(spec, w, PCIE_A100)
    alone = serving_speed.serving_speed(spec, Workload(batch=8, seq=1024), A100)
    assert pcie.tokens_per_second < nvlink.tokens_per_second < 2 * alone.tokens_per_second


def test_training_has_no_serving_speed(spec):
    with pytest.raises(WorkloadError, match="--mode inference"):
        serving_speed.serving_speed(spec, training(), A100)


def test_cost_per_million_tokens():
    assert speed.cost_per_million_tokens(1000.0, 2, speed.Price(3.6)) == pytest.approx(2.0)
    with pytest.raises(WorkloadError):
        speed.cost_per_million_tokens(0.0, 1, speed.Price(1.0))


def test_a_catalog_gpu_outside_the_measured_ones_says_its_default_is_unchecked(spec):
    l40s = speed.Hardware("L40S", 362e12, 864e9, 32e9, 25e9, architecture="Ada Lovelace")
    notes = speed.training_speed(spec, training(), l40s).notes
    assert any("L40S was checked" in n and "set on RTX 4090" in n for n in notes)
    assert not any("was checked" in n for n in speed.training_speed(spec, training(), A100).notes)


def test_unsharded_qlora_moves_fp32_hidden_states_and_casts_at_each_four_bit_linear(spec):
    """prepare_model_for_kbit_training (QLoRA's "mixed" recipe) keeps the norms in fp32, so the
    hidden states are fp32: the elementwise bytes double and each 4-bit linear casts its input
    to bf16 and its output back (6 bytes per feature), except the attention output projection,
    which takes attention's bf16 output. A script that skips it ("pure") moves none of that."""
    qlora = training(method="qlora", quant="nf4", grad_checkpointing=True)
    upcast = work.token_work(spec, qlora)
    plain = work.token_work(spec, qlora.with_(precision="pure"))
    assert upcast.elementwise_bytes == 2 * plain.elementwise_bytes
    assert plain.upcast_bytes == 0
    h, mlp = 4096, 11008
    # q, k, v (h -> h), gate and up (h -> mlp), down (mlp -> h); o_proj casts nothing
    features = 3 * (h + h) + 2 * (h + mlp) + (mlp + h)
    assert upcast.upcast_bytes == 32 * features * (4 + 2)
    # the LM head that prepare_model_for_kbit_training upcast is cast back at each forward
    assert upcast.cast_bytes == 32000 * h * (4 + 2) and plain.cast_bytes == 0
    slow = speed.training_speed(spec, qlora, A100)
    fast = speed.training_speed(spec, qlora.with_(precision="pure"), A100)
    assert slow.seconds_by_part["matmul"] == fast.seconds_by_part["matmul"]
    assert slow.seconds_by_part["memory"] > fast.seconds_by_part["memory"]
    assert any("prepare_model_for_kbit_training" in n for n in slow.notes)
    assert not any("prepare_model_for_kbit_training" in n for n in fast.notes)


def test_sharded_qlora_skips_the_upcast(spec):
    """TRL skips prepare_model_for_kbit_training for a model FSDP or ZeRO-3 shards."""
    w = training(method="qlora", quant="nf4", gpus=2, grad_checkpointing=True)
    assert work.token_work(spec, w).upcast_bytes > 0
    for sharded in (w.with_(fsdp=True), w.with_(zero=3)):
        m = work.token_work(spec, sharded)
        assert m.upcast_bytes == 0 and m.cast_bytes == 0
        assert (
            m.elementwise_bytes
            == work.token_work(spec, w.with_(precision="pure")).elementwise_bytes
        )


def test_upcast_stacked_experts_are_cast_back_at_each_forward():
    """transformers 5's stacked experts stay unquantized under bitsandbytes and
    prepare_model_for_kbit_training upcasts them to fp32: autocast casts every expert's weights
    back to bf16 at each forward (all of them: a micro-batch's tokens reach every expert), as it
    does the router and the head."""
    moe = spec_from_config(
        {
            **LLAMA,
            "model_type": "mixtral",
            "num_hidden_layers": 2,
            "intermediate_size": 2048,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        },
        "mixtral-small",
    )
    qlora = training(method="qlora", quant="nf4", grad_checkpointing=True)
    experts = sum(t.numel for t in moe.tensors if t.role.value == "expert")
    assert experts == 2 * 8 * 3 * 4096 * 2048
    router, head = 2 * 8 * 4096, 32000 * 4096  # a parameter, not an nn.Linear: unquantized too
    assert work.token_work(moe, qlora).cast_bytes == (experts + router + head) * (4 + 2)
    assert work.token_work(moe, qlora.with_(precision="pure")).cast_bytes == 0


def test_llamacpp_serving_one_sequence_is_llamacpps_measured_speed():
    """llama-bench tg512 of Llama 3 8B Q4_K_M on an A100 SXM 80GB: 135.04 tokens/s by a May 2024
    build (XiongjieDai's GPU-Benchmarks-on-LLM-Inference); the roofline at 80 % of 2,039 GB/s
    gave about 330. The estimate is a current build's, whose per-block time no row on an HBM
    card measured: faster than the May 2024 row, and said to be extrapolated."""
    from vramgui.core import llamacpp_speed
    from vramgui.hardware.gpus import find_gpu
    from vramgui.hardware.rates import speed_hardware
    from vramgui.sources import catalog

    spec = catalog.find("llama-3-8b").spec()
    hw = speed_hardware(find_gpu("A100 SXM 80GB"), "fp16")
    w = Workload(mode="inference", engine="llamacpp", quant="Q4_K_M", seq=256, attention="eager")
    served = serving_speed.serving_speed(spec, w, hw)
    assert served.basis == "extrapolated"
    assert any("generation in current builds" in note for note in served.notes)
    assert 135.04 < served.tokens_per_second < 1.5 * 135.04
    may = llamacpp_speed.decode(spec, w, hw, w.seq, prompt_path=llamacpp_speed.DEQUANTIZE_CUBLAS)
    assert may.basis == "measured" and may.tokens_per_second == pytest.approx(135.04, rel=0.2)
    # pp512 measured 5,947.64 tokens/s by a May 2024 build (dequantize + cuBLAS); the estimate
    # is a current build's (MMQ, no 16-bit copy): a 512-token prompt's first token sooner.
    prompted = serving_speed.serving_speed(spec, dataclasses.replace(w, seq=512, prompt=512), hw)
    assert prompted.prefill_seconds is not None and prompted.prefill_seconds < 512 / 5947.64
    # An RTX 4090's Q4_0 pp512 with MMQ (ggml-org/llama.cpp pull request 7676): 10,358.75.
    q4_0 = dataclasses.replace(w, quant="Q4_0", seq=512, prompt=512)
    rtx4090 = serving_speed.serving_speed(spec, q4_0, speed_hardware(find_gpu("RTX 4090"), "fp16"))
    assert rtx4090.prefill_seconds == pytest.approx(512 / 10358.75, rel=0.25)
    flash = serving_speed.serving_speed(spec, dataclasses.replace(w, attention="flash"), hw)
    assert flash.basis == "extrapolated"  # -fa on: no published row
    # Split by layers over four RTX 4090s: tg512 measured 120.32 tokens/s (130.58 on one).
    four = dataclasses.replace(w, gpus=4)
    rtx = speed_hardware(find_gpu("RTX 4090"), "fp16")
    split = serving_speed.serving_speed(spec, four, rtx)
    assert split.prefill_seconds is None  # a prompt pipelined over GPUs: not modelled
    may = llamacpp_speed.decode(
        spec, four, rtx, four.seq, gpus=4, prompt_path=llamacpp_speed.DEQUANTIZE_CUBLAS
    )
    assert may.tokens_per_second == pytest.approx(120.32, rel=0.2)
    assert split.tokens_per_second > may.tokens_per_second  # a current build
    vllm = serving_speed.serving_speed(spec, Workload(mode="inference", engine="vllm", seq=256), hw)
    assert vllm.basis == "measured"  # vLLM's own step: published vLLM runs on an A100 80GB
