"""vLLM 0.11.0's profile of Qwen3-VL's vision tower (core/vllm/encoders.py), against its code
and a held-out start-up log."""

from dataclasses import replace

import pytest

from vramgui.core.rank_weights import rank_tensor_bytes
from vramgui.core.units import GiB, MiB
from vramgui.core.vllm.encoders import (
    VisionTower,
    encoder_profile,
    max_video_frames,
    most_video_tokens,
    video_patches,
)
from vramgui.core.vllm.profile import Scheduler
from vramgui.core.vllm.rules import RULES
from vramgui.core.vllm.startup import VllmEngine
from vramgui.core.workload import Workload
from vramgui.sources.catalog import load_catalog

RTX_3090 = 24576 * MiB  # what nvidia-smi reports


@pytest.fixture(scope="module")
def catalog():
    entries = {e.name: e for e in load_catalog()}
    return lambda name: entries[name].spec()


def test_the_dummy_video_is_as_many_tiny_frames_as_the_context_holds(catalog):
    # qwen3_vl.py (0.11.0): _get_max_video_frames adds frames while the video's tokens stay
    # within max_model_len; the frames of 4096 x 4096 shrink together under the video limit
    # (25,165,824 pixels) to 32 x 32, and _MAX_FRAMES_PER_VIDEO stops them at 24,576.
    tower = VisionTower.of(catalog("qwen3-vl-30b-a3b"))
    assert max_video_frames(tower, 65536) == 24576
    assert video_patches(tower, 24576) == (32, 32, 12288 * 4)
    # A short context holds fewer frames: each pair of 32 x 32 frames is one token.
    assert max_video_frames(tower, 4096) < 24576
    # The shortcut for contexts that hold every count of frames gives what the loop gives.
    most = most_video_tokens(tower)
    for seq in (4096, most - 1, most, 65536):
        assert max_video_frames(tower, seq, most) == max_video_frames(tower, seq)


def test_the_video_outweighs_the_image_and_its_output_is_kept_at_the_budgets_rows(catalog):
    spec = catalog("qwen3-vl-30b-a3b")
    w = Workload(engine="vllm", seq=65536, tp=4, gpus=4, vllm_version="0.11")
    profile = encoder_profile(spec, w, Scheduler(256, 8192), RULES["0.11"])
    assert profile is not None
    # 12,288 vision tokens, counted as 153,600 prompt tokens (12.5 each) in the budget.
    assert profile.items == 1 and profile.tokens_per_item == 12288
    # (153,600 rows x 2,048 x 4 (merger and 3 deepstack mergers)) in bf16 on every rank, with
    # the float pixel values of 49,152 patches.
    padded = 153600 * 2048 * 4 * 2
    assert padded <= profile.kept_bytes < padded + 0.2 * GiB
    assert "24,576 frames" in profile.note
    # Under the 0.20 rules the same model profiles one image of 16,384 tokens instead.
    later = encoder_profile(
        spec, replace(w, vllm_version="0.20"), Scheduler(256, 8192), RULES["0.20"]
    )
    assert later is not None and later.tokens_per_item == 16384
    # 0.11 models Qwen3-VL's tower alone: Qwen3.6 (not in 0.11) keeps its note.
    qwen36 = encoder_profile(
        catalog("qwen3.6-35b-a3b-nvfp4"), w, Scheduler(256, 8192), RULES["0.11"]
    )
    assert qwen36 is None


def test_qwen3_vl_at_tp_4_on_four_3090s_matches_the_held_out_pool(catalog):
    # Held-out vLLM 0.11.0 start-up (issue 40, item 5): Qwen3-VL-30B-A3B-Instruct, TP 4 on four
    # RTX 3090s, --max-model-len 65536: "GPU KV cache size: 100,752 tokens" (2.31 GiB per rank,
    # weights 14.77 GiB). Without the tower's profile the 0.11 rules gave 205,056 (+103 %).
    spec = catalog("qwen3-vl-30b-a3b")
    w = Workload(engine="vllm", seq=65536, tp=4, gpus=4, vllm_version="0.11")
    engine = VllmEngine(spec, w, rank_tensor_bytes(spec, w))
    up = engine.startup(RTX_3090)
    assert up.starts
    assert abs(up.pool_tokens / 100752 - 1) < 0.10
