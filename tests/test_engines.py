"""Engines as objects (core/engines/): each engine answers what its data says, the registry is the
modules present, and no module outside the package compares an engine's name."""

import ast
import sys
import textwrap
from pathlib import Path

import pytest

import vramgui
from vramgui.core import engines
from vramgui.core.engines import ENGINE_KEYS, ENGINES, StartUp, engine
from vramgui.core.errors import WorkloadError
from vramgui.core.kv_cache_types import KV_CACHE_TYPES
from vramgui.core.workload import KV_DTYPES, Workload, engine_quant

ROOT = Path(vramgui.__file__).parent
PACKAGE = ROOT / "core" / "engines"
NAMES = frozenset({"transformers", "vllm", "sglang", "llamacpp", "llama.cpp"})


def _literals(node: ast.AST) -> list[str]:
    """The engine names ``node`` spells as string literals (alone or in a tuple, list, set)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [name for e in node.elts for name in _literals(e)]
    return []


def engine_name_comparisons(source: str) -> list[tuple[int, str]]:
    """Each comparison (==, !=, in, not in, is) or ``case`` against an engine name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, name) for name in _literals(side)]
        elif isinstance(node, ast.match_case):
            for sub in ast.walk(node.pattern):
                if isinstance(sub, ast.MatchValue):
                    found += [(sub.lineno, name) for name in _literals(sub.value)]
    return found


def test_the_detector_finds_each_kind_of_comparison():
    source = textwrap.dedent(
        """
        if w.engine == "vllm": pass
        if "llamacpp" != e: pass
        if w.engine in ("vllm", "sglang"): pass
        if e not in ["transformers"]: pass
        match e:
            case "llama.cpp": pass
        if e == "ollama" or x in ("a", "b"): pass
        names = {"vllm": 1}
        """
    )
    lines = sorted({line for line, _ in engine_name_comparisons(source)})
    assert lines == [2, 3, 4, 5, 7]


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(ROOT.rglob("*.py")) if PACKAGE not in p.parents],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_outside_the_engines_compares_an_engine_name(path):
    found = engine_name_comparisons(path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT)} compares engine names: {found}"


def test_the_registry_lists_exactly_the_engine_modules_present():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "base"}
    assert set(ENGINE_KEYS) == modules
    for key in ENGINE_KEYS:
        # Each module's engine is called as its module.
        assert sys.modules[f"vramgui.core.engines.{key}"].ENGINE is engine(key)
    assert [e.order for e in ENGINES] == sorted(e.order for e in ENGINES)
    assert len({e.order for e in ENGINES}) == len(ENGINES)


def test_adding_an_engine_is_adding_a_module(tmp_path, monkeypatch):
    (tmp_path / "newengine.py").write_text(
        textwrap.dedent(
            """
            from vramgui.core.engines.base import Engine

            ENGINE = Engine(
                key="newengine",
                name="New",
                label="New",
                order=9,
                quant_families=frozenset({"none"}),
                kv_cache={"auto": None},
            )
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(engines, "__path__", [*engines.__path__, str(tmp_path)])
    found = engines._discover()
    assert [e.key for e in found] == [*ENGINE_KEYS, "newengine"]
    sys.modules.pop("vramgui.core.engines.newengine", None)


def test_a_module_without_an_engine_is_refused(tmp_path, monkeypatch):
    (tmp_path / "notanengine.py").write_text("VALUE = 1\n", encoding="utf-8")
    monkeypatch.setattr(engines, "__path__", [*engines.__path__, str(tmp_path)])
    with pytest.raises(TypeError, match="notanengine defines no ENGINE"):
        engines._discover()
    sys.modules.pop("vramgui.core.engines.notanengine", None)


def test_an_unknown_engine_or_planner_is_a_clear_error():
    with pytest.raises(WorkloadError, match="engine must be one of transformers, vllm"):
        engine("tgi")
    with pytest.raises(WorkloadError, match="planner must be one of llamacpp, accelerate"):
        engines.planner("exllama")


def test_kv_caches_each_engine_takes():
    vllm, sglang, llamacpp, transformers = (
        engine(k) for k in ("vllm", "sglang", "llamacpp", "transformers")
    )
    assert vllm.takes_kv("fp8") and vllm.kv_flag("fp8") == "fp8"
    assert not vllm.takes_kv("q4_0")
    assert vllm.kv_flag("bf16") is None  # its default: the model's dtype
    assert sglang.kv_flag("fp8") == "fp8_e4m3"
    assert not sglang.takes_kv("fp16")
    assert llamacpp.takes_kv("q4_0") and llamacpp.kv_flag("q4_0") == "q4_0"
    assert not llamacpp.takes_kv("fp8")
    assert llamacpp.auto_kv_dtype == "fp16" and transformers.auto_kv_dtype is None
    assert transformers.kv_dtypes == ("auto", "fp32", "fp16", "bf16")
    for e in ENGINES:
        assert set(e.kv_dtypes) <= set(KV_DTYPES), e.key
    # Every choice of the table is taken by some engine; those some engines refuse name others.
    for t in KV_CACHE_TYPES:
        assert t.engines, t.name
        assert all(engine(k).takes_kv(t.name) for k in t.switch_to), t.name


def test_pre_allocation_and_parallelism():
    assert engine("vllm").pre_allocates and engine("vllm").startup is StartUp.VLLM
    assert engine("sglang").pre_allocates and engine("sglang").startup is StartUp.SGLANG
    assert not engine("transformers").pre_allocates
    assert not engine("llamacpp").pre_allocates
    assert not engine("transformers").sizes_for_context
    assert engine("llamacpp").sizes_for_context
    assert engine("vllm").tensor_parallel_flag == "--tensor-parallel-size"
    assert engine("sglang").tensor_parallel_flag == "--tp-size"
    assert engine("llamacpp").tensor_parallel_flag == ""
    assert not engine("llamacpp").splits_tensors and engine("transformers").splits_tensors
    assert [e.key for e in ENGINES if e.loads_mtp] == ["vllm"]
    assert [e.key for e in ENGINES if e.ggml] == ["llamacpp"]
    assert [e.key for e in ENGINES if e.eager_pytorch] == ["transformers"]


def test_formats_each_engine_loads():
    assert engine("llamacpp").loads("gguf") and not engine("llamacpp").loads("fp8")
    assert not engine("transformers").loads("nvfp4")
    assert not engine("transformers").loads("gguf")
    assert "gguf" in engine("transformers").dequantized_families
    assert engine("vllm").loads("modelopt") and engine("sglang").loads("nvfp4")
    # The stored format as served: llama.cpp runs MXFP4 as its MXFP4_MOE GGUF, the others as is.
    assert engine_quant("llamacpp", "mxfp4") == "MXFP4_MOE"
    assert engine_quant("llamacpp", "none", stored="mxfp4") == "MXFP4_MOE"
    assert engine_quant("vllm", "mxfp4") == "mxfp4"


def test_the_workload_follows_its_engine():
    with pytest.raises(WorkloadError, match="vLLM has no q4_0 KV cache"):
        Workload(engine="vllm", kv_dtype="q4_0")
    with pytest.raises(WorkloadError, match=r"llama\.cpp runs GGUF files only"):
        Workload(engine="llamacpp", quant="nf4")
    assert Workload(engine="llamacpp", quant="Q4_K_M", kv_dtype="q4_0").kv_dtype == "q4_0"


def test_planners_and_the_engines_they_load_with():
    assert [p.key for p in engines.PLANNERS] == ["llamacpp", "accelerate", "streaming"]
    assert engines.planner_engine("llamacpp").ggml
    assert engines.planner_engine("accelerate").eager_pytorch
    assert engines.planner_engine("streaming").eager_pytorch
    assert engines.default_planner("llamacpp").key == "llamacpp"
    assert engines.default_planner("transformers").key == "accelerate"
    assert engines.default_planner("vllm").key == "accelerate"
    assert engines.default_planner("sglang").key == "accelerate"
