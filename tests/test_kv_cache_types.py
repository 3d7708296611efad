"""Which KV cache dtypes an engine takes is its own (``Engine.kv_cache``, core/engines/); the
workload's check, the fit advisor, the launch lines and the window's disabled choices all follow
it."""

import itertools

import pytest

from vramgui.core import fit, launch, offload
from vramgui.core.engines import engine
from vramgui.core.errors import WorkloadError
from vramgui.core.families import spec_from_config
from vramgui.core.kv_cache_types import KV_CACHE_TYPES
from vramgui.core.units import GiB
from vramgui.core.workload import ENGINES, KV_DTYPES, Workload
from vramgui.sources.catalog import find
from vramgui.ui.controller import disabled_reasons

PAIRS = list(itertools.product(ENGINES, KV_DTYPES))


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(find("llama-2-7b").config, "llama-2-7b")


def _workload(engine: str, kv: str) -> Workload:
    quant = "Q4_K_M" if engine == "llamacpp" else "none"
    return Workload(dtype="fp16", engine=engine, kv_dtype=kv, quant=quant, seq=2048)


def test_the_table_names_every_engine_and_suggests_engines_that_take_the_dtype():
    for e in ENGINES:
        assert set(engine(e).kv_dtypes) <= set(KV_DTYPES), e
        # In the table's order, as the window lists them.
        assert list(engine(e).kv_dtypes) == [k for k in KV_DTYPES if engine(e).takes_kv(k)], e
    for t in KV_CACHE_TYPES:
        assert set(t.switch_to) <= t.engines, t.name
        assert bool(t.switch_to) == (t.engines != set(ENGINES)), t.name


@pytest.mark.parametrize(("engine_key", "kv"), PAIRS)
def test_the_workload_and_the_window_refuse_what_the_table_does_not_list(spec, engine_key, kv):
    takes = engine(engine_key).takes_kv(kv)
    if not takes:
        with pytest.raises(WorkloadError, match=f"no {kv} KV cache"):
            _workload(engine_key, kv)
    # The window greys out exactly the dtypes the engine does not take.
    reasons = disabled_reasons(_workload(engine_key, "auto"), spec)
    assert (f"kv_dtype:{kv}" in reasons) == (not takes)


@pytest.mark.parametrize(("engine_key", "kv"), [p for p in PAIRS if engine(p[0]).takes_kv(p[1])])
def test_the_advisor_and_the_launch_lines_follow_the_table(spec, engine_key, kv):
    w = _workload(engine_key, kv)
    offered = [c["kv_dtype"] for _, c, _ in fit._candidates(spec, w, 8 * GiB) if "kv_dtype" in c]
    assert set(offered) <= set(engine(engine_key).kv_dtypes)
    assert kv not in offered
    args = launch.vllm_settings(spec, w).args
    # vLLM's own flag: fp8 only (the 16/32-bit dtypes are its default, the model's dtype).
    assert ("--kv-cache-dtype" in args) == (kv == "fp8")
    if engine_key == "sglang":
        args = launch.sglang_settings(spec, w).args
        flags = {"bf16": "bf16", "fp8": "fp8_e4m3"}
        assert ("--kv-cache-dtype" in args) == (kv in flags)
        if kv in flags:
            assert args[args.index("--kv-cache-dtype") + 1] == flags[kv]
    if engine_key == "llamacpp":
        placement = offload.llamacpp_model(spec, w).place(4 * GiB, host_ram_bytes=16 * GiB)
        args = launch.llamacpp_settings(spec, placement).args
        cache = args[args.index("--cache-type-k") + 1]
        assert cache == {"auto": "f16", "fp32": "f32", "fp16": "f16"}.get(kv, kv)


def test_the_advisor_offers_each_engines_smaller_caches(spec):
    def offered(engine: str, kv: str) -> list[str]:
        candidates = fit._candidates(spec, _workload(engine, kv), 8 * GiB)
        return [c["kv_dtype"] for _, c, _ in candidates if "kv_dtype" in c]

    assert offered("vllm", "auto") == ["fp8"]
    assert offered("sglang", "bf16") == ["fp8"]
    assert offered("llamacpp", "fp16") == ["q8_0", "q4_0"]
    assert offered("llamacpp", "q8_0") == ["q4_0"]
    assert offered("llamacpp", "q4_0") == []
    assert offered("transformers", "auto") == []
