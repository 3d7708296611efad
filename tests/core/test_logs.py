"""core/logs: every published log reads to its engine; the figures each reader takes are the
ones the engine printed; any other text gets a clear refusal."""

import random
import string

import pytest

from tests.logs_fixtures import SOURCES, text
from vramgui.core.logs import LogUnreadable, read_log
from vramgui.core.logs.text import parse_size, plain_lines
from vramgui.core.units import GiB, MiB


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_published_log_reads_to_its_engine(name):
    setup = read_log(text(name))
    assert setup.engine == SOURCES[name]["engine"]
    model = setup.model
    assert setup.components or setup.decision or setup.facts or model.name or model.layers


def test_every_fixture_has_a_source():
    for name, source in SOURCES.items():
        assert source["url"].startswith("https://github.com/"), name


def _component(setup, name, device=None):
    found = [c for c in setup.components if c.name == name and device in (None, c.device)]
    assert found, f"no {name} on {device}"
    return sum(c.bytes for c in found)


def test_vllm_v1_start_up_lines():
    setup = read_log(text("vllm-dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM.log"))
    assert setup.engine_version == "0.10.1.1"
    assert setup.model.name == "Qwen2-7B-Instruct"
    # The non-default arguments span two lines of the file: read whole.
    assert setup.settings["gpu_memory_utilization"] == 0.25
    assert setup.settings["seq"] == 16384
    assert _component(setup, "weights") == round(14.2488 * GiB)
    assert _component(setup, "kv_pool") == round(5.01 * GiB)
    assert _component(setup, "cuda_graphs") == round(0.50 * GiB)
    assert setup.facts["kv_tokens"] == 93872
    assert setup.facts["sampler"] == "flashinfer"


def test_vllm_refusal_wrapped_mid_word_still_reads():
    setup = read_log(text("vllm-refusal-arc-b70-100k.log"))
    assert setup.decision is not None and setup.decision.kind == "refusal"
    assert setup.decision.figures["needed_bytes"] == round(4.26 * GiB)
    assert setup.decision.figures["available_bytes"] == round(4.25 * GiB)
    assert setup.settings["seq"] == 100000


def test_vllm_v0_profile_and_token_refusal():
    setup = read_log(text("vllm-v0-refusal-3090-29k.log"))
    assert setup.decision.figures == {"max_model_len": 29000, "pool_tokens": 23648}
    assert setup.facts["cuda_total_bytes"] == round(23.58 * GiB)
    assert _component(setup, "non_torch") == round(0.35 * GiB)


def test_ollama_offload_decision_and_runner_command():
    setup = read_log(text("ollama-old-4gpu-64k.log"))
    d = setup.decision
    assert d.kind == "offload"
    assert d.figures["layers.offload"] == 44 and d.figures["layers.model"] == 81
    assert d.figures["layers.split"] == "11,11,11,11"
    assert [d.figures[f"memory.available[{i}]"] for i in range(4)] == [22 * GiB] * 4
    assert d.figures["memory.required.kv"] == round(19.5 * GiB)
    assert setup.settings["n_ctx"] == 64000
    assert setup.settings["tensor_split"] == "11,11,11,11"


def test_ollama_lines_wrapped_by_the_reporter_are_joined():
    setup = read_log(text("ollama-old-mistral-small31.log"))
    assert setup.decision.figures["projector.graph"] == round(8.8 * GiB)
    assert setup.settings["n_ctx"] == 4096
    assert _component(setup, "weights", "CUDA0") == round(13.9 * GiB)


def test_ollama_new_engine_device_lines():
    setup = read_log(text("ollama-new-qwen-5gib.log"))
    assert _component(setup, "kv_cache", "CUDA0") == 936 * MiB
    assert _component(setup, "compute_buffer", "CUDA0") == 98 * MiB
    assert setup.facts["total_memory_bytes"] == round(5.4 * GiB)


def test_llama_runner_under_journald_prefixes_is_ollama():
    assert read_log(text("ollama-old-rtx4070-30-of-81.log")).engine == "ollama"


def test_llamacpp_metadata_buffers_and_build():
    setup = read_log(text("llamacpp-glm-z1-32b-3090ti-32k.log"))
    assert setup.engine_version == "5274 (d541533a)"
    assert setup.model.name == "GLM Z1 32B 0414"
    assert setup.model.file_type == "IQ4_XS"
    assert setup.model.metadata["glm4.block_count"] == 61
    assert setup.model.metadata["glm4.attention.head_count_kv"] == 2
    assert setup.settings["n_ctx"] == 32768 and setup.settings["n_gpu_layers"] == 62
    assert _component(setup, "kv_cache", "CUDA0") == 1952 * MiB
    assert _component(setup, "compute_buffer", "CUDA0") == 353 * MiB
    assert _component(setup, "weights", "CPU") == round(471.75 * MiB)
    assert setup.devices[0].free_bytes == 23041 * MiB


def test_llamacpp_multi_gpu_buffers_and_failed_allocation():
    setup = read_log(text("llamacpp-ik-mla-16gpu-oom.log"))
    assert len({c.device for c in setup.components if c.name == "kv_cache"}) == 11
    assert setup.decision.kind == "oom"
    assert setup.decision.figures["device"] == "CUDA0"
    assert setup.decision.figures["request_bytes"] == round(279356.51 * MiB)


def test_llamacpp_failed_compute_buffer_names_what_failed():
    setup = read_log(text("llamacpp-ik-r1-q2k-compute-oom.log"))
    assert setup.decision.figures["what"] == "compute buffer"


def test_escape_sequences_never_reach_the_setup():
    setup = read_log(text("llamacpp-dsv4-ansi.log"))
    assert setup.model.name == "DeepSeek-V4-Flash-0731"


@pytest.mark.parametrize(
    ("name", "allocated", "reserved"),
    [
        ("pytorch-oom-24gib-22mib.log", 22.90 * GiB, 194.87 * MiB),
        ("pytorch-oom-old-6gib.log", 781.59 * MiB, 1.24 * GiB - 781.59 * MiB),
        ("pytorch-oom-mgfn-0-free.log", 2.93 * GiB, 2.30 * GiB),
    ],
)
def test_pytorch_out_of_memory_old_and_new(name, allocated, reserved):
    setup = read_log(text(name))
    assert setup.decision.kind == "oom"
    assert _component(setup, "torch_allocated") == round(allocated)
    assert abs(_component(setup, "torch_reserved_free") - reserved) <= 1


def test_pytorch_memory_summary_table():
    log = text("pytorch-oom-24gib-22mib.log") + (
        "|===========================================================================|\n"
        "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
        "|---------------------------------------------------------------------------|\n"
        "| Allocated memory      |  23450 MiB |  23460 MiB |  90000 MiB |  66550 MiB |\n"
        "| Reserved memory       |  23645 MiB |  23645 MiB |  23645 MiB |      0 B   |\n"
    )
    figures = read_log(log).decision.figures
    assert figures["summary_allocated_memory_peak_bytes"] == 23460 * MiB
    assert figures["summary_reserved_memory_current_bytes"] == 23645 * MiB


def test_sglang_pool_is_k_plus_v():
    setup = read_log(text("sglang-qwen3-235b-fp8-tp4.log"))
    assert _component(setup, "kv_cache") == round((8.23 + 8.23) * GiB)
    assert setup.settings["tp"] == 4 and setup.settings["mem_fraction_static"] == 0.93


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "\n\n   \n",
        "hello world\nthis is not a log\n",
        "\x00\x01\x02binary",
        "a" * 5_000_000,
    ],
    ids=["empty", "blank", "prose", "binary", "one huge line"],
)
def test_text_that_is_no_log_is_refused_clearly(bad):
    with pytest.raises(LogUnreadable) as exc:
        read_log(bad)
    assert str(exc.value)


def test_a_megabyte_of_noise_is_refused():
    rng = random.Random(7)
    noise = "".join(rng.choice(string.printable) for _ in range(1_000_000))
    with pytest.raises(LogUnreadable):
        read_log(noise)


def test_a_log_cut_before_any_figure_says_so():
    with pytest.raises(LogUnreadable, match="no figure"):
        read_log(
            "INFO 09-04 01:02:16 [__init__.py:241] Automatically detected platform cuda.\n"
            "vLLM API server version 0.10.1.1\n"
        )


def test_sizes_and_plain_lines():
    assert parse_size('size="11.5 GiB"') == round(11.5 * GiB)
    assert parse_size("0 B") == 0
    assert parse_size("0 bytes is free") == 0
    assert parse_size("8.23 GB") == round(8.23 * 1000**3)
    lines = plain_lines("\x1b[31mred\x1b[0m\r\nJul 24 21:50:02 vega ollama[1]: msg=x\n")
    assert lines[:2] == ["red", "msg=x"]


def test_memory_breakdown_table_last_pass_holds():
    setup = read_log(text("llamacpp-ollama-breakdown-5090-3090.log"))
    # Two --fit passes print the table; the second is what llama.cpp settled on.
    assert _component(setup, "kv_cache", "CUDA1") == 18432 * MiB
    assert _component(setup, "weights", "CUDA1") == 1346 * MiB
    assert _component(setup, "compute_buffer", "CUDA0") == 4205 * MiB
    assert _component(setup, "kv_cache", "CPU") == 18432 * MiB
    gpus = {d.name: d for d in setup.devices}
    assert gpus["CUDA1"].total_bytes == 24575 * MiB and gpus["CUDA1"].free_bytes == 23332 * MiB


def test_fit_giving_up_is_a_decision():
    setup = read_log(text("llamacpp-breakdown-1080ti-fit-abort.log"))
    assert setup.decision.kind == "refusal"
    assert "n_gpu_layers already set by user" in setup.decision.summary
    assert setup.devices[0].total_bytes == 11165 * MiB
