"""The window's logic: current model, workload and GPUs in; estimate, fit and advice out.

Views never compute. They call the controller's setters and redraw from its signals, which carry
plain frozen records. Every figure comes from :mod:`vramgui.core`.

Contract for the views that plug into the window (offloading, profiles): they receive the
controller and use only
- signals ``model_changed(ResolvedModel)``, ``workload_changed(Workload)``,
  ``estimate_changed(Analysis)``, ``outlook_changed(Outlook)``, ``capacities_changed(tuple)``;
- properties ``model``, ``spec``, ``source``, ``workload``, ``chosen_workload``, ``capacities``,
  ``analysis``;
- methods ``load_source(source)``, ``set_model(loaded)``, ``set_workload(workload)``,
  ``update(**changes)``, ``show_message(text)``.

Messages reach the window in its own words (``ui/wording.py``): ``message`` carries what went
wrong, ``notice`` what changed by itself (an engine switched, a recipe applied).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from vramgui.core import fit, launch, serving, storage
from vramgui.core.dtypes import SCHEMES
from vramgui.core.errors import VramguiError, WorkloadError
from vramgui.core.estimate import Estimate, estimate
from vramgui.core.kv_cache_types import ENGINE_KV_DTYPES, KV_CACHE_TYPES
from vramgui.core.model import ModelSpec
from vramgui.core.report import rules_of_thumb
from vramgui.core.speed import (
    Hardware,
    Price,
    Utilization,
    cost_per_million_tokens,
    run_cost,
    serving_speed,
    training_speed,
)
from vramgui.core.training import FOUR_BIT_SCHEMES
from vramgui.core.workload import (
    METHOD_RECIPES,
    QLORA_QUANTS,
    EngineConflictError,
    Workload,
    adjusted,
    quant_family,
)
from vramgui.hardware.gpus import architecture_of, engine_notes
from vramgui.ui import wording
from vramgui.ui.workers import Worker, loads, submit

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel


@dataclass(frozen=True, slots=True)
class Rates:
    """What timing and pricing work on one GPU model needs.

    Attributes:
        hardware: the GPU as ``core.speed`` sees it.
        price: one GPU-hour's price (the catalog's, or the user's), or None.
        utilization: the shares of peak to time with (a measured one where there is one).
    """

    hardware: Hardware
    price: Price | None
    utilization: Utilization


# (GPU name, compute dtype) -> its rates, or None where the GPU cannot be timed.
RatesFor = Callable[[str, str], "Rates | None"]


@dataclass(frozen=True, slots=True)
class SpeedSummary:
    """How fast the current setup runs on the target GPU, and what it costs.

    Attributes:
        gpu: the target GPU (every GPU of the setup is one).
        gpus: GPUs of the setup.
        mode: "training" or "inference".
        tokens_per_second: trained or generated, over all GPUs.
        step_seconds: an optimizer step (training) or a decode step (inference).
        mfu: model FLOPs utilization (training), else None.
        bound: the part of the step that takes longest.
        utilization: the shares of peak used.
        price: the price of a GPU-hour, or None.
        cost_per_million: the price of a million tokens trained or generated, or None.
        train_tokens: the tokens of the training run timed, or None.
        time_seconds: the run's wall time, or None.
        gpu_hours: the run's GPU-hours, or None.
        cost: the run's cost, or None.
        notes: what the figures assume.
        concurrency: sequences decoded together (inference).
    """

    gpu: str
    gpus: int
    mode: str
    tokens_per_second: float
    step_seconds: float
    mfu: float | None
    bound: str
    utilization: Utilization
    price: Price | None
    cost_per_million: float | None
    train_tokens: int | None = None
    time_seconds: float | None = None
    gpu_hours: float | None = None
    cost: float | None = None
    notes: tuple[str, ...] = ()
    concurrency: int = 1


@dataclass(frozen=True, slots=True)
class Analysis:
    """The estimate of the current setup and how it sits on each chosen GPU.

    Attributes:
        spec: the model estimated.
        estimate: the estimate, per GPU.
        fit: one row per chosen GPU, the target first.
        speed: how fast and at what cost it runs on the target GPU, or None where it cannot be
            timed (no target, a GPU the catalog lacks).
        engine_notes: the chosen GPUs the engine does not run on, each with why.
    """

    spec: ModelSpec
    estimate: Estimate
    fit: tuple[fit.FitRow, ...]
    speed: SpeedSummary | None = None
    engine_notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Outlook:
    """What surrounds the current setup: the sweep, the room left and the advice.

    Attributes:
        field: the swept setting ("seq" or "batch").
        values: the swept values, ascending.
        totals_bytes: the per-GPU total at each value.
        target: the GPU held against, ``(name, capacity_bytes)``, or None when none is chosen.
        largest: for "seq" and "batch", the largest value that fits the target (None: not even 1).
        suggestions: ranked changes that make the setup fit the target (or save memory).
        rules: the classic rules of thumb for the same setup, bytes by rule name.
        ranked: the catalog GPUs that fit (the fewest of each), cheapest work first.
        ranked_by_time: the same, fastest first.
    """

    field: str
    values: tuple[int, ...]
    totals_bytes: tuple[int, ...]
    target: tuple[str, int] | None
    largest: dict[str, int | None]
    suggestions: tuple[fit.Suggestion, ...]
    rules: dict[str, int]
    ranked: tuple[fit.RankedSetup, ...] = ()
    ranked_by_time: tuple[fit.RankedSetup, ...] = ()


SWEEP_FIELDS = ("seq", "batch")
_SETTINGS = tuple(f.name for f in fields(Workload))
OUTLOOK_DELAY_MS = 120
# The training run the window times until the user says otherwise.
DEFAULT_TRAIN_TOKENS = 100_000_000
# Checkpoint dtypes as the Weights box names them.
_STORED_DTYPES = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}
_CONFIG_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# Where a model comes from a file or folder the user opened (its own dtype then applies).
_LOCAL_KINDS = ("local", "config", "ollama")
RECIPE_NOTES = {
    "lora": "LoRA starts from its usual recipe: the base frozen in 16 bits (Pure 16-bit), "
    "gradient checkpointing on. Change either to compare.",
    "qlora": "QLoRA starts from its usual recipe: an NF4 base, what is not quantized in fp32 "
    "(Mixed) and gradient checkpointing on, as peft's prepare_model_for_kbit_training and the "
    "QLoRA script set them. Pure 16-bit is a script that skips the upcast; change either to "
    "compare.",
}


def sweep_values(field: str, current: int, max_seq: int) -> tuple[int, ...]:
    """Powers of two across the useful range of ``field``, plus the current value."""
    if field == "seq":
        low, high = 256, max(max_seq, current, 512)
    else:
        low, high = 1, max(128, current)
    values = {2**k for k in range(int(math.log2(low)), int(math.log2(high)) + 1)}
    values.update({current, high})
    return tuple(sorted(v for v in values if low <= v <= high or v == current))


def disabled_reasons(workload: Workload, spec: ModelSpec | None) -> dict[str, str]:
    """Settings that do not apply to this setup, each with the reason shown in its tooltip."""
    reasons: dict[str, str] = {}
    training = workload.mode == "training"
    if training:
        for name in ("engine", "gpu_memory_utilization", "kv_dtype"):
            reasons[name] = "Applies to inference only: training keeps no KV cache."
        if workload.method == "full":
            for name in ("lora_rank", "lora_targets"):
                reasons[name] = "Applies to LoRA and QLoRA; full fine-tuning trains every weight."
        if workload.precision == "fp32":
            reasons["dtype"] = "fp32 training computes in fp32 whatever the weight dtype."
        if workload.method == "qlora":
            reasons["precision:fp32"] = (
                "QLoRA's 4-bit layers compute in the Weights dtype: Mixed is its recipe "
                "(prepare_model_for_kbit_training keeps what is not quantized in fp32), Pure "
                "16-bit a script that skips it."
            )
            for name in SCHEMES:
                if name not in FOUR_BIT_SCHEMES:
                    reasons[f"quant:{name}"] = (
                        "QLoRA trains adapters on a 4-bit bitsandbytes base (NF4 or FP4)."
                    )
        else:
            reasons["quant"] = (
                "Full and LoRA fine-tuning train on a 16-bit base; pick QLoRA for a 4-bit one."
            )
    else:
        for name in (
            "method",
            "lora_rank",
            "lora_targets",
            "optimizer",
            "precision",
            "grad_checkpointing",
            "grad_accum",
            "zero",
            "fsdp",
            "cpu_offload",
        ):
            reasons[name] = "Applies to training only."
        if workload.engine != "vllm":
            reasons["gpu_memory_utilization"] = "Only vLLM pre-allocates a share of GPU memory."
        if not workload.enable_lora:
            for name in ("max_loras", "max_lora_rank"):
                reasons[name] = "Applies once LoRA adapters are on."
        if not workload.speculative_tokens:
            reasons["num_speculative_tokens"] = "Applies to speculative decoding."
        if workload.speculative != "draft":
            reasons["draft_model"] = "Applies to speculative decoding with a draft model."
        if workload.engine == "llamacpp":
            reasons["attention"] = "llama.cpp uses its own attention kernels."
        engine = wording.engine_label(workload.engine)
        for kv in KV_CACHE_TYPES:
            if workload.engine in kv.engines:
                continue
            if len(kv.switch_to) == 1:
                owner = wording.engine_label(kv.switch_to[0])
                reason = f"{engine} has no {kv.name} KV cache: it is {owner}'s."
            else:
                offered = ", ".join(ENGINE_KV_DTYPES[workload.engine])
                reason = f"{engine} has no {kv.name} KV cache; it offers {offered}."
            reasons[f"kv_dtype:{kv.name}"] = reason
    if training and workload.fsdp:
        reasons["zero"] = "FSDP already shards; choose FSDP or ZeRO, not both."
    if training and workload.zero:
        reasons["fsdp"] = "ZeRO already shards; choose FSDP or ZeRO, not both."
    if workload.gpus == 1:
        for name in ("tp", "pp"):
            reasons[name] = "Needs more than one GPU."
        if training:
            reasons.setdefault("zero", "Sharding needs more than one GPU.")
            reasons.setdefault("fsdp", "Sharding needs more than one GPU.")
    if not training:
        reasons.update(_stored_reasons(workload, spec))
    return reasons


def _stored_reasons(workload: Workload, spec: ModelSpec | None) -> dict[str, str]:
    """What a pre-quantized checkpoint leaves to choose: another scheme is estimated from its
    unquantized tensors (a GGUF file takes GGUF types only); MTP layers load in vLLM only."""
    reasons: dict[str, str] = {}
    if spec is None or not spec.mtp_tensors:
        reasons["mtp"] = "This checkpoint stores no multi-token-prediction layers."
    elif workload.engine != "vllm":
        reasons["mtp"] = "Only vLLM loads multi-token-prediction layers (MTP speculative decoding)."
    if spec is None or spec.quantization is None:
        return reasons
    if storage.logical_tensors(spec) is None:
        reasons["quant"] = (
            f"The checkpoint is stored quantized ({spec.quantization}) and the tensors it was "
            "made from are not known: it is estimated as stored."
        )
        return reasons
    if storage.from_gguf(spec):
        for name, scheme in SCHEMES.items():
            if scheme.family not in ("none", "gguf"):
                reasons[f"quant:{name}"] = (
                    f"A GGUF file ({spec.quantization}) is estimated as stored or as another "
                    "GGUF type."
                )
    return reasons


def stored_format(spec: ModelSpec | None, dtype: str) -> str:
    """The checkpoint's own format in words ("MXFP4 experts, bf16 elsewhere"), "" if unquantized."""
    if spec is None or spec.quantization is None:
        return ""
    return storage.format_label(spec, dtype) or spec.quantization


def checkpoint_kv(spec: ModelSpec | None, workload: Workload) -> str:
    """The KV cache dtype the engine takes from the checkpoint's own KV-cache scheme
    (``serving.checkpoint_kv_dtype``), "" where it takes the one asked for."""
    if spec is None or workload.mode != "inference":
        return ""
    return serving.checkpoint_kv_dtype(spec, workload) or ""


def stored_dtype(spec: ModelSpec) -> str | None:
    """The Weights choice the checkpoint itself is stored in ("bf16", "fp16", "fp32"), or None.

    From the stored tensors' dtypes (most weights win), else the config's ``torch_dtype``. None
    for a GGUF file: its quantized types are its weights, and the F32 it keeps its norms in is
    no dtype to compute in.
    """
    if spec.quantization is not None and quant_family(spec.quantization) == "gguf":
        return None
    counts: dict[str, int] = {}
    for t in spec.tensors:
        name = _STORED_DTYPES.get(t.dtype or "")
        if name is not None:
            counts[name] = counts.get(name, 0) + t.numel
    if counts:
        return max(counts, key=lambda k: counts[k])
    return _CONFIG_DTYPES.get(spec.facts.torch_dtype or "")


class EstimateController(QObject):
    """Holds the current setup and turns every change into a fresh estimate.

    Changes are coalesced: several setters in one event-loop turn give one estimate. The estimate
    and fit come first (``estimate_changed``); the sweep and the advice are computed on a worker
    thread and follow (``outlook_changed``), a newer change cancelling an older computation.
    """

    model_changed = Signal(object)
    workload_changed = Signal(object)
    capacities_changed = Signal(object)
    estimate_changed = Signal(object)
    estimate_failed = Signal(str)
    outlook_changed = Signal(object)
    loading_changed = Signal(bool)
    message = Signal(str)
    notice = Signal(str)

    def __init__(
        self,
        load_model: Callable[[str], ResolvedModel],
        workload: Workload | None = None,
        parent: QObject | None = None,
        *,
        rates: RatesFor | None = None,
        catalog: tuple[tuple[str, int], ...] = (),
    ) -> None:
        super().__init__(parent)
        self._load_model = load_model
        self._rates = rates
        self._catalog = catalog
        self._train_tokens = DEFAULT_TRAIN_TOKENS
        self._price_per_hour: float | None = None
        self._model: ResolvedModel | None = None
        self._source: str | None = None
        self._workload = workload or Workload()
        self._capacities: tuple[tuple[str, int], ...] = ()
        self._sweep_field = "seq"
        self._analysis: Analysis | None = None
        self._outlook: Outlook | None = None
        # Settings the current model's own format set, with the user's value each replaced.
        self._forced: dict[str, Any] = {}
        # The quantization last served with: what inference returns to after QLoRA's base.
        self._serving_quant = self._workload.quant if self._workload.mode == "inference" else "none"
        self._loading: Worker | None = None
        # vLLM's draft model (speculative decoding): what was asked for, and its spec once read.
        self._draft: tuple[str, ModelSpec] | None = None
        self._draft_loading: tuple[str, Worker] | None = None
        self._outlook_worker: Worker | None = None
        self._estimate_timer = _single_shot(self, self._recompute)
        # The outlook waits for a pause in the input: a slider drag then runs one, not dozens.
        self._outlook_timer = _single_shot(self, self._recompute_outlook, OUTLOOK_DELAY_MS)

    @property
    def model(self) -> ResolvedModel | None:
        return self._model

    @property
    def spec(self) -> ModelSpec | None:
        return self._model.spec if self._model else None

    @property
    def source(self) -> str | None:
        """What the user typed or picked to get the current model (a repo id, path, name)."""
        return self._source

    @property
    def workload(self) -> Workload:
        return self._workload

    @property
    def capacities(self) -> tuple[tuple[str, int], ...]:
        return self._capacities

    @property
    def sweep_field(self) -> str:
        return self._sweep_field

    @property
    def analysis(self) -> Analysis | None:
        return self._analysis

    @property
    def outlook(self) -> Outlook | None:
        return self._outlook

    @property
    def draft(self) -> ModelSpec | None:
        """The draft model of vLLM's speculative decoding, once read (None: none, or loading)."""
        w = self._workload
        if self._draft is None or w.speculative != "draft" or self._draft[0] != w.draft_model:
            return None
        return self._draft[1]

    @property
    def train_tokens(self) -> int:
        """Tokens of the training run the window times and prices."""
        return self._train_tokens

    @property
    def price_per_hour(self) -> float | None:
        """The user's price of one GPU-hour, or None for the catalog's."""
        return self._price_per_hour

    def set_train_tokens(self, tokens: int) -> None:
        """Time and price a training run of ``tokens`` tokens."""
        if tokens < 1:
            raise ValueError("a training run has at least one token")
        if tokens != self._train_tokens:
            self._train_tokens = tokens
            self._schedule()

    def set_price_per_hour(self, price: float | None) -> None:
        """Price every GPU-hour at ``price`` (None: each GPU's catalog price)."""
        if price != self._price_per_hour:
            self._price_per_hour = price
            self._schedule()

    def rates_for(self, gpu: str, dtype: str) -> Rates | None:
        """The rates the window times ``gpu`` with (the user's price where set)."""
        rates = self._rates(gpu, dtype) if self._rates else None
        if rates is None or self._price_per_hour is None:
            return rates
        currency = rates.price.currency if rates.price else "USD"
        price = Price(self._price_per_hour, currency, "set in the window")
        return Rates(rates.hardware, price, rates.utilization)

    @property
    def max_seq(self) -> int:
        """The model's longest context, the upper end of the context controls."""
        spec = self.spec
        return spec.facts.max_position_embeddings if spec else 131072

    def load_source(self, source: str) -> None:
        """Read a model off the GUI thread; a newer request cancels an older one (a load in a
        child process, as the application's is, is then stopped). Loads wait on their own pool,
        so that a slow one never holds the threads the outlook and the searches need."""
        if self._loading is not None:
            self._loading.cancel()
        self.loading_changed.emit(True)
        self._loading = submit(
            lambda: self._load_model(source),
            lambda loaded: self._loaded(source, loaded),
            self._load_failed,
            pool=loads(),
        )

    def set_model(self, loaded: ResolvedModel, source: str | None = None) -> None:
        """Make ``loaded`` the current model and re-estimate.

        The source's own format comes first, then the user's choice. A file or folder the user
        opened is estimated as it is stored (its dtype, its own quantization; QLoRA keeps its
        4-bit base), a checkpoint only some engines run moves the engine to one of them, and a
        context longer than the model's is cut to it. These settings belong to this model only:
        when the next one loads, each goes back to what the user had chosen, unless the user
        changed it meanwhile (``chosen_workload``).
        """
        previous = self.spec
        self._model = loaded
        self._source = source if source is not None else loaded.ref.id
        self.model_changed.emit(loaded)
        for notice in loaded.notices:
            self.notice.emit(notice)
        mine = self.chosen_workload
        if previous is not None and mine != self._workload:
            back = ", ".join(
                wording.setting_text(k, getattr(mine, k)) for k in self._forced if k != "seq"
            )
            if back:
                self.notice.emit(f"Back to your settings after {previous.name}: {back}.")
        self._forced = {}
        changes = {**self._as_stored(loaded, mine), **self._ollama_default(loaded, mine)}
        if changes.get("seq", mine.seq) > self.max_seq:
            changes["seq"] = self.max_seq
        try:
            workload, resets = adjusted(mine, changes, loaded.spec.quantization)
        except VramguiError as exc:
            self.message.emit(_describe(exc))
            workload, resets = mine, ()
        for reset in resets:
            self.notice.emit(wording.reset_notice(reset, loaded.spec.name))
        self._forced = {
            name: getattr(mine, name)
            for name in _SETTINGS
            if getattr(workload, name) != getattr(mine, name)
        }
        self._set_workload(workload)

    @property
    def chosen_workload(self) -> Workload:
        """The settings as the user chose them: ``workload`` without what the current model's own
        format set (the window saves these, and the next model starts from them)."""
        if not self._forced:
            return self._workload
        return self._workload.with_(**self._forced)

    def _as_stored(self, loaded: ResolvedModel, w: Workload) -> dict[str, Any]:
        """The dtype and quantization of an opened file, where they differ from ``w``'s."""
        spec = loaded.spec
        if loaded.ref.kind not in _LOCAL_KINDS or (w.mode, w.method) == ("training", "qlora"):
            return {}
        changes: dict[str, Any] = {}
        dtype = stored_dtype(spec)
        if dtype is not None and dtype != w.dtype:
            changes["dtype"] = dtype
        if w.quant != "none":
            changes["quant"] = "none"
        if changes:
            now = ", ".join(wording.setting_text(k, v) for k, v in changes.items())
            was = ", ".join(wording.setting_text(k, getattr(w, k)) for k in changes)
            self.notice.emit(
                f"{spec.name} is estimated as it is stored: {now} (was {was}), for this model only."
            )
        return changes

    def _ollama_default(self, loaded: ResolvedModel, w: Workload) -> dict[str, Any]:
        """The context Ollama runs an Ollama model at when nothing sets ``num_ctx``: its default
        for the target GPU's memory (``launch.ollama_context``), where it differs from ``w``'s."""
        if loaded.ref.kind != "ollama" or w.mode != "inference":
            return {}
        memory = self._capacities[0][1] if self._capacities else 0
        context = min(launch.ollama_context(memory), self.max_seq)
        if context == w.seq:
            return {}
        self.notice.emit(
            f"{loaded.spec.name} is estimated at Ollama's default context for "
            f"{memory / 1024**3:.0f} GiB of GPU memory: {context:,} tokens (was {w.seq:,}), for "
            "this model only; set the context to run it with another num_ctx."
        )
        return {"seq": context}

    def set_workload(self, workload: Workload) -> None:
        """Replace every setting at once (a restored or loaded profile): all the user's."""
        self._forced = {}
        self._set_workload(workload)

    def _set_workload(self, workload: Workload) -> None:
        self._workload = workload
        if workload.mode == "inference":
            self._serving_quant = workload.quant
        self.workload_changed.emit(workload)
        self._load_draft(workload)
        self._schedule()

    def _load_draft(self, workload: Workload) -> None:
        """Read the draft model the settings name, off the GUI thread (once per name)."""
        name = workload.draft_model
        if workload.speculative != "draft" or not name:
            return
        if (self._draft is not None and self._draft[0] == name) or (
            self._draft_loading is not None and self._draft_loading[0] == name
        ):
            return
        if self._draft_loading is not None:
            self._draft_loading[1].cancel()

        def done(loaded: ResolvedModel) -> None:
            self._draft_loading = None
            self._draft = (name, loaded.spec)
            self._schedule()

        def failed(exc: Exception) -> None:
            self._draft_loading = None
            self.message.emit(f"The draft model {name} could not be read: {_describe(exc)}")

        self._draft_loading = (name, submit(lambda: self._load_model(name), done, failed))

    def update(self, **changes: Any) -> bool:
        """Change some settings; an invalid combination is reported and nothing changes.

        A training method brings its usual recipe (``METHOD_RECIPES``) unless told otherwise;
        settings the engine does not run are carried over as ``core.workload.adjusted`` says,
        and each such change is told in a notice.

        Returns:
            Whether the change was taken.
        """
        w = self._workload
        leaving_qlora = (w.mode, w.method, changes.get("mode")) == (
            "training",
            "qlora",
            "inference",
        )
        if leaving_qlora and w.quant in QLORA_QUANTS and self._serving_quant != w.quant:
            # QLoRA's 4-bit base is a training recipe's: serving goes back to its own choice.
            changes.setdefault("quant", self._serving_quant)
            back = wording.setting_text("quant", self._serving_quant)
            self.notice.emit(f"QLoRA's 4-bit base is for training: {back} again to serve.")
        method = changes.get("method")
        if method in METHOD_RECIPES and method != self._workload.method:
            for name, value in METHOD_RECIPES[method].items():
                changes.setdefault(name, value)
            if self._workload.method == "qlora":
                changes.setdefault("quant", "none")  # the 4-bit base was QLoRA's
            if method in RECIPE_NOTES and changes.get("mode", self._workload.mode) == "training":
                self.notice.emit(RECIPE_NOTES[method])
        before = self._workload
        taken = self._apply(changes)
        # What the user changed (and what changed with it) is theirs now, not the model's.
        for name in list(self._forced):
            if name in changes or getattr(before, name) != getattr(self._workload, name):
                del self._forced[name]
        return taken

    def _apply(self, changes: dict[str, Any]) -> bool:
        spec = self.spec
        try:
            workload, resets = adjusted(
                self._workload, changes, spec.quantization if spec else None
            )
        except EngineConflictError as exc:
            self.message.emit(wording.refusal(exc.conflict, spec.name if spec else ""))
            self.workload_changed.emit(self._workload)
            return False
        except WorkloadError as exc:
            self.message.emit(wording.window_text(str(exc)))
            self.workload_changed.emit(self._workload)
            return False
        for reset in resets:
            self.notice.emit(wording.reset_notice(reset, spec.name if spec else ""))
        if workload != self._workload:
            self._set_workload(workload)
        return True

    def apply_suggestion(self, suggestion: fit.Suggestion) -> bool:
        """Take the changes of one piece of advice."""
        return self.update(**suggestion.changes)

    def set_capacities(self, capacities: tuple[tuple[str, int], ...]) -> None:
        """The GPUs to hold the estimate against, as ``(name, capacity_bytes)``; first is the target.

        The target's generation decides what the engine does with a checkpoint's format (FP8
        kept from Ada, dequantized before): the workload follows it.
        """
        capacities = tuple(capacities)
        if capacities == self._capacities:
            return
        self._capacities = capacities
        self.capacities_changed.emit(capacities)
        arch = architecture_of(capacities[0][0]) if capacities else "auto"
        if arch != self._workload.gpu_arch:
            self._apply({"gpu_arch": arch})
        self._schedule()

    def set_sweep_field(self, field: str) -> None:
        """Sweep context / sequence length ("seq") or batch size ("batch")."""
        if field not in SWEEP_FIELDS:
            raise ValueError(f"sweep field must be one of {SWEEP_FIELDS}")
        self._sweep_field = field
        self._outlook_timer.start()

    def show_message(self, text: str) -> None:
        """Let a plugged-in view report something in the window's message area."""
        self.message.emit(text)

    def recompute_now(self) -> None:
        """Estimate at once instead of in the next event-loop turn (benchmarks, tests)."""
        self._estimate_timer.stop()
        self._recompute()

    def _schedule(self) -> None:
        self._estimate_timer.start()

    def _loaded(self, source: str, loaded: ResolvedModel) -> None:
        self._loading = None
        self.loading_changed.emit(False)
        self.set_model(loaded, source)

    def _load_failed(self, exc: Exception) -> None:
        self._loading = None
        self.loading_changed.emit(False)
        self.message.emit(_describe(exc))

    def _recompute(self) -> None:
        spec = self.spec
        if spec is None:
            return
        name, target = self._capacities[0] if self._capacities else ("", None)
        try:
            result = estimate(spec, self._workload, target, name, self.draft)
            rows = tuple(fit.fit_rows(result, self._capacities))
        except VramguiError as exc:
            self._analysis = None
            # An outlook still on its way belongs to settings that no longer stand.
            self._outlook_timer.stop()
            if self._outlook_worker is not None:
                self._outlook_worker.cancel()
                self._outlook_worker = None
            self.estimate_failed.emit(_describe(exc))
            return
        self._analysis = Analysis(
            spec,
            result,
            rows,
            self._speed(spec, self._workload),
            tuple(engine_notes(self._workload.engine, [gpu for gpu, _ in self._capacities])),
        )
        self.estimate_changed.emit(self._analysis)
        self._outlook_timer.start()

    def _speed(self, spec: ModelSpec, workload: Workload) -> SpeedSummary | None:
        """The current setup timed and priced on the target GPU, or None where it cannot be."""
        if not self._capacities:
            return None
        gpu = self._capacities[0][0]
        rates = self.rates_for(gpu, workload.dtype)
        if rates is None:
            return None
        try:
            return summarize_speed(spec, workload, gpu, rates, self._train_tokens)
        except VramguiError:
            return None

    def _recompute_outlook(self) -> None:
        spec, analysis = self.spec, self._analysis
        if spec is None or analysis is None:
            return
        if self._outlook_worker is not None:
            self._outlook_worker.cancel()
        workload, field, max_seq = self._workload, self._sweep_field, self.max_seq
        target = self._capacities[0] if self._capacities else None
        draft = self.draft
        # Dozens of estimates: off the GUI thread, so that the breakdown stays live meanwhile.
        offers = []
        for name, capacity in self._catalog:
            rates = self.rates_for(name, workload.dtype)
            if rates is not None:
                offers.append((name, capacity, rates))
        tokens = self._train_tokens
        self._outlook_worker = submit(
            lambda: compute_outlook(
                analysis.estimate,
                spec,
                workload,
                field=field,
                target=target,
                max_seq=max_seq,
                draft=draft,
                offers=offers,
                train_tokens=tokens,
            ),
            self._outlook_done,
            self._outlook_failed,
        )

    def _outlook_done(self, outlook: Outlook) -> None:
        self._outlook_worker = None
        self._outlook = outlook
        self.outlook_changed.emit(outlook)

    def _outlook_failed(self, exc: Exception) -> None:
        self._outlook_worker = None
        self.message.emit(_describe(exc))


def compute_outlook(
    current: Estimate,
    spec: ModelSpec,
    workload: Workload,
    *,
    field: str,
    target: tuple[str, int] | None,
    max_seq: int,
    draft: ModelSpec | None = None,
    offers: list[tuple[str, int, Rates]] | None = None,
    train_tokens: int | None = None,
) -> Outlook:
    """The sweep of ``field``, the largest context and batch that fit ``target``, the advice,
    the rules of thumb around the ``current`` estimate, and the GPUs of ``offers`` that fit
    ranked by the cost of the work (a training run of ``train_tokens``).

    Pure: safe to run on a worker thread.
    """
    values = sweep_values(field, getattr(workload, field), max_seq)
    points = [
        (value, e.total_bytes)
        for value, e in zip(
            values, fit.sweep(spec, workload, field, values, draft=draft), strict=True
        )
        if e is not None  # a value the model cannot take
    ]
    largest: dict[str, int | None] = {}
    suggestions: tuple[fit.Suggestion, ...] = ()
    if target is not None:
        gpu, capacity = target
        for name in SWEEP_FIELDS:
            largest[name] = fit.largest_fitting(
                spec, workload, capacity, name, gpu_name=gpu, draft=draft
            )
        suggestions = tuple(fit.advise(spec, workload, capacity, draft))
    ranked: tuple[fit.RankedSetup, ...] = ()
    if offers:
        ranked = tuple(
            fit.rank_setups(
                spec,
                workload,
                [(name, capacity, r.hardware, r.price) for name, capacity, r in offers],
                by="cost",
                draft=draft,
                train_tokens=train_tokens if workload.mode == "training" else None,
                utilizations={name: r.utilization for name, _, r in offers},
            )
        )
    return Outlook(
        field,
        tuple(v for v, _ in points),
        tuple(t for _, t in points),
        target,
        largest,
        suggestions,
        rules_of_thumb(spec, current),
        ranked,
        tuple(fit.order_setups(ranked, "time")),
    )


def summarize_speed(
    spec: ModelSpec, workload: Workload, gpu: str, rates: Rates, train_tokens: int
) -> SpeedSummary:
    """Time and price ``workload`` on GPUs like ``gpu``: a training run of ``train_tokens``, or
    decoding at the batch as concurrency.

    Raises:
        VramguiError: the setup cannot be timed.
    """
    w, price = workload, rates.price
    if w.mode == "training":
        trained = training_speed(spec, w, rates.hardware, rates.utilization)
        run = run_cost(trained, w.gpus, train_tokens, price)
        per_million = (
            None
            if price is None
            else cost_per_million_tokens(trained.tokens_per_second, w.gpus, price)
        )
        return SpeedSummary(
            gpu, w.gpus, w.mode, trained.tokens_per_second, trained.step_seconds, trained.mfu,
            trained.bound, trained.utilization, price, per_million, train_tokens,
            run.time_seconds, run.gpu_hours, run.cost, trained.notes,
        )  # fmt: skip
    served = serving_speed(spec, w, rates.hardware, rates.utilization)
    per_million = (
        None if price is None else cost_per_million_tokens(served.tokens_per_second, w.gpus, price)
    )
    return SpeedSummary(
        gpu, w.gpus, w.mode, served.tokens_per_second, served.step_seconds, None, served.bound,
        rates.utilization, price, per_million, concurrency=served.concurrency,
    )  # fmt: skip


def _single_shot(parent: QObject, slot: Callable[[], None], interval_ms: int = 0) -> QTimer:
    # A zero-interval single shot runs once after the current burst of events: many changes in
    # one turn (a slider drag, a restored profile) cost one estimate.
    timer = QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(interval_ms)
    timer.timeout.connect(slot)
    return timer


def _describe(exc: Exception) -> str:
    if isinstance(exc, EngineConflictError):
        return wording.refusal(exc.conflict)
    if isinstance(exc, VramguiError):
        return wording.window_text(str(exc))
    return f"Could not read the model: {type(exc).__name__}: {exc}"
