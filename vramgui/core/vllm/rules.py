"""The vLLM versions whose start-up the estimate follows, as a table: one record per version
read, each field one thing that changed between them. The workload names a version
(``--vllm-version``, :data:`vramgui.core.workload.VLLM_VERSIONS`); :func:`rules_for` maps any
other release to the record it follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramgui.core.workload import VLLM_VERSIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """What one vLLM version does where the versions read differ.

    Attributes:
        version: the version these rules follow.
        cuda_graphs_in_pool: CUDA graph memory is profiled and taken from the pool before it is
            allocated (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default: read in 0.20.2);
            before, the graphs are captured after the pool, in the margin.
        tokens_from_concurrency: "GPU KV cache size: N tokens" is the concurrency times
            max_model_len (0.20.2); before, blocks per KV cache group times the block size.
        unify_page_sizes: layers of different page sizes get larger blocks until their pages
            match (0.20.2); 0.11 refuses such models.
        capture_step16: CUDA graph sizes past 256 go in steps of 16 and stop at twice
            max_num_seqs (0.11); before, steps of 8 up to 512.
        full_decode_graphs: FULL graphs of whole decode steps besides the piecewise ones (0.11).
        state_blocks_check: models with state layers refuse to start when --max-num-seqs
            exceeds the pool's blocks and FULL decode graphs are captured (0.20.2: each decoding
            sequence needs one state block).
        hybrid_prefix_caching: prefix caching is on by default for models with state layers
            (off in 0.10 to 0.24; on in 0.34).
        sampler: the top-k / top-p sampler vLLM finds: "flashinfer" where the FlashInfer
            package is installed (a dependency of vLLM from 0.20; in the Docker images
            before), else "pytorch".
        mxfp4_hopper_swizzle: on Hopper, the Triton MXFP4 MoE backend swizzles the expert
            weights and scales into triton_kernels' Hopper layouts (torch 2.8.1 and later:
            vLLM 0.11.1 on; 0.10 and 0.11.0 pin torch 2.8.0 or older and keep the strided
            layout, a view of the loaded tensors).
        encoder_profile: multimodal models profile their vision encoder first, on dummy images
            of the largest size, and keep the dummy inputs and the encoder's outputs through
            the text forward (``gpu_model_runner.profile_run``, read in 0.24.0): see
            :func:`encoder_profile`.
        near_equal_groups: where no kind of layer has 1.5 times as many layers as the rarest,
            every group holds as many layers as the commonest kind (one group per kind, the
            rarer padded: gpt-oss-20b with an EAGLE drafter's 13 full + 12 sliding); else
            groups hold as many as the rarest (``_get_kv_cache_groups_uniform_page_size``,
            read in 0.20.2; 0.11.0 always takes the rarest).
        qwen3_vl_video_profile: Qwen3-VL's profile encodes a dummy video of as many frames as
            max_model_len holds, counted at 12.5 prompt tokens per vision token, and its output
            is copied into a tensor of the encoder budget's rows kept through the text forward
            (``qwen3_vl.py``, ``profile_run``, read in 0.11.0): see
            :func:`~vramgui.core.vllm.encoders.qwen3_vl_video_profile`. The other towers are
            not modelled under these rules. Read in 0.11.0 and 0.11.2; 0.13.0 counts a
            video's vision tokens alone (an image then outweighs it) and caches the outputs as
            they are, as 0.20.2 does, so a 0.13 to 0.19 start-up taken under these rules
            counts a profile those versions no longer run.
    """

    version: str
    cuda_graphs_in_pool: bool
    tokens_from_concurrency: bool
    unify_page_sizes: bool
    capture_step16: bool
    full_decode_graphs: bool
    state_blocks_check: bool
    hybrid_prefix_caching: bool
    sampler: str
    mxfp4_hopper_swizzle: bool
    encoder_profile: bool
    near_equal_groups: bool = False
    qwen3_vl_video_profile: bool = False


RULES = {
    rules.version: rules
    for rules in (
        Rules(
            version="0.10",
            cuda_graphs_in_pool=False,
            tokens_from_concurrency=False,
            unify_page_sizes=False,
            capture_step16=False,
            full_decode_graphs=False,
            state_blocks_check=False,
            hybrid_prefix_caching=False,
            sampler="pytorch",
            mxfp4_hopper_swizzle=False,
            encoder_profile=False,
        ),
        Rules(
            version="0.11",
            cuda_graphs_in_pool=False,
            tokens_from_concurrency=False,
            unify_page_sizes=False,
            capture_step16=True,
            full_decode_graphs=True,
            state_blocks_check=False,
            hybrid_prefix_caching=False,
            sampler="pytorch",
            mxfp4_hopper_swizzle=True,
            encoder_profile=False,
            qwen3_vl_video_profile=True,
        ),
        Rules(
            version="0.20",
            cuda_graphs_in_pool=True,
            tokens_from_concurrency=True,
            unify_page_sizes=True,
            capture_step16=True,
            full_decode_graphs=True,
            state_blocks_check=True,
            hybrid_prefix_caching=False,
            sampler="flashinfer",
            mxfp4_hopper_swizzle=True,
            encoder_profile=True,
            near_equal_groups=True,
        ),
    )
}
if set(RULES) != set(VLLM_VERSIONS):  # pragma: no cover - a table kept in step with workload.py
    raise AssertionError("vllm.rules.RULES and workload.VLLM_VERSIONS must name the same versions")


def rules_for(version: str) -> Rules:
    """The rules of the newest version in :data:`RULES` not newer than ``version``
    (``0.10.1.1`` -> 0.10, ``0.20.2rc1`` -> 0.20)."""
    wanted = _version_key(version)
    chosen = min(RULES, key=_version_key)
    for name in RULES:
        if _version_key(chosen) < _version_key(name) <= wanted:
            chosen = name
    return RULES[chosen]


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)
