"""A log laid beside the estimate: each figure the engine printed next to vramgui's estimate of
the same thing, why the engine decided what it did, and what to change.

The log is read by ``core.logs``; the model comes from the user (``model``), the catalog (the
name the log prints) or the GGUF metadata llama.cpp printed; the estimate reuses the engines'
own models in the core (``core.vllm``, ``sglang_startup``, ``offload.plan_llamacpp``) and
the fit advisor's moves (``core.fit.advise``)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from vramgui.answers.advice import saving_text
from vramgui.core import activations, fit, launch, offload, sglang_startup
from vramgui.core.errors import Setting, VramguiError, message_of, phrase
from vramgui.core.estimate import CUDA_CONTEXT_BYTES
from vramgui.core.families import spec_from_config
from vramgui.core.inference import engine_kv_workload
from vramgui.core.logs import COMPONENTS, LoggedSetup, component_label, read_log
from vramgui.core.logs.text import without_escapes
from vramgui.core.model import ModelSpec
from vramgui.core.offload.overrides import LlamaCppLayout, parse_overrides, parse_tensor_split
from vramgui.core.rank_weights import rank_tensor_bytes
from vramgui.core.units import MiB, Unit, format_bytes
from vramgui.core.vllm.profile import CUDA_RESERVED_BYTES, cuda_total_bytes
from vramgui.core.vllm.rules import rules_for
from vramgui.core.vllm.startup import build_plan
from vramgui.core.workload import GPU_ARCHS, Workload

SCHEMA = "vramgui.explain/1"

# How close each component's estimate is meant to be (docs/accuracy.md): a difference beyond it
# is flagged, for the user to report.
ACCURACY = {
    "kv_cache": 0.02,
    "recurrent_state": 0.02,
    "compute_buffer": 0.10,
    "kv_pool": 0.10,
    "weights": 0.05,
    "activations": 0.25,
    "non_torch": 0.50,
    "cuda_graphs": 0.50,
    "projector": 0.10,
}
# A component under this size is never flagged: a few MiB of rounding in the log's own figures.
_FLAG_FLOOR = 64 * MiB

# vLLM's quantization names -> vramgui's --quant (compressed-tensors holds several schemes: the
# user names it).
_VLLM_QUANT = {
    "awq": "awq-int4",
    "awq_marlin": "awq-int4",
    "gptq": "gptq-int4",
    "gptq_marlin": "gptq-int4",
    "fp8": "fp8",
    "mxfp4": "mxfp4",
}

# What llama.cpp's failed allocation was, as the reader names it -> the component.
_OOM_COMPONENT = {
    "compute buffer": "compute_buffer",
    "model weights": "weights",
    "KV cache": "kv_cache",
}

_GGML_KV = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "q8_0": "q8_0", "q4_0": "q4_0"}


def log_text(text: str) -> str:
    """A log as the log view shows it: terminal escapes taken off (``core.logs.text``)."""
    return without_escapes(text)


@dataclass(frozen=True, slots=True)
class ComponentRow:
    """One figure of the log beside the estimate of the same thing."""

    name: str
    device: str
    logged_bytes: int
    estimated_bytes: int | None
    accuracy: float | None = None
    note: str = ""

    @property
    def difference(self) -> float | None:
        if self.estimated_bytes is None or not self.logged_bytes:
            return None
        return self.estimated_bytes / self.logged_bytes - 1

    @property
    def flagged(self) -> bool:
        d = self.difference
        return (
            d is not None
            and self.accuracy is not None
            and abs(d) > self.accuracy
            and max(self.logged_bytes, self.estimated_bytes or 0) >= _FLAG_FLOOR
        )


@dataclass(frozen=True, slots=True)
class Advice:
    """A change, cheapest first: what it frees, what it costs, whether the setup then fits, and
    the settings it changes (empty for advice no setting expresses). Under an engine that
    pre-allocates its KV pool, ``frees_bytes`` is the room the change makes in the pool and
    ``pool_bytes`` / ``pool_tokens`` the pool it starts with (``core.fit.Suggestion``)."""

    title: str
    frees_bytes: int | None
    cost: str
    fits: bool = False
    changes: dict[str, Any] = field(default_factory=dict)
    pool_bytes: int | None = None
    pool_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Explanation:
    """A log beside the estimate.

    Attributes:
        setup: what the log says.
        model_name: the model estimated (or the one the log names, when none was found).
        model_source: where the model came from: ``named`` (the user), ``catalog``, ``log``
            (the printed GGUF metadata) or empty.
        components: each printed figure beside its estimate.
        decision_lines: why the engine decided what it did, in its own terms.
        advice: the changes, those that fit first, then the cheapest.
        launch_line: the engine's command line (or Modelfile) for the estimated setup.
        notes: what the reader and the estimate want the user to know.
        workload: the settings the estimate used.
    """

    setup: LoggedSetup
    model_name: str | None
    model_source: str
    components: tuple[ComponentRow, ...]
    decision_lines: tuple[str, ...] = ()
    advice: tuple[Advice, ...] = ()
    launch_line: str = ""
    notes: tuple[str, ...] = ()
    workload: Workload | None = field(default=None, compare=False)

    @property
    def compared(self) -> int:
        return sum(r.estimated_bytes is not None for r in self.components)


def explain_text(
    text: str, *, model_name: str = "", gpu: str = "", quant: str = "", unit: Unit = "GiB"
) -> Explanation:
    """Read ``text`` and explain it (``LogUnreadable`` when it is no log vramgui reads)."""
    return explain(read_log(text), model_name=model_name, gpu=gpu, quant=quant, unit=unit)


def explain(
    setup: LoggedSetup,
    *,
    model_name: str = "",
    gpu: str = "",
    quant: str = "",
    unit: Unit = "GiB",
) -> Explanation:
    """The explanation of ``setup``.

    Args:
        setup: what the log says.
        model_name: a model the user names (a catalog name, a path, a Hub id) for a log that
            names none or names it differently.
        gpu: a catalog GPU name for a log that prints no capacity.
        quant: the checkpoint's quantization (``--quant``) where the log does not say it.
        unit: the unit the sentences write sizes in (GiB or GB, as the reader set it).
    """
    notes: list[str] = list(setup.notes)
    spec, source = _find_model(setup, model_name, notes)
    capacity = _capacity(setup, gpu)
    builder = {
        "vllm": _vllm,
        "sglang": _sglang,
        "llamacpp": _llamacpp,
        "ollama": _llamacpp,
        "pytorch": _pytorch,
    }[setup.engine]
    rows, decision, advice, line, workload = builder(
        _Inputs(setup, spec, capacity, quant, gpu, notes, source, partial(format_bytes, unit=unit))
    )
    if spec is None and setup.engine != "pytorch":
        notes.append(
            phrase(
                "no estimate: the log does not name a model vramgui knows; name it (",
                Setting("model"),
                ": a catalog name, a GGUF file or a Hub id)",
            )
        )
    rows.sort(key=_row_order)
    for r in rows:
        if r.flagged:
            notes.append(
                f"{component_label(r.name)} on {device_label(r.device)} differs from the "
                f"estimate by {difference_text(r)}, more than its stated accuracy "
                f"(±{r.accuracy:.0%}): worth reporting with this log"
            )
    return Explanation(
        setup=setup,
        model_name=spec.name if spec is not None else setup.model.name,
        model_source=source,
        components=tuple(rows),
        decision_lines=tuple(sentence(x) for x in decision),
        advice=tuple(advice),
        launch_line=line,
        notes=tuple(sentence(x) for x in notes),
        workload=workload,
    )


# What the difference column means, said once for every front end.
DIFFERENCE_MEANING = (
    "(estimate - logged) / logged: + when vramgui estimates more than the engine printed, "
    "- when less"
)
_LOWER_WORD = re.compile(r"[a-z]+(?:'s)?")


def capitalised(text: str) -> str:
    """``text`` with a first plain word capitalised (an identifier such as ``vLLM``, ``n_ctx`` or
    ``vramgui`` kept as written)."""
    first = text.split(" ", 1)[0]
    if _LOWER_WORD.fullmatch(first) and not first.startswith("vramgui"):
        return text[:1].upper() + text[1:]
    return text


def sentence(text: str) -> str:
    """``text`` as a sentence: capitalised, with a closing full stop."""
    text = capitalised(text)
    return text if text.endswith((".", "?", "!")) else text + "."


def device_label(device: str) -> str:
    """A row's device as a person reads it (``all``: the figure covers every device)."""
    return "all devices" if device == "all" else device


def difference_text(r: ComponentRow) -> str:
    """The difference as a signed percentage; empty when there is no estimate."""
    d = r.difference
    return "" if d is None else f"{d:+.1%}"


def advice_text(a: Advice, size: Callable[[int], str] = format_bytes) -> str:
    """A change as both front ends write it: what it is, what it frees (``size`` formats the
    bytes in the reader's unit), what it costs."""
    gives = saving_text(a.frees_bytes, a.pool_bytes, a.pool_tokens, size)
    return f"{a.title} — {gives + ' · ' if gives else ''}costs: {a.cost}"


def accuracy_text(r: ComponentRow) -> str:
    """``beyond ±2%`` for a flagged row, ``within ±2%`` for one held to an accuracy, else empty."""
    if r.accuracy is None or r.difference is None:
        return ""
    return f"{'beyond' if r.flagged else 'within'} ±{r.accuracy:.0%}"


# A setting longer than this is shortened for display (a placement read from thousands of
# tensor lines); the JSON keeps it whole.
_SHOWN_SETTING = 120


def shown_settings(e: Explanation) -> list[tuple[str, str]]:
    """The log's settings as a front end shows them: the model's path left out (the model line
    names it), a long value cut with its length said."""
    out = []
    for key, value in e.setup.settings.items():
        if key == "model_path":
            continue
        text = str(value)
        if len(text) > _SHOWN_SETTING:
            text = f"{text[: _SHOWN_SETTING - 20]}… ({len(text):,} characters)"
        out.append((key, text))
    return out


_Built = tuple[list[ComponentRow], list[str], list[Advice], str, Workload | None]


class _Inputs(NamedTuple):
    """What every engine's explanation starts from."""

    setup: LoggedSetup
    spec: ModelSpec | None
    capacity: int | None
    quant: str
    gpu: str
    notes: list[str]
    source: str
    fmt: Callable[[float], str]


def _row_order(r: ComponentRow) -> tuple[int, tuple[str, int]]:
    """Components in the order the explanation lists them, each device in order."""
    kind = COMPONENTS.index(r.name) if r.name in COMPONENTS else len(COMPONENTS)
    return kind, _device_order(r.device)


def _find_model(setup: LoggedSetup, given: str, notes: list[str]) -> tuple[ModelSpec | None, str]:
    from vramgui.sources import catalog
    from vramgui.sources.resolve import load_model

    if given:
        try:
            return load_model(given).spec, "named"
        except VramguiError as exc:  # the log is still worth reading
            notes.append(
                phrase(
                    "the model named could not be loaded (",
                    message_of(exc),
                    "); the log's own is used",
                )
            )
    name = setup.model.name
    if name:
        for candidate in (name, name.rstrip("/").rsplit("/", 1)[-1]):
            if (found := catalog.find(candidate)) is not None:
                return load_model(found.name).spec, "catalog"
        entry = _catalog_by_tokens(name)
        if entry is not None:
            notes.append(f"the model {name!r} is taken as the catalog's {entry}")
            return load_model(entry).spec, "catalog"
    meta = setup.model.metadata
    if meta.get("general.architecture"):
        from vramgui.sources.gguf_reader import gguf_config

        try:
            count = meta.get("tokenizer.token_count")
            config, warnings = gguf_config(meta, [], int(count) if isinstance(count, int) else None)
            notes.extend(warnings)
            spec = spec_from_config(config, name or str(meta["general.architecture"]))
        except VramguiError as exc:
            notes.append(phrase("the printed metadata does not make a model: ", message_of(exc)))
            return None, ""
        notes.append(
            "the model is built from the metadata llama.cpp printed (its tensor table is not in "
            "the log: the weights are approximate)"
        )
        return spec, "log"
    return None, ""


_TOKEN = re.compile(r"[a-z0-9.]+")


def _catalog_by_tokens(name: str) -> str | None:
    """The catalog entry whose every name token the log's model name holds (the longest such)."""
    from vramgui.sources import catalog

    words = set(_TOKEN.findall(name.lower().replace("-", " ").replace("_", " ")))
    best: tuple[int, str] | None = None
    for entry in catalog.load_catalog():
        tokens = set(_TOKEN.findall(entry.name.lower().replace("-", " ")))
        if tokens and tokens <= words and (best is None or len(tokens) > best[0]):
            best = (len(tokens), entry.name)
    return best[1] if best else None


def _capacity(setup: LoggedSetup, gpu: str) -> int | None:
    """The GPU's memory: the named catalog GPU's (as nvidia-smi shows it), else what the log
    printed."""
    if gpu:
        from vramgui.hardware.gpus import find_gpu

        found = find_gpu(gpu)
        return found.nvml_total_bytes or found.capacity_bytes()
    total = setup.facts.get("cuda_total_bytes")
    if isinstance(total, int):
        return total + CUDA_RESERVED_BYTES
    for d in setup.devices:
        if d.total_bytes:
            return d.total_bytes
    for d in setup.devices:
        if d.is_gpu and d.free_bytes:  # llama.cpp: the memory the GPU had free when it loaded
            return d.free_bytes
    if setup.decision is not None:  # Ollama's estimator: the GPU memory it found free
        available = setup.decision.figures.get("memory.available[0]")
        if isinstance(available, int):
            return available
    return None


def _gpu_arch(gpu: str) -> str | None:
    """The named GPU's generation, where vramgui's engines tell them apart (vLLM's kernels)."""
    if not gpu:
        return None
    from vramgui.hardware.gpus import find_gpu

    arch = (find_gpu(gpu).architecture or "").lower()
    return arch if arch in GPU_ARCHS else None


def _row(
    name: str, device: str, logged: int, estimated: int | None, note: str = "", *, held: bool = True
) -> ComponentRow:
    """A row; ``held`` False for a figure that is the engine's own estimate (Ollama's), which
    vramgui's is not held to."""
    return ComponentRow(name, device, logged, estimated, ACCURACY.get(name) if held else None, note)


def _unestimated(setup: LoggedSetup, decision: list[str]) -> _Built:
    """The log's figures alone, with the engine's decision: no model or setting to estimate."""
    return [_row(c.name, c.device, c.bytes, None) for c in setup.components], decision, [], "", None


def _workload(settings: dict[str, Any], notes: list[str]) -> Workload | None:
    try:
        return Workload.from_dict(settings)
    except VramguiError as exc:
        notes.append(
            phrase("the log's settings do not make a workload vramgui models: ", message_of(exc))
        )
        return None


# ---------------------------------------------------------------- vLLM


def _vllm(inputs: _Inputs) -> _Built:
    setup, spec, capacity, quant, gpu, notes, _source, fmt = inputs
    s = setup.settings
    rows: list[ComponentRow] = []
    decision: list[str] = []
    utilization = float(s.get("gpu_memory_utilization", 0.9))
    if setup.decision is not None:
        decision.append(setup.decision.summary)
    if spec is None:
        return _unestimated(setup, decision + _vllm_rule(setup, utilization, fmt))
    settings: dict[str, Any] = {"engine": "vllm", "gpu-memory-utilization": utilization}
    if setup.engine_version:
        settings["vllm-version"] = rules_for(setup.engine_version).version
    for key in ("seq", "tp", "pp", "max_num_seqs", "max_num_batched_tokens"):
        if key in s:
            settings[key.replace("_", "-")] = s[key]
    settings["gpus"] = int(s.get("tp", 1)) * int(s.get("pp", 1))
    arch = _gpu_arch(gpu)
    if arch:
        settings["gpu-arch"] = arch
    scheme = quant or _VLLM_QUANT.get(str(s.get("quant", "")))
    if scheme:
        settings["quant"] = scheme
    if s.get("kv_dtype") not in (None, "auto"):
        settings["kv-dtype"] = s["kv_dtype"]
    if s.get("enforce_eager") is True:
        settings["enforce-eager"] = True
    workload = _workload(settings, notes)
    if workload is None:
        return _unestimated(setup, decision)
    # Under --kv-dtype auto vLLM caches in the checkpoint's KV scheme, as the estimate does.
    workload = engine_kv_workload(spec, workload)
    total = cuda_total_bytes(capacity) if capacity else None
    rules = rules_for(workload.vllm_version)
    sampler = setup.facts.get("sampler")
    if isinstance(sampler, str):
        rules = dataclasses.replace(rules, sampler=sampler)
    plan = build_plan(
        spec, workload, rank_tensor_bytes(spec, workload), total, gpu_name=gpu, rules=rules
    )
    stage = plan.stages[0]
    layout = stage.layout
    mnbt = plan.scheduler.max_num_batched_tokens
    up = plan.startup(capacity, workload.gpu_memory_utilization, workload.seq) if capacity else None
    for c in setup.components:
        estimate: int | None = None
        note = ""
        if c.name == "weights":
            estimate = plan.weights_bytes
            note = "Model loading took: the weights on one GPU"
        elif c.name == "kv_pool":
            estimate = up.available_bytes if up is not None else None
            note = (
                "the KV cache memory vLLM had left: gpu_memory_utilization × the GPU - the rest"
                if up is not None
                else phrase("the GPU's capacity is not in the log: name it (", Setting("gpu"), ")")
            )
        elif c.name == "activations":
            estimate = stage.activation_bytes
        elif c.name == "non_torch":
            estimate = stage.non_torch_bytes
        elif c.name == "cuda_graphs":
            estimate = stage.cuda_graph_bytes
        rows.append(_row(c.name, c.device, c.bytes, estimate, note))
        tokens = setup.facts.get("kv_tokens")
        if c.name == "kv_pool" and isinstance(tokens, int) and tokens and layout.block_bytes:
            # The pool's bytes for the tokens vLLM reported, at the estimate's bytes per token:
            # the KV layout checked apart from the memory model.
            from_pool = layout.reported_tokens(
                layout.blocks(c.bytes), workload.seq, mnbt, plan.rules
            )
            if from_pool:
                rows.append(
                    _row(
                        "kv_cache",
                        c.device,
                        c.bytes,
                        round(c.bytes * from_pool / tokens),
                        f"the {tokens:,} tokens vLLM reported, at the estimate's bytes per token",
                    )
                )
    d = setup.decision
    if d is not None and d.kind == "refusal" and "needed_bytes" in d.figures:
        need = layout.blocks_per_request(workload.seq, mnbt) * layout.block_bytes
        rows.append(
            _row(
                "kv_cache",
                "GPU 0",
                int(d.figures["needed_bytes"]),
                need,
                f"one request of {workload.seq:,} tokens",
            )
        )
    decision += _vllm_rule(setup, workload.gpu_memory_utilization, fmt)
    if up is not None:
        decision.append(
            f"In vramgui's estimate: {workload.gpu_memory_utilization:g} × "
            f"{fmt(up.total_bytes)} = {fmt(up.requested_bytes)}; weights "
            f"{fmt(stage.weights_bytes)}, activation peak "
            f"{fmt(stage.activation_bytes)}, non-torch "
            f"{fmt(stage.non_torch_bytes)}; pool {fmt(up.available_bytes)} "
            f"({up.pool_tokens:,} tokens), one request of {workload.seq:,} tokens needs "
            f"{fmt(up.needed_bytes)}: vLLM {'starts' if up.starts else 'refuses'}"
        )
    advice = _advice(setup, spec, workload, capacity)
    first = next((a for a in advice if a.fits), None)
    launched = workload
    if first is not None:
        try:
            launched = workload.with_(**first.changes)
        except VramguiError:
            first = None
    line = launch.vllm_settings(spec, launched).text
    if first is not None:
        line = f'# with "{first.title}" applied\n{line}'
    return rows, decision, advice, line, workload


def _advice(
    setup: LoggedSetup, spec: ModelSpec, workload: Workload, capacity: int | None
) -> list[Advice]:
    """The fit advisor's moves, cheapest first, for a run the engine refused or that ran out of
    memory or offloaded layers (a run that started whole needs none)."""
    d = setup.decision
    if capacity is None or d is None:
        return []
    if d.kind == "offload" and d.figures.get("layers.offload") == d.figures.get("layers.model"):
        return []
    return [
        Advice(a.title, a.saves_bytes, a.cost, a.fits, dict(a.changes), a.pool_bytes, a.pool_tokens)
        for a in fit.advise(spec, workload, capacity)
    ]


def _vllm_rule(setup: LoggedSetup, utilization: float, fmt: Callable[[float], str]) -> list[str]:
    """vLLM's own rule, in its terms, with the log's figures where it printed them."""
    facts = setup.facts
    total = facts.get("cuda_total_bytes")
    parts = {c.name: c.bytes for c in setup.components}
    line = (
        f"vLLM's rule: KV pool = gpu_memory_utilization ({utilization:g}) × total GPU memory - "
        "weights - activation peak - non-torch memory"
    )
    if isinstance(total, int) and "weights" in parts:
        line += f" = {utilization:g} × {fmt(total)} - {fmt(parts['weights'])} - the rest"
    out = [line]
    d = setup.decision
    if d is not None and d.kind == "refusal" and "needed_bytes" in d.figures:
        short = int(d.figures["needed_bytes"]) - int(d.figures["available_bytes"])
        out.append(
            f"It refuses to start when one request of --max-model-len tokens does not fit the "
            f"pool: {fmt(short)} short"
        )
        if "estimated_max_model_len" in d.figures:
            out.append(f"The pool holds {int(d.figures['estimated_max_model_len']):,} tokens")
    return out


# ---------------------------------------------------------------- SGLang


def _sglang(inputs: _Inputs) -> _Built:
    setup, spec, _capacity, quant, _gpu, notes, _source, _fmt = inputs
    s = setup.settings
    decision = [setup.decision.summary] if setup.decision else []
    decision.append(
        "SGLang's rule: KV pool = mem_fraction_static × free memory before the weights - weights"
    )
    if spec is None:
        return _unestimated(setup, decision)
    settings: dict[str, Any] = {"engine": "sglang"}
    for key in ("seq", "tp"):
        if key in s:
            settings[key] = s[key]
    settings["gpus"] = int(s.get("tp", 1))
    if quant:
        settings["quant"] = quant
    if "mem_fraction_static" in s:
        settings["mem-fraction-static"] = s["mem_fraction_static"]
    workload = _workload(settings, notes)
    if workload is None:
        return _unestimated(setup, decision)
    # Under --kv-cache-dtype auto SGLang caches a ModelOpt FP8-KV checkpoint in fp8, as the
    # estimate has it.
    workload = engine_kv_workload(spec, workload)
    engine = sglang_startup.SglangEngine(spec, workload, rank_tensor_bytes(spec, workload))
    plan = engine.plan()
    cell = max(st.cell_bytes for st in plan.stages)
    tokens = setup.facts.get("kv_tokens")
    rows = []
    for c in setup.components:
        estimate = None
        note = ""
        if c.name == "weights":
            estimate = plan.weights_bytes
        elif c.name == "kv_cache" and isinstance(tokens, int):
            estimate = tokens * cell
            note = f"the {tokens:,} tokens SGLang allocated, at the estimate's bytes per token"
        rows.append(_row(c.name, c.device, c.bytes, estimate, note))
    line = launch.sglang_settings(spec, workload).text
    return rows, decision, [], line, workload


# ---------------------------------------------------------------- llama.cpp and Ollama


def _llamacpp(inputs: _Inputs) -> _Built:
    setup, spec, capacity, quant, _gpu, notes, _source, fmt = inputs
    s = setup.settings
    decision = _ollama_decision(setup, fmt) if setup.engine == "ollama" else []
    if setup.decision is not None and setup.decision.kind == "oom":
        decision.append(setup.decision.summary)
        what = setup.decision.figures.get("what")
        if what:
            decision.append(f"The allocation that failed was the {what}")
    cells = s.get("n_ctx") or s.get("kv_cells")
    if spec is None or not isinstance(cells, int):
        if spec is not None:
            notes.append("no estimate: the log does not print the context (n_ctx)")
        return _unestimated(setup, decision)
    slots = int(s.get("n_seq_max", 1) or 1)
    scheme = quant or _gguf_type(setup, spec)
    if scheme is None:
        notes.append(
            "the file type is not one vramgui models: the weights are not estimated, the KV "
            "cache and compute buffer are (they do not depend on it)"
        )
    settings: dict[str, Any] = {
        "engine": "llamacpp",
        "batch": slots,
        "seq": max(1, cells // slots),
        "quant": scheme or "Q4_K_M",
    }
    kv = _GGML_KV.get(str(s.get("type_k", "f16")))
    if kv:
        settings["kv-dtype"] = kv
    for key, option in (("n_ubatch", "ubatch-size"), ("n_batch", "batch-size")):
        if isinstance(s.get(key), int) and int(s[key]) > 0:
            settings[option] = int(s[key])
    flash = s.get("flash_attn")
    settings["attention"] = "eager" if flash in (0, "0", "disabled", "off") else "flash"
    workload = _workload(settings, notes)
    if workload is None:
        return _unestimated(setup, decision)
    on_gpu = sorted({c.device for c in setup.components if c.device != "CPU"}, key=_device_order)
    gpus = _gpus(setup, on_gpu)
    ngl = s.get("n_gpu_layers")
    if not on_gpu and setup.components:
        ngl = 0  # every buffer the log printed is the host's: a run on the CPU
    try:
        free = {d.name: d.free_bytes for d in setup.devices if d.free_bytes}
        layout = _layout(
            s,
            tuple(free[g] for g in gpus) if len(gpus) > 1 and all(g in free for g in gpus) else (),
        )
        # The log's build decides how its graph writes the KV cache (None: a current build).
        model = dataclasses.replace(
            offload.llamacpp_model(spec, workload),
            set_rows=activations.llamacpp_set_rows(_build_number(setup.engine_version)),
        )
        placement = model.place(
            [1 << 40] * len(gpus),
            n_gpu_layers=int(ngl) if isinstance(ngl, int) else None,
            host_ram_bytes=None,
            layout=layout,
        )
    except VramguiError as exc:
        notes.append(phrase("no estimate: ", message_of(exc)))
        return _unestimated(setup, decision)
    fork = setup.facts.get("fork_options")
    if fork:
        notes.append(
            f"this is ik_llama.cpp with its own options ({fork}): its compute buffers come from "
            "another graph than llama.cpp's and are not compared"
        )
    estimate: dict[tuple[str, str], int] = {}
    for i, share in enumerate(placement.shares):
        dev = gpus[i] if i < len(gpus) else f"CUDA{i}"
        estimate[("weights", dev)] = share.weights_bytes
        estimate[("kv_cache", dev)] = share.kv_cache_bytes
        estimate[("compute_buffer", dev)] = share.buffers_bytes
    estimate[("kv_cache", "CPU")] = sum(
        u.unit.kv_cache_bytes for u in placement.units if u.kv_device == "cpu"
    )
    rows = []
    for c in _summed(setup):
        guess = (
            estimate.get((c[0], c[1]))
            if c[0] in ("kv_cache", "compute_buffer", "weights")
            else None
        )
        if c[0] == "compute_buffer" and (c[1] == "CPU" or fork):
            guess = None  # the host's compute buffer is not modelled, nor the fork's graph
        if c[0] == "weights" and (scheme is None or inputs.source == "log"):
            guess = None  # without the tensor table or the file's type the weights are a guess
        rows.append(_row(c[0], c[1], c[2], guess))
    size = setup.model.size_bytes
    if size and scheme is not None and inputs.source != "log":
        every = sum(piece.bytes for u in placement.units for piece in u.parts)
        rows.append(
            _row("weights", "all", size, every, f"the file's weights at {scheme} (model size)")
        )
    if not any(r.name == "kv_cache" for r in rows) and "kv_total_bytes" in setup.facts:
        rows.append(
            _row(
                "kv_cache",
                "all",
                int(setup.facts["kv_total_bytes"]),
                sum(v for (k, _), v in estimate.items() if k == "kv_cache"),
            )
        )
    logged_weights = setup.decision.figures.get("memory.weights.total") if setup.decision else None
    if isinstance(logged_weights, int) and scheme is not None and inputs.source != "log":
        rows.append(
            _row(
                "weights",
                "all",
                logged_weights,
                sum(piece.bytes for u in placement.units for piece in u.parts),
                f"Ollama's own estimate (memory.weights.total) beside the weights at {scheme}",
                held=False,
            )
        )
    if "ollama_kv_bytes" in setup.facts:
        rows.append(
            _row(
                "kv_cache",
                "all",
                int(setup.facts["ollama_kv_bytes"]),
                sum(v for (k, _), v in estimate.items() if k == "kv_cache"),
                "Ollama's own estimate (memory.required.kv)",
                held=False,
            )
        )
    decision += _ollama_layers(setup, spec, workload, fmt)
    d = setup.decision
    what = _OOM_COMPONENT.get(str(d.figures.get("what", ""))) if d is not None else None
    if d is not None and d.kind == "oom" and what is not None:
        device = str(d.figures.get("device", ""))
        guess = estimate.get((what, device))
        if guess is not None:
            decision.append(
                f"vramgui's estimate of that {d.figures['what']} on {device} is "
                f"{fmt(guess)}; llama.cpp asked for "
                f"{fmt(int(d.figures['request_bytes']))}"
            )
    advice = _advice(setup, spec, workload, capacity)
    fitted = _fitted(spec, placement, capacity, len(gpus), notes)
    if setup.engine == "ollama":
        line = launch.ollama_settings(spec, spec.name, fitted).text
    else:
        line = launch.llamacpp_settings(spec, fitted).text
    if fitted is not placement:
        margin = fmt(offload.DEFAULT_MARGIN_BYTES)
        line = (
            f"# the most layers that fit {fmt(capacity or 0)} per GPU, {margin} left free\n{line}"
        )
    return rows, decision, advice, line, workload


def _gpus(setup: LoggedSetup, on_gpu: list[str]) -> list[str]:
    """The GPUs the run used: those with buffers and those its placement flags send tensors to
    (``-ot ...=CUDA1``, ``-ts`` proportions), numbered without gaps."""
    s = setup.settings
    names = set(on_gpu)
    names |= {f"CUDA{i}" for i in re.findall(r"CUDA(\d+)", str(s.get("override_tensor", "")))}
    split = str(s.get("tensor_split", ""))
    count = len([v for v in re.split(r"[,/]+", split) if v]) if split else 0
    indexed = [int(m.group(1)) for n in names if (m := re.match(r"CUDA(\d+)$", n))]
    top = max([*indexed, count - 1, 0])
    others = sorted(n for n in names if not re.match(r"CUDA\d+$", n))
    return [f"CUDA{i}" for i in range(top + 1)] if not others else sorted(names, key=_device_order)


def _device_order(name: str) -> tuple[str, int]:
    """``CUDA2`` before ``CUDA10``."""
    m = re.match(r"(\D+)(\d+)$", name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def _layout(s: dict[str, Any], free: tuple[int, ...] = ()) -> LlamaCppLayout:
    """llama.cpp's placement flags as the log's command line gave them; without
    ``--tensor-split``, llama.cpp splits the layers by each GPU's free memory (``free``)."""
    split = s.get("tensor_split")
    return LlamaCppLayout(
        overrides=parse_overrides(str(s["override_tensor"])) if s.get("override_tensor") else (),
        cpu_moe=bool(s.get("cpu_moe", False)),
        n_cpu_moe=int(s.get("n_cpu_moe", 0) or 0),
        tensor_split=parse_tensor_split(str(split)) if split else tuple(f / MiB for f in free),
        split_mode=str(s.get("split_mode", "layer")),
        main_gpu=int(s.get("main_gpu", 0) or 0),
        kv_offload=bool(s.get("kv_offload", True)),
        op_offload=not s.get("no_op_offload", False),
    )


def _build_number(version: str | None) -> int | None:
    """The build number of a llama.cpp version as its log prints it ("5622 (97340b4c)")."""
    number = (version or "").split(" ", 1)[0]
    return int(number) if number.isdigit() else None


def _gguf_type(setup: LoggedSetup, spec: ModelSpec) -> str | None:
    """The GGUF file type the log states, when vramgui models it."""
    from vramgui.core.dtypes import SCHEMES
    from vramgui.sources.gguf_reader import gguf_file_type

    for candidate in (
        gguf_file_type(setup.model.metadata, []),
        setup.model.file_type,
        spec.quantization,
    ):
        if candidate and candidate in SCHEMES and SCHEMES[candidate].gguf_type:
            return candidate
    return None


def _summed(setup: LoggedSetup) -> list[tuple[str, str, int]]:
    """The log's buffers summed per component and device (a device prints several)."""
    out: dict[tuple[str, str], int] = {}
    for c in setup.components:
        out[(c.name, c.device)] = out.get((c.name, c.device), 0) + c.bytes
    return [(k[0], k[1], v) for k, v in out.items()]


def _fitted(
    spec: ModelSpec,
    placement: offload.Placement,
    capacity: int | None,
    gpus: int,
    notes: list[str],
) -> offload.Placement:
    """The logged placement with as many layers on the GPUs as fit ``capacity`` each, with
    llama.cpp's --fit margin left free (the logged one where the capacity is unknown or the
    layers do not change)."""
    if capacity is None:
        return placement
    try:
        fitted = offload.plan_llamacpp(
            spec,
            placement.workload,
            [capacity] * gpus,
            host_ram_bytes=None,
            layout=placement.layout,
            margin_bytes=offload.DEFAULT_MARGIN_BYTES,
        )
    except VramguiError as exc:
        notes.append(phrase("no fitted launch line: ", message_of(exc)))
        return placement
    return fitted if fitted.gpu_layers != placement.gpu_layers else placement


def _ollama_layers(
    setup: LoggedSetup, spec: ModelSpec, workload: Workload, fmt: Callable[[float], str]
) -> list[str]:
    """How many layers vramgui fits in the memory Ollama said it had, beside Ollama's count."""
    d = setup.decision
    if setup.engine != "ollama" or d is None or d.kind != "offload":
        return []
    available = [int(v) for k, v in d.figures.items() if k.startswith("memory.available[")]
    if len(available) != 1:  # several GPUs: Ollama's split is its own, not compared
        return []
    try:
        layers = offload.max_gpu_layers(spec, workload, available[0])
    except VramguiError:
        return []
    return [
        f"In vramgui's estimate, {layers} of {d.figures.get('layers.model')} layers fit "
        f"{fmt(available[0])} (llama.cpp's own buffers, without Ollama's margins); "
        f"Ollama offloaded {d.figures.get('layers.offload')}"
    ]


def _ollama_decision(setup: LoggedSetup, fmt: Callable[[float], str]) -> list[str]:
    d = setup.decision
    if d is None or d.kind != "offload":
        return []
    f = d.figures
    lines = [d.summary]
    available = [v for k, v in f.items() if k.startswith("memory.available[")]
    if "memory.required.partial" in f and available:
        lines.append(
            f"Ollama's rule: as many layers as fit memory.available ({' + '.join(fmt(int(a)) for a in available)}); "
            f"those {f['layers.offload']} layers need memory.required.partial = "
            f"{fmt(int(f['memory.required.partial']))}, all {f['layers.model']} would need "
            f"memory.required.full = {fmt(int(f.get('memory.required.full', 0)))}"
        )
    parts = [
        ("weights", "memory.weights.total"),
        ("KV cache", "memory.required.kv"),
        ("compute graph (partial offload)", "memory.graph.partial"),
        ("projector", "projector.weights"),
    ]
    shown = [f"{label} {fmt(int(f[key]))}" for label, key in parts if key in f]
    if shown:
        lines.append("Ollama's own estimate: " + ", ".join(shown))
    return lines


# ---------------------------------------------------------------- PyTorch


def _pytorch(inputs: _Inputs) -> _Built:
    setup, _spec, _capacity, _quant, _gpu, notes, _source, fmt = inputs
    rows = [
        _row(
            c.name,
            c.device,
            c.bytes,
            CUDA_CONTEXT_BYTES if c.name == "non_torch" else None,
            "the CUDA context and libraries outside PyTorch's allocator"
            if c.name == "non_torch"
            else "",
        )
        for c in setup.components
    ]
    d = setup.decision
    lines: list[str] = []
    advice: list[Advice] = []
    if d is None:
        return rows, lines, advice, "", None
    f = d.figures
    lines.append(d.summary)
    request, free = f.get("request_bytes"), f.get("free_bytes")
    if isinstance(request, int) and isinstance(free, int):
        asked = f"PyTorch asked CUDA for {fmt(request)} and the GPU had {fmt(free)} free"
        lines.append(
            f"{asked}: {fmt(request - free)} short"
            if request > free
            else f"{asked} when the message was written: not short on paper (the message does not "
            "say why the allocation failed)"
        )
    peak = f.get("summary_allocated_memory_peak_bytes")
    if isinstance(peak, int):
        held = f.get("summary_reserved_memory_peak_bytes")
        lines.append(
            f"torch.cuda.memory_summary(): tensors peaked at {fmt(peak)}"
            + (f", the allocator's reserve at {fmt(held)}" if isinstance(held, int) else "")
        )
    reserved = f.get("reserved_unallocated_bytes")
    if (
        isinstance(reserved, int)
        and isinstance(request, int)
        and reserved >= min(request, 512 * MiB)
    ):
        lines.append(f"{fmt(reserved)} is reserved by PyTorch but unallocated: fragmentation")
        advice.append(
            Advice(
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                reserved,
                "none measurable; lets the allocator reuse the fragmented reserve",
            )
        )
    others = next((c.bytes for c in setup.components if c.name == "other_processes"), 0)
    if others >= 256 * MiB:
        lines.append(f"Other processes hold {fmt(others)} of this GPU")
        advice.append(Advice("Close the other programs using this GPU", others, "none"))
    if isinstance(request, int):
        advice.append(
            Advice(
                "Halve the batch (or the sequence length) of the step that failed: about half "
                "of the request",
                request // 2,
                "throughput; keep the effective batch with gradient accumulation",
            )
        )
        advice.append(
            Advice(
                "Turn on gradient checkpointing (training)",
                None,
                "about a third more compute per step",
            )
        )
    notes.append(
        "a PyTorch out-of-memory message names no model: run `vramgui estimate MODEL` with the "
        "same settings to see what the step needs"
    )
    return rows, lines, advice, "", None


# ---------------------------------------------------------------- JSON


def to_json(e: Explanation) -> dict[str, Any]:
    """The ``vramgui.explain/1`` document (docs/cli.md)."""
    s = e.setup
    return {
        "schema": SCHEMA,
        "engine": s.engine,
        "engine_name": s.engine_name,
        "engine_version": s.engine_version,
        "model": {
            "name": e.model_name,
            "logged_name": s.model.name,
            "source": e.model_source or None,
            "architecture": s.model.architecture,
            "layers": s.model.layers,
            "file_type": s.model.file_type,
            "size_bytes": s.model.size_bytes,
            "parameters": s.model.parameters,
        },
        "settings": {**s.settings, "assumed": list(s.assumed)},
        "devices": [
            {
                "name": d.name,
                "gpu": d.is_gpu,
                "description": d.description,
                "total_bytes": d.total_bytes,
                "free_bytes": d.free_bytes,
            }
            for d in s.devices
        ],
        "components": [
            {
                "name": r.name,
                "device": r.device,
                "logged_bytes": r.logged_bytes,
                "estimated_bytes": r.estimated_bytes,
                "difference": r.difference,
                "accuracy": r.accuracy,
                "flagged": r.flagged,
                "note": r.note,
            }
            for r in e.components
        ],
        "facts": dict(s.facts),
        "decision": None
        if s.decision is None
        else {
            "kind": s.decision.kind,
            "summary": s.decision.summary,
            "figures": dict(s.decision.figures),
            "why": list(e.decision_lines),
        },
        "advice": [
            {
                "title": a.title,
                "frees_bytes": a.frees_bytes,
                "cost": a.cost,
                "fits": a.fits,
                "changes": a.changes,
                "kv_pool_bytes": a.pool_bytes,
                "kv_pool_tokens": a.pool_tokens,
            }
            for a in e.advice
        ],
        "launch": e.launch_line or None,
        "estimate_settings": e.workload.to_dict() if e.workload is not None else None,
        "notes": list(e.notes),
    }
