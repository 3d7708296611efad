"""What vLLM holds on a GPU besides its KV pool: the CUDA context and CUDA's reservation, the
scheduler settings its profile run follows, the memory that grows outside PyTorch during the
profile, the LoRA adapter slots and the CUDA graphs.

vLLM sizes itself at start-up (``gpu_worker.determine_available_memory``): it loads the weights,
runs one profiling forward of ``max_num_batched_tokens`` tokens and a sampler warm-up of
``max_num_seqs`` sequences, and measures the peak of PyTorch's allocator and the memory that
grew outside it (the activation peak itself is ``activations.vllm_profile_peak``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.activations import vllm_profile_peak
from vramgui.core.errors import Message, Setting, WorkloadError
from vramgui.core.model import ModelSpec, Role
from vramgui.core.units import GiB, MiB
from vramgui.core.vllm.rules import Rules
from vramgui.core.workload import Workload

# vLLM's scheduler defaults (EngineArgs._set_default_args): for `vllm serve`, GPUs of 70 GiB or
# more other than the A100 take 8192 batched tokens and 1024 sequences, the others 2048 and 256.
LARGE_GPU_BYTES = 70 * GiB
SERVE_BATCHED_TOKENS = (2048, 8192)
SERVE_MAX_SEQS = (256, 1024)
# The LoRA ranks vLLM accepts (LoRAConfig.max_lora_rank).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# CUDA's total (cudaMemGetInfo, the total vLLM multiplies by --gpu-memory-utilization) is what
# nvidia-smi reports less about 0.43 GiB: 23.58 GiB of an RTX 3090's 24,576 MiB (vllm issue
# 10517), 22.06-22.07 GiB of an L4's or A10G's 23,034 MiB, 79.22 GiB of an H100's 81,559 MiB
# (vllm pull request 10511).
CUDA_RESERVED_BYTES = round(0.43 * GiB)
# The CUDA context (PyTorch 2.x, lazy module loading) and NCCL's set-up exist before vLLM takes
# its snapshot of free memory; they stay outside the share --gpu-memory-utilization gives it.
CUDA_CONTEXT_BYTES = round(0.45 * GiB)
# Memory that grows outside PyTorch's allocator from the snapshot to the profile's end (kernel
# modules loaded by the profile, cuBLAS and attention workspaces), and with tensor parallelism
# the communication buffers created at the first collective (custom all-reduce, NCCL).
# 0.13-0.14 GiB at TP 1 and 0.54-0.55 GiB at TP 2 in vLLM 0.11's logs on H100s (llm-d/llm-d-benchmark).
NON_TORCH_BYTES = round(0.13 * GiB)
NON_TORCH_TP_BYTES = round(0.55 * GiB)
# CUDA graphs: each captured graph keeps its kernel nodes; vLLM captures one graph per batch size
# and piece (the pieces between attention calls), and FULL decode graphs of whole steps.
GRAPH_PIECE_BYTES = round(0.28 * MiB)


# Linear layers whose input features tensor parallelism splits (row parallel).
_ROW_PARALLEL = frozenset({"o_proj", "down_proj", "dense", "out_proj", "c_proj", "fc2", "wo"})


def lora_slot_bytes(spec: ModelSpec, workload: Workload, layers: Sequence[int]) -> int:
    """The adapter slots ``--enable-lora`` allocates on one GPU.

    vLLM gives every linear module of the decoder layers stacked A and B tensors for
    ``max_loras`` adapters of rank ``max_lora_rank``, in the model dtype, at load time.
    Column-parallel layers split B over the ranks, row-parallel ones A.
    """
    if not workload.enable_lora:
        return 0
    wanted = set(layers)
    tp = workload.tp
    elements = 0
    for t in spec.tensors:
        if t.layer not in wanted or t.is_bias or len(t.shape) != 2:
            continue
        if t.role not in (Role.ATTENTION, Role.MLP, Role.SHARED_EXPERT):
            continue
        out_features, in_features = t.shape
        if t.module in _ROW_PARALLEL:
            elements += in_features // tp + out_features
        else:
            elements += in_features + out_features // tp
    rank = workload.max_lora_rank
    return elements * rank * workload.max_loras * dtypes.DTYPE_BYTES[workload.dtype]


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The scheduler settings in effect: the command line's, or vLLM's defaults for the GPU."""

    max_num_seqs: int
    max_num_batched_tokens: int


def scheduler_settings(
    workload: Workload, total_bytes: int | None, gpu_name: str = ""
) -> Scheduler:
    """``--max-num-seqs`` and ``--max-num-batched-tokens`` as ``vllm serve`` sets them.

    Raises:
        WorkloadError: fewer batched tokens than sequences (vLLM refuses).
    """
    large = (
        total_bytes is not None
        and total_bytes >= LARGE_GPU_BYTES
        and "a100" not in gpu_name.lower()
    )
    tokens = workload.max_num_batched_tokens or SERVE_BATCHED_TOKENS[large]
    seqs = workload.max_num_seqs or min(SERVE_MAX_SEQS[large], tokens)
    if tokens < seqs:
        raise WorkloadError(
            Message(
                "vLLM needs {tokens} to be at least {seqs}",
                tokens=Setting("max_num_batched_tokens", tokens),
                seqs=Setting("max_num_seqs", seqs),
            )
        )
    return Scheduler(seqs, tokens)


def capture_sizes(scheduler: Scheduler, rules: Rules) -> tuple[int, ...]:
    """The batch sizes vLLM captures CUDA graphs for (VllmConfig._set_cudagraph_sizes)."""
    if rules.capture_step16:
        largest = min(2 * scheduler.max_num_seqs, 512, scheduler.max_num_batched_tokens)
        sizes = [n for n in (1, 2, 4) if n <= largest]
        sizes += range(8, min(largest + 1, 256), 8)
        sizes += range(256, largest + 1, 16)
    else:
        largest = min(512, scheduler.max_num_batched_tokens)
        sizes = [n for n in (1, 2, 4) if n <= largest] + list(range(8, largest + 1, 8))
    return tuple(sizes)


def cuda_graph_bytes(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler, rules: Rules, layers: int
) -> int:
    """Memory of the CUDA graphs vLLM captures on one GPU (0 with --enforce-eager).

    Piecewise graphs cut each step at every attention call (``layers + 1`` pieces per batch
    size); from 0.11 whole-step decode graphs are captured too, for batch sizes up to
    max_num_seqs. Each piece keeps its kernel nodes (:data:`GRAPH_PIECE_BYTES`, from the
    captures vLLM logs); the largest batch's activations are the graphs' shared pool.
    """
    if workload.enforce_eager:
        return 0
    sizes = capture_sizes(scheduler, rules)
    graphs = len(sizes) * (layers + 1)
    if rules.full_decode_graphs:
        graphs += sum(1 for n in sizes if n <= scheduler.max_num_seqs)
    pool = vllm_profile_peak(spec, workload, max(sizes), 0, rules.sampler)
    return graphs * GRAPH_PIECE_BYTES + pool


def non_torch_bytes(workload: Workload) -> int:
    """Memory outside PyTorch's allocator that grows during vLLM's profile."""
    return NON_TORCH_TP_BYTES if workload.tp > 1 else NON_TORCH_BYTES


def cuda_total_bytes(capacity_bytes: int) -> int:
    """What cudaMemGetInfo reports as the total of a GPU of ``capacity_bytes``."""
    return max(0, capacity_bytes - CUDA_RESERVED_BYTES)


def sampler_share(spec: ModelSpec, workload: Workload, scheduler: Scheduler, rules: Rules) -> int:
    """What only the last stage's profile adds (the sampler warm-up): earlier stages peak at
    their forward alone."""
    full = vllm_profile_peak(
        spec, workload, scheduler.max_num_batched_tokens, scheduler.max_num_seqs, rules.sampler
    )
    forward = vllm_profile_peak(spec, workload, scheduler.max_num_batched_tokens, 0, rules.sampler)
    return full - forward
