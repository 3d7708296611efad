"""Host RAM and the bandwidth defaults of the offload view."""

from vramgui.hardware import host
from vramgui.hardware.host import DEFAULT_DISK_READ_BYTES_PER_S, pcie_bytes_per_s, read_host_info

MEMINFO = """MemTotal:       32768000 kB
MemFree:         1000000 kB
MemAvailable:   20000000 kB
Buffers:          100000 kB
Cached:          5000000 kB
"""


def test_meminfo_is_read_in_kib(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    info = read_host_info(meminfo=path)
    assert info.ram_total_bytes == 32768000 * 1024
    assert info.ram_available_bytes == 20000000 * 1024
    assert info.disk_read_bytes_per_s == DEFAULT_DISK_READ_BYTES_PER_S == 3_500_000_000


def test_old_kernels_without_memavailable(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text("\n".join(line for line in MEMINFO.splitlines() if "MemAvailable" not in line))
    info = read_host_info(meminfo=path)
    assert info.ram_available_bytes == (1000000 + 5000000 + 100000) * 1024


def test_without_meminfo_sysconf_answers_or_none(tmp_path):
    info = read_host_info(disk_read_bytes_per_s=7_000_000_000, meminfo=tmp_path / "missing")
    assert info.disk_read_bytes_per_s == 7_000_000_000
    assert info.ram_total_bytes is None or info.ram_total_bytes > 0


def test_real_host_has_ram():
    info = read_host_info()
    assert info.ram_total_bytes > 0
    assert 0 < info.ram_available_bytes <= info.ram_total_bytes


def test_pcie_bandwidth():
    # gen 3 x16: 8 GT/s x 128/130 x 16 lanes / 8 bits = 15.75 GB/s theoretical, ~12 in practice.
    assert round(pcie_bytes_per_s(3, practical=False) / 1e9, 2) == 15.75
    assert pcie_bytes_per_s(3) == 12_000_000_000
    assert pcie_bytes_per_s(4) == 25_000_000_000
    assert pcie_bytes_per_s(5) == 50_000_000_000
    assert pcie_bytes_per_s(4, width=8) == 12_500_000_000
    # An unknown newer generation is never slower than the newest known one.
    assert pcie_bytes_per_s(7) == pcie_bytes_per_s(6)
    assert all(pcie_bytes_per_s(gen) < pcie_bytes_per_s(gen + 1) for gen in range(1, 6))


def test_windows_branch_never_raises_off_windows(monkeypatch, tmp_path):
    # Off Windows, ctypes has no windll: the Win32 call must fail soft and sysconf take over.
    monkeypatch.setattr(host.sys, "platform", "win32")
    info = read_host_info(meminfo=tmp_path / "missing")
    assert info.ram_total_bytes is None or info.ram_total_bytes > 0
