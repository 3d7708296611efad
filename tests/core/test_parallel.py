"""Parallel plans: what each scheme divides, and the settings it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramgui.core import parallel
from vramgui.core.errors import WorkloadError
from vramgui.core.estimate import estimate
from vramgui.core.families import spec_from_config
from vramgui.core.model import Role, Tensor
from vramgui.core.training import training_estimate
from vramgui.core.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = json.loads((ROOT / "tests" / "data" / "families" / "configs.json").read_text())
MISTRAL = spec_from_config(CONFIGS["mistralai/Mistral-7B-v0.1"], "mistral")


def train(**settings: object) -> Workload:
    return Workload(mode="training", **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "shards"),
    [
        ({"gpus": 4}, (1, 1, 1)),
        ({"gpus": 4, "zero": 1}, (4, 1, 1)),
        ({"gpus": 4, "zero": 2}, (4, 4, 1)),
        ({"gpus": 4, "zero": 3}, (4, 4, 4)),
        ({"gpus": 4, "fsdp": True}, (4, 4, 4)),
        ({"gpus": 8, "tp": 2, "zero": 3}, (4, 4, 4)),
    ],
)
def test_sharding_by_stage(settings: dict, shards: tuple[int, int, int]) -> None:
    p = parallel.plan(MISTRAL, train(**settings))
    assert (p.state_shards, p.grad_shards, p.param_shards) == shards


def test_ddp_buckets_copy_the_gradients() -> None:
    p = parallel.plan(MISTRAL, train(gpus=2))
    assert parallel.ddp_bucket_bytes(1000, p) == 1000
    sharded = parallel.plan(MISTRAL, train(gpus=2, zero=2))
    assert parallel.ddp_bucket_bytes(1000, sharded) == 0


def test_stage_layers_cover_every_layer_once() -> None:
    stages = parallel.stage_layers(30, 4)
    assert [len(s) for s in stages] == [8, 8, 7, 7]
    assert [i for s in stages for i in s] == list(range(30))


def test_first_stage_holds_most_micro_batches() -> None:
    assert parallel.in_flight_micro_batches(0, 4) == 4
    assert parallel.in_flight_micro_batches(3, 4) == 1


def test_tp_splits_linears_not_norms() -> None:
    linear = Tensor("q.weight", (8, 8), Role.ATTENTION, 0, "q_proj")
    norm = Tensor("n.weight", (8,), Role.NORM, 0, "input_layernorm")
    row_bias = Tensor("o.bias", (8,), Role.ATTENTION, 0, "o_proj", is_bias=True)
    assert parallel.tp_share(linear, 4) == 0.25
    assert parallel.tp_share(norm, 4) == 1.0
    assert parallel.tp_share(row_bias, 4) == 1.0


def test_tp_not_dividing_kv_heads_is_refused() -> None:
    with pytest.raises(WorkloadError, match="key/value heads"):
        parallel.plan(MISTRAL, train(gpus=16, tp=16))


def test_more_stages_than_layers_is_refused() -> None:
    tiny = spec_from_config(
        {
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 100,
        }
    )
    with pytest.raises(WorkloadError, match="stages"):
        parallel.plan(tiny, train(gpus=4, pp=4))


def test_fsdp_gathers_two_layers_and_the_root() -> None:
    w = train(gpus=2, fsdp=True)
    p = parallel.plan(MISTRAL, w)
    assert parallel.gathered_in_flight_bytes([10, 30, 20], 5, 4, p, w) == 2 * 30 + 5


def test_zero3_parameter_offload_keeps_only_gathered_layers_on_gpu() -> None:
    on_gpu = training_estimate(MISTRAL, train(gpus=2, zero=3))
    offloaded = training_estimate(MISTRAL, train(gpus=2, zero=3, cpu_offload=True))
    assert offloaded.components["weights"] == 0
    assert offloaded.components["gathered_parameters"] > 0
    assert offloaded.host_bytes > on_gpu.components["weights"]
    assert offloaded.total_bytes < on_gpu.total_bytes


def test_parameter_offload_on_one_gpu_still_gathers_each_layer():
    # ZeRO-3 / FSDP with --cpu-offload on one GPU: the parameters live in host RAM, but each
    # layer is brought whole onto the GPU while it computes, as with two or more GPUs.
    from vramgui.sources.catalog import find

    spec = find("llama-3.2-1b").spec()
    for sharding in ({"zero": 3}, {"fsdp": True}):
        one = estimate(spec, Workload(mode="training", seq=512, cpu_offload=True, **sharding))
        two = estimate(
            spec, Workload(mode="training", seq=512, cpu_offload=True, gpus=2, **sharding)
        )
        assert one.components["weights"] == 0
        assert one.components.get("gathered_parameters", 0) > 0
        assert one.total_bytes >= two.total_bytes
