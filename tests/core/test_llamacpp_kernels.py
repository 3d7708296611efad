"""The offload plan times llama.cpp's GPU layers with ``core.llamacpp_speed``'s terms: a plan
with every layer on the GPUs gives its figures, whatever is off them the offload roofline."""

from __future__ import annotations

import pytest

from vramgui.answers.host import this_machine
from vramgui.answers.rates import rates_for
from vramgui.answers.timing import llamacpp_plan
from vramgui.core import llamacpp_speed as lcs
from vramgui.core import offload
from vramgui.core.workload import Workload
from vramgui.sources import catalog

HOST = this_machine(64 << 30)


def _plan(model: str, gpu: str, w: Workload, **kwargs):
    rates = rates_for(gpu, w.dtype)
    spec = catalog.find(model).spec()
    return spec, rates, llamacpp_plan(spec, w, rates.gpu.memory_bytes, rates, host=HOST, **kwargs)


@pytest.mark.parametrize(
    ("model", "gpu", "quant", "seq", "gpus"),
    [
        ("llama-3-8b", "A100 SXM 80GB", "Q4_K_M", 4096, 1),
        ("llama-3-8b", "RTX 4090", "F16", 512, 1),
        ("qwen3-30b-a3b", "RTX 4090", "Q4_K_M", 8192, 1),
        ("llama-3.2-1b", "L40S", "Q8_0", 2048, 1),
        ("llama-3.1-70b", "RTX 3090", "Q4_K_M", 4096, 2),
    ],
)
def test_every_layer_on_the_gpus_gives_llamacpp_speed(model, gpu, quant, seq, gpus):
    w = Workload(mode="inference", engine="llamacpp", quant=quant, seq=seq, gpus=gpus)
    spec, rates, answer = _plan(model, gpu, w)
    assert answer.placement.gpu_layers == answer.placement.blocks + 1
    decode = lcs.decode(spec, w, rates.hardware, depth=seq, gpus=gpus)
    assert answer.throughput.tokens_per_second == pytest.approx(decode.tokens_per_second, 1e-9)
    if gpus == 1:
        prompt = lcs.prefill(spec, w, rates.hardware, seq)
        assert prompt is not None
        assert answer.prefill_seconds == pytest.approx(prompt.seconds, rel=1e-9)


def test_the_token_lookup_is_not_copied_to_the_gpu_for_a_prompt():
    w = Workload(mode="inference", engine="llamacpp", quant="F16", seq=4096)
    _, _, answer = _plan("llama-3-8b", "RTX 4090", w)
    busy = offload.throughput._forward_seconds(
        answer.placement, answer.bandwidths, 1, 4096, context=2048, kv_read=False
    )
    assert busy[offload.PCIE] == 0


def test_layers_in_host_ram_add_the_roofline_to_the_measured_gpu_layers():
    w = Workload(mode="inference", engine="llamacpp", quant="Q4_K_M", seq=4096)
    _, _, full = _plan("llama-3-8b", "RTX 4090", w)
    _, _, partial = _plan("llama-3-8b", "RTX 4090", w, n_gpu_layers=24)
    busy = partial.throughput.seconds_by_resource
    assert busy[offload.CPU_MEMORY] > 0
    # Eight blocks in host RAM: the GPU does less, the CPU reads their bytes at host speed.
    assert busy[offload.GPU_MEMORY] < full.throughput.seconds_by_resource[offload.GPU_MEMORY]
    assert partial.throughput.tokens_per_second < full.throughput.tokens_per_second
