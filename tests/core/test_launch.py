"""Engine settings derived from placements and workloads."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from vramgui.core import launch, offload
from vramgui.core.families import spec_from_config
from vramgui.core.units import GB, GiB, MiB
from vramgui.core.workload import Workload
from vramgui.sources.catalog import find


def _spec(name: str):
    entry = find(name)
    assert entry is not None, name
    return spec_from_config(entry.config, name)


@pytest.fixture(scope="module")
def llama7b():
    return _spec("llama-2-7b")


def _flag(args: tuple[str, ...], name: str) -> str:
    return args[args.index(name) + 1]


def test_llamacpp_flags_follow_the_placement(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048, kv_dtype="q8_0")
    p = offload.plan_llamacpp(llama7b, w, 4 * GiB)
    s = launch.llamacpp_settings(llama7b, p)
    assert int(_flag(s.args, "-ngl")) == p.gpu_layers == offload.max_gpu_layers(llama7b, w, 4 * GiB)
    assert _flag(s.args, "-c") == "2048"
    assert _flag(s.args, "--cache-type-k") == _flag(s.args, "--cache-type-v") == "q8_0"
    assert _flag(s.args, "-fa") == "on"  # a quantized V cache needs flash attention
    assert _flag(s.args, "-ub") == "512"
    assert "--no-kv-offload" not in s.args and "-np" not in s.args
    assert s.text.startswith("llama-server -m MODEL.gguf -ngl ")


def test_llamacpp_shares_the_context_between_parallel_slots(llama7b):
    w = Workload(quant="Q4_K_M", engine="llamacpp", seq=4096, batch=4)
    p = offload.plan_llamacpp(llama7b, w, 24 * GiB, kv_offload=False)
    s = launch.llamacpp_settings(llama7b, p)
    assert _flag(s.args, "-c") == str(4 * 4096)
    assert _flag(s.args, "-np") == "4"
    assert _flag(s.args, "--cache-type-k") == "f16"
    assert "--no-kv-offload" in s.args
    # Flash attention is said, not left to llama.cpp's "auto": the compute buffer depends on it.
    assert _flag(s.args, "-fa") == "on"
    eager = offload.plan_llamacpp(llama7b, w.with_(attention="eager"), 24 * GiB)
    assert _flag(launch.llamacpp_settings(llama7b, eager).args, "-fa") == "off"


def test_vllm_flags(llama7b):
    w = Workload(
        engine="vllm",
        dtype="bf16",
        quant="awq-int4",
        seq=8192,
        batch=16,
        kv_dtype="fp8",
        tp=2,
        gpus=2,
        gpu_memory_utilization=0.85,
    )
    s = launch.vllm_settings(llama7b, w)
    assert s.text.startswith("vllm serve llama-2-7b ")
    assert _flag(s.args, "--max-model-len") == "8192"
    assert _flag(s.args, "--gpu-memory-utilization") == "0.85"
    assert _flag(s.args, "--tensor-parallel-size") == "2"
    assert _flag(s.args, "--kv-cache-dtype") == "fp8"
    assert _flag(s.args, "--quantization") == "awq"
    assert _flag(s.args, "--dtype") == "bfloat16"
    assert "--cpu-offload-gb" not in s.args
    for quant, expected in (("nf4", "bitsandbytes"), ("gptq-int4", "gptq"), ("Q4_K_M", "gguf")):
        args = launch.vllm_settings(llama7b, w.with_(quant=quant)).args
        assert _flag(args, "--quantization") == expected


def test_vllm_offloads_what_the_placement_keeps_on_the_host(llama7b):
    w = Workload(dtype="fp16", seq=1024)
    p = offload.plan_accelerate(llama7b, w, 8 * GiB)
    host = sum(u.unit.bytes for u in p.units if u.device == "cpu")
    assert host > 0
    s = launch.vllm_settings(llama7b, w, p)
    assert int(_flag(s.args, "--cpu-offload-gb")) == -(-host // GiB)


def test_accelerate_device_map_names_every_module_and_max_memory_covers_it(llama7b):
    w = Workload(dtype="fp16", seq=1024)
    p = offload.plan_accelerate(llama7b, w, [5 * GiB], host_ram_bytes=6 * GiB)
    s = launch.accelerate_settings(llama7b, p)
    doc = json.loads(s.text)
    device_map = doc["device_map"]
    assert device_map["model.embed_tokens"] == 0
    assert device_map["model.layers.0"] == 0
    assert device_map["lm_head"] == "disk"
    assert set(device_map.values()) == {0, "cpu", "disk"}
    assert doc["offload_folder"] == "offload"
    # JSON keys are strings; the GPU budget covers its weights plus the largest unit's slot
    gpu_weights = sum(u.unit.bytes for u in p.units if u.device == "gpu:0")
    assert int(doc["max_memory"]["0"].removesuffix("MiB")) * MiB >= gpu_weights + p.stream_bytes
    assert list(doc["max_memory"]) == ["0", "cpu"]
    # every tensor of the model lies under one device_map entry
    for t in llama7b.tensors:
        assert any(t.name == m or t.name.startswith(m + ".") for m in device_map), t.name


def test_streaming_gets_a_zero_inference_config():
    spec = _spec("opt-175b")
    w = Workload(dtype="fp16", seq=2048)
    p = offload.plan_streaming(spec, w, 8 * GiB, host_ram_bytes=200 * GB)
    (zero_inf, vllm) = launch.launch_settings(spec, w, p)
    assert zero_inf.engine == "DeepSpeed ZeRO-Inference" and vllm.engine == "vLLM"
    zero = zero_inf.config["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_param"]["device"] == "nvme"  # 200 GB of RAM cannot hold 350 GB
    assert zero_inf.config["fp16"] == {"enabled": True}
    block = offload.model_units(spec, w)[1]
    assert zero["stage3_prefetch_bucket_size"] == block.parameters


@pytest.mark.parametrize(
    ("changes", "stage", "offload_param"),
    [
        ({"zero": 2, "cpu_offload": True}, 2, False),
        ({"zero": 3, "cpu_offload": True}, 3, True),
        ({"fsdp": True}, 3, False),
    ],
)
def test_deepspeed_training_config(changes, stage, offload_param):
    w = Workload(mode="training", dtype="bf16", batch=4, grad_accum=8, gpus=4, **changes)
    (s,) = launch.launch_settings(_spec("llama-2-7b"), w)
    c = json.loads(s.text)
    assert c["zero_optimization"]["stage"] == stage
    assert c["train_micro_batch_size_per_gpu"] == 4
    assert c["gradient_accumulation_steps"] == 8
    assert c["train_batch_size"] == 4 * 8 * 4
    assert c["bf16"] == {"enabled": True} and c["fp16"] == {"enabled": False}
    assert ("offload_optimizer" in c["zero_optimization"]) == w.cpu_offload
    assert ("offload_param" in c["zero_optimization"]) == offload_param


def test_vllm_serves_a_gguf_file_and_offloads_only_what_does_not_fit(llama7b):
    w = Workload(dtype="fp16", quant="Q4_K_M", engine="llamacpp", seq=2048)
    # Every block fits: llama.cpp still keeps the token embeddings in host memory, vLLM does not.
    p = offload.plan_llamacpp(llama7b, w, 24 * GiB)
    assert p.fits and p.units[0].device == "cpu"
    llamacpp, ollama, lmstudio, vllm = launch.launch_settings(llama7b, w, p)
    assert (ollama.engine, lmstudio.engine) == ("Ollama", "LM Studio")
    assert vllm.text.startswith("vllm serve MODEL.gguf ")
    assert "--tokenizer" in vllm.args and "--cpu-offload-gb" not in vllm.args
    assert any(
        "convert_hf_to_gguf.py --outtype f16, then llama-quantize it to Q4_K_M" in n
        for n in llamacpp.notes
    )
    gguf_file = replace(llama7b, name="llama-2-7b.Q4_K_M.gguf")
    assert launch.vllm_settings(gguf_file, w).text.startswith("vllm serve llama-2-7b.Q4_K_M.gguf ")
    # Half the blocks on the host: vLLM offloads them, not the embeddings beside them.
    half = offload.plan_llamacpp(llama7b, w, 24 * GiB, n_gpu_layers=16)
    blocks = sum(u.unit.bytes for u in half.units[1:-1] if u.device == "cpu")
    assert half.units[-1].device == "gpu:0"
    offloaded = int(_flag(launch.vllm_settings(llama7b, w, half).args, "--cpu-offload-gb"))
    assert offloaded == -(-blocks // GiB)


def test_accelerate_loads_with_the_bitsandbytes_config_the_estimate_assumes(llama7b):
    w = Workload(dtype="bf16", quant="nf4", seq=1024)
    p = offload.plan_accelerate(llama7b, w, 24 * GiB)
    call = launch.accelerate_settings(llama7b, p).notes[-1]
    assert "quantization_config=BitsAndBytesConfig(load_in_4bit=True" in call
    assert "bnb_4bit_quant_type='nf4'" in call and "bnb_4bit_use_double_quant=True" in call
    plain = launch.accelerate_settings(
        llama7b, offload.plan_accelerate(llama7b, w.with_(quant="none"), 24 * GiB)
    )
    assert "quantization_config" not in plain.notes[-1]


def test_llamacpp_batch_sizes_reach_the_launch_line_and_the_compute_buffer(llama7b):
    """-ub sizes the compute buffer; llama.cpp runs micro-batches of min(-ub, -b)
    (llama_context: n_ubatch = min(n_batch, n_ubatch))."""
    w = Workload(quant="Q4_K_M", engine="llamacpp", seq=8192)
    default = offload.plan_llamacpp(llama7b, w, 24 * GiB)
    assert _flag(launch.llamacpp_settings(llama7b, default).args, "-b") == "2048"
    wide = offload.plan_llamacpp(llama7b, w.with_(ubatch_size=1024), 24 * GiB)
    s = launch.llamacpp_settings(llama7b, wide)
    assert _flag(s.args, "-ub") == "1024" and _flag(s.args, "-b") == "2048"
    assert wide.buffers_bytes > default.buffers_bytes
    capped = offload.plan_llamacpp(llama7b, w.with_(ubatch_size=1024, batch_size=512), 24 * GiB)
    assert capped.buffers_bytes == default.buffers_bytes
    assert _flag(launch.llamacpp_settings(llama7b, capped).args, "-b") == "512"


def test_ollama_and_lm_studio_take_the_micro_batch_as_their_batch(llama7b):
    """Ollama's runner hands llama.cpp num_batch as n_ubatch; LM Studio's Evaluation Batch
    Size is its batch. Their defaults (512) are left unsaid."""
    w = Workload(quant="Q4_K_M", engine="llamacpp", seq=4096)
    plain = offload.plan_llamacpp(llama7b, w, 24 * GiB)
    assert not any(
        "num_batch" in line
        for line in launch.ollama_settings(llama7b, "m", plain).config["modelfile"]
    )
    assert "Evaluation Batch Size" not in launch.lmstudio_settings(llama7b, plain).config
    wide = offload.plan_llamacpp(llama7b, w.with_(ubatch_size=1024), 24 * GiB)
    assert (
        "PARAMETER num_batch 1024" in launch.ollama_settings(llama7b, "m", wide).config["modelfile"]
    )
    assert launch.lmstudio_settings(llama7b, wide).config["Evaluation Batch Size"] == 1024
    logical = offload.plan_llamacpp(llama7b, w.with_(batch_size=4096), 24 * GiB)
    assert any("--batch-size" in n for n in launch.ollama_settings(llama7b, "m", logical).notes)
