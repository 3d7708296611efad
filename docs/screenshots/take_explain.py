"""Take docs/screenshots/explain-*.png: the log view at 1280x720 on three published logs.

An Ollama partial offload (ollama issue 5913: Llama 3 70B, 43 of 81 layers on a 24 GiB GPU),
a vLLM refusal (vllm issue 27508: gpt-oss-120b at 131,072 tokens on one H100) and a PyTorch
out-of-memory message with a fragmented reserve (murong-xu/CADS issue 4), from tests/data/logs,
with the model, GPU and format their reports name. Run under Xvfb, as ``take_screenshots.py``
says; user settings go to a temporary folder and no network is needed.

``take_explain.py [WIDTHxHEIGHT FOLDER]`` takes them at another size into another folder, with
the view before any log is pasted (``explain-empty.png``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["VRAMGUI_HOME"] = tempfile.mkdtemp(prefix="vramgui-shots-")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QThreadPool  # noqa: TID251 - it drives the window

from vramgui.ui import app
from vramgui.ui.log_view import LogView
from vramgui.ui.main_window import explain_log

HERE = Path(__file__).resolve().parent
LOGS = HERE.parents[1] / "tests" / "data" / "logs"
CASES = (
    (
        "explain-ollama-partial-offload.png",
        "ollama-old-rocm-llama3-70b.log",
        "llama-3-70b",
        "",
        "Q4_0",
    ),
    (
        "explain-vllm-refusal.png",
        "vllm-refusal-gpt-oss-120b-h100.log",
        "gpt-oss-120b",
        "H100 SXM",
        "",
    ),
    ("explain-pytorch-oom.png", "pytorch-oom-cads-fragmented.log", "", "", ""),
)


def main() -> int:
    qapp = app.create_application(sys.argv[:1])
    size, folder = (1280, 720), HERE
    if len(sys.argv) == 3:
        width, height = sys.argv[1].split("x")
        size, folder = (int(width), int(height)), Path(sys.argv[2])
        folder.mkdir(parents=True, exist_ok=True)
        empty = LogView(explain_log)
        empty.resize(*size)
        empty.show()
        for _ in range(10):
            qapp.processEvents()
        empty.grab().save(str(folder / "explain-empty.png"))
        empty.close()
    for out, log, model, gpu, quant in CASES:
        view = LogView(explain_log)
        view.resize(*size)
        view.set_text((LOGS / log).read_text(encoding="utf-8"))
        for field, value in ((view.model, model), (view.gpu, gpu), (view.quant, quant)):
            field.setText(value)
        view.show()
        view.run()
        deadline = time.monotonic() + 60
        while not view.explain_button.isEnabled() and time.monotonic() < deadline:
            qapp.processEvents()
            time.sleep(0.02)
        for _ in range(20):
            qapp.processEvents()
            time.sleep(0.02)
        view.grab().save(str(folder / out))
        view.close()
    QThreadPool.globalInstance().waitForDone(5000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
