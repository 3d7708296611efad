"""llama.cpp's placement: ``-ngl N`` puts the output layer and the last N - 1 repeating blocks on
the GPUs (the output first, since llama.cpp pull request 18148 of December 2025), token
embeddings stay in host memory, each block's KV
cache lives with its block unless ``--no-kv-offload``; ``--tensor-split`` shares the GPU layers
out among several GPUs (``--split-mode``), and tensor overrides (``--override-tensor``,
``--cpu-moe``, ``--n-cpu-moe``) move single tensors, typically the routed experts, elsewhere.

Source: ``src/llama-model.cpp`` ``load_tensors`` (``i_gpu_start``, the split points, ``dev_input``
on the CPU, ``dev_output = get_layer_buft_list(n_layer)``), ``src/llama-model-loader.cpp``
(overrides, the first match wins), ``common/arg.cpp`` and ``common/common.h`` (the flags).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from vramgui.core import activations, serving
from vramgui.core.errors import Message, Setting, WorkloadError, phrase
from vramgui.core.model import ArchFacts, ModelSpec, Role
from vramgui.core.offload.budget import (
    HostRam,
    compute_buffers,
    engine_workload,
    finish,
    overhead,
)
from vramgui.core.offload.devices import CPU, DISK, gpu_device, gpu_index, is_gpu
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.offload.placement import (
    GpuShare,
    ModelUnit,
    Piece,
    PlacedUnit,
    Placement,
    model_units,
)
from vramgui.core.units import format_bytes
from vramgui.core.workload import Workload

_SINGLE = LlamaCppLayout()
# Copies of each GPU's inputs llama.cpp's scheduler keeps to pipeline micro-batches across GPUs
# (ggml-backend.cpp: GGML_SCHED_MAX_COPIES).
PIPELINE_COPIES = 4


def _budgets(vram_budget_bytes: int | Sequence[int]) -> tuple[int, ...]:
    budgets = (
        (vram_budget_bytes,) if isinstance(vram_budget_bytes, int) else tuple(vram_budget_bytes)
    )
    if not budgets:
        raise WorkloadError("llama.cpp needs at least one GPU budget")
    return budgets


@dataclass(frozen=True, slots=True)
class _Split:
    """Where each unit's layer runs, and each GPU's share of a row-split matrix."""

    devices: tuple[str, ...]  # per unit: cpu or gpu:i
    row_shares: tuple[float, ...]  # per GPU, for split mode row; empty otherwise
    gpus: tuple[int, ...]  # the GPUs llama.cpp uses (a CUDA context and buffers on each)


@dataclass(frozen=True, slots=True)
class LlamaCppModel:
    """A model as llama.cpp places it, sized once: re-placing at another ``-ngl`` is cheap.

    Attributes:
        units: the placement units under the workload's quantization.
        workload: the settings (engine llama.cpp).
        buffers_bytes: llama.cpp's compute buffer on a GPU that runs every layer.
        tied_copy_bytes: the GPU copy of tied embeddings the output layer holds (0 if untied).
        facts: the architecture, to size each GPU's compute buffer when layers are split.
        set_rows: the build writes the KV cache with ggml_set_rows, as every build since
            August 2025 does (``activations.llamacpp_set_rows``); False for a log of an earlier
            build, whose graph without flash attention holds no index of the V it writes.
        served_notes: what llama.cpp leaves out of the checkpoint (``serving.served_storage``:
            the towers' mmproj file, MTP layers), said first in every placement's notes.
    """

    units: tuple[ModelUnit, ...]
    workload: Workload
    buffers_bytes: int
    tied_copy_bytes: int
    facts: ArchFacts | None = None
    set_rows: bool = True
    served_notes: tuple[str, ...] = ()
    # Each unit's pieces by (unit, device, row shares, layout): re-placing at another -ngl, or
    # along a curve, meets the same units on the same devices again.
    _memo: dict[object, dict[str, list[int]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def blocks(self) -> int:
        return len(self.units) - 2

    @property
    def moe_blocks(self) -> int:
        """Blocks with routed experts (what ``--n-cpu-moe`` counts up to)."""
        return sum(1 for u in self.units if u.expert_bytes)

    def on_gpu(self, unit: ModelUnit, n_gpu_layers: int) -> bool:
        """llama.cpp's rule: the output layer first, then blocks from n_layer + 1 - ngl up."""
        n = self.blocks
        if unit.index == n + 1:
            return n_gpu_layers > 0
        return unit.index > 0 and unit.index - 1 >= n + 1 - n_gpu_layers

    def gpu_weight_bytes(self, unit: ModelUnit) -> int:
        return unit.bytes + (self.tied_copy_bytes if unit.index == self.blocks + 1 else 0)

    # --- where each layer runs -------------------------------------------------------------

    def _split(self, n_gpu_layers: int, budgets: tuple[int, ...], layout: LlamaCppLayout) -> _Split:
        """Each unit's device: llama.cpp's split points over the GPU layers (``load_tensors``)."""
        n_gpus = len(budgets)
        if layout.main_gpu >= n_gpus:
            raise WorkloadError(
                Message(
                    "{main} names no GPU: there are {n} (0 to {last})",
                    main=Setting("main_gpu", layout.main_gpu),
                    n=n_gpus,
                    last=n_gpus - 1,
                )
            )
        if layout.tensor_split and len(layout.tensor_split) > n_gpus:
            raise WorkloadError(
                Message(
                    "{split} gives {count} proportions for {n} GPUs",
                    split=Setting("tensor_split"),
                    count=len(layout.tensor_split),
                    n=n_gpus,
                )
            )
        if layout.split_mode == "none" or n_gpus == 1:
            gpus: tuple[int, ...] = (layout.main_gpu,)
            shares = [1.0 if i == layout.main_gpu else 0.0 for i in range(n_gpus)]
        else:
            gpus = tuple(range(n_gpus))
            given = list(layout.tensor_split) + [0.0] * (n_gpus - len(layout.tensor_split))
            # No split given: in proportion to each GPU's memory (llama.cpp: its free memory).
            shares = given if any(given) else [float(b) for b in budgets]
        total = sum(shares)
        cumulative: list[float] = []
        running = 0.0
        for share in shares:
            running += share
            cumulative.append(running / total)
        n = self.blocks
        ngl = max(0, min(n_gpu_layers, n + 1))
        start = n + 1 - ngl
        devices = [CPU]  # the input layer: "very little benefit to offloading" it
        for il in range(n + 1):  # the blocks, then the output layer at index n
            if il < start:
                devices.append(CPU)
            elif layout.split_mode == "row":
                # The layer runs on the main GPU; its matrices are shared out by rows.
                devices.append(gpu_device(layout.main_gpu))
            else:
                position = (il - start) / ngl
                gpu = bisect.bisect_right(cumulative, position)
                devices.append(gpu_device(min(gpu, n_gpus - 1)))
        row = tuple(s / total for s in shares) if layout.split_mode == "row" else ()
        return _Split(tuple(devices), row, gpus)

    def _pieces(
        self, unit: ModelUnit, device: str, split: _Split, layout: LlamaCppLayout
    ) -> dict[str, list[int]]:
        """The unit's bytes, parameters, expert bytes and parameters and read bytes per device."""
        layer = unit.index - 1 if 0 < unit.index <= self.blocks else None
        # --cpu-moe / --n-cpu-moe matter to a unit only as whether they move its experts.
        moved = layout.cpu_moe or (layer is not None and layer < layout.n_cpu_moe)
        key = (unit.index, unit.read_bytes, device, split.row_shares, layout.overrides, moved)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) > 100_000:
                self._memo.clear()
            found = self._memo[key] = self._split_unit(unit, device, split, layout)
        return {target: list(entry) for target, entry in found.items()}

    def _split_unit(
        self, unit: ModelUnit, device: str, split: _Split, layout: LlamaCppLayout
    ) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        layer = unit.index - 1 if 0 < unit.index <= self.blocks else None

        def add(target: str, t_bytes: float, t_params: float, expert: bool, read: float) -> None:
            entry = out.setdefault(target, [0, 0, 0, 0, 0])
            entry[0] += round(t_bytes)
            entry[1] += round(t_params)
            if expert:
                entry[2] += round(t_bytes)
                entry[3] += round(t_params)
            entry[4] += round(read)

        tensors = unit.tensors or ()
        if not tensors:
            add(device, unit.bytes, unit.parameters, False, unit.read_bytes)
            return out
        for t in tensors:
            expert = t.role is Role.EXPERT
            read = 0.0 if expert else float(t.bytes)
            if unit.index == 0:
                read = unit.read_bytes * (t.bytes / unit.bytes) if unit.bytes else 0.0
            target = layout.device_of(t.name, layer) or device
            if split.row_shares and t.is_matrix and target == device and is_gpu(device):
                for i, share in enumerate(split.row_shares):
                    if share:
                        add(
                            gpu_device(i),
                            t.bytes * share,
                            t.parameters * share,
                            expert,
                            read * share,
                        )
                continue
            add(target, t.bytes, t.parameters, expert, read)
        return out

    # --- memory ------------------------------------------------------------------------------

    def _layout_units(
        self,
        n_gpu_layers: int,
        budgets: tuple[int, ...],
        layout: LlamaCppLayout,
    ) -> tuple[_Split, list[tuple[ModelUnit, str, dict[str, list[int]]]]]:
        split = self._split(n_gpu_layers, budgets, layout)
        units = list(self.units)
        n = self.blocks
        if self.tied_copy_bytes and is_gpu(split.devices[n + 1]):
            # The LM head multiplies by the GPU copy of the tied embeddings, not the host original.
            head_params = units[0].parameters
            units[0] = replace(units[0], read_bytes=0)
            units[-1] = replace(
                units[-1],
                read_bytes=units[-1].read_bytes + self.tied_copy_bytes,
                parameters=units[-1].parameters + head_params,
            )
        laid = []
        for u, device in zip(units, split.devices, strict=True):
            pieces = self._pieces(u, device, split, layout)
            if u.index == n + 1 and self.tied_copy_bytes and is_gpu(device):
                entry = pieces.setdefault(device, [0, 0, 0, 0, 0])
                entry[0] += self.tied_copy_bytes
                entry[1] += units[0].parameters
                entry[4] += self.tied_copy_bytes
            laid.append((u, device, pieces))
        return split, laid

    def gpu_tensor_bytes_each(
        self,
        n_gpu_layers: int,
        budgets: Sequence[int] = (0,),
        layout: LlamaCppLayout = _SINGLE,
    ) -> tuple[int, ...]:
        """Per GPU: weights and KV cache of what it holds at ``-ngl n_gpu_layers``, plus its
        compute buffer (on every GPU that runs layers, and on the main GPU in any case: llama.cpp
        sizes one there for the large batches it hands to the GPU)."""
        budgets = tuple(budgets)
        split, laid = self._layout_units(n_gpu_layers, budgets, layout)
        return self._tensor_totals(split, laid, len(budgets), layout)

    def _tensor_totals(
        self,
        split: _Split,
        laid: list[tuple[ModelUnit, str, dict[str, list[int]]]],
        n_gpus: int,
        layout: LlamaCppLayout,
    ) -> tuple[int, ...]:
        return tuple(s.tensor_bytes for s in self._shares(split, laid, n_gpus, layout))

    def _shares(
        self,
        split: _Split,
        laid: list[tuple[ModelUnit, str, dict[str, list[int]]]],
        n_gpus: int,
        layout: LlamaCppLayout,
    ) -> tuple[GpuShare, ...]:
        weights, kv = [0] * n_gpus, [0] * n_gpus
        blocks: dict[int, list[int]] = {}  # per GPU, the blocks it runs (0-based)
        for u, device, pieces in laid:
            for target, entry in pieces.items():
                if is_gpu(target):
                    weights[gpu_index(target)] += entry[0]
            if is_gpu(device):
                if 1 <= u.index <= self.blocks:
                    blocks.setdefault(gpu_index(device), []).append(u.index - 1)
                if layout.kv_offload:
                    kv[gpu_index(device)] += u.kv_cache_bytes
        output = split.devices[-1]
        buffers = [0] * n_gpus
        main = layout.main_gpu if layout.split_mode != "layer" else split.gpus[0]
        # Host experts are multiplied on the first GPU llama.cpp lists (op offload).
        host = self._host_experts(laid, layout)
        receiver = split.gpus[0]
        if len(split.gpus) == 1 or layout.split_mode == "row" or not blocks:
            # One GPU runs the graph (with no layers there, the large batches llama.cpp hands it).
            buffers[main] = (
                self.buffers_bytes
                if self.set_rows
                else self._device_buffer(
                    output=True, blocks=(0, self.blocks), copies=0, set_rows=False
                )
            )
            if host and self.facts is not None:
                # The copies change the layout of the graph's buffer: walk it again with them
                # (on a GPU that runs no part of the graph, they and their products alone).
                w = self.workload
                buffers[receiver] = activations.llamacpp_compute_buffer(
                    self.facts,
                    w.batch,
                    w.seq,
                    flash_attention=activations.llamacpp_flash_attention(w),
                    ubatch=activations.llamacpp_ubatch(w),
                    output=receiver == main,
                    layers=receiver == main,
                    host_experts=host,
                    set_rows=self.set_rows,
                )
        else:
            # Whole layers per GPU: each sizes its own part of the graph. Holding every layer
            # with no override, llama.cpp pipelines micro-batches across them and keeps copies
            # of each GPU's inputs (llama_context: pipeline_parallel).
            pipelined = (
                self.blocks + 1 <= sum(1 for d in split.devices[1:] if is_gpu(d))
                and layout.kv_offload
                and not (layout.overrides or layout.moves_experts)
            )
            for i in split.gpus:
                runs = blocks.get(i, [])
                buffers[i] = self._device_buffer(
                    output=output == gpu_device(i),
                    blocks=(min(runs), max(runs) + 1) if runs else None,
                    copies=PIPELINE_COPIES if pipelined else 0,
                    host=host if i == receiver else (),
                    set_rows=self.set_rows,
                )
        return tuple(GpuShare(weights[i], kv[i], buffers[i]) for i in range(n_gpus))

    def _device_buffer(
        self,
        *,
        output: bool,
        blocks: tuple[int, int] | None,
        copies: int,
        host: activations.HostExperts = (),
        set_rows: bool = True,
    ) -> int:
        """One GPU's compute buffer when the layers are split over several: ``blocks`` are those
        it runs (``(first, end)``, None: none), ``host`` the host experts it multiplies,
        ``set_rows`` the model's."""
        if self.facts is None:
            return self.buffers_bytes if blocks or output else 0
        w = self.workload
        return activations.llamacpp_compute_buffer(
            self.facts,
            w.batch,
            w.seq,
            flash_attention=activations.llamacpp_flash_attention(w),
            ubatch=activations.llamacpp_ubatch(w),
            output=output,
            layers=blocks is not None,
            pipeline_copies=copies,
            blocks=blocks,
            host_experts=host,
            set_rows=set_rows,
        )

    def _host_experts(
        self, laid: list[tuple[ModelUnit, str, dict[str, list[int]]]], layout: LlamaCppLayout
    ) -> activations.HostExperts:
        """The blocks whose routed expert matrices stay in host memory, with the bytes of their
        gate, up and down matrices as stored; empty with ``--no-op-offload`` (the CPU multiplies
        them then, and the GPU holds no copy)."""
        if not layout.op_offload:
            return ()
        found = []
        for u, device, _ in laid:
            if not 1 <= u.index <= self.blocks or not u.expert_bytes:
                continue
            layer = u.index - 1
            moved = layout.cpu_moe or layer < layout.n_cpu_moe
            key = ("host experts", u.index, device, layout.overrides, moved)
            entry = self._memo.get(key)
            if entry is None:
                sizes = [0, 0, 0]
                for t in u.tensors or ():
                    if t.role is not Role.EXPERT or t.name.endswith(".bias"):
                        continue
                    if is_gpu(layout.device_of(t.name, layer) or device):
                        continue
                    slot = 2 if "down" in t.name else 1 if "_up_" in t.name else 0
                    sizes[slot] = max(sizes[slot], t.bytes)
                entry = self._memo[key] = {"": sizes}
            gate, up, down = entry[""]
            if gate or up or down:
                found.append((layer, (gate, up, down)))
        return tuple(found)

    def gpu_tensor_bytes(self, n_gpu_layers: int, kv_offload: bool = True) -> int:
        """Weights and KV cache of the GPU units at ``-ngl n_gpu_layers``, plus the compute buffer."""
        layout = _SINGLE if kv_offload else LlamaCppLayout(kv_offload=False)
        return self.gpu_tensor_bytes_each(n_gpu_layers, (0,), layout)[0]

    def gpu_bytes(self, n_gpu_layers: int, kv_offload: bool = True) -> int:
        """VRAM at ``-ngl n_gpu_layers``: weights, KV cache, compute buffer and runtime overhead."""
        tensors = self.gpu_tensor_bytes(n_gpu_layers, kv_offload)
        return tensors + overhead(self.workload, tensors)

    def gpu_bytes_each(
        self, n_gpu_layers: int, budgets: Sequence[int], layout: LlamaCppLayout = _SINGLE
    ) -> tuple[int, ...]:
        """VRAM of each GPU at ``-ngl n_gpu_layers`` under ``layout`` (0 for a GPU left out)."""
        budgets = tuple(budgets)
        split = self._split(n_gpu_layers, budgets, layout)
        tensors = self.gpu_tensor_bytes_each(n_gpu_layers, budgets, layout)
        return tuple(
            t + overhead(self.workload, t) if i in split.gpus else 0 for i, t in enumerate(tensors)
        )

    def max_gpu_layers(
        self,
        vram_budget_bytes: int | Sequence[int],
        kv_offload: bool = True,
        layout: LlamaCppLayout | None = None,
    ) -> int:
        """The largest ``-ngl`` whose VRAM fits every GPU's budget (0 to n_layer + 1)."""
        budgets = _budgets(vram_budget_bytes)
        if layout is None:
            layout = _SINGLE if kv_offload else LlamaCppLayout(kv_offload=False)
        best = 0
        # Scanned whole: with several GPUs one more layer moves the split points, so a count
        # that overflows one GPU can be followed by one that fits them all.
        for ngl in range(1, self.blocks + 2):
            used = self.gpu_bytes_each(ngl, budgets, layout)
            if all(u <= b for u, b in zip(used, budgets, strict=True)):
                best = ngl
        return best

    # --- the placement -----------------------------------------------------------------------

    def place(
        self,
        vram_budget_bytes: int | Sequence[int],
        *,
        host_ram_bytes: int | None = None,
        n_gpu_layers: int | None = None,
        kv_offload: bool = True,
        margin_bytes: int = 0,
        layout: LlamaCppLayout | None = None,
    ) -> Placement:
        """The placement at ``-ngl n_gpu_layers`` (None: the most that fit); see ``plan_llamacpp``."""
        budgets = _budgets(vram_budget_bytes)
        if layout is None:
            layout = _SINGLE if kv_offload else LlamaCppLayout(kv_offload=False)
        n = self.blocks
        if n_gpu_layers is None:
            room = tuple(b - margin_bytes for b in budgets)
            # The split follows the GPUs' memory, not what is left of it beside the margin.
            searched = layout
            if len(budgets) > 1 and not layout.tensor_split:
                searched = replace(layout, tensor_split=tuple(b / 2**30 for b in budgets))
            ngl = self.max_gpu_layers(room, layout=searched)
        else:
            ngl = max(0, min(n_gpu_layers, n + 1))
        split, laid = self._layout_units(ngl, budgets, layout)
        host = HostRam(host_ram_bytes)
        if host.left is not None:
            # The KV cache of host layers (of all layers with --no-kv-offload) is allocated up front.
            host.left -= sum(
                u.kv_cache_bytes
                for u, device, _ in laid
                if not (layout.kv_offload and is_gpu(device))
            )
        placed: list[PlacedUnit] = []
        for u, layer_device, entries in laid:
            device = layer_device
            pieces = []
            for target, (size, params, e_bytes, e_params, read) in entries.items():
                where = host.place_bytes(size) if target == CPU else target
                pieces.append(
                    Piece(
                        where,
                        size,
                        params,
                        e_bytes,
                        e_params,
                        read,
                        _names(u, target, entries, layer_device, layout),
                    )
                )
            whole = len(pieces) == 1 and pieces[0].device in (device, DISK)
            if device == CPU and len(pieces) == 1:
                device = pieces[0].device  # a host unit paged from disk
            kv_device = device if layout.kv_offload and is_gpu(device) else CPU
            gpu_weights = sum(p.bytes for p in pieces if is_gpu(p.device))
            placed.append(
                PlacedUnit(u, device, kv_device, gpu_weights, () if whole else tuple(pieces))
            )
        hosted = self._host_experts(laid, layout)
        ub = min(
            activations.llamacpp_ubatch(self.workload), self.workload.seq * self.workload.batch
        )
        largest = max((max(c) for _, c in hosted), default=0)
        copied = largest if ub >= activations.LLAMACPP_OP_OFFLOAD_MIN_BATCH else 0
        notes = _notes(
            self, ngl, placed, layout, len(budgets), copied=copied, receiver=split.gpus[0]
        )
        shares = self._shares(split, laid, len(budgets), layout)
        tensors = tuple(s.tensor_bytes for s in shares)
        return finish(
            "llamacpp",
            self.workload,
            placed,
            gpu_layers=ngl,
            budgets=budgets,
            tensors=tensors,
            stream=0,
            buffers=self.buffers_bytes,
            host_ram_bytes=host_ram_bytes,
            notes=notes,
            margin_bytes=margin_bytes,
            used_gpus=split.gpus,
            layout=layout,
            shares=shares,
        )


def _names(
    unit: ModelUnit,
    target: str,
    entries: dict[str, list[int]],
    device: str,
    layout: LlamaCppLayout,
) -> tuple[str, ...]:
    """The GGUF tensors an override moved to ``target`` (none when the unit is not split)."""
    if len(entries) == 1 or target == device:
        return ()
    layer = unit.index - 1 if unit.index > 0 else None
    return tuple(t.name for t in unit.tensors if layout.device_of(t.name, layer) == target)


def _notes(
    model: LlamaCppModel,
    ngl: int,
    placed: Sequence[PlacedUnit],
    layout: LlamaCppLayout,
    n_gpus: int,
    *,
    copied: int = 0,
    receiver: int = 0,
) -> list[str]:
    """The plan's notes; ``copied``: the largest host expert matrix GPU ``receiver`` copies in
    to multiply (0: none)."""
    n = model.blocks
    notes = list(model.served_notes)
    if 0 < ngl <= n:
        notes.append(
            f"-ngl {ngl}: the output layer and the last {ngl - 1} of {n} blocks on the GPU "
            "(llama.cpp offloads the output layer first)."
        )
    moved = sum(
        p.bytes for u in placed for p in u.pieces if p.device in (CPU, DISK) and is_gpu(u.device)
    )
    if moved:
        experts = sum(
            p.expert_bytes
            for u in placed
            for p in u.pieces
            if p.device in (CPU, DISK) and is_gpu(u.device)
        )
        if experts == moved:
            notes.append(
                f"Routed experts of GPU layers kept in host memory: {moved / 1024**3:.2f} GiB, "
                "computed by the CPU, which reads the experts each token picks; the attention, "
                "norms, router and shared experts stay on the GPU with the KV cache."
            )
        else:
            notes.append(
                f"Tensors of GPU layers kept in host memory by the overrides: "
                f"{moved / 1024**3:.2f} GiB, computed by the CPU."
            )
    if copied:
        notes.append(
            f"Prompt processing multiplies the experts kept in host memory on GPU {receiver}: "
            "for micro-batches of 32 tokens or more (ggml-cuda's op offload, on by default) "
            "llama.cpp copies each expert matrix in as stored, one at a time, into that GPU's "
            f"compute buffer, which is sized to hold the largest ({copied / 1024**2:.0f} MiB) "
            "beside the activations of that moment. --no-op-offload leaves them to the CPU "
            "and the copy off the GPU, for a slower prompt processing."
        )
    if layout.moves_experts and not model.moe_blocks:
        notes.append(
            "--cpu-moe / --n-cpu-moe have nothing to move: the model has no routed experts."
        )
    if layout.n_cpu_moe > model.moe_blocks and model.moe_blocks:
        notes.append(
            f"--n-cpu-moe {layout.n_cpu_moe} is more than the {model.moe_blocks} layers with "
            "experts: all of them stay in host memory, as with --cpu-moe."
        )
    if layout.split_mode == "row" and n_gpus > 1:
        notes.append(
            "Row split: the matrices are shared out by rows; the KV cache, the other tensors and "
            "the compute buffer stay on the main GPU (--main-gpu)."
        )
    if any(p.device == DISK for u in placed for p in u.parts):
        notes.append(
            "Host RAM is short: llama.cpp maps the file and the OS pages the rest from disk "
            "on every token."
        )
    return notes


def llamacpp_model(spec: ModelSpec, workload: Workload) -> LlamaCppModel:
    """``spec`` sized for llama.cpp under the workload (the engine is taken as llama.cpp).

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    workload = engine_workload(spec, workload, "llamacpp")
    units = model_units(spec, workload)
    # With tied embeddings llama.cpp duplicates token_embd as the output tensor on the GPU.
    return LlamaCppModel(
        units,
        workload,
        compute_buffers(spec, workload),
        units[0].read_bytes,
        spec.facts,
        served_notes=serving.served_storage(spec, workload).notes,
    )


def layer_split(spec: ModelSpec, workload: Workload, capacity_bytes: int | None) -> Placement:
    """Every layer of ``spec`` on ``workload.gpus`` GPUs of one kind, split as llama.cpp splits
    them by default (``--split-mode layer``): the blocks in proportion to each GPU's memory
    (alike here, so in equal runs), the output layer on the last GPU, each block's KV cache with
    it, a compute buffer on each GPU for its part of the graph, the token embeddings in host
    memory. The placement ``plan`` makes of the same setup when it all fits.

    Args:
        spec: the model.
        workload: the settings; ``gpus`` counts the GPUs (``tp`` is not llama.cpp's: it splits
            whole layers).
        capacity_bytes: each GPU's memory (None: unknown; the split is the same).

    Raises:
        WorkloadError: settings llama.cpp does not support.
    """
    model = llamacpp_model(spec, workload.with_(gpus=1, tp=1, pp=1))
    budgets = [capacity_bytes or 1] * workload.gpus
    return model.place(budgets, n_gpu_layers=model.blocks + 1, host_ram_bytes=None)


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
    vram_budget_bytes: int | Sequence[int],
    *,
    host_ram_bytes: int | None = None,
    n_gpu_layers: int | None = None,
    kv_offload: bool = True,
    margin_bytes: int = 0,
    layout: LlamaCppLayout | None = None,
) -> Placement:
    """llama.cpp's placement at ``-ngl n_gpu_layers`` (default: the most that fit the budget).

    Args:
        spec: the model.
        workload: inference settings (the engine is taken as llama.cpp).
        vram_budget_bytes: GPU memory allowed, one figure per GPU (or one for a single GPU).
        host_ram_bytes: host RAM allowed; weights beyond it are paged from disk (mmap). None: no
            limit.
        n_gpu_layers: ``-ngl``; None picks the largest that fits.
        kv_offload: False keeps the KV cache in host memory (``--no-kv-offload``).
        margin_bytes: GPU memory the most that fit leave free on each GPU.
        layout: tensor overrides and the split across GPUs (its ``kv_offload`` wins when given).

    Raises:
        WorkloadError: settings llama.cpp does not support, a split that names no GPU.
    """
    return llamacpp_model(spec, workload).place(
        vram_budget_bytes,
        host_ram_bytes=host_ram_bytes,
        n_gpu_layers=n_gpu_layers,
        kv_offload=kv_offload,
        margin_bytes=margin_bytes,
        layout=layout,
    )


def fullest_gpu(
    spec: ModelSpec, workload: Workload, capacity_bytes: int | None
) -> tuple[int, int, int, int, Message]:
    """llama.cpp on several GPUs, as the estimate reports it: (weights, KV cache, compute buffer
    of the GPU that holds the most, host memory, a note naming each GPU's share), from the split
    ``plan`` makes (:func:`layer_split`)."""
    placement = layer_split(spec, workload, capacity_bytes)
    shares = placement.shares
    fullest = max(shares, key=lambda share: share.tensor_bytes)
    each = ", ".join(
        f"GPU {i} {format_bytes(share.tensor_bytes)}" for i, share in enumerate(shares)
    )
    note = phrase(
        f"llama.cpp splits the layers across the {len(shares)} GPUs (",
        Setting("split_mode", "layer"),
        "), the output layer on the last, each with its layers' KV cache and its own compute "
        f"buffer; the figures are the fullest GPU's ({each}, before the runtime overhead).",
    )
    if workload.tp > 1:
        note = phrase(
            note, " llama.cpp has no tensor parallelism: ", Setting("tp"), " does not change it."
        )
    return (
        fullest.weights_bytes,
        fullest.kv_cache_bytes,
        fullest.buffers_bytes,
        placement.host_bytes,
        note,
    )
