"""The weights one GPU holds when serving: each tensor's share on a tensor-parallel rank, and
what an engine keeps in host RAM instead, as the engine holds them (``serving.served_storage``:
a format it dequantizes, kernels' padding, MTP layers when loaded)."""

from __future__ import annotations

from vramgui.core import serving
from vramgui.core.engines import engine
from vramgui.core.model import ModelSpec, Role
from vramgui.core.workload import Workload


def resident_weights(spec: ModelSpec, w: Workload) -> tuple[int, int]:
    """Weight bytes on each GPU and in host RAM, under the workload's dtype, scheme, engine, TP,
    as the engine holds them (``serving``: a format it dequantizes, kernels' padding, MTP
    layers)."""

    def compute() -> tuple[int, int]:
        gpu = host = 0
        host_embeddings = engine(w.engine).ggml
        for st in serving.served_storage(spec, w).storage:
            t = st.tensor
            if host_embeddings and t.role is Role.EMBEDDING:
                # llama.cpp keeps token embeddings in host memory: lookups are cheap there.
                host += st.bytes
                if spec.facts.tie_word_embeddings and spec.facts.is_decoder:
                    gpu += st.bytes  # tied: the output layer on the GPU is a copy of it
                continue
            gpu += round(st.bytes * _tp_share(t.role, t.is_bias, t.module, w))
        return gpu, host

    return spec.cached(
        (
            "resident_weights",
            w.dtype,
            w.quant,
            w.engine,
            w.tp,
            w.gpu_arch,
            w.mtp,
            w.vllm_version,
            w.transformers_version,
        ),
        compute,
    )


def rank_tensor_bytes(spec: ModelSpec, w: Workload) -> tuple[tuple[int | None, Role, int], ...]:
    """Each weight tensor's bytes on one tensor-parallel rank, with its layer and role, as the
    engine holds them (``serving.served_storage``: kernels' padding, MTP layers when loaded)."""

    def compute() -> tuple[tuple[int | None, Role, int], ...]:
        return tuple(
            (
                st.tensor.layer,
                st.tensor.role,
                round(st.bytes * _tp_share(st.tensor.role, st.tensor.is_bias, st.tensor.module, w)),
            )
            for st in serving.served_storage(spec, w).storage
        )

    return spec.cached(
        (
            "rank_tensors",
            w.dtype,
            w.quant,
            w.engine,
            w.tp,
            w.gpu_arch,
            w.mtp,
            w.vllm_version,
            w.transformers_version,
        ),
        compute,
    )


def _tp_share(role: Role, is_bias: bool, module: str, workload: Workload) -> float:
    """Fraction of a tensor one tensor-parallel rank holds."""
    if workload.tp == 1:
        return 1.0
    if role in (Role.NORM, Role.POSITION) or role is Role.ROUTER:
        return 1.0
    if is_bias and module in ("o_proj", "down_proj", "dense", "c_proj", "out_proj", "fc2"):
        return 1.0  # row-parallel layers add their bias once, after the all-reduce
    return 1.0 / workload.tp
