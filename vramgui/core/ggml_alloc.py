"""ggml's graph allocator (``ggml/src/ggml-alloc.c``), walked over a sketch of a graph: the size
of the compute buffer llama.cpp reserves for it.

llama.cpp builds one graph per micro-batch and hands it to ggml's allocator, which walks the
nodes in order, places each new tensor in the best-fitting free block of one growing buffer (or
at its end), lets an element-wise operation write over its input when nothing else reads it,
and frees a tensor once its last reader has run. The buffer is the highest offset reached, which
is more than the largest set of tensors alive at once where the free blocks are scattered: a
tensor that fits in none of them goes to the end.

Only what decides the offsets is kept: each tensor's size, what it reads, whether it is a view of
another tensor (no memory of its own), whether its data lives in another buffer (weights, the KV
cache), and whether its operation may run in place. The nodes are ordered the way
``ggml_build_forward_expand`` orders them: each tensor after what it reads, depth first, in the
order of its sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# ggml_op_can_inplace: the operations that may write over an input of the same layout.
INPLACE_OPS = frozenset(
    {"SCALE", "ADD", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "UNARY", "ROPE", "RMS_NORM",
     "CLAMP", "SOFT_MAX"}
)  # fmt: skip


@dataclass(eq=False)
class Tensor:
    """One tensor of the graph.

    Attributes:
        op: its operation (``NONE`` for a leaf: a weight, an input).
        shape: its elements per dimension (with ``dtype``, the layout in-place reuse compares).
        dtype_bytes: bytes per element.
        srcs: the tensors it reads, in ggml's ``src`` order.
        view_of: the tensor whose memory a view uses (VIEW, RESHAPE, PERMUTE, TRANSPOSE,
            SET_ROWS into the cache), else None.
        external: its data lives in another buffer (weights, the KV cache).
        is_input: a graph input, allocated before the nodes run.
        is_output: a graph output, never freed.
    """

    op: str
    shape: tuple[int, ...]
    dtype_bytes: int = 4
    srcs: tuple[Tensor, ...] = ()
    view_of: Tensor | None = None
    external: bool = False
    is_input: bool = False
    is_output: bool = False

    @property
    def nbytes(self) -> int:
        n = self.dtype_bytes
        for d in self.shape:
            n *= d
        return n


@dataclass
class Graph:
    """Nodes in ggml's order, built by ``expand`` as llama.cpp's ``ggml_build_forward_expand``."""

    nodes: list[Tensor] = field(default_factory=list)
    leafs: list[Tensor] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)

    def expand(self, t: Tensor) -> None:
        stack: list[tuple[Tensor, int]] = [(t, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0 and id(node) in self._seen:
                continue
            if i < len(node.srcs):
                stack.append((node, i + 1))
                src = node.srcs[i]
                if id(src) not in self._seen:
                    stack.append((src, 0))
                continue
            if id(node) in self._seen:
                continue
            self._seen.add(id(node))
            (self.leafs if node.op == "NONE" else self.nodes).append(node)


class _Blocks:
    """ggml_dyn_tallocr: free blocks sorted by offset; the last one is the buffer's open end."""

    def __init__(self, alignment: int) -> None:
        self.alignment = alignment
        self.free: list[list[int]] = [[0, 1 << 62]]
        self.max_size = 0

    def _align(self, size: int) -> int:
        return -(-size // self.alignment) * self.alignment

    def alloc(self, size: int) -> int:
        size = self._align(size)
        best, best_size = -1, None
        for i, (_, block) in enumerate(self.free[:-1]):
            if block >= size and (best_size is None or block <= best_size):
                best, best_size = i, block
        if best < 0:
            best = len(self.free) - 1
        offset = self.free[best][0]
        self.free[best][0] += size
        self.free[best][1] -= size
        if self.free[best][1] == 0:
            del self.free[best]
        self.max_size = max(self.max_size, offset + size)
        return offset

    def release(self, offset: int, size: int) -> None:
        size = self._align(size)
        for i, block in enumerate(self.free):
            if block[0] + block[1] == offset:
                block[1] += size
                if i + 1 < len(self.free) and block[0] + block[1] == self.free[i + 1][0]:
                    block[1] += self.free[i + 1][1]
                    del self.free[i + 1]
                return
            if offset + size == block[0]:
                block[0] = offset
                block[1] += size
                if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == block[0]:
                    self.free[i - 1][1] += block[1]
                    del self.free[i]
                return
        at = next((i for i, b in enumerate(self.free) if b[0] >= offset), len(self.free))
        self.free.insert(at, [offset, size])


def buffer_size(graph: Graph, inputs: Sequence[Tensor] = (), alignment: int = 128) -> int:
    """Bytes of the buffer ggml's allocator reserves for ``graph`` (ggml_gallocr_alloc_graph).

    Args:
        graph: the nodes, in order.
        inputs: tensors allocated before the first node, in this order (the inputs the scheduler
            copies in at the start of the device's part of the graph); the graph's other inputs
            follow as ggml meets them.
        alignment: the backend's buffer alignment (CUDA: 128 bytes).
    """
    blocks = _Blocks(alignment)
    children: dict[int, int] = {}
    views: dict[int, int] = {}
    offset: dict[int, int] = {}  # the tensors this buffer holds now

    def own(t: Tensor) -> bool:
        return id(t) in offset

    def allocate(t: Tensor) -> None:
        if t.external or t.view_of is not None or own(t):
            return
        if t.op in INPLACE_OPS:
            for parent in t.srcs:
                if (
                    own(parent)
                    and not parent.is_output
                    and parent.shape == t.shape
                    and parent.dtype_bytes == t.dtype_bytes
                    and children.get(id(parent), 0) == 1
                    and views.get(id(parent), 0) == 0
                ):
                    offset[id(t)] = offset.pop(id(parent))
                    return
        offset[id(t)] = blocks.alloc(t.nbytes)

    def release(t: Tensor) -> None:
        if t.is_output or not own(t):
            return
        blocks.release(offset.pop(id(t)), t.nbytes)

    for t in inputs:
        allocate(t)
    for node in graph.nodes:
        if node.view_of is not None:
            views[id(node.view_of)] = views.get(id(node.view_of), 0) + 1
        for src in node.srcs:
            children[id(src)] = children.get(id(src), 0) + 1
            if src.is_input:
                allocate(src)
    for node in graph.nodes:
        for src in node.srcs:
            allocate(src)
        allocate(node)
        for parent in node.srcs:
            children[id(parent)] -= 1
            if children[id(parent)] or views.get(id(parent), 0):
                continue
            base = parent.view_of
            if base is None:
                release(parent)
                continue
            views[id(base)] -= 1
            if not views[id(base)] and not children.get(id(base), 0):
                release(base)
    return blocks.max_size
