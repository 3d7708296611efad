"""llama.cpp's own speed on one GPU: prompt processing and generation as ``llama-bench`` measures
them (ppN, tgN, ``@ dN``), for a model whose every layer is on the GPU.

A roofline at datasheet peaks overrates llama.cpp where users compare cards most: the kernels it
runs reach a share of the peaks that differs between kinds of GPU (benchmarks/data/llama_bench.json:
618 published rows on 20 GPUs: NVIDIA cards alone and split over several, the DGX Spark, the M2
Ultra, the M3 Max, the M3 Ultra and the RX 7900 XTX; docs/performance.md, "llama.cpp speed"):

- **Generation** reads every weight once per token (MMVQ's matrix-vector products on the
  quantized blocks, or a 16-bit GEMV) and every cached key and value (attention without flash
  attention: per-head products of a 128-wide row, then an fp32 softmax), and launches a fixed
  set of kernels per block. One token costs
  ``weights / (peak * weight_share) + kv(depth) / (peak * attention_share) + blocks * block_s``.
  On GDDR cards the weights stream at 0.85-0.96 of the peak; on HBM (A100, H100 PCIe) at 0.61:
  one token's products are too few to keep enough bytes in flight for HBM's latency. The cache
  is read at a far smaller share (0.1-0.46), which is why generation slows with depth; under
  flash attention one kernel reads it, at its own share. Sliding-window blocks of a model that
  interleaves them with full ones (gpt-oss, Gemma 2 and 3) keep and read their window only.
- **Prompt processing** cuts the prompt into micro-batches of ``-ub`` tokens. Each costs the
  weights' matrix products at a share of the 16-bit tensor peak with fp16 accumulation (what
  cuBLAS runs for llama.cpp; a GeForce card does it at twice the FP32-accumulate rate the
  catalog lists), the attention products over the context so far at that rate, the fp32 score
  matrix written and read four times (no flash attention: it grows with depth, so a long prompt
  is slower per token), for quantized weights their 16-bit copy (dequantized for cuBLAS, each
  micro-batch), and a fixed time per block.
- **A mixture of experts' prompt** runs each block's experts as one ``mul_mat_id`` (MMQ with
  the routing ids in current builds): each expert multiplies only the tokens routed to it, in
  tiles as wide as the micro-batch asks for (up to 128 columns), so at pp512 of gpt-oss-20b
  (32 experts, 4 a token: about 64 tokens each) every expert computes a 128-column tile, twice
  its tokens' products, and at pp128 eight times (``expert_columns``). On Ampere and Ada cards
  each token also takes, in each block with experts, a time published rows measured whose
  cause is not identified (``MOE_TOKEN_FLOPS``: 2.8 us on an RTX 3090).
- **The build** is a term: current builds (the default) multiply a quantized prompt on its
  blocks (MMQ, int8 tensor cores: no 16-bit copy) at their own share of the tensor peak, run
  flash attention's products at theirs (K x Q accumulated in fp32, P x V in fp16: 4/3 of a
  GeForce card's listed rate) with the score matrix on chip, and spend less per block when
  generating (CUDA graphs, fused kernels); builds before June 2024 (``DEQUANTIZE_CUBLAS``, the
  May 2024 rows) dequantize for cuBLAS.

Each share is set per kind of GPU by least squares over every published row of that kind
(``benchmarks/llama_bench.py --fit`` prints them), not on one case. A GPU, a quantization or a
setting (flash attention) no published row covers takes its kind's figures and the estimate says
it is extrapolated. Current builds' generation figures come from an RTX 4090's rows (pull
request 15035); other kinds take GeForce's ratio to their May 2024 figures, extrapolated.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Protocol

from vramgui.core.activations import llamacpp_flash_attention
from vramgui.core.errors import WorkloadError
from vramgui.core.model import LayerType, ModelSpec
from vramgui.core.offload.defaults import LLAMACPP_SPLIT_SECONDS
from vramgui.core.offload.placement import model_units
from vramgui.core.workload import Workload

if TYPE_CHECKING:  # core.speed builds on this module
    from vramgui.core.speed import Hardware

MEASURED = "measured"
EXTRAPOLATED = "extrapolated"
# The quantizations and settings the published rows cover.
MEASURED_QUANTS = frozenset({"Q4_K_M", "F16", "Q4_0", "Q4_K_S", "Q6_K"})
# The kernels a build multiplies a quantized prompt's weights with. Builds before June 2024
# wrote a 16-bit copy of each matrix per micro-batch and ran cuBLAS; from ggml-org/llama.cpp pull
# requests 7676 and 7860 on, MMQ multiplies the quantized blocks on int8 tensor cores (1.65x on
# an RTX 4090's Q4_0 and Q4_K_S prompts, 1.74x on an RTX 3090's Q6_K, in those pull requests).
DEQUANTIZE_CUBLAS = "dequantize + cuBLAS"
MMQ = "MMQ"
PROMPT_PATHS = (MMQ, DEQUANTIZE_CUBLAS)
# What the estimate assumes of the build (docs/performance.md, "llama.cpp speed").
BUILD_NOTE = (
    "llama.cpp's current kernels (MMQ for quantized prompts, flash attention as set): generation's "
    "weight reads and 16-bit prompts as builds of May 2024 measured them; MMQ, flash attention "
    "and generation's per-block time from rows of 2024-2026 builds"
)
# Bytes per score of the attention's fp32 KQ matrix, and the passes over it without flash
# attention: the product writes it, the softmax reads and writes it, the product with V reads it.
SCORE_BYTES = 4
SCORE_PASSES = 4
# Flash attention's cost per score does not fall below that of 128-wide heads: its per-score work
# (scaling, mask, sinks, the online softmax's exponentials and rescaling) is the same at any head
# dim, and at 64 it is as large as the products. The DGX Spark's rows of one build (benches/
# dgx-spark.md, build 6918) measure it: from depth 0 to 32768 the prompt's time grows by 10.4 and
# 9.2 ps per score and query head for gpt-oss-20b and 120b (64-wide heads), by 9.1 for
# Qwen3-30B-A3B (128-wide); costed by the FLOPs of 64-wide heads, gpt-oss's would be half.
FLASH_HEAD_DIM = 128
# MMQ's tiles for a mixture of experts' products (ggml-cuda mmq.cu, ``mul_mat_q_case``): one tile
# spans up to 128 token columns (Turing and later, RDNA), in steps of 8 below 48 columns and of 16
# from 48 on, the width picked per call from the micro-batch's tokens, not from the tokens each
# expert gets; an expert's tokens fill its tiles and the rest of the last tile is computed anyway.
MMQ_TILE_COLUMNS = 128
# A mixture of experts' prompt on Ampere and Ada cards costs, per token and block with routed
# experts, what MMQ would take for this many FLOPs beyond the experts' tiles and every product the
# estimate counts; the cause is not identified (not the router, the activations' quantization, the
# experts' f32 outputs nor stream-k's balance: docs/performance.md, "llama.cpp speed"). Least
# squares over the RTX 3090's Gemma 4 26B-A4B pp2048 rows at -ub 256, 512 and 1024 (pull request
# 22298's master column, `benchmarks/llama_bench.py --fit`): 2.8 us a token and block on the 3090;
# checked on the other Ampere and Ada rows (RTX 3090 gpt-oss-20b and DeepSeek-V2-Lite, RTX 4090
# gpt-oss-20b at 0.43 times the 3090's time, as its tensor rate gives). The DGX Spark's and RTX PRO
# 6000 Blackwell's rows (Blackwell) and the RX 7900 XTX's (RDNA 3) show none of it.
MOE_TOKEN_FLOPS = 2.8e8
MOE_TOKEN_ARCHITECTURES = frozenset({"Ampere", "Ada Lovelace"})
# GeForce names (RTX 2080 ... RTX 5090): their catalog tensor rate is FP32-accumulate, half the
# FP16-accumulate rate cuBLAS runs for llama.cpp's 16-bit products.
_GEFORCE = re.compile(r"^RTX [2-5]0[5-9]0")


@dataclass(frozen=True, slots=True)
class KernelShares:
    """What llama.cpp's kernels reach on one kind of GPU, set from published llama-bench rows.

    Attributes:
        kind: the kind of GPU, as the notes name it.
        weight_share: generation, share of peak memory bandwidth reading the weights.
        attention_share: generation, share of peak bandwidth reading the KV cache.
        block_seconds: generation, fixed time per block per token (kernel launches, small ops).
        matmul_share: prompt, share of the fp16-accumulate tensor peak the products reach (on
            Apple, of the GPU's 16-bit ALU peak).
        score_share: prompt, share of peak bandwidth moving the fp32 score matrix.
        mmq_share: prompt, share of the fp16-accumulate tensor peak MMQ's products on quantized
            weights reach (current builds); None where no row of the kind measured it, which
            then takes GeForce's gain over cuBLAS (``GpuKernels.mmq_share``).
        flash_share: prompt, share of the fp16-accumulate tensor peak flash attention's products
            reach; None where no row of the kind measured it (GeForce's ratio to cuBLAS then).
        dequant_share: prompt, share of peak bandwidth writing quantized weights' 16-bit copy.
        ubatch_block_seconds: prompt, fixed time per block per micro-batch.
        measured_gpus: the GPUs whose published rows set these figures.
        current_gpus: the GPUs whose rows of current builds set ``mmq_share`` and ``flash_share``,
            and the two figures of current builds' generation below.
        current_block_seconds: generation in current builds (CUDA graphs, fused kernels), fixed
            time per block per token; None where no current-build row of the kind set it, which
            then takes GeForce's ratio to May 2024 builds (``GpuKernels.blocks_seconds``).
        flash_cache_share: generation under flash attention, share of peak bandwidth reading the
            KV cache (one kernel reads each cached key and value once); None where no row of the
            kind set it, which then takes GeForce's.
        dequant_copy: whether builds before June 2024 wrote a 16-bit copy of a quantized prompt's
            weights for cuBLAS (CUDA, ROCm); Metal's mul_mm dequantizes each block inside the
            product, in every build, so its quantized products run at ``mmq_share`` and write
            no copy.
    """

    kind: str
    weight_share: float
    attention_share: float
    block_seconds: float
    matmul_share: float
    score_share: float
    dequant_share: float
    ubatch_block_seconds: float
    measured_gpus: tuple[str, ...]
    mmq_share: float | None = None
    flash_share: float | None = None
    current_gpus: tuple[str, ...] = ()
    current_block_seconds: float | None = None
    flash_cache_share: float | None = None
    dequant_copy: bool = True


# Least squares over each kind's rows of benchmarks/data/llama_bench.json, relative errors
# (``benchmarks/llama_bench.py --fit``), rounded to two figures.
GEFORCE = KernelShares(
    kind="GeForce (GDDR)",
    weight_share=0.96,
    attention_share=0.46,
    block_seconds=95e-6,
    matmul_share=0.61,
    score_share=0.60,
    dequant_share=0.96,
    ubatch_block_seconds=160e-6,
    measured_gpus=("RTX 3080 10GB", "RTX 4070 Ti", "RTX 4080", "RTX 3090", "RTX 4090"),
    mmq_share=0.68,
    flash_share=0.41,
    current_gpus=("RTX 4090", "RTX 3090"),
    current_block_seconds=45e-6,
    flash_cache_share=0.39,
)
WORKSTATION = KernelShares(
    kind="workstation / data-centre GDDR",
    weight_share=0.85,
    attention_share=0.32,
    block_seconds=65e-6,
    matmul_share=0.60,
    score_share=0.55,
    dequant_share=0.59,
    ubatch_block_seconds=620e-6,
    measured_gpus=("RTX A6000", "RTX 6000 Ada", "A40", "L40S"),
)
HBM = KernelShares(
    kind="data-centre HBM",
    weight_share=0.61,
    attention_share=0.20,
    block_seconds=100e-6,
    matmul_share=0.70,
    score_share=0.46,
    dequant_share=0.30,
    ubatch_block_seconds=740e-6,
    measured_gpus=("A100 SXM 80GB", "H100 PCIe"),
)
# Apple's prompts are costed on the GPU's 16-bit ALU peak (no tensor cores), Metal's mul_mm
# dequantizing quantized blocks inside the product (no 16-bit copy). The fit cannot tell the
# score matrix from the per-block time: the matrix moves at the kind's streaming share (its
# weight reads'), the rest is fitted (the M3 Max's rows held out).
UNIFIED = KernelShares(
    kind="Apple unified memory (Metal)",
    weight_share=0.85,
    attention_share=0.10,
    block_seconds=170e-6,
    matmul_share=0.79,
    score_share=0.85,
    dequant_share=0.0,
    ubatch_block_seconds=880e-6,
    measured_gpus=("Apple M2 Ultra 192GB",),
    mmq_share=0.63,
    dequant_copy=False,
)
# AMD's consumer cards on ROCm: rows of current builds only (generation at depth 0 and 4096,
# MMQ prompts, all with flash attention), so a 16-bit prompt's cuBLAS products, the score matrix,
# the per-block times and the cache read without flash attention are GeForce's kernels' figures
# or the flash figure.
RADEON = KernelShares(
    kind="AMD Radeon (ROCm)",
    weight_share=0.60,
    attention_share=0.84,
    block_seconds=GEFORCE.block_seconds,
    matmul_share=GEFORCE.matmul_share,
    score_share=GEFORCE.score_share,
    dequant_share=GEFORCE.dequant_share,
    ubatch_block_seconds=GEFORCE.ubatch_block_seconds,
    measured_gpus=("Radeon RX 7900 XTX",),
    mmq_share=0.44,
    flash_share=0.29,
    current_gpus=("Radeon RX 7900 XTX",),
    current_block_seconds=GEFORCE.current_block_seconds,
    flash_cache_share=0.84,
)
KINDS = (GEFORCE, WORKSTATION, HBM, UNIFIED, RADEON)


class GpuKind(Protocol):
    """What sets a GPU's kind for llama.cpp's kernels (``core.speed.Hardware``, a catalog entry)."""

    @property
    def name(self) -> str: ...
    @property
    def architecture(self) -> str: ...
    @property
    def memory_type(self) -> str: ...


def kernel_shares(gpu: GpuKind) -> KernelShares:
    """The kind of GPU ``gpu`` is, for llama.cpp's kernels: Apple (Metal), HBM, and on other
    memory whether it is a GeForce card (other LPDDR systems take the GDDR figures)."""
    if gpu.architecture.startswith("Apple"):
        return UNIFIED
    if gpu.memory_type.upper().startswith("HBM"):
        return HBM
    if gpu.architecture.startswith("RDNA"):
        return RADEON
    return GEFORCE if _GEFORCE.match(gpu.name) else WORKSTATION


def fp16_accumulate_flops(hardware: Hardware) -> float:
    """The 16-bit tensor rate cuBLAS reaches with fp16 accumulation: twice a GeForce card's
    FP32-accumulate rate, the listed rate elsewhere."""
    return _fp16_accumulate(hardware.name, hardware.flops)


def _fp16_accumulate(name: str, listed_flops: float) -> float:
    return listed_flops * (2.0 if _GEFORCE.match(name) else 1.0)


def _flash_rate(name: str, listed_flops: float) -> float:
    """The tensor rate of flash attention's products (ggml-cuda fattn-mma-f16: K x Q accumulated
    in fp32, the probabilities x V in fp16): on a GeForce card half the products at the listed
    FP32-accumulate rate and half at twice it, 4/3 of the listed rate; the listed rate
    elsewhere."""
    return listed_flops * (4.0 / 3.0 if _GEFORCE.match(name) else 1.0)


@dataclass(frozen=True, slots=True)
class GpuKernels:
    """llama.cpp's kernels on one GPU: its kind's shares and the peaks they are shares of. The
    one place the terms of ``decode`` and ``prefill`` are costed, for a whole model on one GPU
    and, through ``core.offload.Bandwidths``, for the layers an offload plan keeps on each GPU.

    Attributes:
        gpu: the GPU's name.
        shares: its kind's shares.
        memory_bytes_per_s: peak memory bandwidth.
        tensor_flops: the fp16-accumulate 16-bit tensor rate (``fp16_accumulate_flops``); 0
            where the GPU's rate is unknown, so no prompt is costed.
        flash_flops: the rate of flash attention's products, half of them accumulated in fp32.
        prompt_path: the kernels of a quantized prompt's products (``PROMPT_PATHS``): MMQ in
            current builds, a 16-bit copy and cuBLAS in builds before June 2024.
        moe_token_flops: a mixture of experts' prompt, MMQ's FLOPs that cost as much as what
            each token takes in each block with routed experts beyond the products
            (``MOE_TOKEN_FLOPS`` on Ampere and Ada cards, none elsewhere).
    """

    gpu: str
    shares: KernelShares
    memory_bytes_per_s: float
    tensor_flops: float
    flash_flops: float
    prompt_path: str = MMQ
    moe_token_flops: float = 0.0

    @property
    def prompts(self) -> bool:
        """Whether prompt processing is costed on this GPU (its 16-bit rate is known)."""
        return self.tensor_flops > 0

    def weights_seconds(self, read_bytes: float) -> float:
        """Generation: reading ``read_bytes`` of weights."""
        return read_bytes / (self.memory_bytes_per_s * self.shares.weight_share)

    def cache_seconds(self, kv_bytes: float, *, flash: bool = False) -> float:
        """Generation: reading ``kv_bytes`` of KV cache, by flash attention's kernel or the
        products and softmax of attention without it."""
        share = self.shares.attention_share
        if flash:
            share = _kind_or_geforce(self.shares.flash_cache_share, GEFORCE.flash_cache_share)
        return kv_bytes / (self.memory_bytes_per_s * share)

    def blocks_seconds(self, blocks: float) -> float:
        """Generation: the fixed time of ``blocks`` blocks for one token, in the build
        ``prompt_path`` marks (MMQ: current builds, whose CUDA graphs and fused kernels cut it;
        a kind without current-build rows at GeForce's ratio to May 2024 builds)."""
        if self.prompt_path != MMQ:
            return blocks * self.shares.block_seconds
        if self.shares.current_block_seconds is not None:
            return blocks * self.shares.current_block_seconds
        current = _kind_or_geforce(None, GEFORCE.current_block_seconds)
        return blocks * self.shares.block_seconds * current / GEFORCE.block_seconds

    def matmul_seconds(self, flops: float) -> float:
        """``flops`` of 16-bit matrix products on the tensor cores (cuBLAS)."""
        return flops / (self.tensor_flops * self.shares.matmul_share)

    def weight_products_seconds(self, flops: float, *, quantized: bool) -> float:
        """Prompt: ``flops`` of products with the weights; quantized weights run MMQ where the
        build has it (and Metal's in-kernel dequantization in every build), 16-bit weights (and
        quantized ones in older CUDA builds) cuBLAS."""
        if quantized and (self.prompt_path == MMQ or not self.shares.dequant_copy):
            return flops / (self.tensor_flops * self.mmq_share)
        return self.matmul_seconds(flops)

    def attention_products_seconds(self, flops: float, *, flash: bool) -> float:
        """Prompt: ``flops`` of attention products, in the flash-attention kernel or cuBLAS."""
        if flash:
            return flops / (self.flash_flops * self.flash_share)
        return self.matmul_seconds(flops)

    @property
    def mmq_share(self) -> float:
        """MMQ's share of the tensor peak: its kind's rows, else GeForce's gain over cuBLAS."""
        return self._measured_or_geforce(self.shares.mmq_share, "mmq_share")

    @property
    def flash_share(self) -> float:
        """Flash attention's share of its rate (``flash_flops``): its kind's rows, else
        GeForce's (the same kernel, costed on each GPU's own rate)."""
        return _kind_or_geforce(self.shares.flash_share, GEFORCE.flash_share)

    def _measured_or_geforce(self, share: float | None, name: str) -> float:
        if share is not None:
            return share
        reference: float | None = getattr(GEFORCE, name)
        assert reference is not None  # GEFORCE's rows set it
        return self.shares.matmul_share * reference / GEFORCE.matmul_share

    def prompt_memory_seconds(self, score_bytes: float, dequant_bytes: float) -> float:
        """Prompt: the fp32 score matrix moved and, in builds without MMQ, quantized weights'
        16-bit copies written."""
        peak = self.memory_bytes_per_s
        scores = score_bytes / (peak * self.shares.score_share) if score_bytes else 0.0
        if not dequant_bytes or self.prompt_path == MMQ or not self.shares.dequant_copy:
            return scores
        return scores + dequant_bytes / (peak * self.shares.dequant_share)

    def moe_tokens_seconds(self, token_blocks: float, *, quantized: bool) -> float:
        """Prompt: the measured time a mixture of experts' tokens take beyond the products, for
        ``token_blocks`` tokens x blocks with routed experts (quantized weights, MMQ)."""
        if not quantized or self.prompt_path != MMQ or not self.moe_token_flops:
            return 0.0
        return token_blocks * self.moe_token_flops / (self.tensor_flops * self.mmq_share)

    def ubatch_blocks_seconds(self, blocks: float) -> float:
        """Prompt: the fixed time of ``blocks`` blocks x micro-batches."""
        return blocks * self.shares.ubatch_block_seconds


def _kind_or_geforce(share: float | None, geforce: float | None) -> float:
    """A kind's own figure where its rows set it, else GeForce's (whose rows set them all)."""
    figure = share if share is not None else geforce
    assert figure is not None  # GEFORCE's rows set every current-build figure
    return figure


def gpu_kernels(hardware: Hardware, prompt_path: str = MMQ) -> GpuKernels:
    """llama.cpp's kernels on ``hardware`` (a build whose quantized prompts run ``prompt_path``)."""
    return kernels_for(hardware, hardware.memory_bytes_per_s, hardware.flops, prompt_path)


def kernels_for(
    gpu: GpuKind, memory_bytes_per_s: float, fp16_flops: float | None, prompt_path: str = MMQ
) -> GpuKernels:
    """llama.cpp's kernels on ``gpu`` of these peaks: memory bandwidth and the listed 16-bit
    tensor rate (None where it is unknown: generation is costed, no prompt)."""
    if prompt_path not in PROMPT_PATHS:
        raise WorkloadError(f"prompt path {prompt_path!r}: one of {', '.join(PROMPT_PATHS)}")
    shares = kernel_shares(gpu)
    flops = _fp16_accumulate(gpu.name, fp16_flops or 0.0)
    flash = _flash_rate(gpu.name, fp16_flops or 0.0)
    moe = MOE_TOKEN_FLOPS if gpu.architecture in MOE_TOKEN_ARCHITECTURES else 0.0
    return GpuKernels(gpu.name, shares, memory_bytes_per_s, flops, flash, prompt_path, moe)


def quantized(workload: Workload) -> bool:
    """Whether cuBLAS's prompt products need a 16-bit copy of the weights (not F16 / BF16)."""
    return workload.quant.upper() not in ("F16", "BF16", "NONE")


def prompt_attention(
    workload: Workload,
    tokens: int,
    depth: int,
    width: float,
    heads: float,
    *,
    window: int | None = None,
) -> tuple[float, float]:
    """Attention FLOPs and fp32 score-matrix bytes of ``tokens`` prompt tokens after ``depth``
    in micro-batches of ``workload.ubatch_size``, for attention ``width`` (query heads x head
    dim) and ``heads`` query heads: each micro-batch attends to the cells cached so far, or in
    sliding-window layers to the last ``window`` and its own (llama.cpp keeps that many cells
    for them). No score bytes under flash attention, which keeps the matrix on chip; its FLOPs
    are counted for heads at least ``FLASH_HEAD_DIM`` wide (the cost of a narrower head's
    score)."""
    if tokens < 1 or depth < 0:
        raise WorkloadError("a prompt needs at least one token and a depth of 0 or more")
    ubatch = max(1, workload.ubatch_size)
    flash = llamacpp_flash_attention(workload)
    flops = scores = 0.0
    for i in range(math.ceil(tokens / ubatch)):
        n = min(ubatch, tokens - i * ubatch)
        context = depth + i * ubatch + n  # the cache cells the micro-batch attends to
        if window is not None:
            context = min(context, window + n)
        flops += 4.0 * n * context * (max(width, FLASH_HEAD_DIM * heads) if flash else width)
        if not flash:
            scores += SCORE_BYTES * SCORE_PASSES * n * context * heads
    return flops, scores


@dataclass(frozen=True, slots=True)
class LlamaCppSpeed:
    """One llama-bench figure as estimated.

    Attributes:
        tokens_per_second: tokens processed (prompt) or generated per second.
        seconds: time for the tokens asked.
        basis: "measured" where published rows of this GPU and quantization set the figures,
            "extrapolated" where the GPU's kind, but not the GPU or the quantization, has rows.
        kind: the kind of GPU whose shares were used.
        notes: what the estimate assumes, and why it is extrapolated where it is.
    """

    tokens_per_second: float
    seconds: float
    basis: str
    kind: str
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Model:
    weight_bytes: float  # read per generated token (the routed experts one token uses)
    dense_weight_bytes: float  # 16-bit copy of every matrix (cuBLAS's dequantized weights)
    matmul_flops: float  # per token: 2 per active weight
    kv_bytes_per_token: float  # cache bytes per token of context (full-attention blocks)
    attention_width: float  # sum over full-attention blocks of query heads x head dim
    score_heads: float  # sum over full-attention blocks of query heads
    blocks: int
    moe: bool  # routed experts: llama.cpp's mul_mat_id kernels
    expert_parameters: float = 0.0  # every routed expert's weights, all blocks
    experts: int = 0  # routed experts per block
    experts_per_token: int = 0  # routed experts each token runs through
    window: int | None = None  # sliding-window blocks: the cells they keep and attend to
    window_kv_bytes_per_token: float = 0.0  # as above, of the sliding-window blocks
    window_width: float = 0.0
    window_heads: float = 0.0
    moe_blocks: int = 0  # blocks with routed experts


def _model(spec: ModelSpec, workload: Workload) -> _Model:
    w = Workload(
        mode="inference",
        batch=1,
        seq=1,
        quant=workload.quant,
        engine="llamacpp",
        kv_dtype=workload.kv_dtype,
        dtype=workload.dtype,
    )
    weights = dense = flops = expert_params = 0.0
    experts = per_token = moe_blocks = 0
    types = spec.facts.layer_types or (LayerType.FULL,) * spec.facts.num_layers
    # llama.cpp windows the blocks of models that interleave sliding and full attention (Gemma 2
    # and 3, gpt-oss); a model whose every block slides (Mistral 7B v0.1) runs full attention.
    window = spec.facts.sliding_window if LayerType.FULL in types else None
    # [full-attention blocks, sliding-window blocks]: cache bytes, query width, query heads
    attention = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    for unit in model_units(spec, w):
        params = float(unit.parameters - unit.expert_parameters)
        if unit.index == 0 and not unit.read_bytes:
            params = 0.0  # an embedding lookup, no product
        weights += unit.read_bytes
        dense += 2.0 * params + 2.0 * unit.expert_parameters
        if unit.experts:
            moe_blocks += 1
            expert_params += unit.expert_parameters
            experts, per_token = unit.experts, unit.experts_per_token
            weights += unit.expert_bytes * unit.experts_per_token / unit.experts
            params += unit.expert_parameters * unit.experts_per_token / unit.experts
        flops += 2.0 * params
        block = unit.index - 1
        sliding = (
            window is not None and 0 <= block < len(types) and types[block] is LayerType.SLIDING
        )
        terms = attention[1 if sliding else 0]
        terms[0] += unit.kv_cache_bytes
        terms[1] += unit.attention_width
        terms[2] += unit.attention_heads
    (kv, width, heads), (window_kv, window_width, window_heads) = attention
    return _Model(weights, dense, flops, kv, width, heads, spec.facts.num_layers, bool(experts),
                  expert_params, experts, per_token, window if window_kv else None, window_kv,
                  window_width, window_heads, moe_blocks)  # fmt: skip


def speed_basis(
    gpu: GpuKind, workload: Workload, *, moe: bool, prompt: bool = True, prompt_path: str = MMQ
) -> tuple[str, tuple[str, ...]]:
    """Whether published rows of ``gpu`` and the workload's quantization and settings set the
    figures (``measured``) or only its kind's (``extrapolated``), and the notes that say so;
    ``prompt``: whether the figures include a prompt's processing by ``prompt_path`` (MMQ's
    rows count then)."""
    shares = kernel_shares(gpu)
    notes = [BUILD_NOTE]
    quant = workload.quant
    gpu_measured = gpu.name in shares.measured_gpus
    quant_measured = quant.upper() in MEASURED_QUANTS
    flash = llamacpp_flash_attention(workload)
    if not gpu_measured:
        notes.append(
            f"no published llama-bench row on the {gpu.name}: the shares of "
            f"{shares.kind} GPUs ({', '.join(shares.measured_gpus)}), extrapolated"
        )
    if not quant_measured:
        notes.append(
            f"no published llama-bench row in {quant}: the shares of "
            f"{', '.join(sorted(MEASURED_QUANTS))}"
        )
    mmq = prompt and prompt_path == MMQ and quantized(workload)
    mmq_measured = shares.mmq_share is not None or not mmq
    if not mmq_measured:
        notes.append(
            f"quantized prompt products (MMQ, current builds): no published row on {shares.kind} "
            "GPUs; GeForce's measured gain over cuBLAS, extrapolated"
        )
    elif mmq and not shares.current_gpus:
        mmq_measured = False
        notes.append(
            f"quantized prompt products: as builds of May 2024 ran them on {shares.kind} GPUs "
            "(dequantized inside the product); no row of a current build, extrapolated"
        )
    # Flash attention's figures for what is costed: a prompt's products, or generation's
    # cache read.
    flash_measured = (shares.flash_share if prompt else shares.flash_cache_share) is not None
    if flash and flash_measured:
        notes.append(
            "flash attention (-fa on, llama.cpp's default): as rows of "
            f"{', '.join(shares.current_gpus)} with -fa 1 measured it"
        )
    elif flash:
        notes.append(
            f"flash attention (-fa on, llama.cpp's default): no published row on {shares.kind} "
            "GPUs; its products and cache read at GeForce's measured shares, extrapolated"
        )
    current_generation = not prompt and prompt_path == MMQ
    generation_measured = not current_generation or shares.current_block_seconds is not None
    if not generation_measured:
        notes.append(
            f"generation in current builds: no published row on {shares.kind} GPUs; their May "
            "2024 per-block time at GeForce's measured ratio to current builds, extrapolated"
        )
    if moe:
        notes.append(
            "mixture of experts: generation reads the experts a token uses, a prompt's experts "
            "are costed as MMQ's tiles compute them (each expert's share of the micro-batch, "
            "taken as even, padded to whole tiles), on Ampere and Ada cards with a time per "
            "token and block that published rows measured and no known cause explains; the "
            "published prompt rows sit within 25 % of it on the RTX 3090 and 4090, "
            "DeepSeek-V2-Lite's on a DGX Spark at a quarter of it: read the prompt speed as "
            "rough"
        )
    measured = (
        gpu_measured
        and quant_measured
        and mmq_measured
        and (flash_measured or not flash)
        and generation_measured
        and not moe
    )
    return (MEASURED if measured else EXTRAPOLATED), tuple(notes)


def generation_terms(spec: ModelSpec, workload: Workload, depth: float) -> tuple[float, float, int]:
    """Bytes of weights and of KV cache one generated token reads at ``depth`` tokens of context,
    and the blocks it runs: the terms ``decode`` costs (``benchmarks/llama_bench.py --fit``)."""
    return _generation_terms(_model(spec, workload), depth)


def moe_blocks(spec: ModelSpec, workload: Workload) -> int:
    """Blocks with routed experts, whose tokens each take ``GpuKernels.moe_tokens_seconds``
    (``benchmarks/llama_bench.py --fit``)."""
    return _model(spec, workload).moe_blocks


def _generation_terms(m: _Model, depth: float) -> tuple[float, float, int]:
    windowed = m.window_kv_bytes_per_token * min(depth, m.window or 0)
    return m.weight_bytes, m.kv_bytes_per_token * depth + windowed, m.blocks


def prompt_terms(
    spec: ModelSpec, workload: Workload, tokens: int, depth: int, prompt_path: str = MMQ
) -> tuple[float, float, float, float, int]:
    """What processing ``tokens`` prompt tokens after ``depth`` costs, in micro-batches of
    ``workload.ubatch_size``: FLOPs of the products with the weights (a mixture of experts' as
    ``prompt_path`` tiles them: ``expert_columns``), of the attention, bytes of the fp32 score
    matrix (none under flash attention, which keeps it on chip), bytes of the quantized weights'
    16-bit copies (written only by builds without MMQ), and blocks x micro-batches."""
    return _prompt_terms(_model(spec, workload), workload, tokens, depth, prompt_path)


@cache
def expert_columns(tokens: int, experts: int, per_token: int) -> float:
    """Token columns each routed expert's product computes, on average, for a micro-batch of
    ``tokens`` under MMQ (``ggml_cuda_mul_mat_q`` with ids, current builds): the tokens routed to
    it padded to whole tiles of the width MMQ picks for the micro-batch, the narrowest that
    covers ``tokens`` in the fewest tiles of at most ``MMQ_TILE_COLUMNS``; an expert no token
    goes to computes nothing. Each token is taken to pick its experts at random (llama-bench's
    random tokens), so an expert's tokens are binomial: at pp512 of gpt-oss-20b (32 experts, 4 a
    token) an expert gets about 64 tokens in a 128-wide tile, twice the products of the tokens
    alone; at -ub 1024 about 128, and the half of the experts routed more than 128 compute a
    second tile (189 columns on average for 128 tokens)."""
    if tokens < 1 or experts < 1 or per_token < 1 or per_token > experts:
        raise WorkloadError("expert columns need a token and an expert")
    fewest = math.ceil(tokens / MMQ_TILE_COLUMNS)
    need = math.ceil(tokens / fewest)
    step = 16 if need > 40 else 8  # widths of 48 and more come in steps of 16
    width = min(MMQ_TILE_COLUMNS, math.ceil(need / step) * step)
    p = per_token / experts
    if p == 1.0:
        return float(math.ceil(tokens / width) * width)
    mean, spread = tokens * p, math.sqrt(tokens * p * (1.0 - p))
    low, high = max(0, int(mean - 12 * spread)), min(tokens, math.ceil(mean + 12 * spread))
    columns = 0.0
    for n in range(max(1, low), high + 1):
        log_pmf = (
            math.lgamma(tokens + 1) - math.lgamma(n + 1) - math.lgamma(tokens - n + 1)
            + n * math.log(p) + (tokens - n) * math.log1p(-p)
        )  # fmt: skip
        columns += math.exp(log_pmf) * math.ceil(n / width) * width
    return columns


def expert_tile_flops(
    expert_parameters: float, experts: int, per_token: int, tokens: int, ubatch: int
) -> float:
    """FLOPs MMQ's tiles add to the routed experts' products of ``tokens`` prompt tokens in
    micro-batches of ``ubatch``, beyond the products of the tokens themselves
    (``expert_columns``), for ``expert_parameters`` weights over ``experts`` experts."""
    extra = 0.0
    for start in range(0, tokens, max(1, ubatch)):
        n = min(max(1, ubatch), tokens - start)
        padded = expert_columns(n, experts, per_token)
        extra += 2.0 * expert_parameters * (padded - n * per_token / experts)
    return extra


def _prompt_terms(
    m: _Model, workload: Workload, tokens: int, depth: int, prompt_path: str = MMQ
) -> tuple[float, float, float, float, int]:
    attention, scores = prompt_attention(workload, tokens, depth, m.attention_width, m.score_heads)
    if m.window is not None:
        sliding = prompt_attention(
            workload, tokens, depth, m.window_width, m.window_heads, window=m.window
        )
        attention, scores = attention + sliding[0], scores + sliding[1]
    ubatch = max(1, workload.ubatch_size)
    passes = math.ceil(tokens / ubatch)
    weights = m.matmul_flops * tokens
    if m.moe and prompt_path == MMQ and quantized(workload):
        weights += expert_tile_flops(
            m.expert_parameters, m.experts, m.experts_per_token, tokens, ubatch
        )
    dequant = passes * m.dense_weight_bytes if quantized(workload) else 0.0
    return weights, attention, scores, dequant, passes * m.blocks


def decode(
    spec: ModelSpec,
    workload: Workload,
    hardware: Hardware,
    depth: int = 0,
    tokens: int = 1,
    *,
    gpus: int = 1,
    prompt_path: str = MMQ,
) -> LlamaCppSpeed:
    """Generation speed of ``tokens`` tokens from ``depth`` tokens of context (llama-bench's
    ``tg<tokens> @ d<depth>``), every layer on the GPU, or split by layers over ``gpus`` GPUs of
    this kind (llama.cpp's default split): they work in turn, so the step is one GPU's plus a
    hand-over between each two (the offload model's ``LLAMACPP_SPLIT_SECONDS``). The build is
    the one whose quantized prompts run ``prompt_path`` (MMQ: current builds)."""
    if tokens < 1 or depth < 0 or gpus < 1:
        raise WorkloadError("generation needs at least one token, one GPU and a depth of 0 or more")
    kernels = gpu_kernels(hardware, prompt_path)
    m = _model(spec, workload)
    # The cost is linear in the depth: the mean token sees the mean depth.
    weights, kv, blocks = _generation_terms(m, depth + (tokens - 1) / 2)
    step = (
        kernels.weights_seconds(weights)
        + kernels.cache_seconds(kv, flash=llamacpp_flash_attention(workload))
        + kernels.blocks_seconds(blocks)
        + (gpus - 1) * LLAMACPP_SPLIT_SECONDS
    )
    basis, notes = speed_basis(hardware, workload, moe=m.moe, prompt=False, prompt_path=prompt_path)
    if gpus > 1:
        notes += (
            f"split by layers over {gpus} GPUs: they work in turn, "
            f"{LLAMACPP_SPLIT_SECONDS * 1e6:.0f} us per hand-over",
        )
    return LlamaCppSpeed(1.0 / step, tokens * step, basis, kernels.shares.kind, notes)


def prefill(
    spec: ModelSpec,
    workload: Workload,
    hardware: Hardware,
    tokens: int,
    depth: int = 0,
    *,
    prompt_path: str = MMQ,
) -> LlamaCppSpeed:
    """Prompt processing speed of ``tokens`` tokens after ``depth`` (llama-bench's
    ``pp<tokens> @ d<depth>``), every layer on the GPU, by a build whose quantized prompts run
    ``prompt_path`` (MMQ: current builds)."""
    kernels = gpu_kernels(hardware, prompt_path)
    m = _model(spec, workload)
    weights, attention, scores, dequant, blocks = _prompt_terms(
        m, workload, tokens, depth, prompt_path
    )
    seconds = (
        kernels.weight_products_seconds(weights, quantized=quantized(workload))
        + kernels.attention_products_seconds(attention, flash=llamacpp_flash_attention(workload))
        + kernels.prompt_memory_seconds(scores, dequant)
        + kernels.ubatch_blocks_seconds(blocks)
        + kernels.moe_tokens_seconds(tokens * m.moe_blocks, quantized=quantized(workload))
    )
    basis, notes = speed_basis(hardware, workload, moe=m.moe, prompt_path=prompt_path)
    return LlamaCppSpeed(tokens / seconds, seconds, basis, kernels.shares.kind, notes)
