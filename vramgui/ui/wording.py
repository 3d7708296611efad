"""The window's words for settings: each setting a message of the core names (a
:class:`~vramgui.core.errors.Setting`) said as the window labels its control and names its
choice, so that no message asks a user of the window to type ``--quant nf4``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramgui.core.dtypes import SCHEMES
from vramgui.core.engines import ENGINE_KEYS
from vramgui.core.engines import engine as engine_of
from vramgui.core.errors import Command, Term, VramguiError, words
from vramgui.core.workload import EngineConflict, EngineConflictError, Reset

if TYPE_CHECKING:
    from vramgui.answers.estimate import Refusal

# Each setting, by its field name, as the window labels its control.
SETTING_LABELS = {
    "mode": "Mode",
    "batch": "Batch",
    "seq": "Context",
    # Distinct from the estimate's components ("Weights", "KV cache", "Runtime overhead",
    # "LoRA adapters"): the comparison of profiles lists both in one table.
    "dtype": "Weights dtype",
    "quant": "Quantization",
    "engine": "Engine",
    "kv_dtype": "KV cache dtype",
    "attention": "Attention",
    "method": "Method",
    "precision": "Precision",
    "optimizer": "Optimizer",
    "lora_rank": "LoRA rank",
    "lora_targets": "LoRA targets",
    "grad_accum": "Accumulation",
    "grad_checkpointing": "Gradient checkpointing",
    "loop": "Training loop",
    "gpus": "GPUs",
    "zero": "ZeRO",
    "fsdp": "FSDP",
    "tp": "Tensor parallel",
    "pp": "Pipeline parallel",
    "cpu_offload": "Offload optimizer to CPU",
    "gpu_memory_utilization": "vLLM share",
    "max_num_seqs": "Max sequences",
    "max_num_batched_tokens": "Batched tokens",
    "enforce_eager": "No CUDA graphs",
    "enable_lora": "Serve LoRA adapters",
    "max_loras": "LoRA slots",
    "max_lora_rank": "LoRA max rank",
    "speculative": "Speculative",
    "draft_model": "Draft model",
    "num_speculative_tokens": "Draft tokens",
    "cpu_offload_gb": "Weights in CPU RAM",
    "enable_prefix_caching": "Prefix caching",
    "vllm_version": "Rules of vLLM",
    "mtp": "Load MTP layers",
    "mem_fraction_static": "SGLang static share",
    "sglang_version": "Rules of SGLang",
    "transformers_version": "transformers release",
    "prompt": "Prompt",
    "ubatch_size": "Micro-batch (-ub)",
    "batch_size": "Batch (-b)",
    "overhead_bytes": "Runtime overhead (set)",
    "overhead_gib": "Runtime overhead (set)",
    "rope_scaling": "RoPE scaling",
    "rope_factor": "RoPE factor",
    "rope_original_context": "Original context",
    "gpu": "GPU",
    "model": "Model",
    # The Offloading tab's.
    "ngl": "GPU layers",
    "n_cpu_moe": "Experts in host RAM",
    "cpu_moe": "Experts in host RAM",
    "split_mode": "split by",
    "margin_gib": "Keep free",
    "ram_gib": "Host RAM",
    "main_gpu": "Main GPU",
    "tensor_split": "Tensor split",
    "overrides": "Tensor overrides",
    "kv_offload": "KV cache on the GPU",
    "op_offload": "Op offload",
    "gpu_arch": "GPU generation",
    "fit": "Fit like llama.cpp",
}
ROPE_LABELS = {"none": "None", "yarn": "YaRN", "linear": "Linear", "dynamic": "Dynamic NTK"}
KV_LABELS = {"auto": "Same as weights", "q8_0": "q8_0", "q4_0": "q4_0"}
# Where the window does what a command of the command line does; a command it has no place for
# is named as the command line's.
COMMAND_PLACES = {
    "search": "the search box",
    "gpus": "The GPUs panel",
}


def engine_label(engine: str) -> str:
    """An engine as the Engine box names it (``llamacpp`` -> ``llama.cpp``)."""
    return engine_of(engine).label if engine in ENGINE_KEYS else engine


def quant_label(quant: str) -> str:
    """A quantization as the Quantization box names it (``nf4`` -> ``bitsandbytes NF4``)."""
    scheme = SCHEMES.get(quant) or SCHEMES.get(quant.upper())
    return "None (16/32-bit)" if quant == "none" else scheme.label if scheme else quant


def value_label(setting: str, value: str) -> str:
    """A setting's value as its control shows it."""
    if setting == "engine":
        return engine_label(value)
    if setting == "quant":
        return quant_label(value)
    if setting == "kv_dtype":
        return KV_LABELS.get(value, value)
    if setting == "rope_scaling":
        return ROPE_LABELS.get(value, value)
    return value


def setting_label(name: str) -> str:
    """A setting as the window names it: its control's label (the field's name made readable
    where it has none). One name everywhere: messages, the comparison of profiles."""
    return SETTING_LABELS.get(name, name.replace("_", " "))


def setting_text(setting: str, value: object) -> str:
    """A setting and its value as the window shows them ("Quantization bitsandbytes NF4")."""
    label = SETTING_LABELS.get(setting, setting)
    return f"{label} {value_label(setting, str(value))}"


def say(term: Term, value: str) -> str:
    """A setting (or a command) a message names, as the window says it: its control's label and
    its choice (``Context “40,000”``, ``Quantization “bitsandbytes NF4”``)."""
    if isinstance(term, Command):
        typed = " ".join(("vramgui", term.name, term.args)).strip()
        return COMMAND_PLACES.get(term.name) or f"the command line's `{typed}`"
    label = setting_label(term.name)
    return f"{label} “{value_label(term.name, value)}”" if value else label


def in_window(error: BaseException | str) -> str:
    """An error or a message of the core in the window's words (another error as it says
    itself)."""
    if isinstance(error, EngineConflictError):
        return refusal(error.conflict)
    if isinstance(error, VramguiError):
        return error.words(say)
    return words(error, say) if isinstance(error, str) else str(error)


def _runs_only(conflict: EngineConflict) -> str:
    """Why the engine does not run the conflicting setting."""
    engine = engine_label(conflict.engine)
    eng = engine_of(conflict.engine)
    if conflict.setting == "kv_dtype":
        return f"{engine} has no {value_label('kv_dtype', conflict.value)} KV cache"
    if conflict.family in eng.dequantized_families:
        return f"{engine} dequantizes GGUF weights to 16 bits when it loads them"
    if conflict.family in eng.gguf_of_family:
        return f"{engine} runs {conflict.value} as the GGUF {eng.gguf_of_family[conflict.family]}"
    if eng.ggml:
        return f"{engine} runs GGUF files only"
    return f"{engine} does not run {quant_label(conflict.value)} weights"


def reset_notice(reset: Reset, model: str = "") -> str:
    """What was changed to fit the engine or the training method, and why, as the window says it."""
    conflict = reset.conflict
    if reset.gguf:
        what = (
            f"{model or 'this model'}'s checkpoint"
            if reset.old == "none"
            else quant_label(reset.old)
        )
        return (
            f"llama.cpp runs {what} as its GGUF {reset.new}, {SCHEMES[reset.new].description}. "
            f"Quantization is now {quant_label(reset.new)}."
        )
    if conflict is None:
        why = (
            "QLoRA trains adapters on a 4-bit bitsandbytes base"
            if reset.new != "none"
            else "Full and LoRA fine-tuning train a 16-bit base"
        )
        return (
            f"{why}: Quantization is now {quant_label(reset.new)} (was {quant_label(reset.old)})."
        )
    if reset.setting == "engine":
        if conflict.setting == "stored":
            what = f"{model or 'This model'} is stored as {conflict.value}"
            why = (
                "a GGUF file, which Transformers would dequantize"
                if conflict.family == "gguf"
                else f"which {engine_label(conflict.engine)} does not run"
            )
            return f"{what}, {why}: Engine is now {engine_label(reset.new)}."
        return (
            f"{_runs_only(conflict)}: Engine is now {engine_label(reset.new)} "
            f"for {value_label(conflict.setting, conflict.value)}."
        )
    label = "Quantization" if reset.setting == "quant" else "KV cache"
    text = (
        f"{_runs_only(conflict)}: {label} reset from "
        f"{value_label(reset.setting, reset.old)} to {value_label(reset.setting, reset.new)}."
    )
    if reset.setting == "quant" and engine_of(conflict.engine).ggml:
        text += " Pick a GGUF type such as Q4_K_M for a smaller model."
    return text


def refusal(conflict: EngineConflict, model: str = "") -> str:
    """Why an engine was not taken for this model, and which would serve it."""
    others = " or ".join(engine_label(e) for e in conflict.engines)
    if conflict.setting == "stored":
        return (
            f"{model or 'This model'} is stored as {conflict.value}: {_runs_only(conflict)}. "
            f"Serve it with {others}."
        )
    return f"{_runs_only(conflict)}: pick {others} for {value_label(conflict.setting, conflict.value)}."


def refused_elsewhere(planned: str, refusal: Refusal) -> str:
    """The Offloading tab's word on settings the Estimate tab refuses while its own plan, for
    the planner's engine (``planned``), stands: whose settings they are and why."""
    setup = "training" if refusal.training else engine_label(refusal.engine)
    return (
        f"This plan is for {engine_label(planned)}, the planner's engine. The Estimate tab "
        f"refuses the current settings for {setup}: {as_sentence(in_window(refusal.error))}"
    )


def as_sentence(text: str) -> str:
    """``text`` (a message of the sources, "cannot reach the Hub ...") as a sentence of its own:
    a full stop last, so that another can follow it, and a capital first where the first word
    is a plain word (never a name: "llama.cpp", "tiny.Q8_0", "meta-llama/...")."""
    text = text.strip()
    if not text:
        return ""
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."
