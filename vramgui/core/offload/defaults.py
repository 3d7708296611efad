"""The offloading package's defaults, the figures ``vramgui plan`` shows in its help.

Standard library only and importing nothing heavy, so that a command's help is printed without
building the planners (``vramgui.core.offload`` loads its modules when first used).
"""

from __future__ import annotations

from vramgui.core.engines import PLANNER_KEYS
from vramgui.core.units import GiB

# GPU memory "most that fit" leaves free: llama.cpp's own fitting (``--fit``) keeps 1024 MiB free
# per device by default (``--fit-target``), for the driver, the desktop and allocations it does not
# foresee.
DEFAULT_MARGIN_BYTES = GiB
# llama.cpp's --fit-ctx default: the smallest context --fit shrinks to.
DEFAULT_FIT_MIN_CONTEXT = 4096

# The share of peak memory bandwidth decoding reaches: with 80 % of the GPU's and 70 % of host
# RAM's, the roofline lands within 8 % of nine llama.cpp measurements that peak figures overrate by
# 19-46 % (docs/offload.md, "llama.cpp partial offload"). Speeds built from datasheet peaks
# (``expected_bandwidths``) take these shares by default.
GPU_MEMORY_EFFICIENCY = 0.8
HOST_MEMORY_EFFICIENCY = 0.7
# Host-side defaults the user may edit: dual-channel DDR5-4800, the base DDR5 speed, peaks at
# 76.8 GB/s (DDR4-3200: 51.2). A desktop CPU sustains well under 1 TFLOPS in llama.cpp's matrix
# kernels (8-16 cores with AVX2 / AVX-512).
DEFAULT_CPU_RAM_PEAK_BYTES_PER_S = 76_800_000_000
DEFAULT_CPU_RAM_BYTES_PER_S = round(DEFAULT_CPU_RAM_PEAK_BYTES_PER_S * HOST_MEMORY_EFFICIENCY)
DEFAULT_CPU_FLOPS = 500_000_000_000

# Each hand-over between a GPU and the CPU (or between GPUs) within a llama.cpp forward: the
# scheduler copies the activations across, waits for them and wakes the CPU's threads. Set from
# llmfit pull request 755 (RTX 2080 + i9-10900X, Qwen3-30B-A3B Q4_K_M, --n-cpu-moe 36: 36.7
# tokens/s measured, 60 from bytes alone; 72 hand-overs a token) and checked on Ollama issue
# 11772 (docs/offload.md).
LLAMACPP_SPLIT_SECONDS = 150e-6

# The placement rules, by name (``planners.plan``): each engine's (``Engine.planners``).
PLANNERS = PLANNER_KEYS
