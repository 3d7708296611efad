"""What a placement is made of: the model cut into units (embeddings, each block, output)
with their stored weights and KV cache, the devices they go to, and the placement a planner
returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramgui.core import inference, naming, serving, storage
from vramgui.core.engines import engine
from vramgui.core.estimate import LayerBytes
from vramgui.core.model import ModelSpec, Role
from vramgui.core.offload.overrides import LlamaCppLayout
from vramgui.core.workload import Workload

EMBEDDINGS = "embeddings"
OUTPUT = "output"


@dataclass(frozen=True, slots=True)
class UnitTensor:
    """The tensors of a unit that share one GGUF name (a transformers inventory's per-expert
    tensors are one stacked tensor in GGUF), what a ``--override-tensor`` pattern is matched with.

    Attributes:
        name: the GGUF name (``blk.3.ffn_up_exps.weight``).
        role: what the tensors do.
        bytes: stored bytes under the workload's dtype and quantization.
        parameters: weights.
        is_matrix: a 2-D weight a row split shares out (3-D stacked experts are not).
    """

    name: str
    role: Role
    bytes: int
    parameters: int
    is_matrix: bool = False


@dataclass(frozen=True, slots=True)
class ModelUnit:
    """One placement unit with what the roofline needs to cost it.

    Attributes:
        index: 0 for the embeddings, 1..n for the blocks, n + 1 for the output.
        name: "embeddings", "block 0"..., "output".
        bytes: stored weight bytes (tied embeddings counted once, in the embeddings).
        kv_cache_bytes: KV cache of this unit for the workload's batch and context.
        parameters: weights in the unit.
        expert_bytes: bytes of routed MoE experts inside ``bytes`` (a token reads only its top-k).
        expert_parameters: parameters of routed experts inside ``parameters``.
        read_bytes: bytes a decode step reads at batch 1 outside the experts (embeddings: a few rows,
            unless the LM head is tied to them and reads them whole).
        modules: the transformers module paths this unit holds (for a ``device_map``).
        attention_width: query heads x head dim of an attention block (its attention FLOPs per
            query per cached token are 4 x this), else 0.
        attention_heads: query heads of an attention block (the rows of its score matrix per
            query), else 0.
        experts: routed experts in the unit (0 if none).
        experts_per_token: routed experts each token runs through.
        tensors: its weights by GGUF name, for overrides and splits (llama.cpp's planner).
    """

    index: int
    name: str
    bytes: int
    kv_cache_bytes: int
    parameters: int
    expert_bytes: int = 0
    expert_parameters: int = 0
    read_bytes: int = 0
    modules: tuple[str, ...] = ()
    attention_width: int = 0
    attention_heads: int = 0
    experts: int = 0
    experts_per_token: int = 0
    tensors: tuple[UnitTensor, ...] = ()


@dataclass(frozen=True, slots=True)
class Piece:
    """The part of a unit's weights that lives on one device.

    Attributes:
        device: ``gpu:i``, ``cpu`` or ``disk``.
        bytes: stored bytes there.
        parameters: weights there.
        expert_bytes: routed experts among ``bytes`` (a token reads only its top-k).
        expert_parameters: routed experts among ``parameters``.
        read_bytes: what a decode step reads there at batch 1 outside the experts.
        names: the GGUF tensors there, when the unit is split (what the view lists).
    """

    device: str
    bytes: int
    parameters: int
    expert_bytes: int = 0
    expert_parameters: int = 0
    read_bytes: int = 0
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlacedUnit:
    """A unit and where it lives.

    Attributes:
        unit: the unit.
        device: ``gpu:i``, ``cpu`` or ``disk`` (where its weights live between uses; for a split
            unit, where its layer runs: its KV cache and attention).
        kv_device: where its KV cache lives (``gpu:i`` or ``cpu``).
        gpu_bytes: weight bytes it keeps on the GPUs (a tied LM head copy included for llama.cpp).
        pieces: the unit's weights by device when they are not all on ``device`` (llama.cpp's
            tensor overrides, a row split across GPUs); empty when they are.
    """

    unit: ModelUnit
    device: str
    kv_device: str
    gpu_bytes: int
    pieces: tuple[Piece, ...] = ()

    @property
    def parts(self) -> tuple[Piece, ...]:
        """Where the weights are: ``pieces``, or the whole unit on ``device``."""
        if self.pieces:
            return self.pieces
        u = self.unit
        return (
            Piece(
                self.device,
                u.bytes,
                u.parameters,
                u.expert_bytes,
                u.expert_parameters,
                u.read_bytes,
            ),
        )

    def bytes_on(self, device: str) -> int:
        """Weight bytes of the unit on ``device``."""
        return sum(p.bytes for p in self.parts if p.device == device)

    @property
    def split(self) -> bool:
        """Whether the unit's weights are on more than one device."""
        return len({p.device for p in self.parts}) > 1


@dataclass(frozen=True, slots=True)
class GpuShare:
    """What one GPU holds besides the runtime overhead.

    Attributes:
        weights_bytes: the weights placed there.
        kv_cache_bytes: the KV cache of the layers that run there.
        buffers_bytes: compute buffers (activations) allocated there.
    """

    weights_bytes: int
    kv_cache_bytes: int
    buffers_bytes: int

    @property
    def tensor_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.buffers_bytes


@dataclass(frozen=True, slots=True)
class Placement:
    """A whole model placed by one planner.

    Attributes:
        planner: "llamacpp", "accelerate" or "streaming".
        workload: the settings the placement was made for.
        units: every unit in model order.
        gpu_layers: units on the GPUs as the engine counts them (llama.cpp's ``-ngl`` value: blocks
            plus the output unit when it is on the GPU).
        vram_budget_bytes: the memory allowed on each GPU.
        gpu_bytes: memory each GPU needs: resident weights, KV cache, the streaming slot, buffers
            and runtime overhead.
        host_bytes: host RAM the weights (and host KV cache) take.
        disk_bytes: weights read from disk.
        stream_bytes: the GPU slot offloaded units are copied into (accelerate, streaming).
        buffers_bytes: activations / compute buffers on the first GPU.
        overhead_bytes: runtime overhead per GPU (CUDA context, allocator slack).
        fits: every GPU stays within its budget and the host within its RAM.
        notes: what the user should know.
        margin_bytes: memory per GPU the placement keeps free when it chooses how much to put there.
        layout: llama.cpp's tensor overrides and split across GPUs (None for other planners).
        shares: what each GPU holds, for the planners that size it per GPU (llama.cpp).
    """

    planner: str
    workload: Workload
    units: tuple[PlacedUnit, ...]
    gpu_layers: int
    vram_budget_bytes: tuple[int, ...]
    gpu_bytes: tuple[int, ...]
    host_bytes: int
    disk_bytes: int
    stream_bytes: int
    buffers_bytes: int
    overhead_bytes: int
    fits: bool
    notes: tuple[str, ...] = ()
    margin_bytes: int = 0
    layout: LlamaCppLayout | None = None
    shares: tuple[GpuShare, ...] = ()

    @property
    def blocks(self) -> int:
        return len(self.units) - 2


def attention_width(spec: ModelSpec, workload: Workload) -> int:
    """Query heads x head dim of an attention block as the workload's engine runs it: half the
    width of its products per query and cached token (K x Q, then the probabilities x V).
    llama.cpp runs multi-head latent attention absorbed (src/models/deepseek2.cpp with today's
    split ``wk_b`` / ``wv_b``): each head's query, multiplied into the latent space, attends the
    cached latent and rotary key (``kv_lora_rank + qk_rope_head_dim`` wide, 576 for DeepSeek-V2)
    and returns the latent value (``kv_lora_rank``, 512), not the 192 / 128 of the heads the
    checkpoint names, so a DeepSeek-V2-Lite head multiplies 2.8 times the products."""
    f = spec.facts
    if f.is_mla and f.kv_lora_rank and engine(workload.engine).ggml:
        return f.num_heads * (2 * f.kv_lora_rank + (f.qk_rope_head_dim or 0)) // 2
    return f.num_heads * f.head_dim


def model_units(spec: ModelSpec, workload: Workload) -> tuple[ModelUnit, ...]:
    """The placement units of ``spec`` with stored bytes under the workload's dtype and quant.

    Raises:
        WorkloadError: a quantization or KV dtype that does not apply.
    """
    stored = serving.loaded(storage.assign_storage(spec, workload.dtype, workload.quant), workload)
    n = spec.facts.num_layers
    groups: list[list[storage.TensorStorage]] = [[] for _ in range(n + 2)]
    for st in stored:
        t = st.tensor
        if t.layer is not None and 0 <= t.layer < n:
            groups[t.layer + 1].append(st)
        elif t.role in (Role.EMBEDDING, Role.POSITION) or "embed" in t.name:
            groups[0].append(st)
        else:
            groups[n + 1].append(st)
    kv = _kv_per_layer(spec, workload)
    tied_head = spec.facts.tie_word_embeddings and spec.facts.is_decoder
    attention = attention_width(spec, workload)
    units = []
    for index, members in enumerate(groups):
        name = EMBEDDINGS if index == 0 else OUTPUT if index == n + 1 else f"block {index - 1}"
        size = sum(st.bytes for st in members)
        experts = [st for st in members if st.tensor.role is Role.EXPERT]
        expert_bytes = sum(st.bytes for st in experts)
        if index == 0:
            # A lookup reads a row per token; a tied LM head multiplies by the whole matrix.
            token_embedding = sum(st.bytes for st in members if st.tensor.role is Role.EMBEDDING)
            read = token_embedding if tied_head else 0
        else:
            read = size - expert_bytes
        units.append(
            ModelUnit(
                index=index,
                name=name,
                bytes=size,
                kv_cache_bytes=kv[index - 1] if 0 < index <= n else 0,
                parameters=sum(st.tensor.numel for st in members),
                expert_bytes=expert_bytes,
                expert_parameters=sum(st.tensor.numel for st in experts),
                read_bytes=read,
                modules=_modules(members, index - 1 if 0 < index <= n else None),
                attention_width=attention if 0 < index <= n and kv[index - 1] else 0,
                attention_heads=spec.facts.num_heads if 0 < index <= n and kv[index - 1] else 0,
                experts=spec.facts.num_experts if expert_bytes else 0,
                experts_per_token=spec.facts.experts_per_token if expert_bytes else 0,
                tensors=_by_gguf_name(members),
            )
        )
    return tuple(units)


def _by_gguf_name(members: Sequence[storage.TensorStorage]) -> tuple[UnitTensor, ...]:
    """A unit's tensors summed by GGUF name, in first-seen order."""
    named: dict[str, list[int]] = {}
    roles: dict[str, Role] = {}
    matrix: dict[str, bool] = {}
    for st in members:
        t = st.tensor
        name = naming.gguf_name(t.name)
        # transformers' fused expert gate_up is two tensors in GGUF: ffn_gate_exps, ffn_up_exps.
        parts = (
            [name.replace("gate_up", "gate"), name.replace("gate_up", "up")]
            if "ffn_gate_up_exps" in name and not t.name.startswith("blk.")
            else [name]
        )
        for i, part in enumerate(parts):
            # The halves add up to the whole: the second takes an odd byte.
            size = st.bytes // len(parts) + (st.bytes % len(parts) if i else 0)
            params = t.numel // len(parts) + (t.numel % len(parts) if i else 0)
            entry = named.setdefault(part, [0, 0])
            entry[0] += size
            entry[1] += params
            roles.setdefault(part, t.role)
            matrix[part] = sum(d != 1 for d in t.shape) == 2 and t.role is not Role.EXPERT
    return tuple(
        UnitTensor(name, roles[name], size, params, matrix[name])
        for name, (size, params) in named.items()
    )


def layer_weights(spec: ModelSpec, workload: Workload) -> tuple[LayerBytes, ...]:
    """Weight and KV cache bytes per unit (embeddings, each block, output), for ``Estimate``.

    Raises:
        WorkloadError: a quantization or KV dtype that does not apply.
    """
    return tuple(
        LayerBytes(index=u.index, name=u.name, bytes=u.bytes, kv_cache_bytes=u.kv_cache_bytes)
        for u in model_units(spec, workload)
    )


def _kv_per_layer(spec: ModelSpec, workload: Workload) -> tuple[int, ...]:
    """KV cache bytes of each block while serving (none in training), from a one-block model."""
    facts = spec.facts
    n = facts.num_layers
    types = facts.layer_types or (None,) * n
    if workload.mode != "inference" or not facts.is_decoder:
        return (0,) * len(types)

    def one(values: tuple[int, ...], i: int) -> tuple[int, ...]:
        return values[i : i + 1] if values else ()

    by_kind: dict[object, int] = {}
    out = []
    for i, layer_type in enumerate(types):
        widths = one(facts.layer_kv_widths, i)
        heads = one(facts.layer_kv_heads, i)
        states = one(facts.layer_state_elements, i)
        key = (layer_type, widths, heads, states)
        if key not in by_kind:
            single = replace(
                facts,
                num_layers=1,
                layer_types=() if layer_type is None else (layer_type,),
                moe_layers=facts.moe_layers[:1],
                layer_kv_widths=widths,
                layer_kv_heads=heads,
                layer_state_elements=states,
            )
            probe = ModelSpec(name=spec.name, facts=single, tensors=())
            by_kind[key] = inference.kv_cache_bytes(probe, workload)
        out.append(by_kind[key])
    return tuple(out)


def _modules(members: Sequence[storage.TensorStorage], layer: int | None) -> tuple[str, ...]:
    """Module paths a device_map names: the block itself, or each module outside the blocks.

    First-seen order, kept in a dict: a list's ``in`` made this quadratic in the tensors of a
    group (over 300 s for a checkpoint of 1M tensors).
    """
    paths: dict[str, None] = {}
    for st in members:
        parts = st.tensor.name.split(".")
        if layer is not None and str(layer) in parts:
            path = ".".join(parts[: parts.index(str(layer)) + 1])
        else:
            path = ".".join(parts[:-1]) or st.tensor.name
        paths[path] = None
    return tuple(paths)
