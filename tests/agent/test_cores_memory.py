"""Cores from the roots given and the agent's cgroup quota; available memory estimated the way
the kernel does when meminfo has no MemAvailable."""

from pathlib import Path

import pytest

from astraeus.agent.cores import cgroup_quota, read_cores
from astraeus.agent.meminfo import parse_zoneinfo, read_memory

ZONEINFO = """\
Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 0
      nr_active_file 500000
  pages free     3968
        boost    0
        min      33
        low      41
        high     49
        spanned  4095
        present  3997
        managed  3968
        cma      0
        protection: (0, 2911, 15847, 15847, 15847)
      nr_free_pages 3968
  pagesets
    cpu: 0
              count: 0
              high:  0
  node_unreclaimable:  0
  start_pfn:           1
Node 0, zone   Normal
  pages free     100000
        boost    0
        min      11000
        low      13750
        high     16500
        spanned  3145728
        present  3145728
        managed  3000000
        cma      0
        protection: (0, 0, 0, 0, 0)
      nr_free_pages 100000
  pagesets
    cpu: 0
              count: 12
              high:  378
"""
OLD_MEMINFO = (
    "MemTotal:       16000000 kB\nMemFree:          415872 kB\nCached:          3000000 kB\n"
    "Active(file):    2000000 kB\nInactive(file):  1000000 kB\nSlab:             400000 kB\n"
    "SReclaimable:     300000 kB\nSUnreclaim:       100000 kB\n"
)


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cores_come_from_proc_stat_then_cpuinfo(tmp_path: Path) -> None:
    """Without cpu/online the cpuN lines of /proc/stat count; without those, cpuinfo's."""
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    _put(proc / "cpuinfo", "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n\nprocessor\t: 2\n")
    assert (read_cores(proc, sys).online, read_cores(proc, sys).source) == (3.0, "cpuinfo")
    _put(proc / "stat", "cpu  1 2\ncpu0 1 2\ncpu1 1 2\ncpu2 1 2\ncpu3 1 2\nctxt 9\n")
    assert (read_cores(proc, sys).online, read_cores(proc, sys).source) == (4.0, "stat")


def test_no_source_counts_zero_cores_with_a_problem(tmp_path: Path) -> None:
    """Roots with nothing to count give 0 cores and say so; the inspecting host is not asked."""
    cores = read_cores(tmp_path / "proc", tmp_path / "sys")
    assert (cores.online, cores.problems) == (
        0.0, ["cannot count the CPUs: no cpu/online, /proc/stat or cpuinfo"],
    )  # fmt: skip


def test_cgroup_v2_quota_caps_allocatable_cores(tmp_path: Path) -> None:
    """cpu.max of the agent's cgroup and its parents: the tightest quota wins, rounded up to a
    hundredth of a core."""
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    _put(sys / "devices/system/cpu/online", "0-63\n")
    _put(proc / "self/cgroup", "0::/kubepods/pod1/agent\n")
    _put(sys / "fs/cgroup/cpu.max", "max 100000\n")
    _put(sys / "fs/cgroup/kubepods/cpu.max", "3200000 100000\n")
    _put(sys / "fs/cgroup/kubepods/pod1/agent/cpu.max", "1234567 100000\n")
    cores = read_cores(proc, sys)
    assert (cores.online, cores.quota, cores.allocatable) == (64.0, 12.35, 12.35)


def test_cgroup_v1_quota_and_unlimited(tmp_path: Path) -> None:
    """v1 cpu.cfs_quota_us/cpu.cfs_period_us; -1 is no quota."""
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    _put(proc / "self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n")
    base = sys / "fs/cgroup/cpu,cpuacct"
    _put(base / "cpu.cfs_quota_us", "-1\n")
    _put(base / "cpu.cfs_period_us", "100000\n")
    _put(base / "docker/abc/cpu.cfs_quota_us", "250000\n")
    _put(base / "docker/abc/cpu.cfs_period_us", "100000\n")
    assert cgroup_quota(proc, sys) == 2.5
    _put(base / "docker/abc/cpu.cfs_quota_us", "-1\n")
    assert cgroup_quota(proc, sys) is None


def test_a_systemd_services_own_quota_is_not_the_machines(tmp_path: Path) -> None:
    """CPUQuota= on the agent's unit limits the agent, not its workers (their own units): only
    the slices above it count."""
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    _put(proc / "self/cgroup", "0::/system.slice/astraeus-agent.service\n")
    _put(sys / "fs/cgroup/system.slice/astraeus-agent.service/cpu.max", "50000 100000\n")
    assert cgroup_quota(proc, sys) is None
    _put(sys / "fs/cgroup/system.slice/cpu.max", "800000 100000\n")
    assert cgroup_quota(proc, sys) == 8.0


def test_zoneinfo_fields_per_zone() -> None:
    """Each zone's low and high watermarks, managed pages, free pages and lowmem reserve."""
    dma, normal = parse_zoneinfo(ZONEINFO)
    assert (dma.low, dma.high, dma.managed, dma.free) == (41, 49, 3968, 3968)
    assert dma.protection == (0, 2911, 15847, 15847, 15847)
    assert (normal.low, normal.high, normal.managed, normal.free) == (13750, 16500, 3000000, 100000)


def test_available_memory_estimated_as_the_kernel_does(tmp_path: Path) -> None:
    """No MemAvailable: free − reserve + page cache and reclaimable slab, each less what would
    dip below the zones' low watermarks (si_mem_available)."""
    _put(tmp_path / "meminfo", OLD_MEMINFO)
    _put(tmp_path / "zoneinfo", ZONEINFO)
    memory = read_memory(tmp_path)
    page, low = 4096, (41 + 13750) * 4096
    reserve = (min(15847 + 49, 3968) + min(0 + 16500, 3000000)) * page
    pagecache, slab = 3000000 * 1024, 300000 * 1024
    expected = (
        415872 * 1024 - reserve + pagecache - min(pagecache // 2, low) + slab - min(slab // 2, low)
    )
    assert (memory.available_bytes, memory.estimated, memory.problems) == (expected, True, [])
    assert expected == 3608240128


def test_memavailable_wins_over_the_estimate(tmp_path: Path) -> None:
    """A kernel that gives MemAvailable is believed as it is."""
    _put(tmp_path / "meminfo", OLD_MEMINFO + "MemAvailable:    1000 kB\n")
    assert (read_memory(tmp_path).available_bytes, read_memory(tmp_path).estimated) == (
        1024000, False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "missing", ["Active(file)", "SReclaimable"], ids=["no-file-lru", "no-slab"]
)
def test_no_estimate_without_its_fields(tmp_path: Path, missing: str) -> None:
    """A meminfo lacking what the estimate needs leaves available memory unknown, saying so."""
    text = "".join(line + "\n" for line in OLD_MEMINFO.splitlines() if not line.startswith(missing))
    _put(tmp_path / "meminfo", text)
    _put(tmp_path / "zoneinfo", ZONEINFO)
    memory = read_memory(tmp_path)
    assert memory.available_bytes is None
    assert memory.problems == ["meminfo lacks MemAvailable and the fields to estimate it"]
