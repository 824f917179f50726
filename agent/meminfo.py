"""Memory from `<proc>/meminfo`, and available memory the way the kernel estimates it
(`si_mem_available`) on kernels whose meminfo has no `MemAvailable` (before 3.14):
free pages less the reserve, plus the page cache and the reclaimable kernel memory that can be
reclaimed without dipping below the zones' low watermarks (`<proc>/zoneinfo`)."""

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

PAGE_SIZES = (4096, 16384, 65536)
_ZONE = re.compile(r"^Node\s+\d+,\s+zone\s+\S+", re.M)
_FIELD = re.compile(r"^\s+(pages free|min|low|high|managed|nr_free_pages)\s+(\d+)\s*$", re.M)
_PROTECTION = re.compile(r"^\s+protection:\s+\(([\d,\s]*)\)", re.M)


@dataclass(frozen=True)
class Zone:
    low: int
    high: int
    managed: int
    free: int
    protection: tuple[int, ...]


@dataclass
class Memory:
    total_bytes: int = 0
    available_bytes: int | None = None
    estimated: bool = False
    """`MemAvailable` was missing and `available_bytes` is the kernel's estimate."""
    problems: list[str] = field(default_factory=list)


def read_memory(proc_root: Path) -> Memory:
    memory = Memory()
    try:
        info = parse_meminfo((proc_root / "meminfo").read_text())
    except OSError:
        memory.problems.append("cannot read meminfo")
        return memory
    memory.total_bytes = info.get("MemTotal", 0)
    if "MemAvailable" in info:
        memory.available_bytes = info["MemAvailable"]
        return memory
    try:
        zones = parse_zoneinfo((proc_root / "zoneinfo").read_text())
    except OSError:
        zones = []
        memory.problems.append(
            "meminfo has no MemAvailable and zoneinfo cannot be read: available memory is "
            "estimated without the zones' low watermarks"
        )
    memory.available_bytes = estimate_available(info, zones)
    memory.estimated = memory.available_bytes is not None
    if memory.available_bytes is None:
        memory.problems.append("meminfo lacks MemAvailable and the fields to estimate it")
    return memory


def parse_meminfo(text: str) -> dict[str, int]:
    """`{"MemTotal": bytes, ...}`; `HugePages_*` counts stay counts."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        number = rest.split()
        if number and number[0].isdigit():
            unit = 1024 if len(number) > 1 and number[1] == "kB" else 1
            values[key.strip()] = int(number[0]) * unit
    return values


def parse_zoneinfo(text: str) -> list[Zone]:
    starts = [m.start() for m in _ZONE.finditer(text)] + [len(text)]
    zones = []
    for begin, end in itertools.pairwise(starts):
        block = text[begin:end]
        fields = {name: int(value) for name, value in _FIELD.findall(block)}
        protection = _PROTECTION.search(block)
        reserve = protection.group(1) if protection else ""
        zones.append(
            Zone(
                low=fields.get("low", 0),
                high=fields.get("high", 0),
                managed=fields.get("managed", 0),
                free=fields.get("pages free", fields.get("nr_free_pages", 0)),
                protection=tuple(int(p) for p in reserve.replace(",", " ").split()),
            )
        )
    return zones


def estimate_available(info: dict[str, int], zones: list[Zone]) -> int | None:
    """The kernel's `si_mem_available`, in bytes; None without the meminfo fields it needs."""
    needed = ("MemFree", "Active(file)", "Inactive(file)")
    reclaimable = info.get("KReclaimable", info.get("SReclaimable"))
    if reclaimable is None or any(key not in info for key in needed):
        return None
    page = page_size(info, zones)
    wmark_low = sum(zone.low for zone in zones) * page
    reserve = sum(min(max(z.protection, default=0) + z.high, z.managed) for z in zones) * page
    available = info["MemFree"] - reserve
    pagecache = info["Active(file)"] + info["Inactive(file)"]
    available += pagecache - min(pagecache // 2, wmark_low)
    available += reclaimable - min(reclaimable // 2, wmark_low)
    return max(0, available)


def page_size(info: dict[str, int], zones: list[Zone]) -> int:
    """The captured machine's page size, from its free memory in bytes and in pages (the two
    are read a moment apart, so the nearest common size wins); 4096 when zoneinfo says none."""
    pages = sum(zone.free for zone in zones)
    if not pages or not info.get("MemFree"):
        return PAGE_SIZES[0]
    ratio = info["MemFree"] / pages
    return min(PAGE_SIZES, key=lambda size: abs(size - ratio))
