"""Reading one Hub repo: its information, config.json and exact tensor inventories from headers.

Weights are never downloaded. huggingface_hub reads the repo's information (``model_info``),
downloads config.json and the shard index into the shared Hugging Face cache
(``hf_hub_download``: the next tool, and the next run offline, find them there), and reads
safetensors headers by Range requests (``parse_safetensors_file_metadata``, or every shard in
one request with ``get_sharded_safetensors_metadata`` where the Hub offers it); the headers it
returns are checked here as a local file's are. GGUF headers are read from growing Range
prefixes through the library's HTTP session and walked by ``gguf_reader``. Every request of one
call shares the call's :class:`~vramgui.sources.hub_http.HubSession`.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramgui.core.model import ModelRef
from vramgui.sources import gguf_reader, local
from vramgui.sources.checkpoint import HeaderTensor, spec_from_checkpoint
from vramgui.sources.errors import BadModelFile, IncompleteModel, ModelNotFound
from vramgui.sources.hub_http import HEADER_SLACK_BYTES, HubSession, RangesIgnored, hub_cache_dir
from vramgui.sources.results import ResolvedModel

if TYPE_CHECKING:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import ModelInfo, RepoSibling

# GGUF headers hold the tokenizer (a few MB for 150k-token vocabularies): read growing prefixes.
GGUF_FIRST_RANGE_BYTES = 2 * 1024 * 1024
SHARD_WORKERS = 16
# What huggingface_hub's parse_safetensors_file_metadata asks for first (bytes=0-100000).
LIBRARY_FIRST_RANGE = 100_001


class RepoReader:
    """The network side of loading one repo, within one session (one deadline)."""

    def __init__(self, session: HubSession) -> None:
        self._session = session
        self._api = session.api()

    def model_info(self, repo_id: str, revision: str) -> ModelInfo:
        """The repo's information at ``revision``, every file with its size."""
        session = self._session
        return session.run(
            f"information on {repo_id}",
            lambda: self._api.model_info(
                repo_id, revision=revision, files_metadata=True, token=session.auth
            ),
            repo_id=repo_id,
        )

    def payload(
        self, repo_id: str, revision: str, info: ModelInfo, filename: str | None
    ) -> dict[str, Any]:
        """What vramgui keeps of a repo at the commit ``info`` names: config and tensor table
        (or GGUF header)."""
        sha = str(info.sha or revision)
        siblings = {s.rfilename: s for s in info.siblings or ()}
        ggufs = gguf_files(info)
        base = {"repo_id": repo_id, "revision": sha, "gated": bool(info.gated), "gguf_files": ggufs}
        only_gguf = ggufs and not any(f.endswith(".safetensors") for f in siblings)
        if (filename or "").endswith(".gguf") or only_gguf:
            return {**base, **self._gguf_payload(repo_id, sha, ggufs, filename)}
        config = local.read_config(self._download(repo_id, revision, sha, "config.json", siblings))
        quant = None
        if local.HF_QUANT_CONFIG in siblings:  # ModelOpt's quantization, beside config.json
            quant = local.read_config(
                self._download(repo_id, revision, sha, local.HF_QUANT_CONFIG, siblings)
            )
        notices: list[str] = []
        sharded = local.SAFETENSORS_INDEX in siblings and local.SAFETENSORS_SINGLE not in siblings
        if sharded:
            index_path = self._download(repo_id, revision, sha, local.SAFETENSORS_INDEX, siblings)
            files = local.index_shards(
                local.read_config(index_path, local.MAX_INDEX_BYTES),
                f"{local.SAFETENSORS_INDEX} of {repo_id}",
            )
        else:
            files = local.weight_files(f for f in siblings if "/" not in f)
        sizes = {f: _sibling_size(siblings.get(f)) for f in files}
        try:
            on_main = revision == "main"
            stored = self._sharded_headers(repo_id, files, sizes) if sharded and on_main else None
            if stored is None:
                stored = self._headers(repo_id, sha, files, sizes)
        except RangesIgnored as exc:
            notices.append(f"{exc}: tensors synthesized from config.json")
            stored = []
        if not files:
            notices.append(
                f"{repo_id} has no safetensors weights: tensors synthesized from config.json"
            )
        return {
            **base,
            "kind": "safetensors",
            "config": config,
            "hf_quant_config": quant,
            "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in stored],
            "notices": notices,
        }

    def _download(
        self, repo_id: str, revision: str, sha: str, filename: str, siblings: dict[str, RepoSibling]
    ) -> Path:
        """A small file of the repo, downloaded into the shared Hugging Face cache.

        Asked for at ``revision`` (``main``...), so that the cache also records which commit
        that is, as any other tool's download does; asked again by commit should the revision
        have moved since the repo's information was read.
        """
        limit = (
            local.MAX_INDEX_BYTES if filename == local.SAFETENSORS_INDEX else local.MAX_CONFIG_BYTES
        )
        size = _sibling_size(siblings.get(filename))
        if size is not None and size > limit:
            raise BadModelFile(f"{filename} of {repo_id} is too large to be what it claims")
        path = download(self._session, self._api, repo_id, filename, revision, limit_bytes=limit)
        if path.parent.name == sha or "/" in filename:
            return path
        return download(self._session, self._api, repo_id, filename, sha, limit_bytes=limit)

    def _headers(
        self, repo_id: str, sha: str, files: list[str], sizes: dict[str, int | None]
    ) -> list[HeaderTensor]:
        """Every tensor of the given safetensors files, shards read in parallel."""
        if not files:
            return []

        def one(filename: str) -> list[HeaderTensor]:
            session = self._session
            found = session.run(
                f"{filename} of {repo_id}",
                lambda: self._api.parse_safetensors_file_metadata(
                    repo_id, filename, revision=sha, token=session.auth
                ),
                # The first 100,001 bytes, then the rest of a longer header.
                limit_bytes=local.MAX_HEADER_BYTES + LIBRARY_FIRST_RANGE + 2 * HEADER_SLACK_BYTES,
                repo_id=repo_id,
                filename=filename,
            )
            return _checked(found.tensors, sizes[filename], f"{repo_id}/{filename}")

        # Each shard's request runs in a copy of this thread's context: the session's deadline
        # and rules follow it into the pool.
        with concurrent.futures.ThreadPoolExecutor(min(SHARD_WORKERS, len(files))) as pool:
            futures = [pool.submit(contextvars.copy_context().run, one, f) for f in files]
            parts = [f.result() for f in futures]
        return _unique(parts)

    def _sharded_headers(
        self, repo_id: str, files: list[str], sizes: dict[str, int | None]
    ) -> list[HeaderTensor] | None:
        """Every shard header in one request, from the Hub's safetensors-metadata endpoint.

        The endpoint serves ``main`` only and only on huggingface.co; None wherever it does not
        answer with all the shards, and the shards are then read one by one.
        """
        session = self._session
        try:
            found = session.run(
                f"safetensors metadata of {repo_id}",
                lambda: self._api.get_sharded_safetensors_metadata(
                    repo_id, filename=local.SAFETENSORS_INDEX, token=session.auth
                ),
                repo_id=repo_id,
                filename=local.SAFETENSORS_INDEX,
            )
        except (IncompleteModel, ModelNotFound, BadModelFile):
            return None
        if set(found.files_metadata) != set(files):
            return None
        return _unique(
            [_checked(found.files_metadata[f].tensors, sizes[f], f"{repo_id}/{f}") for f in files]
        )

    def _gguf_payload(
        self, repo_id: str, sha: str, files: list[tuple[str, int]], filename: str | None
    ) -> dict[str, Any]:
        names = [name for name, _ in files]
        if filename is None:
            filename = gguf_reader.preferred_gguf(names)
        elif filename not in names:
            listing = ", ".join(names) or "none"
            raise ModelNotFound(f"{repo_id} has no file {filename!r}; its GGUF files: {listing}")
        contents = self._gguf_header(repo_id, sha, filename, dict(files)[filename] or None)
        notices = []
        if len(names) > 1:
            notices.append(
                f"{repo_id} holds {len(names)} GGUF files; read {filename} "
                f"(others: {', '.join(n for n in names if n != filename)})"
            )
        return {
            "kind": "gguf",
            "file": filename,
            "metadata": contents.metadata,
            "token_count": contents.token_count,
            "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in contents.tensors],
            "notices": notices,
        }

    def _gguf_header(
        self, repo_id: str, sha: str, filename: str, size: int | None
    ) -> gguf_reader.GgufContents:
        """The GGUF header from growing Range prefixes, walked without writing anything."""
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(repo_id, filename, revision=sha, endpoint=self._session.endpoint)
        origin = f"{repo_id}/{filename}"
        want = GGUF_FIRST_RANGE_BYTES
        while True:
            try:
                prefix = self._session.read_range(url, 0, want, f"{filename} of {repo_id}")
            except RangesIgnored as exc:
                raise BadModelFile(f"{exc}; download {filename} and open the file itself") from None
            whole = len(prefix) < want
            try:
                return gguf_reader.gguf_prefix_contents(
                    prefix, len(prefix) if whole else size, origin
                )
            except gguf_reader.HeaderBeyond:
                if want >= gguf_reader.MAX_HEADER_BYTES:
                    raise BadModelFile(
                        f"{origin}: the GGUF header is larger than "
                        f"{gguf_reader.MAX_HEADER_BYTES // 2**20} MiB; no real model's is"
                    ) from None
                want = min(want * 4, gguf_reader.MAX_HEADER_BYTES)


# ---------------------------------------------------------------------- helpers


def download(
    session: HubSession,
    api: HfApi,
    repo_id: str,
    filename: str,
    revision: str,
    *,
    limit_bytes: int,
) -> Path:
    """A small file of a repo, downloaded through ``session`` into the shared Hugging Face cache.

    Raises:
        HubUnavailable, ModelNotFound, GatedModel, IncompleteModel: as ``HubSession.run``.
    """
    path = session.run(
        f"{filename} of {repo_id}",
        lambda: api.hf_hub_download(
            repo_id, filename, revision=revision, cache_dir=hub_cache_dir(), token=session.auth
        ),
        limit_bytes=limit_bytes + 2 * HEADER_SLACK_BYTES,  # a HEAD, then the GET
        repo_id=repo_id,
        filename=filename,
    )
    return Path(path)


def _checked(tensors: dict[str, Any], size: int | None, origin: str) -> list[HeaderTensor]:
    """The library's decoded header, held to the checks of a local header.

    The offsets can be held only to the file size: the header's own length is not returned.
    """
    if len(tensors) > local.MAX_TENSORS:
        raise BadModelFile(
            f"{origin}: the safetensors header lists {len(tensors):,} tensors, more than any "
            f"real model ({local.MAX_TENSORS:,} at most)"
        )
    return [
        local.header_entry(
            name,
            {"dtype": t.dtype, "shape": t.shape, "data_offsets": t.data_offsets},
            size,
            origin,
        )
        for name, t in tensors.items()
    ]


def _unique(parts: list[list[HeaderTensor]]) -> list[HeaderTensor]:
    """Tensors of all parts, each name once (the first shard that holds it wins)."""
    seen: set[str] = set()
    stored = []
    for part in parts:
        for t in part:
            if t.name not in seen:
                seen.add(t.name)
                stored.append(t)
    if len(stored) > local.MAX_TENSORS:
        raise BadModelFile(
            f"the checkpoint lists {len(stored):,} tensors, more than any real model "
            f"({local.MAX_TENSORS:,} at most)"
        )
    return stored


def _sibling_size(sibling: RepoSibling | None) -> int | None:
    if sibling is None:
        return None
    size = sibling.lfs.size if sibling.lfs is not None else sibling.size
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None


def gguf_files(info: ModelInfo) -> list[tuple[str, int]]:
    """The repo's .gguf files with their sizes (0 when the Hub does not say)."""
    files = [
        (s.rfilename, _sibling_size(s) or 0)
        for s in info.siblings or ()
        if s.rfilename.endswith(".gguf")
    ]
    return sorted(files)


def resolved(payload: dict[str, Any], notices: tuple[str, ...]) -> ResolvedModel:
    """A ResolvedModel from a cached or fresh payload."""
    repo_id, sha = str(payload["repo_id"]), str(payload["revision"])
    try:
        stored = [HeaderTensor(n, d, tuple(s), b) for n, d, s, b in payload["tensors"]]
        source = f"Hub {repo_id}@{sha[:12]}"
        if payload.get("kind") == "gguf":
            contents = gguf_reader.GgufContents(
                payload["metadata"], stored, payload.get("token_count")
            )
            spec = gguf_reader.spec_from_gguf(contents, repo_id, f"{source} {payload['file']}")
        else:
            quant = payload.get("hf_quant_config")
            spec = spec_from_checkpoint(
                payload["config"],
                stored,
                repo_id,
                source,
                hf_quant_config=quant if isinstance(quant, dict) else None,
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadModelFile(f"the stored facts of {repo_id} are damaged ({exc})") from None
    ref = ModelRef(kind="hub", id=repo_id, revision=sha, file=payload.get("file"))
    return ResolvedModel(spec=spec, ref=ref, notices=notices)
