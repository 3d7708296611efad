"""What limits a step, in words for people: the ``bound`` values of the core's timings
(``core.speed``'s parts of a step, ``core.serving_steps``' host, ``core.offload``'s resources) as
the text outputs write them.
The JSON documents keep the values themselves."""

from __future__ import annotations

from vramgui.core import offload, serving_steps, speed

BOUND_WORDS = {
    speed.MATMUL: "compute-bound",
    speed.ATTENTION: "attention-bound",
    speed.MEMORY: "GPU-memory-bound",
    speed.OPTIMIZER: "optimizer-bound",
    speed.COMMUNICATION: "communication-bound",
    speed.LAUNCH: "kernel-launch-bound",
    speed.PIPELINE_BUBBLE: "pipeline-bubble-bound",
    speed.OFFLOAD: "offload-bound",
    offload.GPU_MEMORY: "GPU-memory-bound",
    offload.GPU_COMPUTE: "compute-bound",
    offload.CPU_MEMORY: "host-memory-bound",
    offload.CPU_COMPUTE: "CPU-compute-bound",
    offload.PCIE: "PCIe-bound",
    offload.DISK_READ: "disk-bound",
    offload.SYNC: "hand-over-bound",  # the waits between GPU and CPU within a forward
    serving_steps.HOST: "host-bound",  # a serving engine's own time per step outweighs the GPU's
}


def bound_text(bound: str) -> str:
    """``bound`` as a reader sees it, e.g. ``host-memory-bound`` for ``cpu_memory``."""
    return BOUND_WORDS.get(bound, f"{bound.replace('_', ' ')}-bound")
