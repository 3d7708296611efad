"""How a serving benchmark's run is played (core.serving_steps.simulate_run): the client's
closed loop, the scheduler's limits and the prompt chunks between the decodes, each against the
step it is made of. Accuracy against published runs: tests/benchmarks/test_serving_published.py."""

import dataclasses

import pytest

from vramgui.core import serving_steps
from vramgui.core.serving_speed import serving_rates
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import find_gpu
from vramgui.hardware.rates import speed_hardware
from vramgui.sources import catalog

SPEC = catalog.find("llama-3.1-8b").spec()
RATES = serving_rates(speed_hardware(find_gpu("H100 SXM"), "bf16"))


def _run(concurrency, requests, *, max_sequences=256, batched_tokens=8192, prompt=1024, out=64):
    work = serving_steps.step_work(SPEC, Workload(mode="inference", engine="vllm", seq=prompt))
    return serving_steps.simulate_run(
        work, RATES, concurrency=concurrency, requests=requests, input_tokens=prompt,
        output_tokens=out, batched_tokens=batched_tokens, max_sequences=max_sequences,
    )  # fmt: skip


def test_one_request_decodes_at_the_step_of_one_sequence():
    work = serving_steps.step_work(SPEC, Workload(mode="inference", engine="vllm", seq=1024))
    first = serving_steps.step_time(work, RATES, sequences=1, context_tokens=1024).seconds
    last = serving_steps.step_time(work, RATES, sequences=1, context_tokens=1024 + 62).seconds
    run = _run(1, 1)
    assert first <= run.tpot_seconds <= last
    assert run.output_tokens_per_s == pytest.approx(64 / run.duration_seconds)


def test_requests_sent_together_wait_on_each_others_prompts():
    """32 prompts of 1,024 tokens in 2,048-token chunks: later requests' first tokens wait, and
    the early ones' decodes share steps with the late prompts (their TPOT is longer than a
    decode step of 32 sequences alone)."""
    run = _run(32, 32, batched_tokens=2048)
    work = serving_steps.step_work(SPEC, Workload(mode="inference", engine="vllm", seq=1024))
    decode = serving_steps.step_time(work, RATES, sequences=32, context_tokens=32 * 1056).seconds
    assert run.tpot_seconds > decode
    assert run.ttft_seconds > 4 * _run(1, 1).ttft_seconds


def test_streams_past_max_num_seqs_queue_rather_than_batch():
    """512 streams against 256 sequences: the running batch stays at 256, so the TPOT is the
    256-stream one and the queue shows in the time to first token."""
    capped = _run(512, 512, max_sequences=256, prompt=64)
    full = _run(256, 512, max_sequences=256, prompt=64)
    assert capped.tpot_seconds == pytest.approx(full.tpot_seconds, rel=0.05)
    assert capped.ttft_seconds > 2 * full.ttft_seconds


def test_a_step_of_a_small_model_is_bound_by_the_host_and_a_long_cache_by_memory():
    small = serving_steps.step_work(
        catalog.find("qwen2.5-0.5b").spec(), Workload(mode="inference", engine="vllm", seq=512)
    )
    assert serving_steps.step_time(small, RATES, sequences=1, context_tokens=512).bound == "host"
    big = serving_steps.step_work(SPEC, Workload(mode="inference", engine="vllm", seq=32768))
    step = serving_steps.step_time(big, RATES, sequences=8, context_tokens=8 * 32768)
    assert step.bound == "memory"
    tp = dataclasses.replace(big, tp=2)
    assert serving_steps.step_time(tp, RATES, sequences=8, context_tokens=8 * 32768).seconds > (
        step.seconds
    )  # the same per-GPU work plus the all-reduces


def test_each_gpu_reads_its_own_cache_a_latent_one_whole():
    """Under tensor parallelism each GPU reads the KV heads it holds: Llama 3 70B's eight split
    over eight GPUs, DeepSeek-V3's latent cache whole on every one (vLLM and SGLang replicate it),
    while the weights are split either way."""

    def work(model, tp):
        w = Workload(mode="inference", engine="vllm", seq=1024, gpus=tp, tp=tp)
        return serving_steps.step_work(catalog.find(model).spec(), w)

    llama, llama8 = work("llama-3-70b", 1), work("llama-3-70b", 8)
    assert llama8.kv_bytes_per_token == pytest.approx(llama.kv_bytes_per_token / 8)
    assert llama8.dense_bytes == pytest.approx(llama.dense_bytes / 8)
    latent, latent8 = work("deepseek-v3", 1), work("deepseek-v3", 8)
    assert latent8.kv_bytes_per_token == pytest.approx(latent.kv_bytes_per_token)
    assert latent8.expert_bytes == pytest.approx(latent.expert_bytes / 8)


@pytest.mark.parametrize(
    ("base_ghz", "host"),
    [(2.0, "slow"), (2.1, "slow"), (2.2, "fast"), (2.25, "fast"), (2.7, "fast"), (None, "slow")],
)
def test_the_host_class_follows_the_cpus_base_clock_and_an_unknown_host_is_the_slow_one(
    base_ghz, host
):
    assert serving_steps.host_class(base_ghz) == host
    assert serving_steps.VLLM is serving_steps.VLLM_HOSTS[serving_steps.DEFAULT_HOST]


def test_each_host_class_times_the_small_models_step_its_hosts_measured():
    """Qwen2.5 0.5B, one request, 95 prompt tokens (AccelMark's suite F): its step is the
    host's. Measured TPOT: 5.11 ms on an RTX 5090 whose host is a 2.1 GHz Xeon Gold 6530
    (vLLM 0.19.1), 1.83 ms on an A100 SXM 80GB on a 2.25 GHz EPYC 7742 (vLLM 0.20.1). Each
    class's step reads its own host's run within 20 %, and neither class reads the other's."""
    spec = catalog.find("qwen2.5-0.5b").spec()
    work = serving_steps.step_work(spec, Workload(mode="inference", engine="vllm", seq=170))
    measured = {("RTX 5090", 2.1): 5.11e-3, ("A100 SXM 80GB", 2.25): 1.83e-3}
    for (gpu, base_ghz), tpot in measured.items():
        hardware = speed_hardware(find_gpu(gpu), "bf16")
        own = serving_steps.host_class(base_ghz)
        for host, figures in serving_steps.VLLM_HOSTS.items():
            rates = serving_rates(hardware, figures=figures)
            step = serving_steps.step_time(work, rates, sequences=1, context_tokens=170)
            assert step.bound == serving_steps.HOST
            close = abs(step.seconds / tpot - 1) <= 0.20
            assert close == (host == own), (gpu, host, step.seconds)


def test_one_requests_first_token_is_its_prompts_chunks_plus_the_requests_own_time():
    """A prompt alone: its chunks' steps, the products at the first token's prefill scale,
    then the engine's own time per request."""
    work = serving_steps.step_work(SPEC, Workload(mode="inference", engine="vllm", seq=4096))
    figures = serving_steps.FirstTokenFigures(prefill_scale=1.5, request_seconds=0.02)
    scaled = dataclasses.replace(
        RATES,
        matmul_flops_per_s=RATES.matmul_flops_per_s * 1.5,
        attention_flops_per_s=RATES.attention_flops_per_s * 1.5,
    )
    # 4,096 tokens in two chunks of 2,048: the second attends to the first.
    steps = sum(
        serving_steps.step_time(
            work, scaled, sequences=0, context_tokens=0.0, prompt_tokens=2048,
            prompt_pairs=2048 * (start + (2048 + 1) / 2),
        ).seconds
        for start in (0, 2048)
    )  # fmt: skip
    first = serving_steps.first_token_seconds(
        work, RATES, prompt_tokens=4096, batched_tokens=2048, figures=figures
    )
    assert first == pytest.approx(steps + 0.02)
    shorter = serving_steps.first_token_seconds(
        work, RATES, prompt_tokens=512, batched_tokens=2048, figures=figures
    )
    assert 0.02 < shorter < first
