"""llama.cpp's compute buffer for multi-head latent attention (its DeepSeek-V2 graph,
``src/models/deepseek2.cpp``), from the graph itself: the tensors of one micro-batch, laid out by
ggml's allocator (core/ggml_alloc.py).

The graph, as llama.cpp builds it with the split ``wk_b`` / ``wv_b`` tensors of today's GGUF
files (the absorbed form: the query is multiplied into the latent space and attends the cached
latent and rotary key as one shared head):

- the query through its low rank (``wq_a``, its norm, ``wq_b``) or ``wq``; its rotary part
  roped, its other part multiplied by ``wk_b`` per head and concatenated with it;
- the latent and rotary key (``wkv_a_mqa``), the latent normed, the rotary key roped, both
  concatenated and written to the cache;
- attention over the whole cache: with flash attention one kernel that returns the latent value
  per head, without it the scores of every head against every cell (f32), their softmax, the
  cached latent copied out transposed and the weighted sum; then ``wv_b`` per head and ``wo``;
- a dense feed-forward block (the leading ones) or the router (DeepSeek-V2's softmax; V3's
  sigmoid, bias and group-limited choice add a few tensors of experts x micro-batch floats, left
  out), the routed experts (gate, up, their product, down, weighted) summed, and the shared
  experts;
- after the last block, the rows that are output, the final norm and the logits.

A device's part (its blocks, and the output layer on the last one) begins with the inputs the
scheduler copies in: the hidden state (the token embeddings looked up on the host, or the
previous device's output), the positions, the cache slots, the mask and the output rows; the
experts run where the blocks do. Experts kept in host memory run there too on CUDA, for large
batches: the scheduler copies each host matrix, as stored, into the device's buffer just before
its product (``host_experts``). The sizes are those of ``ggml_nbytes``: f32 activations, an f16
(flash attention) or f32 mask, an f16 cache.
"""

from __future__ import annotations

from functools import lru_cache

from vramgui.core.ggml_alloc import Graph, Tensor, buffer_size
from vramgui.core.model import ArchFacts

_F32 = 4
_WEIGHT = Tensor("NONE", (1,), external=True)
_CACHE = Tensor("NONE", (1,), external=True)


def _op(op: str, shape: tuple[int, ...], *srcs: Tensor, dtype_bytes: int = _F32) -> Tensor:
    return Tensor(op, shape, dtype_bytes, srcs)


def _view(op: str, src: Tensor, shape: tuple[int, ...] = (1,)) -> Tensor:
    base = src.view_of or src
    return Tensor(op, shape, src.dtype_bytes, (src,), view_of=base)


def _norm(x: Tensor) -> Tensor:
    """build_norm with LLM_NORM_RMS and a weight: rms_norm, then mul by the weight."""
    return _op("MUL", x.shape, _op("RMS_NORM", x.shape, x), _WEIGHT)


def _mm(x: Tensor, rows: int, *rest: int) -> Tensor:
    return _op("MUL_MAT", (rows, *rest), _WEIGHT, x)


def _ffn(x: Tensor, width: int, ub: int) -> Tensor:
    """build_ffn, SiLU, parallel gate: down(swiglu(gate(x), up(x)))."""
    gate, up = _mm(x, width, ub), _mm(x, width, ub)
    return _mm(_op("GLU", (width, ub), gate, up), x.shape[0], ub)


def _expert_weight(copy_bytes: int) -> Tensor:
    """An expert matrix as the graph reads it: on the device, or (``copy_bytes`` > 0) the copy of
    a host matrix the scheduler makes in the device's buffer just before the product that reads
    it, freed after it (ggml-backend.cpp: a split input, one copy when not pipelined)."""
    return Tensor("NONE", (copy_bytes,), 1) if copy_bytes else _WEIGHT


def _moe(
    g: Graph, x: Tensor, f: ArchFacts, ub: int, copies: tuple[int, int, int] = (0, 0, 0)
) -> Tensor:
    """build_moe_ffn with softmax gating and separate gate / up experts, then the shared ones.
    ``copies``: the bytes of the gate, up and down expert matrices copied in from the host (0:
    on the device)."""
    h, k, n, width = f.hidden_size, f.experts_per_token, f.num_experts, f.moe_intermediate_size
    probs = _op("SOFT_MAX", (n, ub), _mm(x, n, ub))
    topk = _view("VIEW", _op("ARGSORT", (n, ub), probs), (k, ub))
    weights = _op("GET_ROWS", (1, k, ub), _view("RESHAPE", probs), topk)
    g.expand(weights)
    xr = _view("RESHAPE", x)
    gate_w, up_w, down_w = (_expert_weight(c) for c in copies)
    gate = _op("MUL_MAT_ID", (width, k, ub), gate_w, xr, topk)
    up = _op("MUL_MAT_ID", (width, k, ub), up_w, xr, topk)
    glu = _op("GLU", (width, k, ub), gate, up)
    down = _op("MUL_MAT_ID", (h, k, ub), down_w, glu, topk)
    experts = _op("MUL", down.shape, down, weights)
    g.expand(experts)
    each = [_view("VIEW", experts, (h, ub)) for _ in range(k)]
    for v in each:
        g.expand(v)
    out = each[0]
    for v in each[1:]:
        out = _op("ADD", (h, ub), out, v)
        g.expand(out)
    if k == 1:
        out = _op("CONT", (h, ub), out)
    shared = f.num_shared_experts * width
    return _op("ADD", (h, ub), out, _ffn(x, shared, ub)) if shared else out


def _attention(
    g: Graph, x: Tensor, f: ArchFacts, ub: int, ctx: int, *, flash: bool, inp: dict[str, Tensor]
) -> Tensor:
    """The absorbed MLA attention of one block, from the normed hidden state to ``wo``."""
    heads, rank = f.num_heads, f.kv_lora_rank or 0
    rope = f.qk_rope_head_dim or 0
    nope = f.qk_nope_head_dim or 0
    v_dim = f.v_head_dim or f.head_dim
    q = _norm(_mm(x, f.q_lora_rank, ub)) if f.q_lora_rank else x
    q = _view("RESHAPE", _mm(q, heads * (nope + rope), ub))
    absorbed = _op("MUL_MAT", (rank, ub, heads), _WEIGHT, _view("PERMUTE", _view("VIEW", q)))
    q_pe = _op("ROPE", (rope, heads, ub), _view("VIEW", q), inp["pos"])
    q_cur = _op("CONCAT", (rank + rope, heads, ub), _view("PERMUTE", absorbed), q_pe)
    kv = _mm(x, rank + rope, ub)
    latent = _view("RESHAPE", _norm(_view("VIEW", kv, (rank, ub))))
    k_pe = _op("ROPE", (rope, 1, ub), _view("VIEW", kv), inp["pos"])
    k_cur = _op("CONCAT", (rank + rope, 1, ub), latent, k_pe)
    for t in (q_cur, latent, k_cur):
        g.expand(t)
    store = Tensor("SET_ROWS", (1,), 2, (_CACHE, _view("VIEW", k_cur), inp["idxs"]), _CACHE)
    g.expand(store)
    qp = _view("PERMUTE", _view("VIEW", q_cur))
    kp = _view("PERMUTE", _view("VIEW", _CACHE))
    vp = _view("PERMUTE", _view("VIEW", _view("VIEW", _CACHE)))
    if flash:
        out = _op("FLASH_ATTN_EXT", (rank, heads, ub), qp, kp, vp, inp["mask"])
        out = _op("MUL_MAT", (v_dim, ub, heads), _WEIGHT, _view("PERMUTE", out))
        out = _view("RESHAPE", _op("CONT", (v_dim, heads, ub), _view("PERMUTE", out)))
    else:
        scores = _op("MUL_MAT", (ctx, ub, heads), kp, qp)
        probs = _op("SOFT_MAX", scores.shape, scores, inp["mask"])
        v = _op("CONT", (ctx, rank, 1), _view("TRANSPOSE", vp), dtype_bytes=2)
        out = _op(
            "MUL_MAT", (v_dim, ub, heads), _WEIGHT, _op("MUL_MAT", (rank, ub, heads), v, probs)
        )
        out = _op("CONT", (heads * v_dim, ub), _view("PERMUTE", out))
    g.expand(out)
    return _mm(out, f.hidden_size, ub)


@lru_cache(maxsize=512)
def compute_buffer(
    f: ArchFacts,
    ub: int,
    ctx: int,
    *,
    flash_attention: bool,
    blocks: tuple[int, int] | None = None,
    output: bool = True,
    copies: int = 0,
    host_experts: tuple[tuple[int, tuple[int, int, int]], ...] = (),
    alignment: int = 128,
) -> int:
    """Bytes of llama.cpp's compute buffer for the MLA graph on one device, for micro-batches of
    ``ub`` tokens over ``ctx`` cache cells.

    Args:
        f: the architecture.
        ub: tokens per micro-batch (``-ub``, at most the context).
        ctx: cache cells.
        flash_attention: ``-fa on``.
        blocks: the blocks the device runs, ``(first, end)``; None: every block.
        output: the device runs the output layer.
        copies: with every layer on two or more GPUs, the copies llama.cpp's scheduler keeps of
            each input a device receives, to pipeline micro-batches (``GGML_SCHED_MAX_COPIES``):
            allocated before the graph runs and never freed. 0: one each, freed after its last
            reader.
        host_experts: ``(block, (gate, up, down bytes))`` for the blocks whose expert matrices
            live in host memory and are copied into this device's buffer to be multiplied here
            (llama.cpp's op offload of large batches, core/activations.py).
        alignment: the backend's buffer alignment (CUDA: 128 bytes).
    """
    first, end = blocks if blocks is not None else (0, f.num_layers)
    h = f.hidden_size
    pinned = copies > 0

    def received(shape: tuple[int, ...], dtype_bytes: int = _F32) -> Tensor:
        return Tensor("NONE", shape, dtype_bytes, is_input=True, is_output=pinned)

    # What the device receives, in the order its graph first reads it: the hidden state (the
    # token embeddings looked up on the host, or the previous device's output), the positions,
    # the cache slots, the mask, the rows that are output.
    hidden = received((h, ub))
    inp = {}
    if end > first:
        inp = {
            "pos": received((ub,)),
            "idxs": received((ub,), 8),
            "mask": received((ctx, ub), 2 if flash_attention else _F32),
        }
        if end == f.num_layers:
            inp["out"] = received((ub,))
    inputs = [hidden, *inp.values()]
    if pinned:
        extra = copies - 1
        inputs = [
            c
            for t in inputs
            for c in (t, *(received(t.shape, t.dtype_bytes) for _ in range(extra)))
        ]
    g = Graph()
    moe = f.moe_layers or (f.is_moe,) * f.num_layers
    hosted = dict(host_experts)
    for il in range(first, end):
        cur = _attention(g, _norm(hidden), f, ub, ctx, flash=flash_attention, inp=inp)
        if il == f.num_layers - 1:
            cur = _op("GET_ROWS", (h, ub), cur, inp["out"])
            hidden = _op("GET_ROWS", (h, ub), hidden, inp["out"])
        ffn_inp = _op("ADD", (h, ub), cur, hidden)
        x = _norm(ffn_inp)
        ffn = (
            _moe(g, x, f, ub, hosted.get(il, (0, 0, 0)))
            if moe[il]
            else _ffn(x, f.intermediate_size, ub)
        )
        hidden = _op("ADD", (h, ub), ffn, ffn_inp)
    if output:
        norm = _norm(hidden)
        norm.is_output = True
        hidden = _mm(norm, f.vocab_size, ub)
        hidden.is_output = True
    g.expand(hidden)
    return buffer_size(g, inputs, alignment)
