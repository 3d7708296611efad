"""Activations and compute buffers while serving, per GPU: the peak of vLLM's profiling forward
and llama.cpp's compute buffer (transformers' prefill is core/prefill's). The KV cache and the
weights are inference.py's."""

from __future__ import annotations

from vramgui.core import dtypes
from vramgui.core.model import ArchFacts, ModelSpec, Role
from vramgui.core.workload import Workload

# vLLM's profiling forward runs this many tokens (its default max_num_batched_tokens with chunked
# prefill) and samples this many sequences; both bound its activation peak.
VLLM_PROFILE_TOKENS = 8192
VLLM_PROFILE_SEQS = 256
# Its sampler holds fp32 logits, probabilities and log-probabilities of those sequences at once.
VLLM_SAMPLER_COPIES = 3
# llama.cpp's physical micro-batch (n_ubatch) default: its compute buffer is sized for it.
LLAMACPP_UBATCH = 512


def _shared_expert_width(spec: ModelSpec) -> int:
    """Intermediate width of the always-on shared expert(s) of one MoE layer."""
    facts = spec.facts
    layer = next((i for i, moe in enumerate(facts.moe_layers) if moe), None)
    if layer is None:
        return 0

    def compute() -> int:
        shared = sum(
            t.numel
            for t in spec.layer_tensors(layer)
            if t.role is Role.SHARED_EXPERT
            and not t.is_bias
            and len(t.shape) == 2
            and min(t.shape) > 1
        )
        return shared // ((3 if facts.gated_mlp else 2) * facts.hidden_size)

    return spec.cached("shared_expert_width", compute)


def _mlp_width(spec: ModelSpec, tokens: int) -> int:
    """MLP intermediate elements computed for ``tokens`` tokens (MoE: top-k experts plus shared)."""
    facts = spec.facts
    if not facts.is_moe:
        return tokens * facts.intermediate_size
    routed = tokens * facts.experts_per_token * facts.moe_intermediate_size
    shared = tokens * _shared_expert_width(spec)
    dense = tokens * facts.intermediate_size if not all(facts.moe_layers) else 0
    return max(routed + shared, dense)


# --- vLLM and llama.cpp -------------------------------------------------------------------------


def vllm_profile_peak(spec: ModelSpec, w: Workload, kv_heads: int) -> int:
    """Activation peak of vLLM's profiling forward (chunked prefill of max_num_batched_tokens)."""
    facts = spec.facts
    e = dtypes.DTYPE_BYTES[w.dtype]
    t = VLLM_PROFILE_TOKENS
    tp = w.tp
    q_dim = facts.num_heads * facts.head_dim // tp
    kv_dim = kv_heads * facts.head_dim
    inter = _mlp_width(spec, t) // tp
    # Merged gate_up output (2x), the activation, the fused qkv output, residual + normed input.
    per_token = (q_dim + 2 * kv_dim) * e + 2 * facts.hidden_size * e
    mlp = inter * e * (3 if facts.gated_mlp else 2)
    logits = VLLM_PROFILE_SEQS * facts.vocab_size * 4 * VLLM_SAMPLER_COPIES
    return t * per_token + mlp + logits


def llamacpp_compute_buffer(facts: ArchFacts, batch: int, seq: int) -> int:
    """llama.cpp's CUDA compute buffer: the graph of one micro-batch of n_ubatch tokens.

    Its peak holds one layer's KQ scores in fp32 (flash attention off, the default of the
    published logs), the f16 KQ mask and the micro-batch's hidden and MLP activations in fp32.
    """
    ub = min(LLAMACPP_UBATCH, seq * batch)
    ctx = seq * batch
    kq = ub * ctx * facts.num_heads * 4
    mask = ub * ctx * 2
    side = ub * (facts.hidden_size + facts.intermediate_size) * 4
    logits = ub * facts.vocab_size * 4
    return max(kq + mask, logits) + side
