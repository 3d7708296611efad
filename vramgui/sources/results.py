"""The plain records the sources hand out: a resolved model, search results, models on disk.

A leaf module (it imports only ``vramgui.core``), so that every other module of the package can
name these types without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramgui.core.model import ModelRef, ModelSpec

# The source text of an Ollama model (``ollama:llama3.2:3b``), as ``LocalModel.source`` gives it.
OLLAMA_PREFIX = "ollama:"


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A model spec with where it came from and what the user should know about how it was read.

    Attributes:
        spec: the model.
        ref: enough to find it again (stored in profiles).
        notices: how the source was obtained, to show the user (an offline fallback to cached
            facts, which GGUF file of a repo was read, a repo read from the Hugging Face cache);
            facts about the model itself are in ``spec.warnings``.
    """

    spec: ModelSpec
    ref: ModelRef
    notices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HubModel:
    """One search result.

    Attributes:
        id: repo id (``org/name``), or a catalog name for catalog results without a repo.
        parameters: total parameters as the Hub states them (safetensors metadata), if known.
        downloads: downloads in the last 30 days.
        likes: likes.
        gated: the repo asks for a license agreement and a login.
        library: library tag (``transformers``, ``gguf``...).
        pipeline_tag: task tag (``text-generation``...).
        source: ``hub``, ``cache`` (a stored Hub answer) or ``catalog``.
    """

    id: str
    parameters: int | None = None
    downloads: int = 0
    likes: int = 0
    gated: bool = False
    library: str = ""
    pipeline_tag: str = ""
    source: str = "hub"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class CachedSearch:
    """Search results stored earlier, and when (seconds since the epoch)."""

    results: list[HubModel]
    fetched_at: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Search results and, when they did not come from the Hub just now, why.

    Attributes:
        results: best first.
        offline_notice: a line to show when the results come from the cache or the catalog
            because the Hub could not answer; None when they are live or fresh from the cache.
    """

    results: tuple[HubModel, ...]
    offline_notice: str | None = None


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A model found on this machine by another tool's download (never written to by vramgui).

    Attributes:
        name: what the tool calls it (``org/name`` in the Hugging Face cache, ``llama3.2:3b`` in
            Ollama, ``publisher/repo/file.gguf`` in LM Studio).
        where: the tool: ``Hugging Face cache``, ``Ollama`` or ``LM Studio``.
        source: what ``resolve.load_model`` opens it by (a repo id, ``ollama:NAME``, a path).
        path: the folder or file that holds its weights.
        size_bytes: bytes of its weight files on disk.
        format: ``safetensors`` or ``gguf``.
    """

    name: str
    where: str
    source: str
    path: Path
    size_bytes: int
    format: str

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.__slots__}, "path": str(self.path)}
