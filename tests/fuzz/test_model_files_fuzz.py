"""Model files from anywhere: safetensors headers and GGUF files, mutated and lying.

Readers must refuse a bad file with ``BadModelFile`` (or another vramgui error) quickly, and must
not allocate what a header claims (a 10^15-byte header, 10^15 tensors, a 10^15-element shape).
"""

from __future__ import annotations

import json
import struct
import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, safetensors_bytes, write_gguf
from tests.fuzz.conftest import FUZZ, corpus, parse_safely
from vramgui.sources import gguf_reader, local

TINY = {**TINY_LLAMA_CONFIG, "num_hidden_layers": 1}
SAFETENSORS = safetensors_bytes(llama_tensors(TINY))
HEADERS = corpus("safetensors_headers.json")


@cache
def gguf_seed() -> bytes:
    """A valid one-block GGUF written by gguf.GGUFWriter (Q4_K, Q6_K, Q8_0 and F32 tensors)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "seed.gguf"
        write_gguf(path, vocab=16, ff=256, layers=1, heads=2, kv_heads=1)
        return path.read_bytes()


def hub_prefix(data: bytes) -> gguf_reader.GgufContents | None:
    """The header as the Hub loader reads it from a first range of the file, or None when the
    range ends inside the header (the loader then asks for more)."""
    try:
        return gguf_reader.gguf_prefix_contents(data, None, "fuzz")
    except gguf_reader.HeaderBeyond:
        return None


def mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    """``data`` with bytes overwritten at (fraction-scaled) positions, then maybe truncated."""
    out = bytearray(data)
    for where, value in edits:
        out[where % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


edits = st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), max_size=8)


def test_the_seeds_are_valid(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(SAFETENSORS)
    assert local.load_safetensors_file(path).parameters > 0
    path = tmp_path / "model.gguf"
    path.write_bytes(gguf_seed())
    assert gguf_reader.load_gguf(path).parameters > 0
    assert hub_prefix(gguf_seed()) is not None


@FUZZ
@given(edits=edits, cut=st.one_of(st.none(), st.integers(0, len(SAFETENSORS))))
@example(edits=[], cut=7)
def test_mutated_safetensors_files(tmp_path_factory, edits, cut) -> None:
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    path.write_bytes(mutate(SAFETENSORS, edits, cut))
    parse_safely(lambda: local.load_safetensors_file(path))


@FUZZ
@given(length=st.integers(0, 2**64 - 1), tail=st.binary(max_size=64))
@example(length=10**15, tail=b"{}")
@example(length=2**64 - 1, tail=b"")
def test_header_lengths(tmp_path_factory, length: int, tail: bytes) -> None:
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    path.write_bytes(struct.pack("<Q", length) + tail)
    parse_safely(lambda: local.read_safetensors_header(path))


@FUZZ
@given(
    seed=st.sampled_from(sorted(HEADERS)),
    name=st.text(max_size=30),
    info=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-(2**66), 2**66), st.text(max_size=8)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=12,
    ),
    data_bytes=st.one_of(st.none(), st.integers(0, 2**63)),
)
@example(seed=sorted(HEADERS)[0], name="w", info={"shape": [10**4000]}, data_bytes=None)
@example(seed=sorted(HEADERS)[0], name="w", info={"shape": [1] * 10_000}, data_bytes=None)
def test_safetensors_header_documents(seed: str, name: str, info, data_bytes) -> None:
    doc = {**HEADERS[seed], name: info}
    parse_safely(
        lambda: local.parse_safetensors_header(json.dumps(doc).encode(), data_bytes, "fuzz")
    )


@pytest.mark.parametrize("seed", sorted(HEADERS))
def test_corpus_headers(seed: str) -> None:
    """Each kept header: the lying ones are refused, none is materialized."""
    header = json.dumps(HEADERS[seed]).encode()
    parse_safely(lambda: local.parse_safetensors_header(header, 10**6, seed))


@FUZZ
@given(edits=edits, cut=st.one_of(st.none(), st.integers(0, 4096)))
@example(edits=[(8 + i, 0xFF) for i in range(7)], cut=None)  # 2^56 tensors
@example(edits=[(16 + i, 0xFF) for i in range(7)], cut=None)  # 2^56 metadata entries
@example(edits=[], cut=30)
def test_mutated_gguf_files(tmp_path_factory, edits, cut) -> None:
    seed = gguf_seed()
    data = mutate(seed[:4096], edits, None) + seed[4096:]
    data = data[:cut] if cut is not None else data
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    path.write_bytes(data)
    parse_safely(lambda: gguf_reader.load_gguf(path))
    parse_safely(lambda: hub_prefix(data[:4096]))


@FUZZ
@given(head=st.binary(max_size=512))
@example(head=b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 10**15))
@example(
    head=b"GGUF"
    + struct.pack("<IQQ", 3, 0, 1)
    + struct.pack("<Q", 4)
    + b"name"
    + struct.pack("<IIQ", 9, 0, 10**15)
)
@example(
    head=b"GGUF"
    + struct.pack("<IQQ", 3, 0, 1)
    + struct.pack("<Q", 4)
    + b"name"
    + struct.pack("<IIQ", 9, 8, 10**15)
)
@example(
    head=b"GGUF"
    + struct.pack("<IQQ", 3, 0, 1)
    + struct.pack("<Q", 4)
    + b"name"
    + struct.pack("<IIQ", 9, 9, 10**15)
    + struct.pack("<IQ", 9, 10**15) * 40
)
@example(head=b"GGUF" + struct.pack("<IQQ", 3, 0, 10**6) + b"\0" * 64)  # a million keys
@example(head=b"GGUF" + struct.pack("<IQQ", 3, 100_000, 0) + b"\0" * 64)  # 100k tensors
def test_gguf_heads(tmp_path_factory, head: bytes) -> None:
    """Arbitrary bytes after the magic, as a file and as the Hub's first range of one."""
    data = head if head.startswith(b"GGUF") else b"GGUF" + head
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    path.write_bytes(data)
    parse_safely(lambda: gguf_reader.load_gguf(path))
    parse_safely(lambda: hub_prefix(data))
