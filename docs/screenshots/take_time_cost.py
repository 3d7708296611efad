"""Take the screenshots of the time / cost line and of a comparison ranked by cost:
``python docs/screenshots/take_time_cost.py``.

Under Xvfb for the committed images (see take_screenshots.py); user settings go to a temporary
folder and no network is needed (catalog models). The PNGs are then reduced to 256 colours
(``convert X.png -colors 256 PNG8:X.png``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ["VRAMGUI_HOME"] = tempfile.mkdtemp(prefix="vramgui-shots-")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import shiboken6
from PySide6.QtCore import QSettings, QTimer  # noqa: TID251 - it drives the window
from PySide6.QtWidgets import QApplication  # noqa: TID251

from vramgui.core.model import ModelRef
from vramgui.core.workload import Workload
from vramgui.profiles import Profile
from vramgui.sources.resolve import load_model
from vramgui.ui import app
from vramgui.ui.compare_view import CompareView, reestimate

HERE = Path(__file__).resolve().parent
LORA = Workload(
    mode="training", method="lora", precision="pure", grad_checkpointing=True, batch=4, seq=2048
)


def window_shot(qapp: QApplication) -> None:
    """LoRA of Llama 3.1 8B on an A100 80GB, a run of 200M tokens: the line under the headline
    and the advisor's GPUs to rent, cheapest first."""
    settings = QSettings(
        os.path.join(os.environ["VRAMGUI_HOME"], "w.ini"), QSettings.Format.IniFormat
    )
    settings.setValue("models/last", "llama-3.1-8b")
    settings.setValue("gpus/catalog", ["A100 SXM 80GB"])
    window = app.build_window(app.real_services(), settings)
    window.resize(1600, 1000)
    window.show()

    def setup() -> None:
        window.controller.set_workload(LORA.with_(seq=4096))
        window.controller.set_train_tokens(200_000_000)

    def shoot() -> None:
        window.grab().save(str(HERE / "time-cost-line.png"))
        window.close()
        qapp.quit()

    QTimer.singleShot(2500, setup)
    QTimer.singleShot(7000, shoot)
    qapp.exec()


def compare_shot(qapp: QApplication) -> None:
    """Four ways to run the same LoRA, compared with the cheapest per million tokens first."""
    ref = ModelRef(kind="catalog", id="llama-3.1-8b")
    qlora = LORA.with_(method="qlora", quant="nf4", precision="mixed", batch=2)
    profiles = [
        Profile("LoRA on one H100", ref, LORA, ("H100 SXM",)),
        Profile("LoRA on one A100 80GB", ref, LORA, ("A100 SXM 80GB",)),
        Profile("LoRA on two L40S", ref, LORA.with_(gpus=2, zero=3), ("L40S",)),
        Profile("QLoRA on one RTX 4090", ref, qlora, ("RTX 4090",)),
    ]
    view = CompareView()
    view.resize(1500, 800)
    view.show_results([reestimate(p, load_model) for p in profiles])
    view.cheapest_first.setChecked(True)
    view.only_differences.setChecked(True)
    view.show()

    def shoot() -> None:
        view.grab().save(str(HERE / "compare-by-cost.png"))
        qapp.quit()

    QTimer.singleShot(800, shoot)
    qapp.exec()
    # Destroyed before the application: left to the interpreter's exit, the view aborted it.
    shiboken6.delete(view)


if __name__ == "__main__":
    # One picture a process, each with an application of its own: `take_time_cost.py window`
    # or `take_time_cost.py compare`; without an argument, both.
    shots = {"window": window_shot, "compare": compare_shot}
    if len(sys.argv) > 1:
        shots[sys.argv[1]](QApplication([]))
    else:
        import subprocess

        for name in shots:
            subprocess.run([sys.executable, __file__, name], check=True)
