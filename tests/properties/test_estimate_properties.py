"""Properties of the estimate that must hold for every model and setting, checked with hypothesis.

Models are the real configs of ``tests/data/families/configs.json`` (0.1B to 400B+) and the tiny
per-family configs; settings are drawn from every choice the CLI offers. Runs are derandomized and
bounded, so CI sees the same examples each time.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from vramgui.core import dtypes
from vramgui.core import workload as wl
from vramgui.core.errors import VramguiError
from vramgui.core.estimate import Estimate, estimate
from vramgui.core.families import spec_from_config
from vramgui.core.model import ModelSpec
from vramgui.core.workload import Workload

DATA = Path(__file__).resolve().parents[1] / "data" / "families"
BOUNDED = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
# Narrowest to widest, as bytes per element (q4_0 4.5 bits, q8_0 8.5 bits).
KV_WIDTHS = ("q4_0", "q8_0", "fp8", "fp16", "fp32")


@cache
def configs() -> dict[str, dict]:
    real = json.loads((DATA / "configs.json").read_text(encoding="utf-8"))
    tiny = json.loads((DATA / "tiny_configs.json").read_text(encoding="utf-8"))
    return {**real, **{f"tiny/{k}": v for k, v in tiny.items()}}


@cache
def spec_of(name: str) -> ModelSpec:
    return spec_from_config(configs()[name], name)


def max_seq(spec: ModelSpec) -> int:
    return max(1, min(spec.facts.max_position_embeddings or 32768, 32768))


models = st.sampled_from(sorted(configs()))

settings_of = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(wl.MODES),
        "batch": st.integers(1, 64),
        "seq_fraction": st.floats(0.0, 1.0),
        "dtype": st.sampled_from(wl.DTYPES),
        "quant": st.sampled_from(("none", "int8", "nf4", "gptq-int4", "fp8", "Q8_0", "Q4_K_M")),
        "engine": st.sampled_from(wl.ENGINES),
        "kv_dtype": st.sampled_from(wl.KV_DTYPES),
        "attention": st.sampled_from(wl.ATTENTIONS),
        "method": st.sampled_from(wl.METHODS),
        "precision": st.sampled_from(wl.PRECISIONS),
        "optimizer": st.sampled_from(wl.OPTIMIZERS),
        "grad_checkpointing": st.booleans(),
        "lora_rank": st.sampled_from((1, 8, 64)),
        "lora_targets": st.sampled_from((("all-linear",), wl.DEFAULT_LORA_TARGETS)),
        "gpus": st.sampled_from((1, 2, 4)),
        "zero": st.integers(0, 3),
        "fsdp": st.booleans(),
        "cpu_offload": st.booleans(),
    }
)


def workload_of(spec: ModelSpec, drawn: dict) -> Workload:
    """A valid workload from drawn settings (hypothesis rejects the example when none is)."""
    values = dict(drawn)
    values["seq"] = max(1, round(values.pop("seq_fraction") * max_seq(spec)))
    if values["fsdp"]:
        values["zero"] = 0
    try:
        return Workload(**values)
    except VramguiError:
        assume(False)
        raise


def estimate_or_reject(spec: ModelSpec, w: Workload) -> Estimate:
    """The estimate, or a rejected example when the setting does not apply to this model."""
    try:
        return estimate(spec, w)
    except VramguiError as exc:
        note(f"rejected: {exc}")
        assume(False)
        raise


def estimate_or_none(spec: ModelSpec, w: Workload) -> Estimate | None:
    try:
        return estimate(spec, w)
    except VramguiError:
        return None


def test_every_config_builds() -> None:
    assert len(configs()) > 80
    for name in configs():
        assert spec_of(name).parameters > 0, name


@BOUNDED
@given(model=models, drawn=settings_of)
def test_components_non_negative_and_total_is_their_sum(model: str, drawn: dict) -> None:
    spec = spec_of(model)
    result = estimate_or_reject(spec, workload_of(spec, drawn))
    assert all(isinstance(v, int) and v >= 0 for v in result.components.values()), result.components
    assert result.total_bytes == sum(result.components.values())
    assert result.host_bytes >= 0
    assert result.tensor_bytes <= result.total_bytes


def _grows(model: str, drawn: dict, field: str, small: object, large: object) -> None:
    spec = spec_of(model)
    base = workload_of(spec, drawn)
    try:
        low_w, high_w = base.with_(**{field: small}), base.with_(**{field: large})
    except VramguiError:
        assume(False)
        raise
    low = estimate_or_reject(spec, low_w)
    high = estimate_or_none(spec, high_w)
    assume(high is not None)
    assert high.total_bytes >= low.total_bytes, (
        f"{field} {small} -> {large}: {low.total_bytes} -> {high.total_bytes}\n"
        f"{low.components}\n{high.components}"
    )


@BOUNDED
@given(model=models, drawn=settings_of, a=st.integers(1, 256), b=st.integers(1, 256))
def test_memory_never_decreases_with_batch(model: str, drawn: dict, a: int, b: int) -> None:
    _grows(model, drawn, "batch", min(a, b), max(a, b))


@BOUNDED
@given(model=models, drawn=settings_of, a=st.floats(0, 1), b=st.floats(0, 1))
def test_memory_never_decreases_with_context(model: str, drawn: dict, a: float, b: float) -> None:
    limit = max_seq(spec_of(model))
    low, high = (max(1, round(x * limit)) for x in sorted((a, b)))
    _grows(model, drawn, "seq", low, high)


@BOUNDED
@given(model=models, drawn=settings_of, a=st.integers(1, 512), b=st.integers(1, 512))
def test_memory_never_decreases_with_lora_rank(model: str, drawn: dict, a: int, b: int) -> None:
    drawn = {
        **drawn,
        "mode": "training",
        "method": drawn["method"] if drawn["method"] != "full" else "lora",
    }
    _grows(model, drawn, "lora_rank", min(a, b), max(a, b))


@BOUNDED
@given(model=models, drawn=settings_of)
def test_memory_never_decreases_with_more_trainable_parameters(model: str, drawn: dict) -> None:
    """LoRA on the attention only, then on every linear layer (a superset of the targets)."""
    spec = spec_of(model)
    drawn = {**drawn, "mode": "training", "method": "lora"}
    attention_only = [
        t
        for t in ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "c_attn", "query_key_value")
        if any(f".{t}." in tensor.name for tensor in spec.tensors)
    ]
    assume(attention_only)
    _grows(model, drawn, "lora_targets", tuple(attention_only), ("all-linear",))


@BOUNDED
@given(model=models, drawn=settings_of, narrow=st.sampled_from(("fp16", "bf16")))
def test_a_wider_dtype_never_needs_less(model: str, drawn: dict, narrow: str) -> None:
    """Where ``dtype`` is what tensors are stored in: inference, and pure-precision training.

    (Under mixed precision the master weights are fp32 either way and ``dtype`` is only the
    autocast dtype; fp32 "autocast" keeps no 16-bit weight copies and may need less. Eager
    attention of some families upcasts the scores to fp32 in 16-bit runs and keeps both copies
    for backward, which an fp32 run does not: measured behaviour, so eager is left out here.)
    """
    attention = drawn["attention"] if drawn["attention"] != "eager" else "sdpa"
    drawn = {**drawn, "quant": "none", "kv_dtype": "auto", "dtype": narrow, "attention": attention}
    if drawn["mode"] == "training":
        drawn["precision"] = "pure"
    _grows(model, drawn, "dtype", narrow, "fp32")


@BOUNDED
@given(model=models, drawn=settings_of, a=st.sampled_from(KV_WIDTHS), b=st.sampled_from(KV_WIDTHS))
def test_a_wider_kv_cache_dtype_never_needs_less(model: str, drawn: dict, a: str, b: str) -> None:
    narrow, wide = sorted((a, b), key=KV_WIDTHS.index)
    _grows(model, {**drawn, "mode": "inference"}, "kv_dtype", narrow, wide)


def _per_gpu_never_grows(model: str, drawn: dict, steps: list[dict]) -> None:
    spec = spec_of(model)
    base = workload_of(spec, {**drawn, "mode": "training", "gpus": 1, "zero": 0, "fsdp": False})
    previous: Estimate | None = None
    for step in steps:
        try:
            w = base.with_(**step)
        except VramguiError:
            continue
        result = estimate_or_none(spec, w)
        if result is None:
            continue
        if previous is not None:
            assert result.total_bytes <= previous.total_bytes, (
                f"{step}: {previous.total_bytes} -> {result.total_bytes}\n"
                f"{previous.components}\n{result.components}"
            )
        previous = result


# From two GPUs up: going from one GPU to two adds what only exists between GPUs (DeepSpeed's
# reduce buckets, FSDP's gathered units), so that first step may grow by design.
SHARDED_GPUS = (2, 4, 8, 64)


@BOUNDED
@given(model=models, drawn=settings_of, stage=st.integers(1, 3))
def test_more_gpus_under_zero_never_need_more_per_gpu(model: str, drawn: dict, stage: int) -> None:
    _per_gpu_never_grows(model, drawn, [{"gpus": n, "zero": stage} for n in SHARDED_GPUS])


@BOUNDED
@given(model=models, drawn=settings_of)
def test_more_gpus_under_fsdp_never_need_more_per_gpu(model: str, drawn: dict) -> None:
    _per_gpu_never_grows(model, drawn, [{"gpus": n, "fsdp": True} for n in SHARDED_GPUS])


@BOUNDED
@given(model=models, drawn=settings_of, mode=st.sampled_from(wl.MODES))
def test_more_tensor_parallel_gpus_never_need_more_per_gpu(
    model: str, drawn: dict, mode: str
) -> None:
    spec = spec_of(model)
    base = workload_of(spec, {**drawn, "mode": mode, "gpus": 1, "zero": 0, "fsdp": False})
    previous: Estimate | None = None
    for n in (1, 2, 4, 8):
        try:
            w = base.with_(gpus=n, tp=n)
        except VramguiError:
            continue
        result = estimate_or_none(spec, w)
        if result is None:
            continue
        if previous is not None:
            assert _sharded_bytes(result) <= _sharded_bytes(previous), (
                n,
                previous.components,
                result.components,
            )
        previous = result


def _sharded_bytes(result: Estimate) -> int:
    if result.workload.engine == "sglang" and result.workload.mode == "inference":
        # SGLang's total is the GPU it needs, which holds what tensor parallelism itself adds
        # before loading (communication buffers) and the reserve its default fraction grows by
        # tp / 8 GiB: compare what is sharded.
        c = result.components
        return c["weights"] + c["kv_cache"] + c["activations"]
    # vLLM's non-torch memory (NCCL, custom all-reduce) grows with the tensor-parallel degree
    # (0.13 GiB per GPU at TP 1, 0.55 at TP 2 in vLLM 0.11's logs): on a small model it outweighs
    # what sharding saves. Without a GPU, the total is the GPU vLLM needs, which holds it over
    # --gpu-memory-utilization.
    non_torch = result.details.get("vllm_non_torch_bytes", 0)
    return result.total_bytes - round(non_torch / result.workload.gpu_memory_utilization)


QUANTIZED = [name for name in dtypes.SCHEMES if name not in ("none", "F16", "BF16")]


@settings(BOUNDED, max_examples=100)
@given(model=models, quant=st.sampled_from(QUANTIZED))
def test_a_quantized_model_never_needs_more_weight_memory_than_16_bit(
    model: str, quant: str
) -> None:
    spec = spec_of(model)
    assume(spec.quantization is None)
    seq = min(128, max_seq(spec))
    original = estimate(spec, Workload(dtype="bf16", seq=seq))
    # Served by an engine that keeps the scheme's size (transformers dequantizes GGUF).
    engine = wl.default_engine(quant)
    quantized = estimate_or_none(spec, Workload(dtype="bf16", seq=seq, quant=quant, engine=engine))
    assume(quantized is not None)
    assert quantized.components["weights"] <= original.components["weights"], (
        original.components["weights"],
        quantized.components["weights"],
    )
