"""Where each setting of a ``Workload`` applies: the modes, the engines and the fine-tuning methods
whose setup it is one of. ``Workload.unused`` and the profile comparison read this one table; a
setting outside a workload's scope says nothing of it (a vLLM memory share under llama.cpp, a
LoRA rank when serving).

A training step runs transformers' model code, so a training setup's engine is transformers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from vramgui.core.engines import ENGINES, Engine, StartUp


@dataclass(frozen=True, slots=True)
class Scope:
    """The setups a setting applies to; None: every one.

    Attributes:
        modes: the modes (``workload.MODES``).
        engines: the engines (``workload.ENGINES``); training counts as transformers.
        methods: the fine-tuning methods (``workload.METHODS``), for training settings.
    """

    modes: frozenset[str] | None = None
    engines: frozenset[str] | None = None
    methods: frozenset[str] | None = None

    def covers(self, mode: str, engine: str, method: str) -> bool:
        """Whether the setting applies to a setup of this mode, engine and method."""
        return all(
            allowed is None or value in allowed
            for allowed, value in (
                (self.modes, mode),
                (self.engines, engine),
                (self.methods, method),
            )
        )


def _scope(
    modes: str | None = None,
    engines: Callable[[Engine], bool] | None = None,
    methods: str | None = None,
) -> Scope:
    def names(text: str | None) -> frozenset[str] | None:
        return None if text is None else frozenset(text.split())

    keys = None if engines is None else frozenset(e.key for e in ENGINES if engines(e))
    return Scope(names(modes), keys, names(methods))


def _vllm(e: Engine) -> bool:
    return e.startup is StartUp.VLLM


def _sglang(e: Engine) -> bool:
    return e.startup is StartUp.SGLANG


def _servers(e: Engine) -> bool:
    return e.pre_allocates


def _ggml(e: Engine) -> bool:
    return e.ggml


def _eager(e: Engine) -> bool:
    return e.eager_pytorch


EVERY = _scope()
SERVING = _scope("inference")
TRAINING = _scope("training")
LORA = _scope("training", methods="lora qlora")
# The engines of each scope are those whose data says so (core/engines/): an engine that follows
# vLLM's start-up takes vLLM's settings.
VLLM = _scope("inference", _vllm)
SGLANG = _scope("inference", _sglang)
# What vLLM's and SGLang's start-up both read (core/vllm/startup.py, core/sglang_startup.py).
SERVERS = _scope("inference", _servers)
LLAMACPP = _scope("inference", _ggml)
TRANSFORMERS = _scope(engines=_eager)

# Every ``Workload`` field, by name (tests/core/test_workload.py checks that none is missing).
SCOPES: dict[str, Scope] = {
    "mode": EVERY,
    "batch": EVERY,
    "seq": EVERY,
    "dtype": EVERY,
    "quant": EVERY,
    "engine": SERVING,
    "kv_dtype": SERVING,
    "attention": EVERY,
    "method": TRAINING,
    "precision": TRAINING,
    "optimizer": TRAINING,
    "grad_checkpointing": TRAINING,
    "lora_rank": LORA,
    "lora_targets": LORA,
    "grad_accum": TRAINING,
    "gpus": EVERY,
    "zero": TRAINING,
    "fsdp": TRAINING,
    "tp": EVERY,
    "pp": EVERY,
    "overhead_bytes": EVERY,
    "gpu_memory_utilization": VLLM,
    "cpu_offload": TRAINING,
    "loop": TRAINING,
    "max_num_seqs": VLLM,
    "max_num_batched_tokens": VLLM,
    "enforce_eager": VLLM,
    "enable_lora": SERVERS,
    "max_loras": VLLM,
    "max_lora_rank": VLLM,
    "speculative": SERVERS,
    "num_speculative_tokens": SERVERS,
    "draft_model": SERVERS,
    "cpu_offload_gb": SERVERS,
    "enable_prefix_caching": VLLM,
    "vllm_version": VLLM,
    "gpu_arch": EVERY,
    "mtp": SERVERS,
    "mem_fraction_static": SGLANG,
    "sglang_version": SGLANG,
    "rope_scaling": EVERY,
    "rope_factor": EVERY,
    "rope_original_context": EVERY,
    "ubatch_size": LLAMACPP,
    "batch_size": LLAMACPP,
    "prompt": _scope("inference", _eager),
    "transformers_version": TRANSFORMERS,
}


@cache
def unused(mode: str, engine: str, method: str) -> frozenset[str]:
    """The settings that do not apply to a setup of this mode, engine and method."""
    if mode == "training":
        engine = "transformers"
    return frozenset(
        name for name, scope in SCOPES.items() if not scope.covers(mode, engine, method)
    )
