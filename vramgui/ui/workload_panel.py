"""The workload panel: inference or training settings and parallelism, one widget per setting."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vramgui.answers.setup import LORA_RANKS
from vramgui.core import engines
from vramgui.core.engines import StartUp
from vramgui.core.workload import (
    MAX_BATCH,
    MAX_ROPE_FACTOR,
    MAX_SEQ,
    TRANSFORMERS_VERSIONS,
    Workload,
)
from vramgui.core.workload import ROPE_SCALINGS as ROPE_SCALING_NAMES
from vramgui.ui.widgets import ChoiceCombo, SliderSpin, allow_choice, set_tooltip
from vramgui.ui.wording import ROPE_LABELS

MODES = (("inference", "Inference (serve)"), ("training", "Training (fine-tune)"))
ENGINES = tuple((e.key, e.label) for e in engines.ENGINES)
ATTENTIONS = (("sdpa", "SDPA"), ("flash", "FlashAttention"), ("eager", "Eager"))
METHODS = (("full", "Full fine-tune"), ("lora", "LoRA"), ("qlora", "QLoRA"))
PRECISIONS = (
    ("mixed", "Mixed (fp32 master, 16-bit compute)"),
    ("pure", "Pure 16-bit"),
    ("fp32", "fp32"),
)
OPTIMIZERS = (
    ("adamw", "AdamW"),
    ("adamw-fused", "AdamW (fused)"),
    ("adamw-8bit", "AdamW 8-bit"),
    ("sgd", "SGD (momentum)"),
    ("adafactor", "Adafactor"),
    ("lion", "Lion"),
)
# What the closed boxes show where the whole label would not fit a narrow side panel.
SHORT_LABELS = {
    "inference": "Inference",
    "training": "Training",
    "mixed": "Mixed",
    "pure": "Pure 16-bit",
}
LOOPS = (("trainer", "Trainer"), ("custom", "Custom loop"))
SPECULATIVE = (("none", "Off"), ("draft", "A draft model"))
VLLM_VERSIONS = (("0.20", "0.20.2 and later"), ("0.11", "0.11"), ("0.10", "0.10"))
PREFIX_CACHING = (("default", "vLLM's default"), ("on", "On"), ("off", "Off"))
SGLANG_VERSIONS = (("0.5.6", "0.5"), ("0.4.9", "0.4.9-0.4.10"), ("0.4.4", "0.4.0-0.4.8"))
TRANSFORMERS_RELEASES = tuple(
    (v, f"{v.split('.')[0]}.x" if v == TRANSFORMERS_VERSIONS[-1] else v)
    for v in reversed(TRANSFORMERS_VERSIONS)
)
# The prompt spin box shows "the whole context" at 0.
WHOLE_CONTEXT = "Whole context"
# The static-fraction spin box shows SGLang's own default (for the GPU) at its minimum.
SGLANG_DEFAULT = "Default"
_FRACTION_DEFAULT = 0.0
_PREFIX_VALUES = {"default": None, "on": True, "off": False}
LORA_RANK_CHOICES = tuple((str(r), str(r)) for r in LORA_RANKS)
# The spin boxes of vLLM's scheduler show vLLM's own default at 0.
VLLM_DEFAULT = "vLLM's default"
ZERO_STAGES = (("0", "Off"), ("1", "ZeRO-1"), ("2", "ZeRO-2"), ("3", "ZeRO-3"))
ROPE_SCALINGS = tuple((name, ROPE_LABELS[name]) for name in ROPE_SCALING_NAMES)
# The factor a RoPE scaling starts at when picked (a factor of 1 stretches nothing).
ROPE_START_FACTOR = 2.0
MAX_ROPE_ORIGINAL = 1 << 21

_HINTS = {
    "batch": "Sequences processed together (per GPU for data-parallel training).",
    "seq": "Tokens per sequence: prompt plus generated tokens for inference.",
    "attention": "Eager attention materializes the full score matrix; SDPA / flash do not.",
    "engine": "How the serving engine allocates memory (vLLM and SGLang pre-allocate a KV pool).",
    "gpu_memory_utilization": "vLLM memory share: the share of GPU memory vLLM takes for itself "
    "(--gpu-memory-utilization).",
    "max_num_seqs": "--max-num-seqs: requests vLLM runs at once; its sampler warm-up grows with "
    "it (default: 256, or 1024 on GPUs of 70 GiB and more other than the A100).",
    "max_num_batched_tokens": "--max-num-batched-tokens: tokens per scheduler step, the size "
    "vLLM profiles its activations at (default: 2048, or 8192 on large GPUs).",
    "enforce_eager": "--enforce-eager: no CUDA graphs. From vLLM 0.20.2 their memory comes out "
    "of the KV pool; before, out of the share vLLM leaves free.",
    "enable_lora": "--enable-lora: vLLM reserves room for LoRA adapters on the GPU.",
    "max_loras": "--max-loras: adapters held on the GPU at once.",
    "max_lora_rank": "--max-lora-rank: the largest adapter rank vLLM reserves room for.",
    "speculative": "Speculative decoding with a draft model, whose weights and KV cache share "
    "the GPU (the model's own multi-token-prediction layers: Load MTP layers).",
    "draft_model": "The draft model: a catalog name, a Hub id or a folder.",
    "num_speculative_tokens": "Tokens the MTP layers or the draft propose per step.",
    "cpu_offload_gb": "--cpu-offload-gb: GiB of weights per GPU kept in host RAM and streamed in "
    "on every step; their room goes to the KV pool.",
    "vllm_version": "The vLLM version whose start-up rules the estimate follows.",
    "mem_fraction_static": "--mem-fraction-static: the share of the GPU's free memory SGLang's "
    "weights and KV pool take; the rest is left for activations and CUDA graphs (default: "
    "SGLang's for the GPU).",
    "sglang_version": "The SGLang version whose default --mem-fraction-static the estimate "
    "follows.",
    "enable_prefix_caching": "--enable-prefix-caching: for models with state layers (Mamba, "
    "linear attention) vLLM then keeps one more state per request, or one per block of tokens; "
    "up to 0.24 it is off for them unless asked for.",
    "rope_scaling": "RoPE scaling runs the model past the context its config states, as "
    "llama.cpp (--rope-scaling), vLLM (--hf-overrides) and transformers (rope_scaling) take it; "
    "None keeps the config's own.",
    "rope_factor": "RoPE factor: how many times the scaling stretches the context (YaRN: the "
    "original context times it is the longest context, as vLLM derives it).",
    "rope_original_context": "Original context: the context the scaling stretches (YaRN's "
    "original_max_position_embeddings); its lowest value takes the config's.",
    "prompt": "Prompt tokens transformers prefills; the rest of the context is generated. The "
    "peak is the larger of the prefill (its activations beside the prompt's KV cache) and the "
    "last step (the KV cache of the whole context). Whole context: a prefill of all of it.",
    "ubatch_size": "-ub (--ubatch-size): llama.cpp's physical micro-batch; its compute buffer "
    "is sized for one of this many tokens (at most -b). Ollama: num_batch.",
    "batch_size": "-b (--batch-size): llama.cpp's logical batch; micro-batches are at most "
    "this large.",
    "transformers_version": "The transformers release: from 5.0 a MoE block's experts are "
    "stacked parameters, which bitsandbytes (QLoRA, 4- and 8-bit loading) leaves in 16 bits "
    "(fp32 after QLoRA's upcast); before, each expert is a linear layer it quantizes.",
    "lora_targets": "Module names LoRA adapts, comma-separated, or all-linear.",
    "grad_accum": "Gradient accumulation: micro-batches per optimizer step; does not change "
    "peak memory per step.",
    "tp": "Tensor parallel: splits every layer's weights across GPUs.",
    "pp": "Pipeline parallel: splits the layers across GPUs.",
    "cpu_offload": "Keep optimizer states (and with ZeRO-3, weights) in host RAM.",
    "mtp": "Load the multi-token-prediction layers the checkpoint stores, as vLLM does for MTP "
    "speculative decoding; otherwise they stay on disk.",
    "loop": (
        "Trainer: transformers' Trainer.compute_loss keeps only the loss; the logits are freed "
        "before backward.\n"
        "Custom: outputs = model(**batch); loss = outputs.loss; loss.backward(), as in "
        "tutorials and accelerate's examples: outputs keeps the logits (fp32 under mixed "
        "precision) through backward and the optimizer step until the next forward returns; "
        "loss = model(**batch).loss frees them before backward."
    ),
}


class WorkloadPanel(QWidget):
    """Edits a :class:`Workload`; emits ``changed`` with the settings the user touched, and
    ``notice`` with what the panel did by itself (a number typed past a box's maximum)."""

    changed = Signal(dict)
    notice = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = ChoiceCombo(MODES, short=SHORT_LABELS)
        self.batch = SliderSpin(1, 4096)
        self.seq = SliderSpin(1, 131072)
        self.attention = ChoiceCombo(ATTENTIONS)
        self.engine = ChoiceCombo(ENGINES)
        self.gpu_memory_utilization = QDoubleSpinBox()
        self.gpu_memory_utilization.setRange(0.05, 1.0)
        self.gpu_memory_utilization.setSingleStep(0.05)
        self.max_num_seqs = _default_spin(4096)
        self.max_num_batched_tokens = _default_spin(1 << 20, step=1024)
        self.enforce_eager = QCheckBox("No CUDA graphs (--enforce-eager)")
        self.enable_lora = QCheckBox("LoRA adapters (--enable-lora)")
        self.max_loras = QSpinBox()
        self.max_loras.setRange(1, 256)
        self.max_lora_rank = ChoiceCombo(LORA_RANK_CHOICES)
        self.speculative = ChoiceCombo(SPECULATIVE)
        self.draft_model = QLineEdit()
        self.draft_model.setPlaceholderText("e.g. llama-3.2-1b")
        self.num_speculative_tokens = QSpinBox()
        self.num_speculative_tokens.setRange(1, 16)
        self.cpu_offload_gb = QDoubleSpinBox()
        self.cpu_offload_gb.setRange(0.0, 4096.0)
        self.cpu_offload_gb.setSingleStep(1.0)
        self.cpu_offload_gb.setSuffix(" GiB")
        self.vllm_version = ChoiceCombo(VLLM_VERSIONS)
        self.enable_prefix_caching = ChoiceCombo(PREFIX_CACHING)
        self.mem_fraction_static = QDoubleSpinBox()
        self.mem_fraction_static.setRange(_FRACTION_DEFAULT, 1.0)
        self.mem_fraction_static.setDecimals(3)
        self.mem_fraction_static.setSingleStep(0.01)
        self.mem_fraction_static.setSpecialValueText(SGLANG_DEFAULT)
        self.sglang_version = ChoiceCombo(SGLANG_VERSIONS)
        self.method = ChoiceCombo(METHODS)
        self.lora_rank = SliderSpin(1, 1024)
        self.lora_targets = QLineEdit()
        self.optimizer = ChoiceCombo(OPTIMIZERS)
        self.precision = ChoiceCombo(PRECISIONS, short=SHORT_LABELS)
        self.grad_checkpointing = QCheckBox("Gradient checkpointing")
        self.grad_accum = QSpinBox()
        self.grad_accum.setRange(1, 4096)
        self.loop = ChoiceCombo(LOOPS)
        self.gpus = QSpinBox()
        self.gpus.setRange(1, 1024)
        self.tp = QSpinBox()
        self.tp.setRange(1, 1024)
        self.pp = QSpinBox()
        self.pp.setRange(1, 1024)
        self.zero = ChoiceCombo(ZERO_STAGES)
        self.fsdp = QCheckBox("FSDP full shard")
        self.cpu_offload = QCheckBox("Offload optimizer to CPU")
        self.mtp = QCheckBox("Load MTP layers")
        self.prompt = QSpinBox()
        self.prompt.setRange(0, MAX_SEQ)
        self.prompt.setSingleStep(256)
        self.prompt.setSpecialValueText(WHOLE_CONTEXT)
        self.ubatch_size = QSpinBox()
        self.ubatch_size.setRange(1, MAX_SEQ)
        self.ubatch_size.setSingleStep(128)
        self.batch_size = QSpinBox()
        self.batch_size.setRange(1, MAX_SEQ)
        self.batch_size.setSingleStep(512)
        self.transformers_version = ChoiceCombo(TRANSFORMERS_RELEASES)
        self._seq_label = QLabel("Context")
        self.rope_scaling = ChoiceCombo(ROPE_SCALINGS)
        self.rope_factor = QDoubleSpinBox()
        self.rope_factor.setRange(1.0, MAX_ROPE_FACTOR)
        self.rope_factor.setSingleStep(0.5)
        self.rope_factor.setDecimals(2)
        self.rope_factor.setPrefix("× ")
        self.rope_factor.setAccessibleName("RoPE factor")
        self.rope_original_context = QSpinBox()
        # Past what a rotary scaling stretches from (the longest trained contexts are ~1M).
        self.rope_original_context.setRange(0, MAX_ROPE_ORIGINAL)
        self.rope_original_context.setGroupSeparatorShown(True)
        self.rope_original_context.setAccessibleName("Original context")
        self._rope_factor_label = QLabel("RoPE factor")
        self._rope_original_label = QLabel("Original context")
        # Shown once a scaling is picked; hidden, they take no width from the side column.
        for widget in self._rope_widgets():
            widget.setVisible(False)

        common = QFormLayout()
        common.addRow("Mode", self.mode)
        common.addRow("Batch", self.batch)
        common.addRow(self._seq_label, self.seq)
        common.addRow("RoPE scaling", self.rope_scaling)
        common.addRow(self._rope_factor_label, self.rope_factor)
        common.addRow(self._rope_original_label, self.rope_original_context)
        common.addRow("Attention", self.attention)
        common.addRow("transformers", self.transformers_version)
        self._common = common

        self.inference_box = QGroupBox("Inference")
        form = QFormLayout(self.inference_box)
        form.addRow("Engine", self.engine)
        form.addRow("Prompt", self.prompt)
        form.addRow(self.mtp)
        self._inference_form = form

        self.llamacpp_box = QGroupBox("llama.cpp")
        form = QFormLayout(self.llamacpp_box)
        form.addRow("Micro-batch (-ub)", self.ubatch_size)
        form.addRow("Batch (-b)", self.batch_size)

        self.vllm_box = QGroupBox("vLLM")
        form = QFormLayout(self.vllm_box)
        form.addRow("GPU share", self.gpu_memory_utilization)
        form.addRow("Max sequences", self.max_num_seqs)
        form.addRow("Batched tokens", self.max_num_batched_tokens)
        form.addRow(self.enforce_eager)
        form.addRow(self.enable_lora)
        form.addRow("LoRA slots", self.max_loras)
        form.addRow("LoRA max rank", self.max_lora_rank)
        form.addRow("Speculative", self.speculative)
        form.addRow("Draft model", self.draft_model)
        form.addRow("Draft tokens", self.num_speculative_tokens)
        form.addRow("CPU offload", self.cpu_offload_gb)
        form.addRow("Prefix caching", self.enable_prefix_caching)
        form.addRow("Rules of vLLM", self.vllm_version)

        self.sglang_box = QGroupBox("SGLang")
        form = QFormLayout(self.sglang_box)
        form.addRow("Static share", self.mem_fraction_static)
        form.addRow("Rules", self.sglang_version)

        self.training_box = QGroupBox("Training")
        form = QFormLayout(self.training_box)
        form.addRow("Method", self.method)
        form.addRow("LoRA rank", self.lora_rank)
        form.addRow("LoRA targets", self.lora_targets)
        form.addRow("Optimizer", self.optimizer)
        form.addRow("Precision", self.precision)
        form.addRow("Accumulation", self.grad_accum)
        form.addRow("Training loop", self.loop)
        form.addRow(self.grad_checkpointing)

        self.parallel_box = QGroupBox("Parallelism")
        form = QFormLayout(self.parallel_box)
        form.addRow("GPUs", self.gpus)
        form.addRow("Tensor", self.tp)
        form.addRow("Pipeline", self.pp)
        form.addRow("ZeRO", self.zero)
        form.addRow(self.fsdp)
        form.addRow(self.cpu_offload)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(common)
        layout.addWidget(self.inference_box)
        layout.addWidget(self.vllm_box)
        layout.addWidget(self.sglang_box)
        layout.addWidget(self.llamacpp_box)
        layout.addWidget(self.training_box)
        layout.addWidget(self.parallel_box)

        self._hints = {name: hint for name, hint in _HINTS.items()}
        for name, hint in self._hints.items():
            self._widget(name).setToolTip(hint)
        self._connect()

    def set_workload(
        self,
        workload: Workload,
        reasons: dict[str, str],
        max_seq: int,
        rope_original: int = 0,
    ) -> None:
        """Show ``workload``; disable what ``reasons`` names, with the reason as tooltip.

        ``max_seq`` is the longest context with the RoPE scaling in effect, ``rope_original``
        the context a scaling stretches unless set (the config's).
        """
        self.mode.set_value(workload.mode)
        self.seq.set_range(1, max(max_seq, workload.seq))
        set_tooltip(
            self.seq,
            f"{_HINTS['seq']} Up to {max_seq:,} tokens, the model's context with the RoPE "
            "scaling in effect: RoPE scaling, below, runs it longer.",
        )
        self._show_rope(workload, rope_original)
        self.batch.set_range(1, min(MAX_BATCH, max(4096, workload.batch)))
        for widget, value in (
            (self.batch, workload.batch),
            (self.seq, workload.seq),
            (self.lora_rank, workload.lora_rank),
        ):
            widget.set_value(value)
        for combo, choice in (
            (self.attention, workload.attention),
            (self.engine, workload.engine),
            (self.method, workload.method),
            (self.optimizer, workload.optimizer),
            (self.precision, workload.precision),
            (self.loop, workload.loop),
            (self.zero, str(workload.zero)),
            (self.max_lora_rank, str(workload.max_lora_rank)),
            (self.speculative, workload.speculative),
            (self.vllm_version, workload.vllm_version),
            (self.sglang_version, workload.sglang_version),
            (self.transformers_version, workload.transformers_version),
            (
                self.enable_prefix_caching,
                {None: "default", True: "on", False: "off"}[workload.enable_prefix_caching],
            ),
        ):
            combo.set_value(choice)
        for box, checked in (
            (self.grad_checkpointing, workload.grad_checkpointing),
            (self.fsdp, workload.fsdp),
            (self.cpu_offload, workload.cpu_offload),
            (self.enforce_eager, workload.enforce_eager),
            (self.enable_lora, workload.enable_lora),
            (self.mtp, workload.mtp),
        ):
            _quietly(box.setChecked, box, checked)
        for spin, number in (
            (self.gpus, workload.gpus),
            (self.tp, workload.tp),
            (self.pp, workload.pp),
            (self.grad_accum, workload.grad_accum),
            (self.gpu_memory_utilization, workload.gpu_memory_utilization),
            (self.max_num_seqs, workload.max_num_seqs or 0),
            (self.max_num_batched_tokens, workload.max_num_batched_tokens or 0),
            (self.max_loras, workload.max_loras),
            (self.num_speculative_tokens, workload.num_speculative_tokens),
            (self.cpu_offload_gb, workload.cpu_offload_gb),
            (self.mem_fraction_static, workload.mem_fraction_static or _FRACTION_DEFAULT),
            (self.ubatch_size, workload.ubatch_size),
            (self.batch_size, workload.batch_size),
        ):
            # A spin box repaints on every setValue, even of the value it shows.
            if spin.value() != number:
                _quietly(spin.setValue, spin, number)
        targets = ",".join(workload.lora_targets)
        if not self.lora_targets.hasFocus() and self.lora_targets.text() != targets:
            self.lora_targets.setText(targets)
            self.lora_targets.setCursorPosition(0)  # show the first names, not the last
        if not self.draft_model.hasFocus() and self.draft_model.text() != workload.draft_model:
            self.draft_model.setText(workload.draft_model)
        training = workload.mode == "training"
        self._seq_label.setText("Sequence length" if training else "Context")
        self.inference_box.setVisible(not training)
        eng = engines.engine(workload.engine)
        self.vllm_box.setVisible(not training and eng.startup is StartUp.VLLM)
        self.sglang_box.setVisible(not training and eng.startup is StartUp.SGLANG)
        self.llamacpp_box.setVisible(not training and eng.ggml)
        transformers = eng.eager_pytorch
        self._inference_form.setRowVisible(self.prompt, transformers)
        self._common.setRowVisible(self.transformers_version, training or transformers)
        # The prompt is at most the context: a longer one reads as the whole context.
        prompt = workload.prompt if workload.prompt and workload.prompt < workload.seq else 0
        _quietly(self.prompt.setMaximum, self.prompt, workload.seq)
        if self.prompt.value() != prompt:
            _quietly(self.prompt.setValue, self.prompt, prompt)
        self.training_box.setVisible(training)
        for name in (
            "engine",
            "gpu_memory_utilization",
            "attention",
            "lora_rank",
            "lora_targets",
            "zero",
            "fsdp",
            "tp",
            "pp",
            "cpu_offload",
            "grad_checkpointing",
            "optimizer",
            "precision",
            "grad_accum",
            "loop",
            "max_loras",
            "max_lora_rank",
            "draft_model",
            "num_speculative_tokens",
            "mtp",
            "rope_scaling",
        ):
            control = self._widget(name)
            reason = reasons.get(name)
            control.setEnabled(reason is None)
            set_tooltip(control, reason or self._hints.get(name, ""))
        hint = self._hints.get("precision", "")
        for index, (choice, _label) in enumerate(PRECISIONS):
            allow_choice(self.precision, index, reasons.get(f"precision:{choice}"), hint)

    def _show_rope(self, workload: Workload, rope_original: int) -> None:
        """The RoPE scaling row: its factor and original context shown only when one is set."""
        self.rope_scaling.set_value(workload.rope_scaling)
        scaled = workload.rope_scaling != "none"
        for widget in self._rope_widgets():
            widget.setVisible(scaled)
        if self.rope_factor.value() != workload.rope_factor:
            _quietly(self.rope_factor.setValue, self.rope_factor, workload.rope_factor)
        self.rope_original_context.setSpecialValueText(
            f"{rope_original:,} (config)" if rope_original else "Config's"
        )
        original = workload.rope_original_context or 0
        if self.rope_original_context.value() != original:
            _quietly(self.rope_original_context.setValue, self.rope_original_context, original)

    def _rope_widgets(self) -> tuple[QWidget, ...]:
        return (
            self.rope_factor,
            self._rope_factor_label,
            self.rope_original_context,
            self._rope_original_label,
        )

    def _rope_picked(self) -> None:
        """A scaling picked: it starts stretching (a factor above 1); None takes it all off."""
        kind = self.rope_scaling.value()
        if kind == "none":
            self._emit(rope_scaling="none", rope_factor=1.0, rope_original_context=None)
            return
        factor = self.rope_factor.value()
        self._emit(rope_scaling=kind, rope_factor=factor if factor > 1 else ROPE_START_FACTOR)

    def _widget(self, name: str) -> QWidget:
        return getattr(self, name)

    def _connect(self) -> None:
        self.mode.currentIndexChanged.connect(lambda: self._emit(mode=self.mode.value()))
        self.batch.valueChanged.connect(lambda v: self._emit(batch=v))
        self.seq.valueChanged.connect(lambda v: self._emit(seq=v))
        self.lora_rank.valueChanged.connect(lambda v: self._emit(lora_rank=v))
        self.seq.clamped.connect(
            lambda typed, most: self.notice.emit(
                f"{self._seq_label.text()} {typed:,} is longer than this model takes, "
                f"{most:,} tokens: set to {most:,}."
            )
        )
        for label, spin in (("Batch", self.batch), ("LoRA rank", self.lora_rank)):
            spin.clamped.connect(
                lambda typed, most, label=label: self.notice.emit(
                    f"{label} {typed:,} is more than this box takes, {most:,}: set to {most:,}."
                )
            )
        for name in (
            "attention",
            "engine",
            "method",
            "optimizer",
            "precision",
            "loop",
            "speculative",
            "vllm_version",
            "sglang_version",
            "transformers_version",
        ):
            combo: ChoiceCombo = getattr(self, name)
            combo.currentIndexChanged.connect(
                lambda _i, n=name, c=combo: self._emit(**{n: c.value()})
            )
        self.max_lora_rank.currentIndexChanged.connect(
            lambda: self._emit(max_lora_rank=int(self.max_lora_rank.value()))
        )
        self.zero.currentIndexChanged.connect(lambda: self._emit(zero=int(self.zero.value())))
        self.rope_scaling.currentIndexChanged.connect(self._rope_picked)
        self.rope_factor.setKeyboardTracking(False)
        self.rope_factor.valueChanged.connect(lambda value: self._emit(rope_factor=value))
        self.rope_original_context.setKeyboardTracking(False)
        # Its minimum is the config's own original context.
        self.rope_original_context.valueChanged.connect(
            lambda value: self._emit(rope_original_context=value or None)
        )
        self.enable_prefix_caching.currentIndexChanged.connect(
            lambda: self._emit(
                enable_prefix_caching=_PREFIX_VALUES[self.enable_prefix_caching.value()]
            )
        )
        for name in (
            "grad_checkpointing",
            "fsdp",
            "cpu_offload",
            "enforce_eager",
            "enable_lora",
            "mtp",
        ):
            box: QCheckBox = getattr(self, name)
            box.toggled.connect(lambda checked, n=name: self._emit(**{n: checked}))
        for name in (
            "gpus",
            "tp",
            "pp",
            "grad_accum",
            "gpu_memory_utilization",
            "max_loras",
            "num_speculative_tokens",
            "cpu_offload_gb",
            "ubatch_size",
            "batch_size",
        ):
            spin = getattr(self, name)
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(lambda value, n=name: self._emit(**{n: value}))
        self.prompt.setKeyboardTracking(False)
        # 0 is the whole context.
        self.prompt.valueChanged.connect(lambda value: self._emit(prompt=value or None))
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            spin = getattr(self, name)
            spin.setKeyboardTracking(False)
            # 0 is vLLM's own default.
            spin.valueChanged.connect(lambda value, n=name: self._emit(**{n: value or None}))
        self.mem_fraction_static.setKeyboardTracking(False)
        # Its minimum is SGLang's own default for the GPU.
        self.mem_fraction_static.valueChanged.connect(
            lambda value: self._emit(mem_fraction_static=value or None)
        )
        self.lora_targets.editingFinished.connect(self._targets_edited)
        self.draft_model.editingFinished.connect(
            lambda: self._emit(draft_model=self.draft_model.text().strip())
        )

    def _targets_edited(self) -> None:
        targets = tuple(t.strip() for t in self.lora_targets.text().split(",") if t.strip())
        self._emit(lora_targets=targets)

    def _emit(self, **changes: Any) -> None:
        self.changed.emit(changes)


def _default_spin(maximum: int, step: int = 1) -> QSpinBox:
    """A spin box whose 0 reads as vLLM's own default."""
    spin = QSpinBox()
    spin.setRange(0, maximum)
    spin.setSingleStep(step)
    spin.setSpecialValueText(VLLM_DEFAULT)
    return spin


def _quietly(setter: Any, widget: QWidget, value: Any) -> None:
    blocked = widget.blockSignals(True)
    setter(value)
    widget.blockSignals(blocked)
