"""llama.cpp's placement (``-ngl N``): the last N repeating blocks on the GPU, the output
unit only when every block is there, token embeddings in host memory, each block's KV cache
with its block unless ``--no-kv-offload``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramgui.core.model import ModelSpec
from vramgui.core.offload.budget import (
    HostRam,
    compute_buffers,
    engine_workload,
    finish,
    overhead,
)
from vramgui.core.offload.placement import (
    CPU,
    DISK,
    ModelUnit,
    PlacedUnit,
    Placement,
    gpu_device,
    is_gpu,
    model_units,
)
from vramgui.core.workload import Workload


@dataclass(frozen=True, slots=True)
class LlamaCppModel:
    """A model as llama.cpp places it, sized once: re-placing at another ``-ngl`` is cheap.

    Attributes:
        units: the placement units under the workload's quantization.
        workload: the settings (engine llama.cpp).
        buffers_bytes: llama.cpp's compute buffer on the GPU.
        tied_copy_bytes: the GPU copy of tied embeddings the output layer holds (0 if untied).
    """

    units: tuple[ModelUnit, ...]
    workload: Workload
    buffers_bytes: int
    tied_copy_bytes: int

    @property
    def blocks(self) -> int:
        return len(self.units) - 2

    def on_gpu(self, unit: ModelUnit, n_gpu_layers: int) -> bool:
        """llama.cpp's rule: blocks from index n_layer - ngl up, the output only when ngl > n_layer."""
        n = self.blocks
        if unit.index == n + 1:
            return n_gpu_layers > n
        return unit.index > 0 and unit.index - 1 >= n - n_gpu_layers

    def gpu_weight_bytes(self, unit: ModelUnit) -> int:
        return unit.bytes + (self.tied_copy_bytes if unit.index == self.blocks + 1 else 0)

    def gpu_tensor_bytes(self, n_gpu_layers: int, kv_offload: bool = True) -> int:
        """Weights and KV cache of the GPU units at ``-ngl n_gpu_layers``, plus the compute buffer."""
        total = self.buffers_bytes
        for u in self.units:
            if self.on_gpu(u, n_gpu_layers):
                total += self.gpu_weight_bytes(u) + (u.kv_cache_bytes if kv_offload else 0)
        return total

    def gpu_bytes(self, n_gpu_layers: int, kv_offload: bool = True) -> int:
        """VRAM at ``-ngl n_gpu_layers``: weights, KV cache, compute buffer and runtime overhead."""
        tensors = self.gpu_tensor_bytes(n_gpu_layers, kv_offload)
        return tensors + overhead(self.workload, tensors)

    def max_gpu_layers(self, vram_budget_bytes: int, kv_offload: bool = True) -> int:
        """The largest ``-ngl`` whose VRAM fits the budget (0 to n_layer + 1)."""
        best = 0
        # VRAM grows with every layer added, so the first that overflows ends the search.
        for ngl in range(1, self.blocks + 2):
            if self.gpu_bytes(ngl, kv_offload) > vram_budget_bytes:
                break
            best = ngl
        return best

    def place(
        self,
        vram_budget_bytes: int,
        *,
        host_ram_bytes: int | None = None,
        n_gpu_layers: int | None = None,
        kv_offload: bool = True,
        margin_bytes: int = 0,
    ) -> Placement:
        """The placement at ``-ngl n_gpu_layers`` (None: the most that fit); see ``plan_llamacpp``."""
        n = self.blocks
        if n_gpu_layers is None:
            ngl = self.max_gpu_layers(vram_budget_bytes - margin_bytes, kv_offload)
        else:
            ngl = max(0, min(n_gpu_layers, n + 1))
        host = HostRam(host_ram_bytes)
        if host.left is not None:
            # The KV cache of host layers (of all layers with --no-kv-offload) is allocated up front.
            host.left -= sum(
                u.kv_cache_bytes for u in self.units if not (kv_offload and self.on_gpu(u, ngl))
            )
        units = list(self.units)
        if self.tied_copy_bytes and ngl > n:
            # The LM head multiplies by the GPU copy of the tied embeddings, not the host original.
            head_params = units[0].parameters
            units[0] = replace(units[0], read_bytes=0)
            units[-1] = replace(
                units[-1],
                read_bytes=units[-1].read_bytes + self.tied_copy_bytes,
                parameters=units[-1].parameters + head_params,
            )
        placed: list[PlacedUnit] = []
        for u in units:
            if self.on_gpu(u, ngl):
                device, gpu_weights = gpu_device(0), self.gpu_weight_bytes(u)
            else:
                device, gpu_weights = host.place(u), 0
            kv_device = device if kv_offload and is_gpu(device) else CPU
            placed.append(PlacedUnit(u, device, kv_device, gpu_weights))
        notes = []
        if ngl <= n:
            notes.append(
                f"-ngl {ngl}: the last {min(ngl, n)} of {n} blocks on the GPU; the output layer "
                f"joins them only at -ngl {n + 1}."
            )
        if any(p.device == DISK for p in placed):
            notes.append(
                "Host RAM is short: llama.cpp maps the file and the OS pages the rest from disk "
                "on every token."
            )
        return finish(
            "llamacpp",
            self.workload,
            placed,
            gpu_layers=ngl,
            budgets=(vram_budget_bytes,),
            tensors=(self.gpu_tensor_bytes(ngl, kv_offload),),
            stream=0,
            buffers=self.buffers_bytes,
            host_ram_bytes=host_ram_bytes,
            notes=notes,
            margin_bytes=margin_bytes,
        )


def llamacpp_model(spec: ModelSpec, workload: Workload) -> LlamaCppModel:
    """``spec`` sized for llama.cpp under the workload (the engine is taken as llama.cpp).

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    workload = engine_workload(spec, workload, "llamacpp")
    units = model_units(spec, workload)
    # With tied embeddings llama.cpp duplicates token_embd as the output tensor on the GPU.
    return LlamaCppModel(units, workload, compute_buffers(spec, workload), units[0].read_bytes)


def max_gpu_layers(
    spec: ModelSpec, workload: Workload, vram_budget_bytes: int, *, kv_offload: bool = True
) -> int:
    """The largest llama.cpp ``-ngl`` whose VRAM fits the budget (0 to n_layer + 1).

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    return llamacpp_model(spec, workload).max_gpu_layers(vram_budget_bytes, kv_offload)


def llamacpp_gpu_bytes(
    spec: ModelSpec, workload: Workload, n_gpu_layers: int, *, kv_offload: bool = True
) -> int:
    """VRAM llama.cpp takes at ``-ngl n_gpu_layers``: weights, KV, compute buffer and overhead.

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    return llamacpp_model(spec, workload).gpu_bytes(n_gpu_layers, kv_offload)


def plan_llamacpp(
    spec: ModelSpec,
    workload: Workload,
    vram_budget_bytes: int,
    *,
    host_ram_bytes: int | None = None,
    n_gpu_layers: int | None = None,
    kv_offload: bool = True,
    margin_bytes: int = 0,
) -> Placement:
    """llama.cpp's placement at ``-ngl n_gpu_layers`` (default: the most that fit the budget).

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as llama.cpp).
        vram_budget_bytes: GPU memory allowed.
        host_ram_bytes: host RAM allowed; weights beyond it are paged from disk (mmap). None: no
            limit.
        n_gpu_layers: ``-ngl``; None picks the largest that fits.
        kv_offload: False keeps the KV cache in host memory (``--no-kv-offload``).
        margin_bytes: GPU memory the most that fit leave free.

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    return llamacpp_model(spec, workload).place(
        vram_budget_bytes,
        host_ram_bytes=host_ram_bytes,
        n_gpu_layers=n_gpu_layers,
        kv_offload=kv_offload,
        margin_bytes=margin_bytes,
    )
