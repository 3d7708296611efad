"""Peak live tensor bytes of a transformers model built from a config.json, without a GPU.

The model is built from its config and run for real through transformers / peft / torch.optim
under torch's FakeTensorMode (no memory is allocated), while `LiveBytes` counts the bytes of every
live storage: the figure `torch.cuda.max_memory_allocated` reports on a GPU, without the CUDA
context, cuBLAS workspaces and the caching allocator's rounding.

Usage:
    python -m vramgui.measure.harness --config config.json --settings '{"mode": "inference"}'

Settings use the option names of `vramgui estimate`; see `Settings`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import inspect
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import peft
import torch
import transformers
from accelerate.utils import convert_to_fp32
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers import (
    CONFIG_MAPPING,
    AutoConfig,
    AutoModelForCausalLM,
    BertForMaskedLM,
    DynamicCache,
)
from transformers.initialization import no_init_weights
from transformers.integrations import moe

from vramgui.measure.autocast import CudaAutocastRules
from vramgui.measure.live_bytes import LiveBytes

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
OPTIMIZERS = ("adamw", "adamw-fused", "sgd", "adafactor", "lion")
LOOPS = ("trainer", "custom")
ENCODER_MODEL_TYPES = frozenset({"bert"})
# Keys of a config.json that point transformers at code outside it.
_CODE_KEYS = frozenset({"auto_map", "custom_pipelines"})
LEARNING_RATE = 1e-5
MAX_GRAD_NORM = 1.0  # transformers' TrainingArguments default
# A transformers model (or peft's wrapper of one) built from a config: the harness reaches its
# class's own attributes (config, generate's helpers), which torch's Module.__getattr__ would type
# as tensors or modules.
Model = Any


class UnsupportedSettingError(ValueError):
    """A setting this harness cannot measure on this machine."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """One workload, named as `vramgui estimate` names its options.

    Attributes:
        mode: "inference" (prefill + one decode step, as `model.generate` runs them) or
            "training" (two optimizer steps; the second one is reported).
        batch: sequences per batch.
        seq: prompt length (inference) or sequence length (training), in tokens.
        dtype: compute dtype; in inference and pure training also the weight dtype.
        attention: "eager" or "sdpa".
        method: "full" or "lora" (training).
        precision: "mixed" (fp32 weights, autocast to `dtype`), "pure" (everything in `dtype`)
            or "fp32" (training).
        optimizer: "adamw" (foreach), "adamw-fused", "sgd" (momentum 0.9, foreach), "adafactor"
            (torch.optim.Adafactor, foreach) or "lion" (not available in torch: unsupported).
        grad_checkpointing: transformers' activation checkpointing (use_reentrant=False).
        lora_rank: LoRA rank r (lora_alpha and lora_dropout stay at peft's defaults, 8 and 0.0).
        lora_targets: comma-separated module names, "all-linear", or "" for peft's default
            targets of the architecture.
        grad_accum: micro-batches per optimizer step.
        loop: "trainer" (transformers' Trainer: outputs dropped once the loss is taken, gradients
            clipped to 1.0) or "custom" (``outputs = model(**batch); loss = outputs.loss;
            loss.backward()``, no clipping).
        fake: run under FakeTensorMode (False: really run on the CPU, for small models only).
    """

    mode: str = "inference"
    batch: int = 1
    seq: int = 512
    dtype: str = "bf16"
    attention: str = "sdpa"
    method: str = "full"
    precision: str = "mixed"
    optimizer: str = "adamw"
    grad_checkpointing: bool = False
    lora_rank: int = 16
    lora_targets: str = ""
    grad_accum: int = 1
    loop: str = "trainer"
    fake: bool = True

    @classmethod
    def from_dict(cls, raw: dict) -> Settings:
        """Settings from CLI-style names (`grad-checkpointing`, `lora-rank`, ...)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {}
        for key, value in raw.items():
            name = key.replace("-", "_")
            if name not in fields:
                raise UnsupportedSettingError(f"unknown setting {key!r}")
            values[name] = value
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raise UnsupportedSettingError for values the harness cannot run."""
        allowed = {
            "mode": ("inference", "training"),
            "dtype": tuple(DTYPES),
            "attention": ("eager", "sdpa"),
            "method": ("full", "lora"),
            "precision": ("mixed", "pure", "fp32"),
            "optimizer": OPTIMIZERS,
            "loop": LOOPS,
        }
        for name, choices in allowed.items():
            if getattr(self, name) not in choices:
                raise UnsupportedSettingError(f"{name} must be one of {choices}")
        if min(self.batch, self.seq, self.lora_rank, self.grad_accum) < 1:
            raise UnsupportedSettingError("batch, seq, lora-rank and grad-accum must be >= 1")
        if self.optimizer == "lion":
            raise UnsupportedSettingError("lion: no Lion optimizer in torch or transformers")

    def to_dict(self) -> dict:
        """CLI-style names, for the records."""
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def weight_dtype(self) -> torch.dtype:
        """The dtype the model's weights are built in."""
        if self.mode == "training" and self.precision in ("mixed", "fp32"):
            return torch.float32
        return DTYPES[self.dtype]


def _named_class(config: dict) -> type[transformers.PreTrainedModel] | None:
    """The model class the config names (``architectures``), where transformers ships it as a
    generating model of the config's own type: a multimodal checkpoint is built whole, vision
    tower included, as the estimate counts it. None otherwise."""
    named = config.get("architectures")
    name = named[0] if isinstance(named, list) and named and isinstance(named[0], str) else ""
    if not name.endswith(("ForCausalLM", "ForConditionalGeneration")):
        return None
    cls = getattr(transformers, name, None)
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        return None
    own_type = getattr(getattr(cls, "config_class", None), "model_type", None)
    known = config.get("model_type") in CONFIG_MAPPING
    return cls if own_type == config.get("model_type") or (own_type and not known) else None


def _config_object(config: dict) -> transformers.PreTrainedConfig:
    """The config as transformers' own config class of its type holds it.

    ``auto_map`` (code in the model's folder or repo) is dropped: a model's own code is never
    imported or offered, only the classes transformers ships are built.

    Raises:
        UnsupportedSettingError: transformers ships no class for this type.
    """
    values = {k: v for k, v in config.items() if k not in _CODE_KEYS}
    model_type = values.pop("model_type", None)
    cls = _named_class(config)
    config_class = cls.config_class if cls is not None else None
    if config_class is not None and model_type not in CONFIG_MAPPING:
        # A type of its own that names a class transformers ships (Kimi K2: DeepseekV3ForCausalLM),
        # read through that class as the estimate reads it.
        return config_class(**values)
    if model_type not in CONFIG_MAPPING:
        where = " (its code is in the model's folder: auto_map)" if "auto_map" in config else ""
        raise UnsupportedSettingError(
            f"transformers {transformers.__version__} has no model type {model_type!r}{where}; "
            "vramgui runs only the models transformers ships, never a model's own code"
        )
    return AutoConfig.for_model(model_type, **values)


def _instantiate(
    cfg: transformers.PreTrainedConfig,
    settings: Settings,
    named: type[transformers.PreTrainedModel] | None = None,
) -> Model:
    kwargs = {"dtype": settings.weight_dtype, "attn_implementation": settings.attention}
    if cfg.model_type in ENCODER_MODEL_TYPES:
        return BertForMaskedLM._from_config(cfg, **kwargs)
    if named is not None:
        return named._from_config(cfg, **kwargs)
    return AutoModelForCausalLM.from_config(cfg, trust_remote_code=False, **kwargs)


def _prepare(model: Model, settings: Settings) -> Model:
    """Checkpointing and LoRA, applied as a user applies them (checkpointing first)."""
    if settings.mode != "training":
        return model
    if settings.grad_checkpointing:
        model.activation_checkpointing_enable()
    if settings.method == "lora":
        targets: str | list[str] | None = None
        if settings.lora_targets == "all-linear":
            targets = "all-linear"
        elif settings.lora_targets:
            targets = settings.lora_targets.split(",")
        task = "CAUSAL_LM" if model.config.model_type not in ENCODER_MODEL_TYPES else None
        lora = peft.LoraConfig(r=settings.lora_rank, target_modules=targets, task_type=task)
        model = peft.get_peft_model(model, lora)
    return model


def _materialize(model: torch.nn.Module) -> None:
    """Give every meta parameter and buffer a fresh tensor of the current (fake) mode.

    Tied parameters stay one tensor.
    """
    fresh: dict[int, torch.nn.Parameter] = {}
    fresh_buffers: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            if id(param) not in fresh:
                data = torch.empty(param.shape, dtype=param.dtype)
                fresh[id(param)] = torch.nn.Parameter(data, requires_grad=param.requires_grad)
            module._parameters[name] = fresh[id(param)]
        for name, buffer in list(module._buffers.items()):
            if buffer is None:
                continue
            if id(buffer) not in fresh_buffers:
                fresh_buffers[id(buffer)] = torch.empty(buffer.shape, dtype=buffer.dtype)
            module._buffers[name] = fresh_buffers[id(buffer)]


def build_model(config: dict, settings: Settings, fake_mode: FakeTensorMode | None = None) -> Model:
    """The model of `config` for `settings`, ready to run.

    With `fake_mode`: built on the meta device without initialization, tied, wrapped (LoRA,
    checkpointing: peft cannot move adapters under FakeTensorMode), then every tensor materialized
    as a fake tensor of `fake_mode`. Without: built the ordinary way on the default device (the
    CPU for checks on small models, a GPU under `torch.device("cuda")`).
    """
    cfg = _config_object(config)
    named = _named_class(config)
    if fake_mode is None:
        return _prepare(_instantiate(cfg, settings, named), settings)
    with torch.device("meta"), no_init_weights():
        model = _instantiate(cfg, settings, named)
    # no_init_weights() skips tying; untied, a tied model would count its embedding twice.
    model.tie_weights()
    model = _prepare(model, settings)
    with fake_mode:
        _materialize(model)
    return model


def _make_optimizer(params: list[torch.nn.Parameter], name: str) -> torch.optim.Optimizer:
    # Explicit foreach / fused: on a CPU torch defaults to the per-tensor loop, on CUDA to foreach.
    if name == "adamw":
        return torch.optim.AdamW(params, lr=LEARNING_RATE, foreach=True)
    if name == "adamw-fused":
        return torch.optim.AdamW(params, lr=LEARNING_RATE, fused=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=0.9, foreach=True)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=LEARNING_RATE, foreach=True)
    raise UnsupportedSettingError(f"optimizer {name!r}")


@contextlib.contextmanager
def _fake_tensor_workarounds() -> Iterator[None]:
    """Make transformers take, under FakeTensorMode, the paths it takes on a real batch.

    Fake tensors have no values, and transformers takes any fake tensor for a tracing graph:
    it would assume packed sequences (another mask path) and never skip the causal mask for
    SDPA, materializing a batch x seq x seq mask that a real all-ones batch never builds. The
    harness only runs unpadded batches, so each check gets the answer of a mask without padding.
    MoE experts: the fake kernel of torch._grouped_mm accepts bf16 only (the CUDA kernel's
    check), so other dtypes take transformers' fallback op, whose output is the same tensor.
    """
    masking = transformers.masking_utils
    patched = [
        (masking, "find_packed_sequence_indices"),
        (masking, "_ignore_causal_mask_sdpa"),
        (masking, "_ignore_bidirectional_mask_sdpa"),
        (moe, "_can_use_grouped_mm"),
    ]
    originals = [(module, name, getattr(module, name)) for module, name in patched]
    ignore_causal = masking._ignore_causal_mask_sdpa
    ignore_bidirectional = masking._ignore_bidirectional_mask_sdpa
    can_use_grouped_mm = moe._can_use_grouped_mm
    masking.find_packed_sequence_indices = lambda position_ids: None
    masking._ignore_causal_mask_sdpa = lambda padding_mask, *args, **kwargs: ignore_causal(
        None, *args, **kwargs
    )
    masking._ignore_bidirectional_mask_sdpa = lambda padding_mask, *args, **kwargs: (
        ignore_bidirectional(None, *args, **kwargs)
    )
    moe._can_use_grouped_mm = lambda input, weight, offs: (
        weight.dtype == torch.bfloat16 and can_use_grouped_mm(input, weight, offs)
    )
    try:
        yield
    finally:
        for module, name, function in originals:
            setattr(module, name, function)


def _register_model(counter: LiveBytes, model: torch.nn.Module) -> None:
    counter.classify(model.parameters(), "parameters")
    counter.classify(model.buffers(), "parameters")
    counter.classify((p.grad for p in model.parameters()), "gradients")


def _tag_cache_updates(cache: DynamicCache, counter: LiveBytes) -> None:
    """Count what the cache holds as kv_cache as soon as each layer stores it."""
    update = cache.update

    def counted_update(
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        result = update(key_states, value_states, layer_idx, *args, **kwargs)
        layer = cache.layers[layer_idx]
        counter.classify((getattr(layer, "keys", None), getattr(layer, "values", None)), "kv_cache")
        return result

    cache.update = counted_update  # type: ignore[method-assign] # wrapped in place


def _cache_bytes(cache: DynamicCache) -> int:
    storages = {}
    for layer in cache.layers:
        for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                storages[storage._cdata] = storage.nbytes()
    return sum(storages.values())


def _run_generate_steps(model: Model, settings: Settings, counter: LiveBytes) -> int:
    """Prefill and one decode step, with the inputs `model.generate` builds (greedy, no padding).

    Mirrors transformers' generate: position ids from the attention mask's cumsum (batch x seq),
    the all-ones mask then dropped, a DynamicCache of the text config, logits of the last position
    only, an fp32 copy of those logits, argmax, and the same input preparation for the decode step.
    Returns the KV cache bytes held after the prefill.
    """
    batch, seq = settings.batch, settings.seq
    prompt_ids = torch.zeros((batch, seq), dtype=torch.long)
    input_ids = prompt_ids
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    _tag_cache_updates(cache, counter)
    # The caller keeps its tokenizer output (prompt_ids and the mask) for the whole of generate.
    attention_mask = torch.ones((batch, seq), dtype=torch.long)
    # generate's per-sequence "not finished" flags
    unfinished_sequences = torch.ones(batch, dtype=torch.long)
    model_kwargs: dict = {
        "attention_mask": attention_mask,
        "cache": cache,
        "use_cache": True,
    }
    if "position_ids" in inspect.signature(model.forward).parameters:
        model_kwargs["position_ids"] = model._prepare_position_ids_for_generation(
            input_ids, model_kwargs
        )
    # generate drops a mask without padding once the position ids are built
    model_kwargs["attention_mask"] = None
    if model._supports_logits_to_keep():
        model_kwargs["logits_to_keep"] = 1
    kv_cache_bytes = 0
    for phase in ("prefill", "decode"):
        counter.phase = phase
        inputs = model.prepare_inputs_for_generation(
            input_ids,
            next_sequence_length=seq if phase == "prefill" else 1,
            is_first_iteration=phase == "prefill",
            **model_kwargs,
        )
        outputs = model(**inputs, return_dict=True)
        del inputs
        if phase == "prefill":
            kv_cache_bytes = _cache_bytes(cache)
        model_kwargs = model._update_model_kwargs_for_generation(
            outputs, model_kwargs, is_encoder_decoder=False
        )
        next_token_logits = outputs.logits[:, -1].to(copy=True, dtype=torch.float32)
        next_tokens = torch.argmax(next_token_logits, dim=-1)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        del outputs, next_token_logits, next_tokens
    del prompt_ids, attention_mask, unfinished_sequences
    return kv_cache_bytes


def _run_encoder_forward(model: Model, settings: Settings, counter: LiveBytes) -> None:
    counter.phase = "forward"
    input_ids = torch.zeros((settings.batch, settings.seq), dtype=torch.long)
    attention_mask = torch.ones((settings.batch, settings.seq), dtype=torch.long)
    model(input_ids=input_ids, attention_mask=attention_mask)


def _mixed(settings: Settings) -> bool:
    return settings.precision == "mixed" and settings.dtype != "fp32"


def _autocast(settings: Settings) -> contextlib.AbstractContextManager:
    """Mixed precision as on CUDA: CPU autocast plus the float32 rules only CUDA autocast has.

    On a CUDA default device (a run on the GPU), CUDA autocast itself.
    """
    stack = contextlib.ExitStack()
    if _mixed(settings):
        device_type = torch.get_default_device().type
        stack.enter_context(torch.autocast(device_type=device_type, dtype=DTYPES[settings.dtype]))
        if device_type == "cpu":
            stack.enter_context(CudaAutocastRules())
    return stack


def _forward(model: Model, settings: Settings, inputs: dict) -> Any:
    """The forward as accelerate's prepare_model wraps it (transformers' Trainer included).

    Under mixed precision: autocast, then the 16-bit outputs converted to fp32
    (``convert_outputs_to_fp32``); the 16-bit logits are freed once converted.
    """
    with _autocast(settings):
        outputs = model(**inputs)
    return convert_to_fp32(outputs) if _mixed(settings) else outputs


def _grad_scaler(settings: Settings) -> torch.amp.GradScaler | None:
    """accelerate's GradScaler for fp16 mixed precision (Trainer and accelerate loops alike)."""
    if settings.precision == "mixed" and settings.dtype == "fp16":
        return torch.amp.GradScaler(torch.get_default_device().type)
    return None


def _run_training(model: Model, settings: Settings, counter: LiveBytes) -> list[dict]:
    """Two optimizer steps as the settings' loop runs them; the peak of each.

    trainer: transformers' Trainer: ``compute_loss`` returns the loss alone (the outputs are
    dropped), backward (through the GradScaler in fp16 mixed precision), gradients unscaled and
    clipped to ``max_grad_norm`` 1.0, step, zero_grad. custom: the loop as tutorials and
    accelerate's examples write it; ``outputs`` lives until the next forward has returned. The
    GradScaler's step is its ``unscale_`` plus the optimizer's step: what it adds beyond them
    is only the choice of skipping a step whose gradients overflowed.
    """
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = _make_optimizer(trainable, settings.optimizer)
    scaler = _grad_scaler(settings)

    def states_to_category(*_args: object) -> None:
        counter.classify(
            (v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)),
            "optimizer_states",
        )

    optimizer.register_step_post_hook(states_to_category)
    for param in trainable:
        param.register_post_accumulate_grad_hook(lambda p: counter.classify((p.grad,), "gradients"))
    encoder = model.config.model_type in ENCODER_MODEL_TYPES
    input_ids = torch.zeros((settings.batch, settings.seq), dtype=torch.long)
    # Encoders get their attention mask; decoders get use_cache=False as fine-tuning scripts set
    # it (otherwise the forward also builds a KV cache, a copy of every layer's keys and values).
    extra = {"attention_mask": torch.ones_like(input_ids)} if encoder else {"use_cache": False}
    batch = {"input_ids": input_ids, "labels": input_ids, **extra}
    steps = []
    outputs = None
    for _ in range(2):
        counter.reset_peak()
        for _ in range(settings.grad_accum):
            counter.phase = "forward"
            if settings.loop == "custom":
                outputs = _forward(model, settings, batch)
                loss = outputs.loss
            else:
                loss = _forward(model, settings, batch).loss
            if settings.grad_accum > 1:
                loss = loss / settings.grad_accum
            counter.phase = "backward"
            (loss if scaler is None else scaler.scale(loss)).backward()
            if settings.loop == "trainer":
                del loss
        counter.phase = "optimizer step"
        if scaler is not None:
            scaler.unscale_(optimizer)
        if settings.loop == "trainer":
            torch.nn.utils.clip_grad_norm_(trainable, MAX_GRAD_NORM)
        counter.item_stand_in = 1.0 if settings.fake else None
        optimizer.step()
        counter.item_stand_in = None
        if scaler is not None:
            scaler.update()
        counter.phase = "zero_grad"
        optimizer.zero_grad(set_to_none=True)
        steps.append(_peak_record(counter))
    del outputs
    return steps


def _peak_record(counter: LiveBytes) -> dict:
    return {
        "peak_bytes": counter.peak_bytes,
        "phase": counter.peak_phase,
        "breakdown_at_peak": dict(counter.peak_breakdown),
        "phase_peaks": dict(counter.phase_peaks),
    }


def _autocast_notes(settings: Settings) -> str | None:
    if settings.mode != "training" or settings.precision != "mixed" or settings.dtype == "fp32":
        return None
    return (
        "mixed precision: torch.autocast('cpu') plus CUDA autocast's float32 rules "
        "(vramgui/measure/autocast.py); fp32 weights cast to 16-bit once per forward and "
        "cached by autocast (weight_copies)"
    )


def harness_digest() -> str:
    """A short hash of the harness's measuring code, to tell records of older code apart."""
    digest = hashlib.sha256()
    for name in ("harness.py", "live_bytes.py", "autocast.py"):
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:12]


def measure(config: dict, settings: dict, counter: LiveBytes | None = None) -> dict:
    """Measure the peak live tensor bytes of `config`'s model under `settings`.

    Args:
        config: a config.json dict (with `model_type`).
        settings: option names of `vramgui estimate` (see `Settings`).
        counter: the counter to use, for callers that follow the phases as they run (progress,
            the allocator's figures on a GPU); a new `LiveBytes` by default.

    Returns:
        peak_bytes, phase (of the peak), breakdown_at_peak (bytes per category, summing to
        peak_bytes), phase_peaks, weights_bytes (parameters + buffers), trainable_parameters,
        parameters, and per mode: kv_cache_bytes (inference, held after the prefill) or
        first_step (training: the first step's peak record), plus seconds and versions.
    """
    parsed = Settings.from_dict(settings)
    started = time.perf_counter()
    fake_mode = FakeTensorMode() if parsed.fake else None
    counter = LiveBytes() if counter is None else counter
    result: dict = {}
    model = build_model(config, parsed, fake_mode)
    patches = _fake_tensor_workarounds() if fake_mode else contextlib.nullcontext()
    with patches, fake_mode or contextlib.nullcontext():
        _register_model(counter, model)
        weights_bytes = counter.current_bytes
        params = list(model.parameters())
        result["parameters"] = sum(p.numel() for p in params)
        result["trainable_parameters"] = sum(p.numel() for p in params if p.requires_grad)
        with counter:
            if parsed.mode == "training":
                first, second = _run_training(model, parsed, counter)
                result.update(second)
                result["first_step"] = first
            else:
                model.eval()
                counter.reset_peak()
                with torch.no_grad():
                    if model.config.model_type in ENCODER_MODEL_TYPES:
                        _run_encoder_forward(model, parsed, counter)
                        result["kv_cache_bytes"] = 0
                    else:
                        result["kv_cache_bytes"] = _run_generate_steps(model, parsed, counter)
                result.update(_peak_record(counter))
    result["weights_bytes"] = weights_bytes
    result["settings"] = parsed.to_dict()
    notes = _autocast_notes(parsed)
    if notes:
        result["notes"] = notes
    result["seconds"] = round(time.perf_counter() - started, 2)
    result["harness_digest"] = harness_digest()
    result["versions"] = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    """CLI: print `measure`'s result as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path, help="config.json path")
    parser.add_argument("--settings", default="{}", help="JSON object of estimate options")
    args = parser.parse_args(argv)
    try:
        result = measure(json.loads(args.config.read_text()), json.loads(args.settings))
    except UnsupportedSettingError as error:
        print(f"unsupported: {error}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
