"""One setup, one answer: every figure the front ends share is the same everywhere.

Each setup runs through ``vramgui estimate --json``, ``vramgui plan --json`` (inference),
``vramgui profile compare --json`` and the window: its controller (the Estimate tab's figures
and time / cost line), the Offloading tab, the Serving tab (vLLM) and the profile comparison.
The weights, the total, the fit and headroom, the tokens/s, the cost, the KV pool in tokens and
the one-layer floor must be identical; and no view may give a speed or a cost for a setup that
does not fit without naming the placement it times.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from tests.logs_fixtures import text
from vramgui.answers.host import host_settings
from vramgui.answers.rates import catalog_rates
from vramgui.answers.timing import AS_SET, Timing
from vramgui.cli import main
from vramgui.core.logs import read_log
from vramgui.core.units import GiB
from vramgui.core.workload import Workload
from vramgui.hardware.gpus import custom_gpu, load_catalog
from vramgui.profiles import ProfileStore
from vramgui.sources.resolve import load_model
from vramgui.ui import report, timing
from vramgui.ui.capacity_view import CapacityView
from vramgui.ui.compare_view import comparison_rows, reestimate
from vramgui.ui.controller import EstimateController
from vramgui.ui.extra_views import OffloadFeed
from vramgui.ui.offload_view import OffloadView

RAM_GIB = 64
# (model, GPU, flags): every engine, inference and training, fitting and not, offloading,
# several GPUs, vLLM's and SGLang's start-up.
SETUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # llama.cpp: fitting, offloading whole layers, experts in host RAM, two GPUs
    ("llama-3.1-8b", "RTX 3060 12GB", ("--engine", "llamacpp", "--quant", "Q8_0")),
    ("llama-3.1-8b", "RTX 4090", ("--engine", "llamacpp", "--quant", "Q4_K_M", "--seq", "32768")),
    ("llama-3.1-70b", "RTX 4090", ("--engine", "llamacpp", "--quant", "Q4_K_M")),
    ("llama-3.1-70b", "RTX 3060 12GB", ("--engine", "llamacpp", "--quant", "Q4_K_M")),
    ("qwen3-30b-a3b", "RTX 4090", ("--engine", "llamacpp", "--quant", "Q4_K_M", "--seq", "32768")),
    ("qwen3-30b-a3b", "RTX 3060 12GB",
     ("--engine", "llamacpp", "--quant", "Q4_K_M", "--seq", "40960")),
    ("qwen3-30b-a3b", "RTX 3060 12GB", ("--engine", "llamacpp", "--quant", "Q4_K_M", "--gpus", "2")),
    # llama.cpp's layer split over 2 and 4 GPUs: fitting, and not (layers in host RAM)
    ("llama-3.1-70b", "RTX 4090", ("--engine", "llamacpp", "--quant", "Q4_K_M", "--gpus", "2")),
    ("llama-3.1-70b", "RTX 3060 12GB",
     ("--engine", "llamacpp", "--quant", "Q4_K_M", "--gpus", "2")),
    ("llama-3.1-70b", "RTX 3060 12GB",
     ("--engine", "llamacpp", "--quant", "Q4_K_M", "--gpus", "4")),
    ("qwen3-30b-a3b", "RTX 3060 12GB",
     ("--engine", "llamacpp", "--quant", "Q4_K_M", "--gpus", "4", "--seq", "40960")),
    ("llama-3.1-70b", "RTX 3060 12GB",
     ("--engine", "llamacpp", "--quant", "Q4_K_M", "--gpus", "4", "--seq", "32768")),
    ("qwen2.5-14b", "RTX 3080 10GB", ("--engine", "llamacpp", "--quant", "Q4_K_M", "--batch", "4")),
    ("mistral-7b-v0.3", "L4", ("--engine", "llamacpp", "--quant", "Q5_K_M")),
    # vLLM: starts, does not start (more GPUs), tensor parallel
    ("llama-3.1-8b", "H100 SXM", ("--engine", "vllm")),
    ("llama-3.1-8b", "RTX 3060 12GB", ("--engine", "vllm")),
    ("llama-3.1-70b", "H100 SXM", ("--engine", "vllm")),
    ("llama-3.1-70b", "H100 SXM", ("--engine", "vllm", "--gpus", "4", "--tp", "4")),
    ("qwen3-30b-a3b", "A100 SXM 80GB", ("--engine", "vllm", "--seq", "32768")),
    ("qwen2.5-7b", "RTX 4090", ("--engine", "vllm", "--batch", "16", "--seq", "8192")),
    # SGLang
    ("llama-3.1-8b", "H100 SXM", ("--engine", "sglang")),
    ("qwen2.5-7b", "RTX 4090", ("--engine", "sglang", "--seq", "8192")),
    ("llama-3.1-70b", "H100 SXM", ("--engine", "sglang")),
    # transformers
    ("llama-3.2-1b", "RTX 3060 12GB", ()),
    ("llama-3.1-8b", "RTX 4090", ("--batch", "4", "--seq", "2048")),
    ("llama-3.1-70b", "RTX 4090", ("--quant", "nf4")),
    ("qwen2.5-7b", "A100 SXM 80GB", ("--quant", "int8", "--batch", "8")),
    # training: fitting, on more GPUs, on none
    ("llama-3.2-1b", "RTX 4090", ("--mode", "training", "--seq", "1024")),
    ("llama-3.1-8b", "A100 SXM 80GB", ("--mode", "training", "--method", "lora", "--seq", "2048")),
    ("llama-3.1-8b", "RTX 4090", ("--mode", "training", "--method", "qlora", "--seq", "2048")),
    ("llama-3.1-70b", "H100 SXM", ("--mode", "training", "--method", "qlora", "--seq", "2048")),
    ("llama-3.1-70b", "H100 SXM", ("--mode", "training", "--seq", "2048")),
    ("qwen2.5-7b", "A100 SXM 80GB",
     ("--mode", "training", "--seq", "2048", "--gpus", "4", "--zero", "3")),
    ("mistral-7b-v0.3", "RTX 3090", ("--mode", "training", "--method", "lora", "--seq", "1024")),
    ("llama-3.2-3b", "RTX 3060 12GB", ("--mode", "training", "--seq", "512")),
    ("gpt-oss-20b", "RTX 4090", ("--mode", "training", "--method", "qlora", "--seq", "1024")),
    ("qwen2.5-14b", "L4", ("--mode", "training", "--method", "lora", "--seq", "1024")),
)  # fmt: skip


def _run(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code == 0, argv
    return out.getvalue()


def _cli(*argv: str) -> dict[str, Any]:
    return json.loads(_run(*argv))


def _timed_block(doc: dict[str, Any]) -> dict[str, Any] | None:
    return doc.get("speed") or doc.get("serving")


def _shared(doc: dict[str, Any]) -> dict[str, Any]:
    """The figures a document shares with the other front ends."""
    fit = doc["fit"][0]
    figures: dict[str, Any] = {
        "weights": doc["per_gpu"]["components"].get("weights"),
        "total": doc["per_gpu"]["total_bytes"],
        "fits": fit["fits"],
        "headroom": fit["headroom_bytes"],
        "pool tokens": (fit.get("vllm") or fit.get("sglang") or {}).get("kv_pool_tokens"),
    }
    block = _timed_block(doc)
    if block is not None:
        figures["tokens/s"] = block["tokens_per_second"]
        figures["cost"] = block.get("cost", block["cost_per_million_tokens"])
        figures["placement"] = block["placement"]["text"]
        figures["basis"] = block.get("basis")
        figures["first token"] = block.get("time_to_first_token_seconds")
    return figures


def _window(c: EstimateController) -> dict[str, Any]:
    a = c.analysis
    assert a is not None
    fit = a.fit[0]
    figures: dict[str, Any] = {
        "weights": a.estimate.components.get("weights"),
        "total": a.estimate.total_bytes,
        "fits": fit.fits,
        "headroom": fit.headroom_bytes,
        "pool tokens": (fit.vllm.pool_tokens if fit.vllm is not None else None)
        if fit.sglang is None
        else fit.sglang.pool_tokens,
    }
    if isinstance(a.speed, Timing):
        t = a.speed
        figures["tokens/s"] = round(t.tokens_per_second, 1)
        cost = t.cost if t.mode == "training" else t.cost_per_million
        figures["cost"] = None if cost is None else round(cost, 2 if t.mode == "training" else 4)
        figures["placement"] = t.placement.describe()
        figures["basis"] = t.basis or None
        seconds = t.prefill_seconds
        figures["first token"] = None if seconds is None else round(seconds, 4)
    return figures


def _not_fitting_speed_named(doc: dict[str, Any]) -> bool:
    """A setup that does not fit has no speed, or one that names its placement."""
    block = _timed_block(doc)
    return doc["fit"][0]["fits"] or block is None or block["placement"]["kind"] != AS_SET


def test_every_front_end_gives_one_figure_for_each_setup(qtbot):
    ram = ("--ram-gib", str(RAM_GIB))
    catalog = load_catalog()
    controller = EstimateController(
        load_model, rates=catalog_rates(catalog), host=host_settings(RAM_GIB * GiB)
    )
    offload_view = OffloadView()
    qtbot.addWidget(offload_view)
    feed = OffloadFeed(offload_view, controller, lambda: catalog, None)
    serving_view = CapacityView(controller)
    qtbot.addWidget(serving_view)
    loaded: dict[str, Any] = {}
    mismatches: list[str] = []
    names: list[str] = []
    estimates: list[dict[str, Any]] = []
    timed = 0  # setups whose speed at least three views give
    reopened = []
    for index, (source, gpu, flags) in enumerate(SETUPS):
        label = f"{source} on {gpu} {' '.join(flags)}"
        # The window times a training run of 100M tokens unless told otherwise.
        run = ("--train-tokens", "100M") if "training" in flags else ()
        printed = _run("estimate", source, *flags, "--gpu", gpu, *ram, *run, "--json")
        estimate = json.loads(printed)
        name = f"setup {index}"
        names.append(name)
        estimates.append(_shared(estimate))
        _run("profile", "save", name, source, *flags, "--gpu", gpu, *ram)
        workload = Workload.from_dict(estimate["settings"])
        model = loaded.setdefault(source, load_model(source))
        controller.set_model(model, source)
        controller.set_workload(workload)
        controller.set_capacities(((gpu, estimate["fit"][0]["capacity_bytes"]),))
        controller.recompute_now()
        assert controller.analysis is not None and controller.analysis.estimate.workload == workload
        window = _window(controller)
        # Copy as JSON: the command line's document, byte for byte.
        copied = controller.document()
        if copied is None or report.as_json(copied) != printed:
            mismatches.append(f"{label}: the window's copy as JSON is not `estimate --json`'s")
        reopened.append(reestimate(ProfileStore().get(name), load_model))
        window_compare = reopened[-1].document
        views = {
            "estimate --json": _shared(estimate),
            "window": window,
            "window comparison": _shared(window_compare),
        }
        if not _not_fitting_speed_named(estimate):
            mismatches.append(f"{label}: estimate times a setup that does not fit as chosen")
        if isinstance(controller.analysis.speed, Timing) and not window["fits"]:
            text = timing.speed_text(controller.analysis.speed)
            if controller.analysis.speed.placement.flags not in text:
                mismatches.append(f"{label}: the window's time / cost line names no placement")
        if workload.mode == "inference":
            plan = _cli("plan", source, *flags, "--gpu", gpu, *ram, "--json")
            feed.feed()
            answer = offload_view.answer
            assert answer is not None, label
            if workload.engine == "llamacpp":
                views["plan --json"] = {
                    "tokens/s": round(plan["tokens_per_second"], 1),
                    "floor": plan["min_vram_bytes"],
                    "ngl": plan["gpu_layers"],
                }
                views["Offloading tab"] = {
                    "tokens/s": round(answer.throughput.tokens_per_second, 1),
                    "floor": answer.min_vram_bytes,
                    "ngl": answer.placement.gpu_layers,
                }
                block = estimate["serving"]
                views["estimate --json"].update({"ngl": block["placement"].get("gpu_layers")})
                views["window"]["ngl"] = controller.analysis.speed.placement.gpu_layers
                mismatches += _llamacpp_gpus_agree(label, estimate, plan)
            else:
                # accelerate's plan of the same model: the same floor in the tab and `plan`
                views["plan --json"] = {"floor": plan["min_vram_bytes"]}
                views["Offloading tab"] = {"floor": answer.min_vram_bytes}
            if workload.engine == "vllm":
                serving_view._feed.feed()
                qtbot.waitUntil(lambda: serving_view.report is not None, timeout=20000)
                tab = serving_view.report.gpus[0]
                views["Serving tab"] = {
                    "pool tokens": None if tab.startup is None else tab.startup.pool_tokens,
                    "vLLM curve": [[n, round(at_once, 4)] for n, at_once in tab.curve],
                }
                views["estimate --json"]["vLLM curve"] = [
                    [p["max_model_len"], p["max_concurrency"]]
                    for p in estimate["serving_report"]["gpus"][0]["curve"]
                ]
                serving_view.report = None
        mismatches += _disagreements(label, views)
        timed += sum("tokens/s" in figures for figures in views.values()) >= 3
    # The window's comparison names the placement it times where the setup does not fit.
    rows = {row.label: row for row in comparison_rows(reopened)}
    for index, result in enumerate(reopened):
        block = _timed_block(result.document)
        if block is not None and block["placement"]["kind"] != AS_SET:
            cell = rows["Tokens per second, all GPUs"].cells[index]
            if block["placement"]["text"] not in cell:
                mismatches.append(f"setup {index}: the comparison's speed names no placement")
    compared = _cli("profile", "compare", *names, "--json")
    for index, entry in enumerate(compared["profiles"]):
        source, gpu, flags = SETUPS[index]
        label = f"{source} on {gpu} {' '.join(flags)}"
        assert entry["re_estimated"], label
        saved = ProfileStore().get(names[index]).saved_estimate
        views = {
            "estimate --json": estimates[index],
            "profile compare --json": _shared(entry["estimate"]),
            "saved": _shared(saved),
        }
        if not _not_fitting_speed_named(entry["estimate"]):
            mismatches.append(f"{label}: the comparison times a setup that does not fit")
        mismatches += _disagreements(label, views)
    assert not mismatches, "\n".join(mismatches)
    # Not a comparison of nothing: most setups are timed (the rest have no price or no fit).
    assert len(SETUPS) >= 30 and timed >= 25


def test_the_windows_copy_lists_a_card_added_by_hand_as_the_cli_lists_one_given():
    # "Add a card…" 20 GiB, 500 GB/s, 80 TFLOPS: the card --vram-gib / --gpu-gbps / --gpu-tflops give.
    card = custom_gpu(20.0, 500.0, 80.0)  # the dialog's spin boxes give floats, as argparse does
    catalog = load_catalog()
    controller = EstimateController(
        load_model,
        rates=catalog_rates(lambda: [*catalog, card]),
        host=host_settings(RAM_GIB * GiB),
        cards=lambda: [card],
    )
    for source, flags in (
        ("llama-3.1-8b", ("--engine", "llamacpp", "--quant", "Q4_K_M")),
        ("llama-3.2-1b", ("--mode", "training", "--seq", "1024")),
    ):
        run = ("--train-tokens", "100M") if "training" in flags else ()
        printed = _run(
            "estimate", source, *flags, "--vram-gib", "20", "--gpu-gbps", "500",
            "--gpu-tflops", "80", "--ram-gib", str(RAM_GIB), *run, "--json",
        )  # fmt: skip
        assert json.loads(printed)["custom_gpus"][0]["name"] == card.name
        controller.set_model(load_model(source), source)
        controller.set_workload(Workload.from_dict(json.loads(printed)["settings"]))
        controller.set_capacities(((card.name, card.capacity_bytes()),))
        controller.recompute_now()
        copied = controller.document()
        assert copied is not None and report.as_json(copied) == printed, source


def _llamacpp_gpus_agree(label: str, estimate: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """llama.cpp, on one GPU or several: the estimate's per-GPU figures are those of the GPU
    the plan fills most when the plan holds every layer on the GPUs, and the estimate fits then;
    where the plan keeps layers or experts in host RAM, the estimate does not fit with the
    plan's margin to spare."""
    fit = estimate["fit"][0]
    on_gpus = (
        plan["fits"]
        and all(layer["device"].startswith("gpu") for layer in plan["layers"][1:])
        and plan["host_bytes"] == estimate["host_bytes"]
    )
    if not on_gpus:
        if fit["headroom_bytes"] >= plan["margin_bytes"]:
            return [f"{label}: the plan offloads what the estimate fits with room to spare"]
        return []
    fullest = max(range(len(plan["gpu_bytes"])), key=lambda i: plan["gpu_bytes"][i])
    share = plan["per_gpu"][fullest]
    seen = {
        "estimate --json": (
            fit["fits"],
            estimate["per_gpu"]["total_bytes"],
            estimate["per_gpu"]["components"]["weights"],
            estimate["per_gpu"]["components"]["kv_cache"],
            estimate["per_gpu"]["components"]["activations"],
        ),
        "plan --json": (
            True,
            plan["gpu_bytes"][fullest],
            share["weights_bytes"],
            share["kv_cache_bytes"],
            share["buffers_bytes"],
        ),
    }
    if len(set(seen.values())) > 1:
        return [f"{label}: the fullest GPU (fits, total, weights, KV, buffers) differs: {seen}"]
    return []


def _disagreements(label: str, views: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    keys = {k for figures in views.values() for k in figures}
    for key in sorted(keys):
        seen = {name: figures[key] for name, figures in views.items() if key in figures}
        if len({json.dumps(v) for v in seen.values()}) > 1:
            out.append(f"{label}: {key} differs: {seen}")
    return out


def test_llamacpp_on_two_gpus_splits_the_kv_cache_as_a_published_log():
    # ik_llama.cpp issue 398: Qwen3-30B-A3B on two Tesla T4s, -c 32768, every layer on the GPUs,
    # split as llama.cpp splits them by default ("CUDA0 KV buffer size = 1600.00 MiB", "CUDA1 KV
    # buffer size = 1472.00 MiB": 25 and 23 of 48 layers). Its weights are a quant mix of that
    # fork's own and its compute buffers another graph's: the KV cache is what both share.
    logged = {
        c.device: c.bytes
        for c in read_log(text("llamacpp-ik-issue398-0.log")).components
        if c.name == "kv_cache"
    }
    flags = ("qwen3-30b-a3b", "--engine", "llamacpp", "--quant", "Q4_K_M", "--seq", "32768")
    flags += ("--gpu", "T4", "--gpus", "2", "--json")
    estimate = _cli("estimate", *flags)
    plan = _cli("plan", *flags)
    assert [share["kv_cache_bytes"] for share in plan["per_gpu"]] == [
        logged["CUDA0"],
        logged["CUDA1"],
    ]
    assert estimate["per_gpu"]["components"]["kv_cache"] == max(logged.values())
    assert estimate["fit"][0]["fits"] and plan["fits"]


def test_the_ranking_times_a_llamacpp_setup_on_several_gpus_as_the_estimate_does():
    # The ranking placed the GPUs' count of the setup with tensor parallelism (core.fit.sharded),
    # which is not llama.cpp's: 2 x RTX 4090 at $17.27 per million tokens beside the
    # estimate's own $17.51 for the same two GPUs.
    doc = _cli("estimate", "llama-3.1-70b", "--engine", "llamacpp", "--quant", "Q4_K_M",
               "--gpu", "RTX 4090", "--gpus", "2", "--rank", "cost", "--json")  # fmt: skip
    (ranked,) = (r for r in doc["ranked"] if r["gpu"] == "RTX 4090" and r["count"] == 2)
    serving = doc["serving"]
    assert serving["placement"]["kind"] == AS_SET
    assert ranked["tokens_per_second"] == serving["tokens_per_second"]
    assert ranked["cost_per_million_tokens"] == serving["cost_per_million_tokens"]
