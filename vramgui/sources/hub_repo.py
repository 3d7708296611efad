"""Reading one Hub repo: its information, config.json and exact tensor inventories from headers.

Weights are never downloaded: safetensors headers come from HTTP Range requests on the files (the
8-byte length, then the JSON header), GGUF headers likewise. Requests go through ``hub.open_url``
(the standard library's client, the token huggingface_hub would send): all the requests of one
call share one deadline (``hub.CallDeadline``), with at most one quick retry. ``HubClient.load``
imports this module on first use.
"""

from __future__ import annotations

import concurrent.futures
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from vramgui.core.model import ModelRef
from vramgui.sources import local
from vramgui.sources.errors import (
    BadModelFile,
    GatedModel,
    HubUnavailable,
    IncompleteModel,
    ModelNotFound,
)
from vramgui.sources.hub import (
    Answer,
    CallDeadline,
    fetch,
    open_url,
    stored_token,
    unavailable,
)
from vramgui.sources.resolve import LoadedModel

if TYPE_CHECKING:
    from vramgui.sources.hub import HubClient

# The first Range request: most safetensors headers fit (huggingface_hub uses the same size).
FIRST_RANGE_BYTES = 100_000
# GGUF headers hold the tokenizer (a few MB for 150k-token vocabularies): read growing prefixes.
GGUF_FIRST_RANGE_BYTES = 2 * 1024 * 1024
GGUF_MAX_HEADER_BYTES = 64 * 1024 * 1024
SHARD_WORKERS = 16
# Repo information lists every file; a few MB for the largest repos.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
_READ_CHUNK_BYTES = 64 * 1024
_PREFERRED_GGUF = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q8_0")


class Fetch:
    """The network side of loading a repo: every request of one call shares one deadline.

    Each request's timeout is what is left of the call's ``timeout_s``, so a call returns (or
    fails) within about ``timeout_s`` however many requests it needs.
    """

    def __init__(self, client: HubClient) -> None:
        self.endpoint = client.endpoint
        self._token = client._token
        self._deadline = CallDeadline(client.timeout_s)

    def model_info(self, repo_id: str, revision: str) -> dict[str, Any]:
        url = f"{self.endpoint}/api/models/{repo_id}/revision/{quote(revision, safe='')}"
        answer = self.get(f"{url}?blobs=true", what=f"information on {repo_id}")
        self.raise_for_status(answer, repo_id, None)
        if len(answer.body) > MAX_ANSWER_BYTES:
            raise HubUnavailable(f"the Hub sent an unreadable answer about {repo_id}")
        try:
            info = json.loads(answer.body)
        except (ValueError, RecursionError):
            raise HubUnavailable(f"the Hub sent an unreadable answer about {repo_id}") from None
        if not isinstance(info, dict):
            raise HubUnavailable(f"the Hub sent an unreadable answer about {repo_id}")
        return info

    def payload(
        self, repo_id: str, sha: str, info: dict[str, Any], filename: str | None, *, on_main: bool
    ) -> dict[str, Any]:
        """What vramgui keeps of a repo at commit ``sha``: config and tensor table (or GGUF)."""
        siblings = {str(s.get("rfilename")): s for s in _siblings(info)}
        base = {
            "repo_id": repo_id,
            "revision": sha,
            "gated": bool(info.get("gated")),
            "gguf_files": gguf_files(info),
        }
        only_gguf = base["gguf_files"] and not any(f.endswith(".safetensors") for f in siblings)
        if (filename or "").endswith(".gguf") or only_gguf:
            return {**base, **self._gguf_payload(repo_id, sha, base["gguf_files"], filename)}
        config = local.parse_config(
            self._text(repo_id, sha, "config.json"), f"config.json of {repo_id}"
        )
        notices: list[str] = []
        sharded = local.SAFETENSORS_INDEX in siblings and local.SAFETENSORS_SINGLE not in siblings
        if sharded:
            index = local.parse_config(
                self._text(repo_id, sha, local.SAFETENSORS_INDEX),
                f"{local.SAFETENSORS_INDEX} of {repo_id}",
            )
            files = local.index_shards(index, f"{local.SAFETENSORS_INDEX} of {repo_id}")
        else:
            files = local.weight_files(f for f in siblings if "/" not in f)
        if not files:
            notices.append(
                f"{repo_id} has no safetensors weights: tensors synthesized from config.json"
            )
        sizes = {f: _sibling_size(siblings.get(f)) for f in files}
        stored = self._sharded_headers(repo_id, files, sizes) if sharded and on_main else None
        if stored is None:
            stored = self._headers(repo_id, sha, files, sizes)
        return {
            **base,
            "kind": "safetensors",
            "config": config,
            "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in stored],
            "notices": notices,
        }

    def _headers(
        self, repo_id: str, sha: str, files: list[str], sizes: dict[str, int | None]
    ) -> list[local.StoredTensor]:
        """Every tensor of the given safetensors files, shards read in parallel."""
        if not files:
            return []
        with concurrent.futures.ThreadPoolExecutor(min(SHARD_WORKERS, len(files))) as pool:
            parts = list(
                pool.map(lambda f: self._safetensors_header(repo_id, sha, f, sizes[f]), files)
            )
        return _unique(parts)

    def _sharded_headers(
        self, repo_id: str, files: list[str], sizes: dict[str, int | None]
    ) -> list[local.StoredTensor] | None:
        """Every shard header in one request, from the Hub's safetensors-metadata endpoint.

        The endpoint serves ``main`` only and only on huggingface.co; None wherever it does not
        answer with all the shards, and the shards are then read one by one.
        """
        url = f"{self.endpoint}/api/models/{repo_id}/safetensors-metadata/{local.SAFETENSORS_INDEX}"
        answer = self.get(url, what=f"safetensors metadata of {repo_id}")
        if answer.status != 200 or len(answer.body) > MAX_ANSWER_BYTES:
            return None
        try:
            headers = json.loads(answer.body)["headers"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        if not isinstance(headers, dict) or set(headers) != set(files):
            return None
        # The endpoint hands out decoded headers: the offsets can only be held to the file size.
        parts = [
            local.parse_safetensors_header(
                json.dumps(headers[f]).encode(), sizes[f], f"{repo_id}/{f}"
            )
            for f in files
        ]
        return _unique(parts)

    def _safetensors_header(
        self, repo_id: str, sha: str, filename: str, size: int | None
    ) -> list[local.StoredTensor]:
        url = self._file_url(repo_id, sha, filename)
        origin = f"{repo_id}/{filename}"
        prefix, total = self._range(url, 0, FIRST_RANGE_BYTES, repo_id, filename)
        total = total or size
        length = local.header_length(prefix, total, origin)
        if 8 + length <= len(prefix):
            header = prefix[8 : 8 + length]
        else:
            header, _ = self._range(url, 8, length, repo_id, filename)
            if len(header) < length:
                raise BadModelFile(f"{origin}: the Hub sent a truncated header")
        return local.parse_safetensors_header(header, total - 8 - length if total else None, origin)

    def _gguf_payload(
        self, repo_id: str, sha: str, gguf_files: list[tuple[str, int]], filename: str | None
    ) -> dict[str, Any]:
        names = [name for name, _ in gguf_files]
        if filename is None:
            filename = _default_gguf(names)
        elif filename not in names:
            listing = ", ".join(names) or "none"
            raise ModelNotFound(f"{repo_id} has no file {filename!r}; its GGUF files: {listing}")
        size = dict(gguf_files)[filename]
        contents = self._gguf_header(repo_id, sha, filename, size)
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

    def _gguf_header(self, repo_id: str, sha: str, filename: str, size: int) -> local.GgufContents:
        """The GGUF header from growing Range prefixes, read by the gguf package.

        The prefix is written into a sparse file of the real size, so the reader sees offsets
        as in the real file while no tensor data is downloaded.
        """
        url = self._file_url(repo_id, sha, filename)
        want = GGUF_FIRST_RANGE_BYTES
        while True:
            prefix, total = self._range(url, 0, want, repo_id, filename)
            total = total or size
            end = local.gguf_header_end(prefix, f"{repo_id}/{filename}")
            if end is not None:
                break
            if len(prefix) < want:
                raise BadModelFile(f"{repo_id}/{filename}: the GGUF header is truncated")
            if want >= GGUF_MAX_HEADER_BYTES:
                raise BadModelFile(
                    f"{repo_id}/{filename}: the GGUF header is larger than "
                    f"{GGUF_MAX_HEADER_BYTES // 2**20} MiB; download the file and open it locally"
                )
            want = min(want * 4, GGUF_MAX_HEADER_BYTES)
        with tempfile.TemporaryDirectory(prefix="vramgui-gguf-") as tmp:
            path = Path(tmp) / filename.replace("/", "_")
            with path.open("wb") as fh:
                fh.write(prefix[:end])
                fh.truncate(max(total or 0, end))
            return local.read_gguf(path)

    # ------------------------------------------------------------------ HTTP

    def _file_url(self, repo_id: str, revision: str, filename: str) -> str:
        return f"{self.endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"

    def _text(self, repo_id: str, revision: str, filename: str) -> str:
        url = self._file_url(repo_id, revision, filename)
        answer = self.get(url, what=f"{filename} of {repo_id}", limit_bytes=local.MAX_CONFIG_BYTES)
        self.raise_for_status(answer, repo_id, filename)
        if len(answer.body) > local.MAX_CONFIG_BYTES:
            raise BadModelFile(f"{filename} of {repo_id} is too large to be what it claims")
        return answer.body.decode("utf-8", errors="replace")

    def get(self, url: str, *, what: str, limit_bytes: int = MAX_ANSWER_BYTES) -> Answer:
        return fetch(url, limit_bytes=limit_bytes, **self._how(what))

    def _how(self, what: str) -> dict[str, Any]:
        return {
            "what": what,
            "deadline": self._deadline,
            "endpoint": self.endpoint,
            "token": self._token,
        }

    def _range(
        self, url: str, start: int, length: int, repo_id: str, filename: str
    ) -> tuple[bytes, int | None]:
        """Up to ``length`` bytes from ``start``, and the file size when the server states it.

        Read as a stream and cut at ``length``, so a server that ignores Range cannot make us
        download a whole weights file.
        """
        rng = {"Range": f"bytes={start}-{start + length - 1}"}
        with open_url(url, headers=rng, **self._how(f"{filename} of {repo_id}")) as r:
            self.raise_for_status(r, repo_id, filename)
            chunks: list[bytes] = []
            received = 0
            skip = start if r.status == 200 else 0  # the server ignored Range
            try:
                while received < skip + length and (chunk := r.read(_READ_CHUNK_BYTES)):
                    chunks.append(chunk)
                    received += len(chunk)
            except Exception as exc:  # a dropped stream is the Hub failing, not a bad file
                raise HubUnavailable(f"the Hub stopped sending {filename} of {repo_id}") from exc
            data = b"".join(chunks)[skip : skip + length]
            return data, _total_size(r.headers)

    def raise_for_status(self, response: Any, repo_id: str, filename: str | None) -> None:
        """Map an HTTP error about a repo (or one of its files) to our hierarchy.

        Args:
            response: the answer.
            repo_id: the repo asked about.
            filename: the file asked for, or None when asking about the repo itself.
        """
        status = response.status
        if status < 400:
            return
        code = response.headers.get("X-Error-Code", "")
        if code == "GatedRepo" or (status in (401, 403) and code != "RepoNotFound"):
            raise GatedModel(self._gated_message(repo_id))
        if code == "RevisionNotFound":
            raise ModelNotFound(f"{repo_id} has no such revision")
        if filename is not None and (code == "EntryNotFound" or (status == 404 and not code)):
            if filename == "config.json":
                raise IncompleteModel(
                    f"{repo_id} has no config.json, which vramgui needs for the architecture"
                )
            raise IncompleteModel(f"{repo_id} has no file {filename}")
        if status in (401, 404):
            raise ModelNotFound(
                f"{repo_id} is not on the Hub at {self.endpoint} (if it is private, log in with "
                "`hf auth login` or set HF_TOKEN)"
            )
        raise unavailable(status)

    def _gated_message(self, repo_id: str) -> str:
        who = (
            "the token in use has no access to it" if self._has_token() else "you are not logged in"
        )
        return (
            f"{repo_id} is gated and {who}: accept its terms at {self.endpoint}/{repo_id}, "
            "then log in with `hf auth login` or set the HF_TOKEN environment variable"
        )

    def _has_token(self) -> bool:
        return bool(self._token or stored_token())


# ---------------------------------------------------------------------- helpers


def _unique(parts: list[list[local.StoredTensor]]) -> list[local.StoredTensor]:
    """Tensors of all parts, each name once (the first shard that holds it wins)."""
    seen: set[str] = set()
    stored = []
    for part in parts:
        for t in part:
            if t.name not in seen:
                seen.add(t.name)
                stored.append(t)
    return stored


def _siblings(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The repo's file entries; a damaged answer (not a list of objects) lists fewer or none."""
    siblings = info.get("siblings")
    return [s for s in siblings if isinstance(s, dict)] if isinstance(siblings, list) else []


def _sibling_size(sibling: dict[str, Any] | None) -> int | None:
    if not sibling:
        return None
    lfs = sibling.get("lfs")
    size = (lfs if isinstance(lfs, dict) else {}).get("size", sibling.get("size"))
    return size if isinstance(size, int) else None


def gguf_files(info: dict[str, Any]) -> list[tuple[str, int]]:
    files = []
    for s in _siblings(info):
        name = str(s.get("rfilename", ""))
        if name.endswith(".gguf"):
            files.append((name, _sibling_size(s) or 0))
    return sorted(files)


def _default_gguf(names: list[str]) -> str:
    for quant in _PREFERRED_GGUF:
        for name in names:
            if quant.lower() in name.lower():
                return name
    return names[0]


def _total_size(headers: Any) -> int | None:
    content_range = headers.get("Content-Range", "")
    if "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    length = headers.get("Content-Length", "")
    return int(length) if length.isdigit() and "Content-Range" not in headers else None


def loaded(payload: dict[str, Any], notices: tuple[str, ...]) -> LoadedModel:
    """A LoadedModel from a cached or fresh payload."""
    repo_id, sha = str(payload["repo_id"]), str(payload["revision"])
    try:
        stored = [local.StoredTensor(n, d, tuple(s), b) for n, d, s, b in payload["tensors"]]
        source = f"Hub {repo_id}@{sha[:12]}"
        if payload.get("kind") == "gguf":
            contents = local.GgufContents(payload["metadata"], stored, payload.get("token_count"))
            spec = local.spec_from_gguf(contents, repo_id, f"{source} {payload['file']}")
        else:
            spec = local.spec_from_checkpoint(payload["config"], stored, repo_id, source)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadModelFile(f"the stored facts of {repo_id} are damaged ({exc})") from None
    ref = ModelRef(kind="hub", id=repo_id, revision=sha, file=payload.get("file"))
    return LoadedModel(spec=spec, ref=ref, notices=notices)
