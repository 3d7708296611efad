"""The multimodal towers in vLLM's profile run: before the text forward, vLLM encodes dummy
items of the largest size with the model's vision encoder and keeps their outputs until the
profile ends (``gpu_model_runner.profile_run``). Modelled: the Qwen3-VL family's tower, Gemma 3's
SigLIP and Mistral 3's Pixtral; the other towers a checkpoint carries are named as left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vramgui.core import dtypes
from vramgui.core.model import ModelSpec, Role
from vramgui.core.units import GiB
from vramgui.core.vllm.profile import Scheduler
from vramgui.core.vllm.rules import Rules
from vramgui.core.workload import Workload

# The models whose vision tower is vLLM's Qwen3_VisionTransformer and whose processor sizes go by
# Qwen3VLProcessingInfo (model_executor/models/qwen3_vl.py, qwen3_vl_moe.py, qwen3_5.py).
QWEN3_VL_MODEL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"})
# The pixel limits (``size.longest_edge``) in the preprocessor_config.json and
# video_preprocessor_config.json Qwen publishes with its Qwen3-VL, Qwen3.5 and Qwen3.6
# checkpoints: 4096 x 4096 pixels per image, 2 x 3072 x 4096 per pair of video frames. The
# inventory does not carry the checkpoint's own files: a checkpoint that lowers them profiles
# smaller images.
QWEN3_VL_IMAGE_MAX_PIXELS = 16_777_216
QWEN3_VL_IMAGE_MIN_PIXELS = 65_536
QWEN3_VL_VIDEO_MAX_PIXELS = 25_165_824
QWEN3_VL_VIDEO_MIN_PIXELS = 4_096
# Items of one modality a prompt may hold when --limit-mm-per-prompt leaves it out
# (config/multimodal.py).
MM_LIMIT_PER_PROMPT = 999
# vLLM 0.11.0's Qwen3-VL (qwen3_vl.py, qwen3_vl_moe.py): the models it serves, the prompt tokens
# one video token stands for with its timestamp and markers (get_max_video_tokens), and the
# most frames of its dummy video (_MAX_FRAMES_PER_VIDEO).
QWEN3_VL_011_MODEL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe"})
QWEN3_VL_VIDEO_TOKEN_FACTOR = 12.5
QWEN3_VL_MAX_VIDEO_FRAMES = 24_576
# Aspect ratios the processor refuses past (smart_resize); vLLM's largest image stays under it.
MAX_ASPECT_RATIO = 200


def _numbered(shapes: Mapping[str, object], prefix: str) -> int:
    """How many numbered modules ``<prefix><i>.`` a tower's tensor names hold (its blocks)."""
    return len({n[len(prefix) :].split(".", 1)[0] for n in shapes if n.startswith(prefix)})


@dataclass(frozen=True, slots=True)
class VisionTower:
    """The shapes of a Qwen3-VL-style vision tower, read from its weights.

    Attributes:
        depth: transformer blocks.
        hidden: the tower's width.
        intermediate: its MLP's width.
        patch: pixels per patch side.
        temporal_patch: frames per patch.
        channels: colour channels.
        merge: patches per merged token side (spatial_merge_size).
        out_hidden: the merged tokens' width (the language model's hidden size).
        deepstack: mergers whose outputs go to the language model beside the last one's.
    """

    depth: int
    hidden: int
    intermediate: int
    patch: int
    temporal_patch: int
    channels: int
    merge: int
    out_hidden: int
    deepstack: int

    @classmethod
    def of(cls, spec: ModelSpec) -> VisionTower | None:
        """The tower of a Qwen3-VL-family checkpoint from its inventory (None: not one, or its
        tower is not in the inventory)."""
        if spec.facts.model_type not in QWEN3_VL_MODEL_TYPES:
            return None
        # Read once per spec: a sweep estimates hundreds of points.
        return spec.cached("vision_tower", lambda: cls._read(spec))

    @classmethod
    def _read(cls, spec: ModelSpec) -> VisionTower | None:
        shapes = {
            t.name.split("visual.", 1)[1]: t.shape
            for t in spec.tensors
            if t.role is Role.ENCODER and "visual." in t.name
        }
        needed = (
            "patch_embed.proj.weight",
            "blocks.0.mlp.linear_fc1.weight",
            "merger.linear_fc1.weight",
            "merger.linear_fc2.weight",
        )
        if not all(name in shapes for name in needed):
            return None
        hidden, channels, temporal, patch, _ = shapes["patch_embed.proj.weight"]
        merged = shapes["merger.linear_fc1.weight"][1]
        return cls(
            depth=_numbered(shapes, "blocks."),
            hidden=hidden,
            intermediate=shapes["blocks.0.mlp.linear_fc1.weight"][0],
            patch=patch,
            temporal_patch=temporal,
            channels=channels,
            merge=math.isqrt(merged // hidden),
            out_hidden=shapes["merger.linear_fc2.weight"][0],
            deepstack=_numbered(shapes, "deepstack_merger_list."),
        )


def smart_resize(
    height: int, width: int, factor: int, limits: tuple[int, int], frames: int = 1
) -> tuple[int, int]:
    """The size the Qwen2-VL image processor (``frames`` 1) or the Qwen3-VL video processor
    (``frames`` read as ``temporal_factor`` frames at a time) resizes to: both sides multiples
    of ``factor``, the pixels (of a frame group) within ``limits`` (min_pixels, max_pixels)."""
    min_pixels, max_pixels = limits
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if frames * h_bar * w_bar > max_pixels:
        beta = math.sqrt(frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif frames * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def largest_image(tower: VisionTower, max_pixels: int) -> tuple[int, int]:
    """vLLM's image of the most tokens under ``max_pixels`` (height, width):
    ``get_image_size_with_most_features`` factors the most merged tokens into the squarest
    grid, and takes fewer tokens where the only grids are past the aspect-ratio limit."""
    unit = tower.patch * tower.merge
    most = max_pixels // (unit * unit)
    rows, columns = 1, most
    for tokens in range(most, 0, -1):
        rows = next(d for d in range(math.isqrt(tokens), 0, -1) if tokens % d == 0)
        columns = tokens // rows
        if columns / rows <= MAX_ASPECT_RATIO:
            break
    return unit * rows, unit * columns


def image_patches(tower: VisionTower, video: bool = False) -> int:
    """Patches of vLLM's largest image, or of its largest pair of video frames (the frames
    ``get_max_video_tokens`` counts), under the pixel limits of Qwen's published processor
    configs (``Qwen3VLProcessingInfo._get_vision_info``)."""
    unit = tower.patch * tower.merge
    frames = tower.temporal_patch if video else 1
    padded = -(-frames // tower.temporal_patch) * tower.temporal_patch
    if video:
        # The video limit counts a group of temporal_patch_size frames: the largest frame is
        # sized under its share, then the group is resized as one.
        height, width = largest_image(tower, QWEN3_VL_VIDEO_MAX_PIXELS // tower.temporal_patch)
        height, width = smart_resize(
            height, width, unit, (QWEN3_VL_VIDEO_MIN_PIXELS, QWEN3_VL_VIDEO_MAX_PIXELS), padded
        )
    else:
        height, width = largest_image(tower, QWEN3_VL_IMAGE_MAX_PIXELS)
        height, width = smart_resize(
            height, width, unit, (QWEN3_VL_IMAGE_MIN_PIXELS, QWEN3_VL_IMAGE_MAX_PIXELS)
        )
    grid_t = max(padded // tower.temporal_patch, 1)
    return grid_t * (height // tower.patch) * (width // tower.patch)


@dataclass(frozen=True, slots=True)
class EncoderProfile:
    """What vLLM's profile run spends on the vision encoder (``gpu_model_runner.profile_run``).

    Attributes:
        items: dummy images encoded at once.
        tokens_per_item: merged tokens of one image (what the language model reads).
        patches: patches through the tower, all items together.
        peak_bytes: the tower's peak on one rank, its inputs included.
        kept_bytes: what stays allocated through the text forward and the sampler warm-up: the
            dummy pixel values (a local of ``profile_run``) and the encoder's outputs (the
            encoder cache).
        note: how the figure was found, and what it assumed.
    """

    items: int
    tokens_per_item: int
    patches: int
    peak_bytes: int
    kept_bytes: int
    note: str


def encoder_items(tokens: int, workload: Workload, scheduler: Scheduler) -> int:
    """Dummy items of ``tokens`` tokens each that vLLM's profile encodes at once
    (``MultiModalBudget._get_max_items``, chunked prefill on): as many as the encoder budget
    (``max(max_num_batched_tokens, tokens)``) holds, at least one, at most ``max_num_seqs`` x
    the items one prompt of max_model_len may hold (``--limit-mm-per-prompt``: vLLM's default)."""
    budget = max(scheduler.max_num_batched_tokens, tokens)
    per_prompt = max(1, min(MM_LIMIT_PER_PROMPT, workload.seq // tokens))
    return max(1, min(budget // tokens, scheduler.max_num_seqs * per_prompt))


def encoder_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler, rules: Rules
) -> EncoderProfile | None:
    """vLLM's profile of the vision encoder, before the text forward (None: none modelled).

    ``profile_run`` (read in 0.24.0) picks the modality with the most tokens per item, encodes
    as many dummy items of the largest size as the encoder budget holds (:func:`encoder_items`)
    and keeps their outputs in the encoder cache, with the dummy inputs, until the text forward
    and the sampler warm-up are done. The tower runs eagerly (``compile_mm_encoder`` off), so
    its peak is the sum of the tensors alive at its busiest moment. Modelled: the Qwen3-VL
    family's tower (:func:`qwen3_vl_profile`), Gemma 3's SigLIP (:func:`gemma3_profile`) and
    Mistral 3's Pixtral (:func:`pixtral_profile`); under rules that follow 0.11.0, Qwen3-VL's
    video profile (:func:`qwen3_vl_video_profile`) alone.
    """
    if rules.qwen3_vl_video_profile and spec.facts.model_type in QWEN3_VL_011_MODEL_TYPES:
        return qwen3_vl_video_profile(spec, workload, scheduler)
    if not rules.encoder_profile:
        return None
    if spec.facts.model_type in QWEN3_VL_MODEL_TYPES:
        return qwen3_vl_profile(spec, workload, scheduler)
    if spec.architecture == "Gemma3ForConditionalGeneration":
        return gemma3_profile(spec, workload, scheduler)
    if spec.architecture == "Mistral3ForConditionalGeneration":
        return pixtral_profile(spec, workload, scheduler)
    return None


def qwen3_vl_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """The profile of a Qwen3-VL-family tower (``Qwen3_VisionTransformer``; None: the tower is
    not in the inventory, or vLLM would profile a video).

    The peak is one block beside its inputs: in the attention, the residual stream, the
    normed input (held by the call), the fused qkv output, the contiguous copy of q and k and
    its rotated output, the attention output and the projection's; in the MLP, the residual,
    the normed input, the first projection and its activation. Beside them the pixel values
    (cast to the model's dtype by the processor) and the interpolated position embeddings stay
    alive; the rotary cos / sin tables (under 1 % of it) are left out.
    """
    tower = VisionTower.of(spec)
    if tower is None:
        return None
    merge2 = tower.merge * tower.merge
    image = image_patches(tower)
    video = image_patches(tower, video=True)
    tokens = image // merge2
    if video // merge2 > tokens:  # vLLM would profile a video: its frames are not modelled
        return None
    items = encoder_items(tokens, workload, scheduler)
    n = items * image
    pixels = items * _pixel_bytes(tower, image, workload)
    peak = pixels + _tower_peak(tower, n, workload)
    outputs = items * tokens * _output_width(tower) * dtypes.DTYPE_BYTES[workload.dtype]
    height, width = largest_image(tower, QWEN3_VL_IMAGE_MAX_PIXELS)
    note = (
        f"vLLM's profile run first encodes {items} dummy image{'s' if items > 1 else ''} of "
        f"{tokens:,} tokens ({image:,} patches, {width} x {height} pixels) with the vision "
        f"encoder: a peak of {peak / GiB:.2f} GiB, and {(pixels + outputs) / GiB:.2f} GiB kept "
        "through the text forward. The image size is the limit in Qwen's published "
        f"preprocessor_config.json ({QWEN3_VL_IMAGE_MAX_PIXELS:,} pixels); this checkpoint's "
        "own is not read, so the figure is uncertain: a lower max_pixels profiles smaller images."
    )
    return EncoderProfile(items, tokens, n, peak, pixels + outputs, note)


def _pixel_bytes(tower: VisionTower, patches: int, workload: Workload) -> int:
    """One dummy item's pixel values (cast to the model's dtype by the processor)."""
    e = dtypes.DTYPE_BYTES[workload.dtype]
    return patches * tower.channels * tower.temporal_patch * tower.patch * tower.patch * e


def _output_width(tower: VisionTower) -> int:
    """The width of the tower's output per token: the merger's and each deepstack merger's."""
    return tower.out_hidden * (1 + tower.deepstack)


def _tower_peak(tower: VisionTower, n: int, workload: Workload) -> int:
    """The tower's busiest moment on one rank for ``n`` patches, its pixel values apart (see
    :func:`qwen3_vl_profile`): the blocks' linear layers are split over the tensor-parallel
    ranks (``mm_encoder_tp_mode`` "weights", the default), their inputs and outputs whole."""
    merge2 = tower.merge * tower.merge
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    h = n * tower.hidden * e
    attention = 3 * h + 8 * h // tp
    mlp = 2 * h + 2 * n * tower.intermediate * e // tp
    deepstack = tower.deepstack * (n // merge2) * tower.out_hidden * e
    return h + max(attention, mlp) + deepstack


def max_video_frames(tower: VisionTower, seq: int, most_tokens: int | None = None) -> int:
    """Frames of vLLM 0.11.0's dummy Qwen3-VL video: ``_get_max_video_frames`` adds frames, from
    2, while the video's tokens (the frames resized together under the video limit) stay
    within ``max_model_len``; ``get_num_frames_with_most_features`` caps them at 24,576.

    ``most_tokens``: the most tokens any count of frames up to the cap gives
    (:func:`most_video_tokens`), when known: a context that holds them takes the cap at once.
    """
    if most_tokens is not None and most_tokens <= seq:
        return QWEN3_VL_MAX_VIDEO_FRAMES
    merge2 = tower.merge * tower.merge
    frames = 2
    while (
        frames < QWEN3_VL_MAX_VIDEO_FRAMES and video_patches(tower, frames + 1)[2] // merge2 <= seq
    ):
        frames += 1
    return frames


def most_video_tokens(tower: VisionTower) -> int:
    """The most tokens a dummy video of 3 to 24,576 frames gives (see :func:`max_video_frames`)."""
    merge2 = tower.merge * tower.merge
    return max(
        video_patches(tower, frames)[2] // merge2
        for frames in range(3, QWEN3_VL_MAX_VIDEO_FRAMES + 1)
    )


def video_patches(tower: VisionTower, frames: int) -> tuple[int, int, int]:
    """A dummy video of ``frames`` frames at the largest image's size, resized as Qwen3-VL's
    video processor does (the pixels of all frames within the video limit): (height, width,
    patches) (``Qwen3VLProcessingInfo._get_vision_info``, vLLM 0.11.0)."""
    unit = tower.patch * tower.merge
    height, width = largest_image(tower, QWEN3_VL_IMAGE_MAX_PIXELS)
    height, width = smart_resize(
        height, width, unit, (QWEN3_VL_VIDEO_MIN_PIXELS, QWEN3_VL_VIDEO_MAX_PIXELS), frames
    )
    padded = frames + frames % tower.temporal_patch
    grid_t = max(padded // tower.temporal_patch, 1)
    return height, width, grid_t * (height // tower.patch) * (width // tower.patch)


def qwen3_vl_video_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """vLLM 0.11.0's profile of Qwen3-VL's tower (None: the tower is not in the inventory).

    0.11.0 counts a video's tokens as its prompt holds them (``get_max_video_tokens``): each
    vision token with its ``<t seconds>`` timestamp and markers, 12.5 tokens on average, over
    as many frames as ``max_model_len`` holds (:func:`max_video_frames`). That outweighs the
    largest image, so the profile encodes dummy videos (one, unless the batched tokens hold
    more), and the encoder budget is the video's prompt tokens. ``profile_run`` then copies
    each output into a tensor of the budget's rows (the encoder cache's scatter target),
    kept with the dummy pixel values through the text forward: at 65,536 tokens, 153,600
    rows of the merger's and deepstack mergers' outputs, 2.34 GiB for Qwen3-VL-30B-A3B on
    every tensor-parallel rank (the tower's outputs are gathered whole on each).
    """
    tower = VisionTower.of(spec)
    if tower is None:
        return None
    merge2 = tower.merge * tower.merge
    e = dtypes.DTYPE_BYTES[workload.dtype]
    most = spec.cached("qwen3_vl_video_most_tokens", lambda: most_video_tokens(tower))
    frames = max_video_frames(tower, workload.seq, most)
    height, width, patches = video_patches(tower, frames)
    vision_tokens = patches // merge2
    prompt_tokens = int(vision_tokens * QWEN3_VL_VIDEO_TOKEN_FACTOR)
    image_tokens = image_patches(tower) // merge2
    if prompt_tokens <= image_tokens:
        return None  # vLLM would profile images: modelled under the 0.20 rules only
    items = encoder_items(prompt_tokens, workload, scheduler)
    budget = max(scheduler.max_num_batched_tokens, prompt_tokens)
    width_out = _output_width(tower)
    pixels = items * _pixel_bytes(tower, patches, workload)
    outputs = items * vision_tokens * width_out * e
    padded = items * max(vision_tokens, budget) * width_out * e
    n = items * patches
    peak = pixels + max(_tower_peak(tower, n, workload), outputs + padded)
    note = (
        f"vLLM 0.11's profile run first encodes {items} dummy video{'s' if items > 1 else ''} "
        f"of {frames:,} frames of {width} x {height} pixels ({vision_tokens:,} vision tokens, "
        f"{prompt_tokens:,} prompt tokens with their timestamps) with the vision encoder, and "
        f"keeps its output copied into {budget:,} rows (the encoder budget) through the text "
        f"forward: {(pixels + padded) / GiB:.2f} GiB, a peak of {peak / GiB:.2f} GiB. The "
        "sizes follow Qwen's published processor configs; this checkpoint's own are not read. "
        "vLLM 0.13 and later profile one image instead (the 0.20 rules)."
    )
    return EncoderProfile(items, vision_tokens, n, peak, pixels + padded, note)


# Gemma 3's image tokens: Gemma3Config.mm_tokens_per_image, 256 in every Gemma 3 checkpoint
# published (config.json; not in the weights). The projector average-pools the tower's grid to it.
GEMMA3_TOKENS_PER_IMAGE = 256


@dataclass(frozen=True, slots=True)
class SiglipTower:
    """The shapes of Gemma 3's SigLIP vision tower, read from its weights.

    Attributes:
        depth: encoder layers.
        hidden: the tower's width.
        intermediate: its MLP's width.
        patch: pixels per patch side.
        channels: colour channels.
        patches: patches of one image (its position embeddings: (image_size / patch)^2).
        out_hidden: the projector's output width (the language model's hidden size).
    """

    depth: int
    hidden: int
    intermediate: int
    patch: int
    channels: int
    patches: int
    out_hidden: int

    @property
    def image_size(self) -> int:
        """Pixels per side of the square image the tower reads (Gemma 3: 896)."""
        return math.isqrt(self.patches) * self.patch

    @classmethod
    def of(cls, spec: ModelSpec) -> SiglipTower | None:
        """Gemma 3's tower from its inventory (None: not in the inventory)."""
        return spec.cached("siglip_tower", lambda: cls._read(spec))

    @classmethod
    def _read(cls, spec: ModelSpec) -> SiglipTower | None:
        shapes = {
            t.name.split("vision_tower.", 1)[1].removeprefix("vision_model."): t.shape
            for t in spec.tensors
            if t.role is Role.ENCODER and "vision_tower." in t.name
        }
        projector = next(
            (t.shape for t in spec.tensors if t.name.endswith("mm_input_projection_weight")),
            None,
        )
        needed = (
            "embeddings.patch_embedding.weight",
            "embeddings.position_embedding.weight",
            "encoder.layers.0.mlp.fc1.weight",
        )
        if projector is None or not all(name in shapes for name in needed):
            return None
        hidden, channels, patch, _ = shapes["embeddings.patch_embedding.weight"]
        return cls(
            depth=_numbered(shapes, "encoder.layers."),
            hidden=hidden,
            intermediate=shapes["encoder.layers.0.mlp.fc1.weight"][0],
            patch=patch,
            channels=channels,
            patches=shapes["embeddings.position_embedding.weight"][0],
            out_hidden=projector[1],
        )


def gemma3_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """The profile of Gemma 3's SigLIP tower (``gemma3_mm.py``, ``siglip.py``, read in 0.24.0;
    None: the tower is not in the inventory).

    The largest image (``get_image_size_with_most_features``) is resized by the processor to
    the tower's square (896 x 896) with pan-and-scan off (the processor's default), so each
    dummy image is one crop of ``GEMMA3_TOKENS_PER_IMAGE`` tokens and
    ``(image_size / patch)^2`` patches; every image runs through the tower in one batch. Its
    attention (``MMEncoderAttention``) runs FlashAttention's varlen kernel on GPUs of compute
    capability 8.0 and later (head size 72, a multiple of 8): no score matrix, and q, k, v
    pass as views of the fused projection. The busiest moment is in a layer past the first:
    the embeddings (kept by the encoder's list of hidden states), the layer's input (kept by
    the encoder's loop), the attention block's output and its normed copy, then the MLP's
    first projection and its GELU; the attention block (normed input, qkv, attention and
    projection outputs) and the MLP's second projection hold less, unless tensor parallelism
    splits the MLP (each row-parallel output is all-reduced out of place, one more copy).
    Beside them the pixel values stay alive.
    """
    tower = SiglipTower.of(spec)
    if tower is None:
        return None
    tokens = GEMMA3_TOKENS_PER_IMAGE
    items = encoder_items(tokens, workload, scheduler)
    n = items * tower.patches
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    reduced = 1 if tp > 1 else 0  # the all-reduce's output beside the partial sum
    h = n * tower.hidden * e
    inner = n * tower.intermediate * e // tp
    pixels = items * tower.channels * tower.image_size**2 * e
    # Embeddings and the layer's input, then what each stage adds.
    attention = 2 * h + h + 4 * h // tp + h + reduced * h
    mlp = 2 * h + 2 * h + 2 * inner
    down = 2 * h + 2 * h + inner + h + reduced * h
    peak = pixels + max(attention, mlp, down)
    outputs = items * tokens * tower.out_hidden * e
    note = (
        f"vLLM's profile run first encodes {items} dummy image{'s' if items > 1 else ''} of "
        f"{tokens} tokens ({tower.patches:,} patches each, {tower.image_size} x "
        f"{tower.image_size} pixels) with the SigLIP vision tower in one batch: a peak of "
        f"{peak / GiB:.2f} GiB, and {(pixels + outputs) / GiB:.2f} GiB kept through the text "
        "forward. Assumed: pan-and-scan off (the processor's default: with it on, vLLM profiles "
        "up to 5 crops per image), FlashAttention for the tower (GPUs of compute capability "
        "8.0 and later; an older GPU runs PyTorch's SDPA), and --limit-mm-per-prompt left at "
        "its default."
    )
    return EncoderProfile(items, tokens, n, peak, pixels + outputs, note)


# The image side Mistral 3's Pixtral tower reads (vision_config.image_size: 1540 in Mistral Small
# 3.1 / 3.2's and Devstral Small 2's config.json; not in the weights).
PIXTRAL_IMAGE_SIZE = 1540
# PyTorch's memory-efficient SDPA pads an attention mask whose rows are not a multiple of this
# many elements (aten/src/ATen/native/transformers/attention.cpp, preprocess_mask).
SDPA_MASK_ALIGNMENT = 8


@dataclass(frozen=True, slots=True)
class PixtralTower:
    """The shapes of Mistral 3's Pixtral vision tower and projector, read from its weights.

    Attributes:
        depth: transformer blocks.
        hidden: the tower's width.
        intermediate: its gated MLP's width (gate and up each).
        patch: pixels per patch side.
        channels: colour channels.
        merge: patches per merged token side (the projector's patch merger).
        out_hidden: the projector's output width (the language model's hidden size).
    """

    depth: int
    hidden: int
    intermediate: int
    patch: int
    channels: int
    merge: int
    out_hidden: int

    @classmethod
    def of(cls, spec: ModelSpec) -> PixtralTower | None:
        """Mistral 3's tower from its inventory (None: not in the inventory)."""
        return spec.cached("pixtral_tower", lambda: cls._read(spec))

    @classmethod
    def _read(cls, spec: ModelSpec) -> PixtralTower | None:
        shapes = {
            t.name.split("model.", 1)[-1]: t.shape for t in spec.tensors if t.role is Role.ENCODER
        }
        needed = (
            "vision_tower.patch_conv.weight",
            "vision_tower.transformer.layers.0.feed_forward.gate_proj.weight",
            "multi_modal_projector.patch_merger.merging_layer.weight",
            "multi_modal_projector.linear_1.weight",
        )
        if not all(name in shapes for name in needed):
            return None
        hidden, channels, patch, _ = shapes["vision_tower.patch_conv.weight"]
        merged = shapes["multi_modal_projector.patch_merger.merging_layer.weight"][1]
        return cls(
            depth=_numbered(shapes, "vision_tower.transformer.layers."),
            hidden=hidden,
            intermediate=shapes["vision_tower.transformer.layers.0.feed_forward.gate_proj.weight"][
                0
            ],
            patch=patch,
            channels=channels,
            merge=math.isqrt(merged // hidden),
            out_hidden=shapes["multi_modal_projector.linear_1.weight"][0],
        )


def pixtral_profile(
    spec: ModelSpec, workload: Workload, scheduler: Scheduler
) -> EncoderProfile | None:
    """The profile of Mistral 3's Pixtral tower (``mistral3.py``, ``pixtral.py``'s
    ``PixtralHFVisionModel``, read in 0.24.0; None: the tower is not in the inventory).

    The largest image is the tower's square (1540 x 1540 pixels: 110 x 110 patches, merged
    2 x 2 into 55 x 55 = 3,025 image tokens; the row breaks are not embeddings), and the budget
    holds ``max(batched tokens, 3,025) // 3,025`` of them. The tower runs every image as one
    sequence. Without xformers (not a dependency of vLLM since it dropped its xformers
    backend) the images are kept apart by a dense additive mask of (patches x patches) in the
    model's dtype (transformers' ``generate_block_attention_mask``), alive through every
    block, and attention is PyTorch's SDPA with that mask (the memory-efficient kernel: no
    score matrix; it pads a mask whose rows are not a multiple of 8 elements, a second copy
    during the call). q and k are rotated the Hugging Face way (``q * cos + rotate_half(q) *
    sin``: three temporaries of their size at once). The busiest moment of a block past the first is the MLP's second
    projection: the transformer's list keeps the first block's input, beside the block's
    input, the attention output, their sum and its normed copy, the fused gate / up output
    (kept by the MLP's call), its activation and the projection's output (at TP, its
    all-reduced copy); the attention (normed input, qkv, rotated q and k, attention and
    projection outputs) holds less unless the mask is padded. Beside them the pixel values
    and the convolution's outputs (kept for the position ids) stay alive.
    """
    tower = PixtralTower.of(spec)
    if tower is None:
        return None
    side = PIXTRAL_IMAGE_SIZE // tower.patch
    patches = side * side
    tokens = (side // tower.merge) ** 2
    items = encoder_items(tokens, workload, scheduler)
    n = items * patches
    e = dtypes.DTYPE_BYTES[workload.dtype]
    tp = workload.tp
    reduced = 1 if tp > 1 else 0  # the all-reduce's output beside the partial sum
    h = n * tower.hidden * e
    inner = n * tower.intermediate * e // tp
    pixels = items * tower.channels * PIXTRAL_IMAGE_SIZE**2 * e
    mask = n * n * e
    row = -(-n // SDPA_MASK_ALIGNMENT) * SDPA_MASK_ALIGNMENT
    padded = 0 if row == n else n * row * e
    # The first block's input (kept by the list), the block's input and its normed copy, then
    # each stage: rotating k (qkv, rotated q, three temporaries of k: q * cos, rotate_half's
    # cat, its product with sin); SDPA (qkv, rotated q and k, output, padded mask); the output
    # projection; the MLP's second projection (attention output, sum, normed sum, gate / up,
    # activation, output).
    rotary = 3 * h + 3 * h // tp + h // tp + 3 * h // tp
    attention = 3 * h + 3 * h // tp + 2 * h // tp + h // tp + padded
    projection = 3 * h + 6 * h // tp + h + reduced * h
    mlp = 2 * h + 3 * h + 3 * inner + h + reduced * h
    peak = pixels + h + mask + max(rotary, attention, projection, mlp)
    outputs = items * tokens * tower.out_hidden * e
    note = (
        f"vLLM's profile run first encodes {items} dummy image{'s' if items > 1 else ''} of "
        f"{tokens:,} tokens ({patches:,} patches each, {PIXTRAL_IMAGE_SIZE} x "
        f"{PIXTRAL_IMAGE_SIZE} pixels) with the Pixtral vision tower as one sequence: a peak of "
        f"{peak / GiB:.2f} GiB, of which {mask / GiB:.2f} GiB is the dense mask that keeps the "
        f"images apart, and {(pixels + outputs) / GiB:.2f} GiB kept through the text forward. "
        f"Assumed: images of {PIXTRAL_IMAGE_SIZE} pixels a side (Mistral Small 3.1 / 3.2's and "
        "Devstral Small 2's config; this checkpoint's own is not read), no xformers installed "
        "(with it the mask is a block-diagonal bias of no size), the Hugging Face config "
        "(with --config-format mistral vLLM runs Pixtral's own VisionTransformer, not "
        "modelled), and --limit-mm-per-prompt left at its default."
    )
    return EncoderProfile(items, tokens, n, peak, pixels + outputs, note)


# Encoder tensors of audio towers (Gemma 3n / Gemma 4's audio encoder, MiniCPM-o's ``apm``...);
# every other encoder tensor belongs to a vision tower or its projector.
_AUDIO_NAME = re.compile(r"(^|\.)(\w*audio\w*|apm)\.")


def encoder_towers(spec: ModelSpec) -> tuple[str, ...]:
    """The kinds of tower ("vision", "audio") a multimodal checkpoint carries, from its weights
    (empty for a text-only model, or one whose towers are not in the inventory)."""

    def read() -> tuple[str, ...]:
        kinds = {
            "audio" if _AUDIO_NAME.search(t.name) else "vision"
            for t in spec.tensors
            if t.role is Role.ENCODER
        }
        return tuple(k for k in ("vision", "audio") if k in kinds)

    return spec.cached("encoder_towers", read)


def unmodelled_towers(spec: ModelSpec, encoder: EncoderProfile | None) -> tuple[str, ...]:
    """The towers whose share of vLLM's profile run the estimate leaves out.

    Every vLLM V1 read (0.9.2, 0.11.0, 0.22.0, 0.24.0) encodes dummy items with a multimodal
    model's tower before the text forward (``profile_run``), unless --skip-mm-profiling; only
    the towers :func:`encoder_profile` models are counted.
    """
    modelled = ("vision",) if encoder is not None else ()
    return tuple(t for t in encoder_towers(spec) if t not in modelled)


def towers_named(towers: Sequence[str]) -> str:
    """``("vision",)`` -> "vision tower", ``("vision", "audio")`` -> "vision and audio towers"."""
    return f"{' and '.join(towers)} tower{'s' if len(towers) > 1 else ''}"


def unmodelled_note(spec: ModelSpec, towers: Sequence[str], rules: Rules) -> str:
    """What the estimate leaves out of vLLM's profile run, and what that does to the pool."""
    items = " and ".join("images" if t == "vision" else "audio clips" for t in towers)
    scope = (
        f"for {spec.architecture or spec.facts.model_type}"
        if rules.encoder_profile
        else f"under the vLLM {rules.version} rules"
    )
    return (
        f"This model has a {towers_named(towers)}. vLLM's profile run first encodes dummy {items} "
        "of the largest size its processor accepts, as many as its encoder budget holds, and "
        "keeps their outputs through the text forward (gpu_model_runner.profile_run); the "
        f"estimate does not model that {scope}. vLLM's KV pool may be smaller than shown, by "
        "how much is not known here (the tower's peak on those inputs, from a few hundred MiB "
        "to several GiB), and a setup shown starting with little to spare may not start."
    )
