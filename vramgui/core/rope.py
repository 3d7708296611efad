"""RoPE scaling: how far past its trained context a model runs, and what the engines take.

A config may carry its own scaling (``rope_scaling``, or transformers 5's ``rope_parameters``);
the user may set one (``--rope-scaling yarn --rope-factor 4``), as llama.cpp
(``--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx N``), vLLM (``--hf-overrides``), SGLang
(``--json-model-override-args``) and transformers (``from_pretrained(rope_parameters=...)``) take
it.
The longest context is vLLM's ``_get_and_verify_max_len`` (vllm/config): YaRN scales the
original context by the factor, the other kinds the config's ``max_position_embeddings``;
llama3 and longrope scalings, and Gemma 3's, are already counted in that figure.
"""

from __future__ import annotations

import math
from typing import Any

from vramgui.core.engines import engine
from vramgui.core.errors import ConfigError, Message, Setting, WorkloadError, shown
from vramgui.core.model import ArchFacts, RopeScaling
from vramgui.core.prefill import LEARNED_POSITIONS
from vramgui.core.workload import Workload

# Architectures without rotary position embeddings (learned positions or ALiBi).
NO_ROTARY = LEARNED_POSITIONS | {"bloom", "mpt"}
# Scalings whose max_position_embeddings is already the scaled length (vLLM leaves it as it is).
_ALREADY_SCALED = frozenset({"su", "longrope", "llama3"})
# The kinds of ``rope_type`` vLLM renames when it loads a config (patch_rope_scaling).
_RENAMED = {"su": "longrope"}
# The kinds llama.cpp's --rope-scaling takes besides none.
LLAMACPP_SCALINGS = ("linear", "yarn")


def config_scaling(config: dict[str, Any]) -> RopeScaling | None:
    """The RoPE scaling a config.json carries (``rope_scaling``, ``rope_parameters``, or its
    ``text_config``'s), or None where it has none (or the "default" kind).

    Raises:
        ConfigError: a scaling whose factor or original context is not a number.
    """
    for scope in (config, config.get("text_config")):
        if not isinstance(scope, dict):
            continue
        for key in ("rope_scaling", "rope_parameters"):
            found = scope.get(key)
            if isinstance(found, dict):
                return _scaling(found, key)
    return None


def config_theta(config: dict[str, Any]) -> float | None:
    """The rotary base a config.json states (``rope_theta``, at its top, in ``rope_parameters``
    or in its ``text_config``), or None."""
    for scope in (config, config.get("text_config")):
        if not isinstance(scope, dict):
            continue
        parameters = scope.get("rope_parameters")
        for where in (scope, parameters if isinstance(parameters, dict) else {}):
            theta = where.get("rope_theta")
            if isinstance(theta, int | float) and not isinstance(theta, bool) and theta > 0:
                return float(theta)
    return None


def _scaling(found: dict[str, Any], key: str) -> RopeScaling | None:
    kind = found.get("rope_type", found.get("type"))
    if not isinstance(kind, str) or kind == "default":
        return None
    factor = found.get("factor", 1.0)
    original = found.get("original_max_position_embeddings")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor > 0:
        raise ConfigError(f"'{key}.factor' must be a positive number, not {shown(factor)}")
    if original is not None and (
        isinstance(original, bool) or not isinstance(original, int) or original < 1
    ):
        raise ConfigError(
            f"'{key}.original_max_position_embeddings' must be a positive integer, "
            f"not {shown(original)}"
        )
    return RopeScaling(_RENAMED.get(kind, kind), float(factor), original)


def default_original(facts: ArchFacts) -> int:
    """The context a user's scaling stretches unless told: the config's (its own scaling's
    original context, else its ``max_position_embeddings``)."""
    own = facts.rope_scaling
    return (own.original_context if own else None) or facts.max_position_embeddings


def scaling(facts: ArchFacts, workload: Workload) -> RopeScaling | None:
    """The scaling in effect: the user's (``--rope-scaling``) over the config's own."""
    if workload.rope_scaling == "none":
        return facts.rope_scaling
    return RopeScaling(
        workload.rope_scaling,
        workload.rope_factor,
        workload.rope_original_context or default_original(facts),
    )


def context_limit(facts: ArchFacts, workload: Workload) -> int:
    """The longest context the model runs at with the scaling in effect: vLLM's derived
    ``max_model_len`` (the config's ``max_position_embeddings`` when none)."""
    longest = facts.max_position_embeddings
    s = scaling(facts, workload)
    if (
        s is None
        or s.kind in _ALREADY_SCALED
        or facts.model_type.startswith("gemma3")
        or facts.model_type in NO_ROTARY
    ):
        return longest
    base = (s.original_context or longest) if s.kind == "yarn" else longest
    return int(base * s.factor)


class ContextTooLong(WorkloadError):
    """A context past what the model runs at, with the YaRN factor that would lift the limit.

    Attributes:
        model: the model's name.
        seq: the context asked for.
        limit: the longest the model runs at now.
        factor: the smallest whole ``--rope-factor`` with which ``--rope-scaling yarn`` (from
            the default original context) reaches ``seq``; 0 for a model without rotary
            embeddings.
    """

    def __init__(self, model: str, seq: int, limit: int, factor: int) -> None:
        self.model, self.seq, self.limit, self.factor = model, seq, limit, factor
        head = "{seq:,} is longer than {model}'s context of {limit:,} tokens"
        if factor:
            head += (
                ": set {yarn} with {factor} (or linear / dynamic) to run it longer, as "
                "llama.cpp, vLLM, SGLang and transformers do"
            )
        super().__init__(
            Message(
                head,
                seq=Setting("seq", seq),
                model=model,
                limit=limit,
                yarn=Setting("rope_scaling", "yarn"),
                factor=Setting("rope_factor", factor),
            )
        )


def check_context(name: str, facts: ArchFacts, workload: Workload) -> None:
    """Refuse a context past the model's, or RoPE scaling of a model without rotary embeddings.

    Raises:
        ContextTooLong: ``workload.seq`` is past ``context_limit``.
        WorkloadError: RoPE scaling set for a model with learned or ALiBi positions.
    """
    rotary = facts.model_type not in NO_ROTARY
    if workload.rope_scaling != "none" and not rotary:
        raise WorkloadError(
            Message(
                "{name} has no rotary position embeddings ({kind}): {setting} does not apply",
                name=name,
                kind=facts.model_type,
                setting=Setting("rope_scaling"),
            )
        )
    limit = context_limit(facts, workload)
    if not limit or workload.seq <= limit:
        return
    base = default_original(facts)
    factor = max(2, math.ceil(workload.seq / base)) if rotary and base else 0
    raise ContextTooLong(name, workload.seq, limit, factor)


def user_scaling(facts: ArchFacts, workload: Workload) -> RopeScaling | None:
    """The scaling the user set (None: the config's own applies, and the engines read it)."""
    return scaling(facts, workload) if workload.rope_scaling != "none" else None


def config_override(s: RopeScaling, theta: float | None = None) -> dict[str, Any]:
    """A scaling as a config states it, for the config overrides of vLLM's ``--hf-overrides``,
    SGLang's ``--json-model-override-args`` and transformers' ``from_pretrained``.

    ``theta``: for transformers 5's ``rope_parameters``, which replace the whole dict and so
    must repeat the rotary base (vLLM's context-extension example does); None for transformers
    4's ``rope_scaling``.
    """
    out: dict[str, Any] = {"rope_type": s.kind, "factor": s.factor}
    if s.kind == "yarn" and s.original_context:
        out["original_max_position_embeddings"] = s.original_context
    if theta is not None:
        out["rope_theta"] = int(theta) if theta.is_integer() else theta
    return out


def llamacpp_args(s: RopeScaling) -> list[str]:
    """llama.cpp's flags for a scaling (common/arg.cpp: ``--rope-scaling {none,linear,yarn}``,
    ``--rope-scale N``, ``--yarn-orig-ctx N``); none for a kind it does not have."""
    if s.kind not in LLAMACPP_SCALINGS:
        return []
    args = ["--rope-scaling", s.kind, "--rope-scale", f"{s.factor:g}"]
    if s.kind == "yarn" and s.original_context:
        args += ["--yarn-orig-ctx", str(s.original_context)]
    return args


def notes(facts: ArchFacts, workload: Workload) -> tuple[str, ...]:
    """What the estimate should say about the RoPE scaling the user set."""
    s = user_scaling(facts, workload)
    if s is None:
        return ()
    trained = facts.max_position_embeddings
    limit = context_limit(facts, workload)
    of = f" of {s.original_context:,} tokens" if s.kind == "yarn" and s.original_context else ""
    out = [
        f"RoPE scaling {s.kind} x{s.factor:g}{of}: contexts up to {limit:,} tokens (vLLM's "
        f"derived max_model_len; the config's context is {trained:,}). The KV cache and "
        "activations grow with the context as they do without it; how well the model reads "
        "past its trained context is the model's own."
    ]
    if workload.mode == "inference" and engine(workload.engine).ggml:
        if s.kind not in LLAMACPP_SCALINGS:
            out.append(
                f"llama.cpp has no {s.kind} RoPE scaling (its --rope-scaling takes none, linear "
                "or yarn): pick yarn or linear to run it there."
            )
        if workload.seq > trained:
            out.append(
                "llama-server (recent versions) caps each slot at the GGUF's context_length "
                f"({trained:,}, its n_ctx_train) whatever the RoPE scaling, though it allocates "
                "the KV cache for all of -c: --override-kv "
                f"<arch>.context_length=int:{workload.seq} lets requests use it "
                "(tools/server/server-context.cpp)."
            )
    return tuple(out)
