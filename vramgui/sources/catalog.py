"""The bundled offline model catalog: the models people ask about, usable with no network.

Each entry carries the model's published config.json, where those values were read, and the exact
parameter counts transformers gives for it (the whole checkpoint, its language model, and each part);
``tools/build_catalog.py`` generates ``resources/catalog.json`` (see docs/catalog.md), so no number
here is typed by hand. The catalog is read once, through ``vramgui.paths.bundled``, so it
works the same from a checkout, an installed package and a frozen bundle.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from vramgui.core.families import spec_from_config
from vramgui.core.model import ModelRef, ModelSpec
from vramgui.paths import bundled
from vramgui.sources.checkpoint import as_shipped
from vramgui.sources.errors import SourceError

CATALOG_FORMAT = "vramgui.catalog"
CATALOG_FORMAT_VERSION = 1
# Shown on first run: popular, small enough for one consumer GPU, and answering the most common question.
DEFAULT_NAME = "llama-3.1-8b"

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+[a-z0-9]*)*")


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One bundled model.

    Attributes:
        name: the catalog's short name, lower case (``llama-3.1-8b``).
        hub_id: the Hugging Face repo the config comes from, or "" when there is no public repo.
        family: the model series as people say it (``Llama 3.1``, ``Qwen 2.5``).
        parameters: exact parameter count of the transformers model built from ``config``: the
            whole checkpoint, vision and audio towers included.
        config: the published config.json values.
        display_name: a label for people (``Llama 3.1 8B``).
        architecture: the transformers class the count was taken from.
        aliases: other Hub ids with the same architecture (instruct / chat variants).
        license: license identifier as the Hub shows it.
        gated: the Hub repo asks for a license agreement and a login.
        max_context: the longest context the model supports, in tokens.
        popularity: a hand-set rank of how often the model is asked about (higher first); it orders
            search results and is not a download count.
        note: how the entry departs from the published checkpoint, if it does.
        config_source: where ``config`` was read: the config.json URL at the Hub, or the URL of the
            stored copy it was taken from.
        parameters_text: the language model's share of ``parameters`` (all of it for a text model).
        parameters_by_part: ``parameters`` split by top-level module (``language_model``,
            ``vision_tower``, ``multi_modal_projector``, ...), as transformers names them.
        hf_quant_config: the repo's ``hf_quant_config.json`` (NVIDIA ModelOpt checkpoints
            whose config.json does not say how they are quantized), else empty.
        hf_quant_config_source: where ``hf_quant_config`` was read.
        stored_bytes: the checkpoint's published size (``total_size`` of its
            model.safetensors.index.json), 0 where none was found.
        stored_bytes_source: where ``stored_bytes`` was read.
    """

    name: str
    hub_id: str
    family: str
    parameters: int
    config: dict[str, Any]
    display_name: str = ""
    architecture: str = ""
    aliases: tuple[str, ...] = ()
    license: str = ""
    gated: bool = False
    max_context: int = 0
    popularity: int = 0
    note: str = ""
    config_source: str = ""
    parameters_text: int = 0
    parameters_by_part: dict[str, int] = dataclasses.field(default_factory=dict)
    hf_quant_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    hf_quant_config_source: str = ""
    stored_bytes: int = 0
    stored_bytes_source: str = ""

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    @property
    def config_origin(self) -> str:
        """A short label for ``config_source``: the host and repository of a URL, else the text."""
        url = urlsplit(self.config_source)
        if not url.netloc:
            return self.config_source
        repo = "/".join(url.path.strip("/").split("/")[:2])
        return f"{url.netloc}/{repo}"

    def spec(self) -> ModelSpec:
        """The model's ModelSpec, synthesized from its config by ``core.families``.

        Raises:
            ConfigError: the family is not supported by ``core.families``.
        """
        spec = as_shipped(
            spec_from_config(self.config, name=self.hub_id or self.name),
            self.config,
            self.hf_quant_config or None,
        )
        source = f"bundled catalog ({self.name})"
        if self.config_origin:
            source += f", config from {self.config_origin}"
        return dataclasses.replace(spec, source=source)

    def ref(self) -> ModelRef:
        """The reference a profile stores for this entry."""
        return ModelRef(kind="catalog", id=self.name)


def _entry(raw: dict[str, Any]) -> CatalogEntry:
    parameters = int(raw["parameters_transformers"])
    return CatalogEntry(
        name=raw["name"],
        hub_id=raw["hub_id"],
        family=raw["family"],
        parameters=parameters,
        config=raw["config"],
        display_name=raw.get("display_name", raw["name"]),
        architecture=raw.get("architecture", ""),
        aliases=tuple(raw.get("aliases", ())),
        license=raw.get("license", ""),
        gated=bool(raw.get("gated", False)),
        max_context=int(raw.get("max_context") or 0),
        popularity=int(raw.get("popularity", 0)),
        note=raw.get("note", ""),
        config_source=raw.get("config_source", ""),
        parameters_text=int(raw.get("parameters_text", parameters)),
        parameters_by_part={
            str(k): int(v)
            for k, v in (raw.get("parameters_by_part") or {"language_model": parameters}).items()
        },
        hf_quant_config=dict(raw.get("hf_quant_config") or {}),
        hf_quant_config_source=raw.get("hf_quant_config_source", ""),
        stored_bytes=int(raw.get("stored_bytes") or 0),
        stored_bytes_source=raw.get("stored_bytes_source", ""),
    )


@functools.cache
def load_catalog() -> tuple[CatalogEntry, ...]:
    """Every catalog entry, in file order (read once, then cached).

    Raises:
        SourceError: the bundled file is missing or not a catalog this version can read; that is a
            broken installation, so the message says to reinstall.
    """
    path = bundled() / "catalog.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(
            f"the bundled model catalog cannot be read ({exc}); reinstall vramgui"
        ) from exc
    if (
        not isinstance(doc, dict)
        or doc.get("format") != CATALOG_FORMAT
        or doc.get("format_version") != CATALOG_FORMAT_VERSION
    ):
        raise SourceError("the bundled model catalog has an unknown format; reinstall vramgui")
    try:
        return tuple(_entry(raw) for raw in doc["entries"])
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise SourceError(
            f"the bundled model catalog is damaged ({exc}); reinstall vramgui"
        ) from exc


@functools.cache
def _index() -> dict[str, CatalogEntry]:
    index: dict[str, CatalogEntry] = {}
    for entry in load_catalog():
        for key in (entry.name, entry.hub_id, *entry.aliases):
            # Primary names and hub ids win over aliases that happen to repeat them.
            if key:
                index.setdefault(key.lower(), entry)
    return index


def find(name: str) -> CatalogEntry | None:
    """The entry for a catalog name, Hub id or alias (case-insensitive), or None."""
    return _index().get(name.strip().lower())


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@functools.cache
def _entry_tokens() -> tuple[tuple[CatalogEntry, frozenset[str]], ...]:
    return tuple(
        (
            e,
            frozenset(
                _tokens(
                    " ".join((e.name, e.hub_id, e.display_name, e.family, e.model_type, *e.aliases))
                )
            ),
        )
        for e in load_catalog()
    )


def search(query: str, limit: int = 20) -> list[CatalogEntry]:
    """Entries matching every token of ``query``, most popular first.

    A query token matches when it starts a token of the entry's name, Hub id, aliases, display
    name, family or model type: "llama 3" finds Llama 3, 3.1, 3.2 and 3.3, "7b" finds 7B models
    but not 27B ones, "Qwen/Qwen2.5" finds the Qwen2.5 repos. A number matches a whole number:
    "llama 4" finds Llama 4, not Llama 3.1 405B. An empty query lists the most popular entries.
    """
    wanted = _tokens(query)
    hits = [
        e
        for e, have in _entry_tokens()
        if all(any(_starts(token, w) for token in have) for w in wanted)
    ]
    # Popularity first, then smaller models (more people can run them), then name for stability.
    hits.sort(key=lambda e: (-e.popularity, e.parameters, e.name))
    return hits[: max(limit, 0)]


def _starts(token: str, wanted: str) -> bool:
    """Whether ``token`` starts with ``wanted``, a number only where its digits end there."""
    if not token.startswith(wanted):
        return False
    rest = token[len(wanted) :]
    return not (wanted[-1].isdigit() and rest[:1].isdigit())


def popular_default() -> CatalogEntry:
    """The model the app shows on its first run."""
    entry = find(DEFAULT_NAME)
    if entry is None:
        raise SourceError(f"the bundled model catalog lacks {DEFAULT_NAME}; reinstall vramgui")
    return entry
