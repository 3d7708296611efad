"""The window's logic: current model, workload and GPUs in; estimate, fit and advice out.

Views never compute. They call the controller's setters and redraw from its signals, which carry
plain frozen records. Every figure comes from :mod:`vramgui.core`.

Contract for the views that plug into the window (offloading, profiles): they receive the
controller and use only
- signals ``model_changed(ResolvedModel)``, ``workload_changed(Workload)``,
  ``estimate_changed(Analysis)``, ``estimate_failed(str)``, ``outlook_changed(Outlook)``,
  ``capacities_changed(tuple)``;
- properties ``model``, ``spec``, ``source``, ``workload``, ``chosen_workload``, ``capacities``,
  ``analysis``, ``estimate_error``;
- methods ``load_source(source)``, ``set_model(loaded)``, ``set_workload(workload)``,
  ``update(**changes)``, ``show_message(text)``.

Messages reach the window in its own words (``ui/wording.py``): ``message`` carries what went
wrong, ``notice`` what changed by itself (an engine switched, a recipe applied).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from vramgui.answers import setup
from vramgui.answers.documents import DEFAULT_TRAIN_TOKENS, estimate_json
from vramgui.answers.estimate import (
    SWEEP_FIELDS,
    Estimate,
    FitRow,
    Outlook,
    Suggestion,
    compute_outlook,
    estimate_setup,
)
from vramgui.answers.host import SET, UNKNOWN_HOST, HostSettings, choose_host
from vramgui.answers.offload import LlamaCppLayout
from vramgui.answers.rates import Price, Rates, RatesFor, timing_dtype
from vramgui.answers.setup import FOUR_BIT_SCHEMES, stored_dtype, stored_format
from vramgui.answers.timing import NO_RATES, Timing, Untimed, time_setup
from vramgui.core import engines
from vramgui.core.dtypes import SCHEMES
from vramgui.core.engines import StartUp
from vramgui.core.errors import VramguiError, WorkloadError
from vramgui.core.kv_cache_types import KV_CACHE_TYPES
from vramgui.core.model import ModelSpec
from vramgui.core.workload import (
    METHOD_RECIPES,
    QLORA_QUANTS,
    EngineConflictError,
    Workload,
    adjusted,
)
from vramgui.hardware.gpus import CatalogGpu, architecture_of, engine_notes
from vramgui.profiles import OffloadSettings
from vramgui.ui import wording
from vramgui.ui.workers import Worker, loads, submit

if TYPE_CHECKING:
    from vramgui.sources.results import ResolvedModel


@dataclass(frozen=True, slots=True)
class Analysis:
    """The estimate of the current setup and how it sits on each chosen GPU.

    Attributes:
        spec: the model estimated.
        estimate: the estimate, per GPU.
        fit: one row per chosen GPU, the target first.
        speed: how fast and at what cost it runs on the target GPU, on the placement that would
            run (``answers.timing``); ``Untimed`` with the reason where none runs or the GPU
            cannot be timed; None without a target.
        engine_notes: the chosen GPUs the engine does not run on, each with why.
    """

    spec: ModelSpec
    estimate: Estimate
    fit: tuple[FitRow, ...]
    speed: Timing | Untimed | None = None
    engine_notes: tuple[str, ...] = ()


_SETTINGS = tuple(f.name for f in fields(Workload))
OUTLOOK_DELAY_MS = 120
# Checkpoint dtypes as the Weights box names them.
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
        eng = engines.engine(workload.engine)
        if eng.startup is not StartUp.VLLM:
            reasons["gpu_memory_utilization"] = "Only vLLM pre-allocates a share of GPU memory."
        if not workload.enable_lora:
            for name in ("max_loras", "max_lora_rank"):
                reasons[name] = "Applies once LoRA adapters are on."
        if not workload.speculative_tokens:
            reasons["num_speculative_tokens"] = "Applies to speculative decoding."
        if workload.speculative != "draft":
            reasons["draft_model"] = "Applies to speculative decoding with a draft model."
        if eng.ggml:
            reasons["attention"] = "llama.cpp uses its own attention kernels."
        engine = wording.engine_label(workload.engine)
        for kv in KV_CACHE_TYPES:
            if eng.takes_kv(kv.name):
                continue
            if len(kv.switch_to) == 1:
                owner = wording.engine_label(kv.switch_to[0])
                reason = f"{engine} has no {kv.name} KV cache: it is {owner}'s."
            else:
                offered = ", ".join(eng.kv_dtypes)
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
    if spec is not None and not setup.has_rotary(spec):
        reasons["rope_scaling"] = (
            f"{spec.name} has no rotary position embeddings: RoPE scaling does not apply."
        )
    return reasons


def _stored_reasons(workload: Workload, spec: ModelSpec | None) -> dict[str, str]:
    """What a pre-quantized checkpoint leaves to choose: another scheme is estimated from its
    unquantized tensors (a GGUF file takes GGUF types only); MTP layers load in vLLM only."""
    reasons: dict[str, str] = {}
    if spec is None or not spec.mtp_tensors:
        reasons["mtp"] = "This checkpoint stores no multi-token-prediction layers."
    elif not engines.engine(workload.engine).loads_mtp:
        reasons["mtp"] = "Only vLLM loads multi-token-prediction layers (MTP speculative decoding)."
    if spec is None or spec.quantization is None:
        return reasons
    if not setup.quantizable(spec):
        reasons["quant"] = (
            f"The checkpoint is stored quantized ({spec.quantization}) and the tensors it was "
            "made from are not known: it is estimated as stored."
        )
        return reasons
    if setup.from_gguf(spec):
        for name, scheme in SCHEMES.items():
            if scheme.family not in ("none", "gguf"):
                reasons[f"quant:{name}"] = (
                    f"A GGUF file ({spec.quantization}) is estimated as stored or as another "
                    "GGUF type."
                )
    return reasons


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
    bits_changed = Signal(dict)
    loading_changed = Signal(bool)
    message = Signal(str)
    notice = Signal(str)
    host_changed = Signal(object)
    placement_changed = Signal(object)

    def __init__(
        self,
        load_model: Callable[[str], ResolvedModel],
        workload: Workload | None = None,
        parent: QObject | None = None,
        *,
        rates: RatesFor | None = None,
        catalog: tuple[tuple[str, int], ...] = (),
        host: HostSettings | None = None,
        cards: Callable[[], Sequence[CatalogGpu]] = tuple,
    ) -> None:
        super().__init__(parent)
        self._load_model = load_model
        self._rates = rates
        # The cards added by hand ("Add a card…"): the JSON copy lists those it fits against.
        self._cards = cards
        # Host RAM and disk for what llama.cpp does not hold on the GPUs: the Offloading tab
        # sets them; the time / cost line follows.
        self._machine = host or UNKNOWN_HOST
        self._host = self._machine
        # llama.cpp's placement as the Offloading tab set it: None, the fastest that fits.
        self._placement: OffloadSettings | None = None
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
        # Why the current settings have no estimate ("" while they have one).
        self._estimate_error = ""
        # Settings the current model's own format set, with the user's value each replaced.
        self._forced: dict[str, Any] = {}
        # The quantization last served with: what inference returns to after QLoRA's base.
        self._serving_quant = self._workload.quant if self._workload.mode == "inference" else "none"
        self._loading: Worker | None = None
        # vLLM's draft model (speculative decoding): what was asked for, and its spec once read.
        self._draft: tuple[str, ModelSpec] | None = None
        self._draft_loading: tuple[str, Worker] | None = None
        self._outlook_worker: Worker | None = None
        self._bits_for: tuple[ModelSpec, str] | None = None
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
    def estimate_error(self) -> str:
        """Why the current settings have no estimate, in the window's words ("" while they have
        one): what every view shows in place of figures of settings that no longer stand."""
        return self._estimate_error

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

    @property
    def host(self) -> HostSettings:
        """The host RAM and disk speed offloaded layers are placed and timed with."""
        return self._host

    @property
    def machine_host(self) -> HostSettings:
        """This machine's host figures: what the host settings return to when cleared."""
        return self._machine

    @property
    def placement(self) -> OffloadSettings | None:
        """llama.cpp's placement as set (the Offloading tab, advice, a profile); None: the
        fastest that fits."""
        return self._placement

    @property
    def offload(self) -> OffloadSettings:
        """llama.cpp's placement and the host as set: what a profile keeps."""
        p = self._placement or OffloadSettings()
        host = self._host
        return dataclasses.replace(
            p,
            ram_bytes=host.ram_bytes if host.ram_source == SET else None,
            disk_bytes_per_s=host.disk_bytes_per_s if host.disk_source == SET else None,
        )

    def set_placement(
        self, n_gpu_layers: int | None, n_cpu_moe: int, cpu_moe: bool, op_offload: bool = True
    ) -> None:
        """Time llama.cpp with ``-ngl n_gpu_layers``, experts in host RAM and op offload as
        given (None, no experts and op offload on: the fastest placement that fits)."""
        placement = None
        if n_gpu_layers is not None or n_cpu_moe or cpu_moe or not op_offload:
            placement = OffloadSettings(n_gpu_layers, n_cpu_moe, cpu_moe, op_offload=op_offload)
        if placement != self._placement:
            self._placement = placement
            self.placement_changed.emit(placement)
            self._schedule()

    def set_offload(self, saved: OffloadSettings | None) -> None:
        """Take a profile's placement and host (None: the fastest placement, this machine)."""
        saved = saved or OffloadSettings()
        self.set_placement(saved.n_gpu_layers, saved.n_cpu_moe, saved.cpu_moe, saved.op_offload)
        self.set_host(saved.ram_bytes, saved.disk_bytes_per_s)

    def set_host(self, ram_bytes: int | None, disk_bytes_per_s: float | None) -> None:
        """Place and time with ``ram_bytes`` of host RAM and a disk of ``disk_bytes_per_s``
        (None: this machine's available RAM, the default disk).

        Raises:
            WorkloadError: a figure that is not positive.
        """
        host = choose_host(self._machine, ram_bytes, disk_bytes_per_s)
        if host != self._host:
            self._host = host
            self.host_changed.emit(host)
            self._schedule()

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

    def document(self) -> dict[str, Any] | None:
        """The ``vramgui estimate --json`` document of the current setup, timed as the window
        times it (its rates and price, host, training run and placement); None without an
        estimate (``answers.documents.estimate_json``).

        Raises:
            VramguiError: the setup does not apply to the model.
        """
        if self._model is None or self._analysis is None:
            return None
        return estimate_json(
            self._model,
            self._workload,
            self._capacities,
            rates=self.rates_for,
            host=self._host,
            train_tokens=self._train_tokens,
            draft=self.draft,
            placement=self._placement,
            custom=self._custom_capacities(),
        )

    def _custom_capacities(self) -> list[CatalogGpu]:
        """The cards added by hand among the GPUs fitted against, in their order (as
        ``vramgui estimate`` lists the cards --vram-gib gives)."""
        cards = {card.name: card for card in self._cards()}
        return [cards[name] for name, _ in self._capacities if name in cards]

    def rates_for(self, gpu: str, dtype: str) -> Rates | None:
        """The rates the window times ``gpu`` with (the user's price where set)."""
        rates = self._rates(gpu, dtype) if self._rates else None
        if rates is None or self._price_per_hour is None:
            return rates
        currency = rates.price.currency if rates.price else "USD"
        price = Price(self._price_per_hour, currency, "set in the window")
        return replace(rates, price=price)

    @property
    def max_seq(self) -> int:
        """The model's longest context with the RoPE scaling in effect (``core.rope``), the
        upper end of the context controls."""
        return self._limit(self._workload)

    def _limit(self, workload: Workload) -> int:
        return setup.context_limit(self.spec, workload)

    @property
    def rope_original(self) -> int:
        """The context a RoPE scaling stretches unless set: the config's (0: no model)."""
        return setup.default_original(self.spec)

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
        if previous is not None and previous is not loaded.spec and self._placement is not None:
            # Another model's -ngl and experts mean nothing here: the fastest placement again.
            self._placement = None
            self.placement_changed.emit(None)
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
        if changes.get("seq", mine.seq) > self._limit(mine):
            changes["seq"] = self._limit(mine)
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
            stored = stored_format(spec, changes.get("dtype", w.dtype))
            now = ", ".join(
                # "none" of a quantized checkpoint is the box's "As stored · Q8_0"
                f"Quantization “As stored · {stored}”"
                if k == "quant" and stored
                else wording.setting_text(k, v)
                for k, v in changes.items()
            )
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
        context = min(setup.ollama_context(memory), self.max_seq)
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
            self.message.emit(wording.in_window(exc))
            self.workload_changed.emit(self._workload)
            return False
        for reset in resets:
            self.notice.emit(wording.reset_notice(reset, spec.name if spec else ""))
        limit = self._limit(workload)
        if workload.seq > limit and spec is not None:
            if "seq" in changes:
                # The context typed is past the model's: the message names RoPE scaling.
                try:
                    setup.check_context(spec, workload)
                except WorkloadError as exc:
                    self.message.emit(wording.in_window(exc))
                    self.workload_changed.emit(self._workload)
                    return False
            # A RoPE scaling taken off or narrowed: the context follows the model's limit.
            scaled = "with this RoPE scaling" if workload.rope_scaling != "none" else "without one"
            self.notice.emit(
                f"Context is now {limit:,} tokens (was {workload.seq:,}): the longest "
                f"{spec.name} runs at {scaled}; RoPE scaling runs it longer."
            )
            workload = workload.with_(seq=limit)
        if workload != self._workload:
            self._set_workload(workload)
        return True

    def apply_suggestion(self, suggestion: Suggestion) -> bool:
        """Take the changes of one piece of advice (an offload: its llama.cpp placement)."""
        if suggestion.placement is not None:
            self.set_placement(suggestion.placement[0], suggestion.placement[1], False)
            return True
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
        try:
            fitted = estimate_setup(spec, self._workload, self._capacities, draft=self.draft)
        except VramguiError as exc:
            # The last estimate and its outlook (and one still on its way) belong to settings
            # that no longer stand.
            self._analysis = self._outlook = None
            self._outlook_timer.stop()
            if self._outlook_worker is not None:
                self._outlook_worker.cancel()
                self._outlook_worker = None
            self._estimate_error = _describe(exc)
            self.estimate_failed.emit(self._estimate_error)
            return
        self._estimate_error = ""
        self._analysis = Analysis(
            spec,
            fitted.estimate,
            fitted.fit,
            self._speed(spec, fitted.estimate),
            tuple(engine_notes(self._workload.engine, [gpu for gpu, _ in self._capacities])),
        )
        self.estimate_changed.emit(self._analysis)
        self._outlook_timer.start()

    def _speed(self, spec: ModelSpec, est: Estimate) -> Timing | Untimed | None:
        """The current setup timed and priced on the target GPU (``answers.timing``)."""
        if not self._capacities:
            return None
        gpu, capacity = self._capacities[0]
        rates = self.rates_for(gpu, timing_dtype(est.workload))
        if rates is None:
            return Untimed(
                gpu, NO_RATES, f"{gpu} is not in the GPU catalog (its peak rates are unknown)"
            )
        return time_setup(
            spec,
            est,
            gpu,
            capacity,
            rates,
            host=self._host,
            train_tokens=self._train_tokens if est.workload.mode == "training" else None,
            draft=self.draft,
            n_gpu_layers=None if self._placement is None else self._placement.n_gpu_layers,
            layout=None
            if self._placement is None
            else LlamaCppLayout(
                cpu_moe=self._placement.cpu_moe,
                n_cpu_moe=self._placement.n_cpu_moe,
                op_offload=self._placement.op_offload,
            ),
        )

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
            rates = self.rates_for(name, timing_dtype(workload))
            if rates is not None:
                offers.append((name, capacity, rates))
        tokens, host = self._train_tokens, self._host
        target_rates = self.rates_for(target[0], timing_dtype(workload)) if target else None
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
                host=host,
                target_rates=target_rates,
            ),
            self._outlook_done,
            self._outlook_failed,
        )

    def _outlook_done(self, outlook: Outlook) -> None:
        self._outlook_worker = None
        self._outlook = outlook
        self.outlook_changed.emit(outlook)
        self._label_schemes()

    def _label_schemes(self) -> None:
        """The bits per weight of every quantization scheme on the current model and dtype
        (``storage.bits_by_scheme``, 0.1-0.2 s the first time for a large model): on a worker,
        after the outlook, once per model and dtype; ``bits_changed`` says {} meanwhile."""
        spec, dtype = self.spec, self._workload.dtype
        if spec is None or self._labelled(spec, dtype):
            return
        self._bits_for = (spec, dtype)
        self.bits_changed.emit({})

        def done(bits: dict[str, float]) -> None:
            if self._labelled(spec, dtype):  # still the current model and dtype
                self.bits_changed.emit(bits)

        submit(lambda: setup.bits_by_scheme(spec, dtype), done, self._outlook_failed)

    def _labelled(self, spec: ModelSpec, dtype: str) -> bool:
        # The spec by identity: comparing two specs compares every tensor.
        return (
            self._bits_for is not None and self._bits_for[0] is spec and self._bits_for[1] == dtype
        )

    def _outlook_failed(self, exc: Exception) -> None:
        self._outlook_worker = None
        self.message.emit(_describe(exc))


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
        return wording.in_window(exc)
    return f"Could not read the model: {type(exc).__name__}: {exc}"
