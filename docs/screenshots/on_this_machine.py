"""Take docs/screenshots/on-this-machine.png: the window with its "On this machine" list.

The stores are built in a temporary folder as each tool lays them out (a Hugging Face cache,
an Ollama store, an LM Studio folder), with real headers of real model shapes; the weights are
sparse files (their size without their disk space). Under Xvfb:
``Xvfb :117 -screen 0 1600x1000x24 & DISPLAY=:117 QT_QPA_PLATFORM=xcb python docs/screenshots/on_this_machine.py``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(tempfile.mkdtemp(prefix="vramgui-stores-"))
os.environ.update(
    VRAMGUI_HOME=str(ROOT / "vramgui"),
    HOME=str(ROOT / "home"),
    HF_HUB_CACHE=str(ROOT / "hf"),
    OLLAMA_MODELS=str(ROOT / "ollama"),
    HF_HUB_OFFLINE="1",
)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QTimer  # noqa: E402, TID251 - it drives the window

from tests.fakehub.files import llama_tensors, write_sparse_safetensors  # noqa: E402
from tests.fakehub.stores import hf_cache_repo, lm_studio_model, ollama_model  # noqa: E402
from vramgui.ui import app  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFIGS = json.loads(
    (HERE.parents[1] / "tests" / "data" / "families" / "configs.json").read_text(encoding="utf-8")
)
OPENED = "llama3.1:8b"


def sparse_gguf(path: Path, config: dict, quant: str, file_type: int) -> None:
    """A llama GGUF header of ``config``'s shapes in ``quant`` (norms in F32), data a hole."""
    import gguf
    import numpy as np

    q = gguf.GGMLQuantizationType
    kind = q[quant]
    writer = gguf.GGUFWriter(str(path), "llama")
    h, ff, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    writer.add_block_count(layers)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(h)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_rope_freq_base(float(config.get("rope_theta", 500000.0)))
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(file_type)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(config["vocab_size"])])
    total = 0
    for name, (_, shape) in _gguf_layout(config).items():
        raw = q.F32 if len(shape) == 1 else kind
        block, size = gguf.GGML_QUANT_SIZES[raw]
        nbytes = math.prod(shape) // block * size
        byte_shape = (*shape[:-1], shape[-1] // block * size)
        writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=raw)
        total += -(-nbytes // 32) * 32
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    end = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(-(-end // 32) * 32 + total)


def _gguf_layout(config: dict) -> dict:
    h, ff, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    hd = h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * hd
    layout = {"token_embd.weight": ("", (v, h)), "output_norm.weight": ("", (h,))}
    if not config.get("tie_word_embeddings"):
        layout["output.weight"] = ("", (v, h))
    for n in range(config["num_hidden_layers"]):
        b = f"blk.{n}"
        layout |= {
            f"{b}.attn_norm.weight": ("", (h,)),
            f"{b}.attn_q.weight": ("", (h, h)),
            f"{b}.attn_k.weight": ("", (kv, h)),
            f"{b}.attn_v.weight": ("", (kv, h)),
            f"{b}.attn_output.weight": ("", (h, h)),
            f"{b}.ffn_norm.weight": ("", (h,)),
            f"{b}.ffn_gate.weight": ("", (ff, h)),
            f"{b}.ffn_up.weight": ("", (ff, h)),
            f"{b}.ffn_down.weight": ("", (h, ff)),
        }
    return layout


def build_stores() -> None:
    """The three stores, holding what a typical machine might."""
    hf = Path(os.environ["HF_HUB_CACHE"])
    work = ROOT / "work"
    work.mkdir()
    for repo in ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.1-8B"):
        config = CONFIGS[repo]
        folder = work / repo.replace("/", "--")
        folder.mkdir()
        write_sparse_safetensors(
            folder / "model.safetensors", llama_tensors(config, norm_dtype="BF16")
        )
        snapshot = hf_cache_repo(hf, repo, {"config.json": json.dumps(config).encode()})
        (snapshot / "model.safetensors").symlink_to(folder / "model.safetensors")
    ollama = Path(os.environ["OLLAMA_MODELS"])
    for name, tag, repo in (
        ("llama3.2", "3b", "meta-llama/Llama-3.2-3B"),
        ("llama3.1", "8b", "meta-llama/Llama-3.1-8B"),
    ):
        path = work / f"{name}-{tag}.gguf"
        sparse_gguf(path, CONFIGS[repo], "Q4_K", 15)
        ollama_model(ollama, name, tag, path)
    studio = Path(os.environ["HOME"]) / ".lmstudio" / "models"
    folder = lm_studio_model(studio, "lmstudio-community", "Meta-Llama-3.1-70B-Instruct-GGUF", {})
    sparse_gguf(
        folder / "Meta-Llama-3.1-70B-Instruct-Q4_K_M.gguf",
        CONFIGS["meta-llama/Llama-3.1-70B"],
        "Q4_K",
        15,
    )


def main() -> int:
    build_stores()
    qapp = app.create_application(sys.argv[:1])
    window = app.build_window(app.real_services(), app.settings())
    window.resize(1600, 1000)
    window.show()
    view = window.model_panel.result_area.currentWidget()

    def when(ready: object, then: object) -> None:
        QTimer.singleShot(100, lambda: then() if ready() else when(ready, then))

    def open_one() -> None:
        model = view.table_model
        row = next(r for r in range(model.rowCount()) if model.index(r, 0).data() == OPENED)
        view.table.selectRow(row)
        view.table.clicked.emit(model.index(row, 0))
        when(
            lambda: (
                window.controller.spec is not None
                and window.controller.spec.name == OPENED
                and window.controller.outlook is not None
                and not view.busy
            ),
            lambda: QTimer.singleShot(500, shoot),
        )

    def shoot() -> None:
        path = HERE / "on-this-machine.png"
        window.grab().save(str(path))
        print(f"wrote {path}")
        qapp.quit()

    when(lambda: view.table_model.rowCount() and not view.busy, open_one)
    return qapp.exec()


if __name__ == "__main__":
    sys.exit(main())
