"""The config.json a loaded model was read from, for the runs that build the model from it.

A measured run builds the model with transformers from its config.json, never from the weights:
the config comes from where the model was found (``ModelRef``), a Hub repo's through
huggingface_hub into the shared Hugging Face cache (offline: from that cache).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vramgui.core.model import ModelRef
from vramgui.sources import catalog, local
from vramgui.sources.errors import HubUnavailable, IncompleteModel, ModelNotFound

HUB_TIMEOUT_S = 10.0


def config_of(ref: ModelRef) -> dict[str, Any]:
    """config.json of the model ``ref`` points at, as a dict.

    Raises:
        IncompleteModel: the model has none (a GGUF file, a lone safetensors file).
        ModelNotFound / GatedModel / HubUnavailable: the Hub repo cannot be read now.
        BadModelFile: the file is not a JSON object.
    """
    if ref.kind == "catalog":
        entry = catalog.find(ref.id)
        if entry is None:
            raise ModelNotFound(f"{ref.id} is not in the bundled catalog")
        return dict(entry.config)
    if ref.kind == "ollama":
        raise IncompleteModel(f"Ollama's {ref.id} is a GGUF file, which has no config.json")
    if ref.kind == "hub":
        if ref.file:
            raise IncompleteModel(f"{ref.id}:{ref.file} is a GGUF file, which has no config.json")
        return local.read_config(_hub_config(ref.id, ref.revision))
    path = Path(ref.id)
    if path.is_dir():
        path /= "config.json"
    elif path.suffix != ".json":
        path = path.parent / "config.json"
    if not path.is_file():
        raise IncompleteModel(
            f"no config.json for {ref.id}: a run builds the model from its config.json, "
            "which a GGUF file does not carry; put the model's config.json beside it"
        )
    return local.read_config(path)


def _hub_config(repo_id: str, revision: str | None) -> Path:
    """config.json of a Hub repo through vramgui's Hub client (its deadline, its token rules),
    else the copy in the Hugging Face cache."""
    from vramgui.sources import hub_repo
    from vramgui.sources.hub import HubClient
    from vramgui.sources.hub_http import hub_cache_dir

    session = HubClient(timeout_s=HUB_TIMEOUT_S).session()
    try:
        return hub_repo.download(
            session,
            session.api(),
            repo_id,
            "config.json",
            revision or "main",
            limit_bytes=local.MAX_CONFIG_BYTES,
        )
    except HubUnavailable as exc:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(
            repo_id, "config.json", cache_dir=hub_cache_dir(), revision=revision
        )
        if isinstance(cached, str):
            return Path(cached)
        raise HubUnavailable(
            f"config.json of {repo_id} could not be fetched ({exc}) and is not in the Hugging "
            "Face cache"
        ) from None
