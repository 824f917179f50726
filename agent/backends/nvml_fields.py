"""NVML field values read in ONE `nvmlDeviceGetFieldValues` call per GPU per scan: the GPU
recovery action (field 230, R570+), the NVLink link count (91), each link's state (165, link in
`scopeId`), the NVLink error totals over all links (CRC flit 38, CRC data 45, replay 52,
recovery 59: DCGM's NVLink fields) and, per link, the NVLink5 (Blackwell) error counters that
replace the per-link error counters there (docs/hardware.md §1.7, §1.8, §1.11).

Each value carries its own return code: a field this GPU or driver does not have answers
`NVML_ERROR_NOT_SUPPORTED` and is skipped quietly (every pre-Blackwell GPU lacks the NVLink5
counters); only a driver without the call itself is worth a scan warning.

What a GPU supports is fixed by its chip and driver, so each GPU's *plan* (its link count and
the fields it answered NOT_SUPPORTED) is learnt by asking for everything, then kept: later scans
ask only what the GPU has. The plan is made again when the GPU's link count answer changes, when
its UUID is new (a GPU swapped in, or one that came back) and every `REPROBE_SCANS` scans (a
driver upgraded under a running agent). A driver without the link count or link state fields
leaves the links to the per-link calls (`NvmlBackend._nvlinks`)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import GpuSample

if TYPE_CHECKING:
    from .nvml import NvmlBackend

NVLINK5_COUNTERS = {
    "malformed_packet_errors": ("NVML_FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS", 206),
    "buffer_overrun_errors": ("NVML_FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS", 207),
    "rcv_errors": ("NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS", 208),
    "rcv_remote_errors": ("NVML_FI_DEV_NVLINK_COUNT_RCV_REMOTE_ERRORS", 209),
    "rcv_general_errors": ("NVML_FI_DEV_NVLINK_COUNT_RCV_GENERAL_ERRORS", 210),
    "local_link_integrity_errors": ("NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS", 211),
    "link_recovery_failed_events": ("NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS", 214),
    "effective_errors": ("NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS", 219),
    "symbol_errors": ("NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS", 221),
}
"""The counters DCGM's NVLink5 health watch fails on any growth of (`MonitorNVLink5Fields`);
summed over the GPU's links into `counters["nvlink5_<name>"]`. Each id is nvml.h's number, used
where an older nvidia-ml-py (the agent accepts 12.535 on) lacks the name: the driver answers
by number, and NOT_SUPPORTED for a field it does not know."""

NVLINK_TOTALS = {
    "nvlink_replay": (("NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 52),),
    "nvlink_recovery": (("NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 59),),
    "nvlink_crc": (
        ("NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 38),
        ("NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 45),
    ),
}
"""`counters[key]` ← the sum of these fields: the driver's totals over all the GPU's links, the
same four counters `nvmlDeviceGetNvLinkErrorCounter` gives per link. A total over every link
(not only the active ones) never falls when a link goes down, which the health history would
read as a reset."""

RECOVERY_ACTION = ("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", 230)
LINK_COUNT = ("NVML_FI_DEV_NVLINK_LINK_COUNT", 91)
LINK_STATE = ("NVML_FI_DEV_NVLINK_GET_STATE", 165)
LINK_UP_STATES = (("NVML_NVLINK_STATE_ACTIVE", 1), ("NVML_NVLINK_STATE_SLEEP", 2))
"""Field 165 answers these for a link that carries traffic (asleep in low power counts as up);
INACTIVE (0) and ACTIVE_TRAFFIC_DISABLED (3) put the link in `nvlinks_down`."""

REPROBE_SCANS = 100
"""A GPU's plan is remade from a full ask this often (about 17 minutes at a 10 s scan)."""

_VALUE = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
"""`NVML_VALUE_TYPE_*` → the member of `c_nvmlValue_t` that holds it."""

Wanted = tuple[int, int]
"""`(fieldId, scopeId)`, as `nvmlDeviceGetFieldValues` takes it."""


@dataclass
class FieldPlan:
    """What to ask one GPU for, and what it lacks."""

    uuid: str
    links: int | None
    """From field 91; None when the driver does not give it (links by per-link calls then)."""
    wanted: list[Wanted]
    unsupported: frozenset[Wanted]
    scans: int = 0
    """Scans read with this plan since it was made (less its `stagger` for a first plan)."""

    @property
    def link_fields(self) -> bool:
        """True when this plan reads the links' states from fields."""
        return self.links is not None


class FieldReader:
    """One per NVML backend: the field ids resolved once from the module, and each GPU's plan
    (by NVML index, checked against the UUID)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.recovery = _const(lib, RECOVERY_ACTION)
        self.link_count = _const(lib, LINK_COUNT)
        self.link_state = _const(lib, LINK_STATE)
        self.up_states = frozenset(_const(lib, state) for state in LINK_UP_STATES)
        self.nvlink5 = {_const(lib, field): name for name, field in NVLINK5_COUNTERS.items()}
        self.totals = {
            _const(lib, field): key for key, fields in NVLINK_TOTALS.items() for field in fields
        }
        self.success = int(lib.NVML_SUCCESS)
        self.not_supported = int(lib.NVML_ERROR_NOT_SUPPORTED)
        self.plans: dict[int, FieldPlan] = {}

    def read(self, backend: "NvmlBackend", h: Any, s: GpuSample) -> FieldPlan | None:
        """Fill `s` from this GPU's one field call; the plan used, or None when the driver has
        no field values at all (the links are then read by per-link calls)."""
        plan = self.plans.get(s.index)
        if plan is None or plan.uuid != s.uuid or plan.scans >= REPROBE_SCANS:
            due = plan is not None and plan.uuid == s.uuid
            plan = self._probe(backend, h, s)
            if plan is None:
                return None
            if not due:  # GPUs met together are asked again apart, not all in one scan
                plan.scans = -stagger(s.index, REPROBE_SCANS)
        values = self._ask(backend, h, s, plan.wanted) if plan.wanted else []
        if values is None:
            self.plans.pop(s.index, None)
            return None
        if plan.links is not None and self._links(values) != plan.links:
            plan = self._probe(backend, h, s)  # links came or went: ask for everything again
            if plan is None:
                return None
            values = self._ask(backend, h, s, plan.wanted) if plan.wanted else []
            if values is None:
                return None
        plan.scans += 1
        self._apply(values, s, plan)
        return plan

    def forget(self, index: int) -> None:
        self.plans.pop(index, None)

    def _probe(self, backend: "NvmlBackend", h: Any, s: GpuSample) -> FieldPlan | None:
        """Ask for every field this agent reads; keep what the GPU answered."""
        self.plans.pop(s.index, None)
        first = self._ask(backend, h, s, [(self.recovery, 0), (self.link_count, 0)])
        if first is None:
            return None
        links = self._links(first)
        wanted: list[Wanted] = [(self.recovery, 0)]
        if links is not None:
            wanted.append((self.link_count, 0))
            if links:
                wanted += [(field, 0) for field in self.totals]
                wanted += [(self.link_state, link) for link in range(links)]
                wanted += [(field, link) for link in range(links) for field in self.nvlink5]
        values = self._ask(backend, h, s, wanted)
        if values is None:
            return None
        lacking = frozenset(
            (int(v.fieldId), int(v.scopeId)) for v in values if v.nvmlReturn == self.not_supported
        )
        states = [w for w in wanted if w[0] == self.link_state]
        if states and all(w in lacking for w in states):
            links = None  # a driver with a link count but no link state field: per-link calls
            lacking |= {w for w in wanted if w[0] != self.recovery}
        plan = FieldPlan(s.uuid, links, [w for w in wanted if w not in lacking], lacking)
        self.plans[s.index] = plan
        return plan

    def _ask(self, backend: "NvmlBackend", h: Any, s: GpuSample, wanted: list[Wanted]) -> Any:
        return backend.optional(s, self.lib.nvmlDeviceGetFieldValues, h, wanted)

    def _links(self, values: Any) -> int | None:
        for value in values:
            if value.fieldId == self.link_count:
                return int(_number(value)) if value.nvmlReturn == self.success else None
        return None

    def _apply(self, values: Any, s: GpuSample, plan: FieldPlan) -> None:
        nvlink5: dict[str, float] = {}
        totals: dict[str, float] = {}
        down: list[int] = []
        for value in values:
            if _member(value, "nvmlReturn") != self.success:
                continue
            field, number = _member(value, "fieldId"), _number(value)
            if field == self.link_state:
                if int(number) not in self.up_states:
                    down.append(int(_member(value, "scopeId")))
            elif field in self.nvlink5:
                key = "nvlink5_" + self.nvlink5[field]
                nvlink5[key] = nvlink5.get(key, 0.0) + number
            elif field in self.totals:
                key = self.totals[field]
                totals[key] = totals.get(key, 0.0) + number
            elif field == self.recovery:
                s.recovery_action = int(number)
        if plan.links:
            s.nvlinks_down = sorted(down)
            s.counters.update(totals)
        s.counters.update(nvlink5)


def stagger(index: int, period: int) -> int:
    """How many scans GPU `index`'s first re-read waits beyond `period`: spread over the period
    (0, 61, 22, 83, … for 100), so the GPUs of a machine, met in one scan, are re-read in
    different scans after it and no scan pays for all of them."""
    return index * 61 % period


def _const(lib: Any, named: tuple[str, int]) -> int:
    """The module's constant of that name, else nvml.h's number for it."""
    name, number = named
    return int(getattr(lib, name, number))


_member = object.__getattribute__
"""A member of an NVML struct read straight from its ctypes field: pynvml's structs look at every
read to turn bytes into str, which a field value's numbers never are, and a scan reads some 150
of them per GPU."""


def _number(value: Any) -> float:
    kind = _VALUE.get(int(_member(value, "valueType")), "ullVal")
    return float(getattr(_member(value, "value"), kind))
