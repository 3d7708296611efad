"""vramgui.core.offload loads its modules when a name is first used."""

import subprocess
import sys

import pytest

from vramgui.core import offload


def test_every_name_of_the_package_resolves_to_its_module():
    assert set(dir(offload)) >= {"plan", "Placement", "DEFAULT_MARGIN_BYTES"}
    for name in dir(offload):
        value = getattr(offload, name)
        home = offload._HOME[name]
        assert value is getattr(sys.modules[f"vramgui.core.offload.{home}"], name)
    with pytest.raises(AttributeError):
        offload.no_such_name  # noqa: B018


def test_the_defaults_come_without_the_planners():
    code = (
        "import sys\n"
        "from vramgui.core import offload\n"
        "offload.DEFAULT_MARGIN_BYTES, offload.PLANNERS, offload.GPU_MEMORY_EFFICIENCY\n"
        "print(sorted(m for m in sys.modules if m.startswith('vramgui.core')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout
    assert "vramgui.core.offload.defaults" in loaded
    for heavy in (
        "vramgui.core.estimate",
        "vramgui.core.offload.placement",
        "vramgui.core.inference",
    ):
        assert heavy not in loaded
    # a submodule is still imported by name
    from vramgui.core.offload import curves

    assert callable(curves.best)
