"""What a probe of hostile inputs found, each kept as a reproduction: paths that raised
tracebacks, integers past Python's 4,300-digit limit, named pipes that hung a reader forever,
and files whose parsing cost was out of proportion to what any model holds.

Each runs within the fuzz suite's bounds (``parse_safely``: 5 s, 64 MiB, only vramgui's own
errors may escape) and says which error, with which words, it must end in.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fakehub.files import TINY_LLAMA_CONFIG, llama_tensors, safetensors_bytes, write_gguf
from tests.fuzz.conftest import parse_safely
from vramgui.sources import gguf_reader, local
from vramgui.sources.errors import BadModelFile, ModelNotFound
from vramgui.sources.resolve import load_model

TENSORS = llama_tensors(TINY_LLAMA_CONFIG)


def _refused(fn, error=BadModelFile, match: str = "") -> str:
    """Run ``fn`` within the fuzz bounds; it must raise ``error`` whose message holds ``match``."""
    caught: list[Exception] = []

    def run() -> None:
        try:
            fn()
        except error as exc:
            caught.append(exc)
            raise

    parse_safely(run)
    assert caught, f"expected {error.__name__}"
    assert match in str(caught[0]), str(caught[0])
    return str(caught[0])


# ----------------------------------------------------------------------------- paths


@pytest.mark.parametrize("name", ["a" * 300 + ".json", "a" * 300, "b" * 300 + "/config.json"])
def test_a_file_name_too_long_for_the_system(tmp_path, name):
    message = _refused(lambda: load_model(str(tmp_path / name)), ModelNotFound, "no such file")
    assert len(message) < 400  # the name is cut, not repeated whole


def test_a_home_folder_of_no_such_user():
    _refused(lambda: load_model("~nosuchuser-vramgui/x"), ModelNotFound, "no user")


def test_a_folder_this_user_may_not_read(tmp_path):
    """As root (who reads anything), the check runs in a child that becomes ``nobody``."""
    public = Path(tempfile.mkdtemp(prefix="vramgui-perm-", dir="/tmp"))
    try:
        public.chmod(0o755)
        folder = public / "model"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
        folder.chmod(0o311)  # enter, not list
        assert _as_unprivileged(lambda: load_model(str(folder))) == (
            f"BadModelFile: cannot read the folder {folder}: permission denied"
        )
        folder.chmod(0o000)
        assert _as_unprivileged(lambda: load_model(str(folder / "config.json"))) == (
            f"BadModelFile: cannot read {folder / 'config.json'}: permission denied"
        )
    finally:
        for path in (public / "model", public):
            path.chmod(0o755)
        (public / "model" / "config.json").unlink()
        (public / "model").rmdir()
        public.rmdir()


def _as_unprivileged(fn) -> str:
    """``fn()`` run as a user without special rights; returns its error as ``Type: message``."""
    if os.geteuid() != 0:
        try:
            fn()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "no error"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run, report, leave without running pytest's exit
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            fn()
            outcome = "no error"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    return outcome


# ----------------------------------------------------------------------------- named pipes


@pytest.mark.parametrize("name", ["config.json", "x.safetensors", "x.gguf", "folder"])
def test_named_pipes_are_refused_at_once(tmp_path, name):
    """A reader that opened one would wait forever for a writer."""
    if name == "folder":
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
        os.mkfifo(tmp_path / "m" / "model.safetensors")
        target = tmp_path / "m"
    else:
        target = tmp_path / name
        os.mkfifo(target)
    _refused(lambda: load_model(str(target)), BadModelFile, "is a named pipe, not a file")


def test_a_device_is_refused():
    _refused(lambda: load_model("/dev/zero"), BadModelFile, "is a device, not a file")


# ----------------------------------------------------------------------------- long integers


def test_an_integer_past_the_conversion_limit_in_a_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA_CONFIG)[:-1] + ', "vocab_size": ' + "9" * 5000 + "}")
    _refused(lambda: load_model(str(path)), BadModelFile, "an integer of 5,000 digits")


@pytest.mark.parametrize(
    ("digits", "words"), [(5000, "an integer of over 4,300 digits"), (4000, "invalid shape")]
)
def test_long_integers_in_a_header(tmp_path, digits, words):
    """Past Python's limit the parser refuses it; below, a dimension past 2^64 is refused
    before any product of dimensions is computed."""
    header = b'{"w": {"dtype": "F32", "shape": [' + b"7" * digits + b'], "data_offsets": [0, 4]}}'
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    _refused(lambda: load_model(str(path)), BadModelFile, words)


def test_a_tensor_of_more_dimensions_than_any_is_refused():
    header = b'{"w": {"dtype": "U8", "shape": [' + b"1," * 1000 + b'1], "data_offsets": [0, 1]}}'
    _refused(lambda: local.parse_safetensors_header(header, None, "x"), match="invalid shape")


# ----------------------------------------------------------------------------- sizes


def _minimal_header(count: int, escaped: bool = False) -> bytes:
    key = '"data\\u005foffsets"' if escaped else '"data_offsets"'
    entry = '"t{}":{{"dtype":"U8","shape":[],' + key + ":[{},{}]}}"
    return ("{" + ",".join(entry.format(i, i, i + 1) for i in range(count)) + "}").encode()


def test_a_header_of_a_million_tensors_is_refused_unread(tmp_path):
    """66 MB, 1M tensors: 17.7 s and 738 MB before; now refused on its length field."""
    header = _minimal_header(1_000_000)
    assert len(header) > 50 * 2**20
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(1_000_000))
    _refused(lambda: local.read_safetensors_header(path), match="32 MiB at most")


def test_a_header_with_more_tensors_than_a_model_holds_is_refused_before_parsing():
    header = _minimal_header(local.MAX_TENSORS + 1)
    assert len(header) < local.MAX_HEADER_BYTES
    _refused(lambda: local.parse_safetensors_header(header, None, "x"), match="262,144")


def test_hidden_keys_do_not_hide_the_tensor_count():
    """The fast count misses escaped keys; the count of parsed objects stops the parse."""
    header = _minimal_header(5000, escaped=True)
    _refused(
        lambda: local.parse_safetensors_header(header, None, "x", max_tensors=1000),
        match="over 1,002 entries",
    )


def test_shards_together_are_held_to_the_tensor_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "MAX_TENSORS", len(TENSORS) - 1)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    names = list(TENSORS)
    (folder / "a.safetensors").write_bytes(safetensors_bytes({n: TENSORS[n] for n in names[:5]}))
    (folder / "b.safetensors").write_bytes(safetensors_bytes({n: TENSORS[n] for n in names[5:]}))
    _refused(lambda: load_model(str(folder)), match="more than vramgui reads")


def _gguf(kv: bytes, n_kv: int, tensors: bytes = b"", n_tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kv + tensors


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def test_a_gguf_of_a_million_empty_strings_is_walked_cheaply(tmp_path):
    """8 MB: 29 s and 1.6 GB in gguf's reader. Walked in a child process whose memory is
    measured (tracemalloc, which the fuzz bounds use, slows a million-step walk tenfold)."""
    array = _string(b"general.junk") + struct.pack("<IIQ", 9, 8, 1_000_000) + bytes(8_000_000)
    path = tmp_path / "strings.gguf"
    path.write_bytes(_gguf(array, 1))
    script = (
        "import resource, sys\n"
        "from vramgui.sources import gguf_reader\n"
        "from vramgui.sources.errors import BadModelFile\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        f"    gguf_reader.load_gguf(__import__('pathlib').Path({str(path)!r}))\n"
        "except BadModelFile as exc:\n"
        "    print(exc)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    message, grown_kib = done.stdout.strip().splitlines()
    assert "holds no tensors" in message  # refused for what it lacks, not for its size
    assert int(grown_kib) < 64 * 1024


def test_a_gguf_of_a_million_metadata_keys_is_refused_unread(tmp_path):
    kv = b"".join(_string(b"k%07d" % i) + struct.pack("<IB", 0, 1) for i in range(1000))
    path = tmp_path / "keys.gguf"
    path.write_bytes(_gguf(kv, 1_000_000))
    _refused(lambda: gguf_reader.load_gguf(path), match="1000000 metadata entries")


def test_a_gguf_of_a_hundred_thousand_tensors_is_refused_unread(tmp_path):
    info = _string(b"t") + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<IQ", 0, 0)
    path = tmp_path / "tensors.gguf"
    path.write_bytes(_gguf(b"", 0, info * 100_000, 100_000))
    _refused(lambda: gguf_reader.load_gguf(path), match="100000 tensors")


def test_too_many_array_items_are_refused(tmp_path):
    count = gguf_reader.MAX_ARRAY_ITEMS + 1
    array = _string(b"tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, count)
    path = tmp_path / "items.gguf"
    path.write_bytes(_gguf(array, 1) + bytes(4 * count))
    _refused(lambda: gguf_reader.load_gguf(path), match="array items")


def test_a_large_gguf_is_read_for_its_header_only(tmp_path):
    """A 4 GiB file (sparse) with a small header: read in the fuzz bounds' 64 MiB, where the
    header walk used to read the first 256 MB into memory."""
    path = tmp_path / "big.gguf"
    write_gguf(path)
    with path.open("r+b") as fh:
        fh.truncate(4 * 2**30)
    assert parse_safely(lambda: gguf_reader.load_gguf(path)).parameters > 0


def test_a_gguf_header_past_its_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gguf_reader, "MAX_HEADER_BYTES", 2**20)
    path = tmp_path / "m.gguf"
    write_gguf(path, vocab=100_000)
    _refused(lambda: gguf_reader.load_gguf(path), match="runs past 1 MiB")


@pytest.mark.parametrize(
    "key",
    [
        "block_count",
        "embedding_length",
        "feed_forward_length",
        "attention.head_count",
        "attention.head_count_kv",
        "context_length",
    ],
)
@pytest.mark.parametrize("value", [float("inf"), float("nan"), -float("inf"), 2.5, 1e30, -64.0])
def test_a_gguf_size_stored_as_an_odd_float_is_refused_with_its_key(tmp_path, key, value):
    """FLOAT32 +inf (and NaN, fractions, negative or huge values) where a size belongs: an
    OverflowError out of the reader once; now one message naming the key, or, for a whole
    number out of range, the family's refusal."""
    from vramgui.core.errors import ConfigError

    path = tmp_path / "model.gguf"
    write_gguf(path, floats={key: value})
    said = _refused(lambda: load_model(str(path)), error=ConfigError)
    if not (math.isfinite(value) and value.is_integer()):
        assert f"llama.{key} is {value}, not a whole number" in said


@pytest.mark.parametrize(
    ("name", "shape", "said"),
    [
        ("model.embed_tokens.weight", (), "has 0 dimensions where the model's has 2"),
        ("model.embed_tokens.weight", (32, 0), "holds no elements"),
        ("model.layers.0.self_attn.q_proj.weight", (32, 0), "holds no elements"),
        ("model.layers.0.self_attn.o_proj.weight", (64,), "has 1 dimensions where the model's"),
        ("model.norm.weight", (0,), "holds no elements"),
    ],
)
def test_a_tensor_of_an_impossible_rank_or_size_is_refused_by_name(tmp_path, name, shape, said):
    """A scalar embedding raised IndexError and a [32, 0] tensor ZeroDivisionError in the
    training estimate (inference passed): each checkpoint is now refused, naming the tensor."""
    from tests.fakehub.files import write_model_folder

    tensors = {**TENSORS, name: ("BF16", shape)}
    folder = write_model_folder(tmp_path / "model", TINY_LLAMA_CONFIG, tensors)
    message = _refused(lambda: load_model(str(folder)))
    assert f"tensor {name} of shape {list(shape)} {said}" in message


def test_a_quant_state_beside_the_experts_leaves_qlora_to_the_expert_matrices():
    """A bitsandbytes checkpoint's 1-D quant state is named like an expert weight; QLoRA's note on
    the stacked experts sized it as a matrix (IndexError)."""
    import dataclasses

    from vramgui.core.estimate import estimate
    from vramgui.core.model import Role, Tensor
    from vramgui.core.workload import Workload
    from vramgui.sources.catalog import find

    base = find("qwen3-30b-a3b").spec()
    state = Tensor(
        "model.layers.0.mlp.experts.0.up_proj.weight.quant_state.bitsandbytes__nf4",
        (3,),
        Role.EXPERT,
        0,
        "up_proj",
        "U64",
    )
    spec = dataclasses.replace(base, tensors=(*base.tensors, state))
    workload = Workload.from_dict(
        {"mode": "training", "method": "qlora", "quant": "nf4", "seq": 32, "batch": 1}
    )
    assert estimate(spec, workload).total_bytes > estimate(base, workload).total_bytes > 0
