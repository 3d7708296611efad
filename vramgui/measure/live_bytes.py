"""Live tensor bytes, counted per storage, as the CUDA caching allocator would see them."""

from __future__ import annotations

import weakref
from collections.abc import Collection, Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

CATEGORIES = (
    "parameters",
    "gradients",
    "optimizer_states",
    "kv_cache",
    "weight_copies",
    "other",
)

_aten = torch.ops.aten
# Ops whose output is a 16-bit copy of a weight when autocast casts it (cached or not).
_CAST_OPS = frozenset({_aten._to_copy.default, _aten._autocast_to_reduced_precision.default})


class LiveBytes(TorchDispatchMode):
    """Counts the bytes of every live storage and keeps the peak, with a breakdown at the peak.

    Every storage the dispatcher returns is counted once (views share it), from the op that
    creates it until Python frees it (a `weakref.finalize` on the storage). Tensors that exist
    before the mode is entered (parameters, buffers, gradients, optimizer states) are registered
    with `classify`. Categories can change while a storage lives (a gradient tensor is born as an
    op output and becomes `.grad` later); the breakdown at the peak uses the categories of that
    moment.
    """

    def __init__(self) -> None:
        super().__init__()
        self._live: dict[int, list] = {}
        self._by_category = dict.fromkeys(CATEGORIES, 0)
        self.current_bytes = 0
        self.peak_bytes = 0
        self.peak_phase = "setup"
        self.peak_breakdown = dict(self._by_category)
        self.phase = "setup"
        self.phase_peaks: dict[str, dict] = {}
        # What `.item()` returns while set: fake tensors have no values, and some code (torch's
        # Adafactor) reads scalars that only scale an update, never change what is allocated.
        self.item_stand_in: float | None = None

    def reset_peak(self) -> None:
        """Start a new peak window at the current live bytes (like reset_peak_memory_stats)."""
        self.peak_bytes = self.current_bytes
        self.peak_phase = self.phase
        self.peak_breakdown = dict(self._by_category)
        self.phase_peaks = {}

    def category_bytes(self, category: str) -> int:
        """Live bytes in one category now."""
        return self._by_category[category]

    def classify(self, tensors: Iterable[torch.Tensor | None], category: str) -> None:
        """Count these tensors' storages (if new) and put them in `category`."""
        for tensor in tensors:
            if tensor is None:
                continue
            storage = tensor.untyped_storage()
            entry = self._live.get(storage._cdata)
            if entry is None:
                self._add(storage, category)
            elif entry[1] != category:
                self._by_category[entry[1]] -= entry[0]
                self._by_category[category] += entry[0]
                entry[1] = category

    def category_of(self, tensor: torch.Tensor) -> str | None:
        """The category a tensor's storage is counted in, or None if it is not counted."""
        entry = self._live.get(tensor.untyped_storage()._cdata)
        return None if entry is None else entry[1]

    def _add(self, storage: torch.UntypedStorage, category: str) -> None:
        key = storage._cdata
        nbytes = storage.nbytes()
        self._live[key] = [nbytes, category]
        self._by_category[category] += nbytes
        self.current_bytes += nbytes
        weakref.finalize(storage, self._release, key)
        self._note_peak()

    def _release(self, key: int) -> None:
        nbytes, category = self._live.pop(key)
        self._by_category[category] -= nbytes
        self.current_bytes -= nbytes

    def _note_peak(self) -> None:
        phase = self.phase
        phase_peak = self.phase_peaks.get(phase)
        if phase_peak is None or self.current_bytes > phase_peak["peak_bytes"]:
            self.phase_peaks[phase] = {
                "peak_bytes": self.current_bytes,
                "breakdown": dict(self._by_category),
            }
        if self.current_bytes > self.peak_bytes:
            self.peak_bytes = self.current_bytes
            self.peak_phase = phase
            self.peak_breakdown = dict(self._by_category)

    def _category_for_output(self, func: object, args: tuple) -> str:
        is_cast = func in _CAST_OPS and args and isinstance(args[0], torch.Tensor)
        if is_cast and self.category_of(args[0]) == "parameters":
            return "weight_copies"
        return "other"

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Collection[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is _aten._local_scalar_dense.default and self.item_stand_in is not None:
            dtype = args[0].dtype
            if dtype.is_floating_point:
                return self.item_stand_in
            return dtype is torch.bool or int(self.item_stand_in)
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            entry = self._live.get(storage._cdata)
            if entry is None:
                self._add(storage, self._category_for_output(func, args))
            elif entry[0] != storage.nbytes():
                # An out= op or resize_ grew or shrank a storage that is already counted.
                delta = storage.nbytes() - entry[0]
                entry[0] += delta
                self._by_category[entry[1]] += delta
                self.current_bytes += delta
                self._note_peak()
        return out
