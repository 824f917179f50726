"""The compact form of a stored report (`coordinator/compact.py`, migration 17): read back
without a parse, it is the same report, machine by machine (the same placement facts, the same
API summary, the same health), and a machine's record is the same whichever way it was read."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from astraeus.agent.fake import load_fake_machine, shipped_machines
from astraeus.agent.inventory import Scanner
from astraeus.coordinator import compact
from astraeus.coordinator.api.machines import _summary
from astraeus.coordinator.machine_records import MachineRecords, fingerprint
from astraeus.coordinator.placement import MachineSnapshot
from astraeus.coordinator.placement.cache.kinds import describe
from astraeus.coordinator.placement.fabrics import network_place
from astraeus.coordinator.placement.facts import MachineFacts, free_idle, machine_facts
from astraeus.coordinator.reports import faulted_gpus
from astraeus.coordinator.store import Store
from astraeus.coordinator.store.queue import Usage
from astraeus.coordinator.testing import fake_cluster
from astraeus.shared import (
    DriveInfo,
    GpuInfo,
    MachineReport,
    MachineState,
    PressureCondition,
)
from astraeus.shared.clock import FakeClock

from .fakes import report as wire_report

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CAPTURE = Path("shared/realdata/procfs-capture")


def _scanned(tmp_path: Path) -> list[MachineReport]:
    """Every shipped fake machine as the agent's scanner reports it, and the real machine's
    capture (`shared/realdata`) where it is here."""
    found = []
    clock = FakeClock(NOW)
    for name in shipped_machines():
        machine = load_fake_machine(name, clock=clock)
        scanner = Scanner(name=name, backend=machine, data_dir=tmp_path / name, clock=clock)
        try:
            found.append(scanner.scan())
        finally:
            scanner.close()
    capture = _capture()
    if capture is not None:
        scanner = Scanner(
            name="capture",
            backend="none",
            sysfs_root=capture / "sys",
            proc_root=capture / "proc",
            dev_root=tmp_path / "dev",
            data_dir=tmp_path / "capture",
            clock=clock,
        )
        try:
            found.append(scanner.scan())
        finally:
            scanner.close()
    return found


def _capture() -> Path | None:
    """The real machine's /proc and /sys (`tests/agent/conftest.py` finds it the same way)."""
    env = os.environ.get("ASTRAEUS_REALDATA")
    if env:
        return Path(env) if Path(env).is_dir() else None
    found = (p / CAPTURE for p in Path(__file__).resolve().parents if (p / CAPTURE).is_dir())
    return next(found, None)


def _made() -> list[MachineReport]:
    """The placement tests' machines, with what they vary: ports, drives, conditions, labels,
    faulted and at-risk GPUs, NVLink domains, IMEX; and the coordinator tests' wire reports."""
    gpus = fake_cluster.gpus("nvl", 4, nvlink_domain="c1/0", at_risk={1}, faulted={2})
    port = fake_cluster.rdma_port(subnet="fe80:0:0:1", at_risk=True)
    ethernet = fake_cluster.rdma_port(device="mlx5_1", roce=True, gbps=100, up=False)
    drives = [
        DriveInfo(name="scratch", path="/scratch", capacity_bytes=10, free_bytes=5),
        DriveInfo(name="datasets", local=False, reachable=False),
    ]
    snapshots = [
        fake_cluster.machine("plain"),
        fake_cluster.machine("nvl", gpu_list=gpus, rack="r1", site="s1"),
        fake_cluster.machine("ib", ports=[port, ethernet], fabric="ib-a", drives=drives),
        fake_cluster.machine(
            "pressed",
            conditions=[PressureCondition.DISK],
            cpu_pressure=True,
            capabilities=(),
            data_free_gib=1.5,
            labels_={"team": "a", "topology.astraeus.io/site": "west"},
        ),
        fake_cluster.machine("none", gpu_count=0, cpu_cores=0.5),
    ]
    made = [one.report for one in snapshots if one.report is not None]
    wire = [
        wire_report("w-1", faulted=(3,), reported_at=NOW.isoformat(), free_cpu_cores=12.5),
        wire_report("w-2", gpus=2, labels={"pool": "x"}, hostname="w-2.example"),
    ]
    return made + [MachineReport.model_validate(one) for one in wire]


@pytest.fixture
def reports(tmp_path: Path) -> list[MachineReport]:
    found = _made() + _scanned(tmp_path)
    assert len(found) >= len(shipped_machines()) + 7
    return found


def _both(report: MachineReport) -> tuple[MachineReport, MachineReport]:
    """The report as the full parse of its stored JSON reads it, and as the compact form."""
    parsed = MachineReport.model_validate_json(report.model_dump_json())
    decoded, printed = compact.decode(compact.encode(report, fingerprint(report)))
    assert printed == fingerprint(parsed)
    return parsed, decoded


def test_the_compact_form_reads_back_the_same_report(reports: list[MachineReport]) -> None:
    """Field by field, and printed (a machine's details show the report as JSON)."""
    for report in reports:
        parsed, decoded = _both(report)
        assert decoded == parsed, report.name
        assert decoded.model_dump_json() == parsed.model_dump_json(), report.name
        assert fingerprint(decoded) == fingerprint(parsed), report.name


def _facts(report: MachineReport) -> MachineFacts:
    snapshot = MachineSnapshot(name=report.name, state=MachineState.UP, report=report)
    return machine_facts(snapshot)


def _read(facts: MachineFacts) -> tuple[object, ...]:
    """Everything the engine reads of a machine's facts, but its snapshot."""
    places = [network_place(facts.report, gbps, labelled) for gbps in (None, 100.0)
              for labelled in (False, True)]  # fmt: skip
    return (
        facts.up,
        facts.site,
        facts.rack,
        facts.nvlink_domain,
        facts.imex,
        facts.gpus,
        facts.gpu_by_id,
        facts.local_drives,
        facts.reachable_drives,
        facts.reported_drives,
        describe(facts),
        free_idle(facts),
        places,
    )


def test_placement_facts_are_the_same_machine_by_machine(reports: list[MachineReport]) -> None:
    for report in reports:
        parsed, decoded = _both(report)
        assert _read(_facts(decoded)) == _read(_facts(parsed)), report.name


def test_api_summary_and_health_are_the_same(reports: list[MachineReport]) -> None:
    """What lists of machines show, and the faults a report's tasks are failed with."""
    held = Usage(gpu_ids={"GPU-held"}, cpu_cores=2, memory_bytes=3)
    for report in reports:
        parsed, decoded = _both(report)
        for usable in (True, False):
            assert _summary(decoded, held, usable) == _summary(parsed, held, usable)
        assert faulted_gpus(decoded) == faulted_gpus(parsed), report.name
    faulted = [r for r in reports if faulted_gpus(r)]
    assert faulted  # the comparison saw a faulted GPU with its signals


def test_alike_parts_of_alike_machines_are_one_object() -> None:
    one, two = (
        compact.decode(compact.encode(r, fingerprint(r)))[0]
        for r in (_made()[2], _made()[2].model_copy(update={"name": "ib-2"}))
    )
    assert one.rdma_ports[0] is two.rdma_ports[0]
    assert one.drives[0] is two.drives[0]
    assert one.gpus[0].health is two.gpus[0].health
    assert one.gpus[0] is not two.gpus[0]  # a GPU has its own UUID


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"form": compact.FORM + 1, "fingerprint": "", "report": {}}),
        json.dumps({"form": compact.FORM, "fingerprint": "", "report": {"name": "x"}}),
        json.dumps({"form": compact.FORM, "fingerprint": "", "report": {"gpus": 3}}),
        json.dumps([1]),
    ],
    ids=["not-json", "another-form", "missing-fields", "wrong-type", "a-list"],
)
def test_a_form_this_coordinator_does_not_write_is_refused(text: str) -> None:
    with pytest.raises(compact.FormError):
        compact.decode(text)


def _store_with(where: Path | str, *reports: MachineReport) -> Store:
    store = Store.open(where)
    records = MachineRecords(store)
    for report in reports:
        with store.database.write() as conn:
            record, _ = records.write_report(conn, report, "10.0.0.1", NOW, 0)
        records.remember(record)
    return store


def test_a_worker_reads_every_record_without_parsing(
    database_location: Path | str, reports: list[MachineReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second process's records (the pass worker's) come from the compact forms the
    service wrote, on either engine: equal to the service's, and no report parsed."""
    store = _store_with(database_location, *reports)
    service = MachineRecords(store)

    def parse(*_: object, **__: object) -> None:
        raise AssertionError("a stored report was parsed again")

    monkeypatch.setattr(MachineReport, "model_validate_json", parse)
    worker = MachineRecords(Store.open(database_location))
    names = sorted(r.name for r in reports)
    assert [r.name for r in worker.all()] == names
    for name in names:
        mine, theirs = worker.get(name), service.get(name)
        assert mine is not None
        assert theirs is not None
        assert (mine.report, mine.fingerprint) == (theirs.report, theirs.fingerprint)
        assert (mine.address, mine.last_seen, mine.labels) == (
            theirs.address,
            theirs.last_seen,
            theirs.labels,
        )


def test_a_report_stored_before_migration_17_is_parsed_in_full(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No compact form (or one of another version): the JSON, checked, as before."""
    report = _made()[1]
    store = _store_with(tmp_path / "astraeus.db", report, _made()[2])
    with store.database.write() as conn:
        conn.execute("UPDATE machines SET compact = NULL WHERE name = ?", ("nvl",))
        conn.execute("UPDATE machines SET compact = '{\"form\": 0}' WHERE name = ?", ("ib",))
    with caplog.at_level(logging.INFO):
        records = MachineRecords(store)
    assert "machine ib: its report is parsed in full (not compact form 1)" in caplog.text
    found = records.get("nvl")
    assert found is not None
    assert found.report == report
    assert found.fingerprint == fingerprint(report)
    ib = records.get("ib")
    assert ib is not None
    assert ib.report == _made()[2]


def test_a_start_reads_no_json_beside_a_form_it_reads(database_location: Path | str) -> None:
    """Rows with a form of this version are read without their JSON; the others with it."""
    store = _store_with(database_location, _made()[1], _made()[2])
    with store.database.write() as conn:
        conn.execute("UPDATE machines SET compact = NULL WHERE name = ?", ("ib",))
    found = store.machines.reports(["nvl", "ib"], compact.PREFIX)
    assert found["nvl"][0] is None
    assert found["nvl"][1] is not None
    assert found["nvl"][1].startswith(compact.PREFIX)
    assert found["ib"] == (_made()[2].model_dump_json(), None)
    assert store.machines.reports(["nvl"])["nvl"][0] == _made()[1].model_dump_json()


def test_a_form_of_this_version_that_cannot_be_read_has_its_json_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its JSON was left out of the read: it is read then, and parsed in full."""
    report = _made()[1]
    store = _store_with(tmp_path / "astraeus.db", report)
    broken = compact.PREFIX + '"fingerprint":"","report":{"gpus":3}}'
    with store.database.write() as conn:
        conn.execute("UPDATE machines SET compact = ? WHERE name = ?", (broken, "nvl"))
    with caplog.at_level(logging.INFO):
        records = MachineRecords(store)
    assert "machine nvl: its report is parsed in full (MachineReport: [" in caplog.text
    found = records.get("nvl")
    assert found is not None
    assert found.report == report
    assert found.fingerprint == fingerprint(report)


def test_access_labels_in_a_stored_compact_form_are_still_taken_out(tmp_path: Path) -> None:
    """A label listed in `access_labels` after its report was stored stays out of the
    record (`admit`), read from the compact form as from the JSON."""
    report = _made()[3]  # labels team=a
    store = _store_with(tmp_path / "astraeus.db", report)
    records = MachineRecords(store, access_labels=("team",))
    found = records.get("pressed")
    assert found is not None
    assert found.report is not None
    assert "team" not in found.report.labels
    assert found.report.labels == {"topology.astraeus.io/site": "west"}


def test_gpus_are_read_as_gpus() -> None:
    """Nested models come back as their models, enums as enums (not their strings)."""
    report = _made()[1]
    decoded, _ = compact.decode(compact.encode(report, fingerprint(report)))
    gpu = decoded.gpus[2]
    assert isinstance(gpu, GpuInfo)
    assert gpu.health.state is report.gpus[2].health.state
    assert gpu.vendor is report.gpus[2].vendor


def test_a_report_received_is_kept_as_a_start_reads_it(tmp_path: Path) -> None:
    """A new report is kept in its compact reading (alike parts shared with other machines),
    and one that changes nothing placement reads keeps the old report's parts: a long-running
    service holds what a fresh one does."""
    one, two = (MachineReport.model_validate(wire_report(name)) for name in ("w-1", "w-2"))
    store = Store.open(tmp_path / "astraeus.db")
    records = MachineRecords(store)
    for report in (one, two):
        with store.database.write() as conn:
            record, _ = records.write_report(conn, report, None, NOW, 0)
        records.remember(record)
    first, second = records.get("w-1"), records.get("w-2")
    assert first is not None
    assert second is not None
    assert first.report == one
    assert first.report is not None
    assert second.report is not None
    assert first.report.gpus[0].health is second.report.gpus[0].health
    newer = one.model_copy(update={"free_cpu_cores": 3.0})
    with store.database.write() as conn:
        again, _ = records.write_report(conn, newer, None, NOW, 1)
    assert again.report is not None
    assert again.report.free_cpu_cores == 3.0
    assert again.report.gpus[0] is first.report.gpus[0]


_MEMORY_PER_GPU = """
import json, sys, tracemalloc
from astraeus.coordinator import compact
from astraeus.shared import MachineReport
from astraeus.shared.report import GpuInfo

def report(i):
    gpus = [
        {"index": g, "uuid": f"GPU-{i}-{g}", "vendor": "nvidia", "model": "H100",
         "memory_bytes": 85520809984}
        for g in range(8)
    ]
    return {"schema_version": "1.0", "name": f"m-{i}", "cpu_cores": 64,
            "memory_bytes": 2**40, "gpus": gpus}

# What a service does before it reads its machines back, and after: validate reports (each
# validation makes an instance without attributes, which would use up the shared keys' room).
for i in range(2000):
    GpuInfo.model_validate(report(i)["gpus"][0])
forms = [compact.encode(MachineReport.model_validate(report(i)), "") for i in range(2000)]
tracemalloc.start()
kept = [compact.decode(form)[0] for form in forms]
for one in kept[:1000]:
    one.model_dump_json()  # reading __dict__ once adds a small dict over the same values
print(json.dumps({"bytes": tracemalloc.get_traced_memory()[0] / 2000}))
"""


def test_a_kept_report_holds_no_dict_per_gpu() -> None:
    """Decoded GPUs keep their fields as inline values with keys shared by every GPU (`_prime`),
    not a dict each: a machine of 8 GPUs was ~7 KB, and is under 4.5 KB (measured: ~3.5 KB),
    even in a process that validated thousands of GPUs first. A fresh interpreter: the test
    process's own history of GPU instances is not a service's."""
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_PER_GPU], capture_output=True, text=True, check=True
    )
    per_machine = json.loads(done.stdout)["bytes"]
    assert per_machine < 4500, per_machine


def test_gpus_kept_as_inline_values_read_and_print_as_parsed_ones() -> None:
    report = _made()[1]
    decoded, _ = compact.decode(compact.encode(report, fingerprint(report)))
    parsed = MachineReport.model_validate_json(report.model_dump_json())
    for mine, theirs in zip(decoded.gpus, parsed.gpus, strict=True):
        assert mine == theirs
        assert mine.model_dump() == theirs.model_dump()
        assert mine.__dict__ == theirs.__dict__
        assert mine.model_copy(update={"index": 9}).index == 9
        assert mine.index == theirs.index  # the copy changed nothing shared


def test_strings_no_two_machines_share_are_not_interned() -> None:
    """A GPU's UUID is not interned (it would only grow the interpreter's table), a model name
    alike machines repeat is."""
    report = _made()[1]
    one, _ = compact.decode(compact.encode(report, fingerprint(report)))
    two, _ = compact.decode(compact.encode(report, fingerprint(report)))
    assert one.gpus[0].model is two.gpus[0].model
    assert one.gpus[0].uuid == two.gpus[0].uuid
    assert one.gpus[0].uuid is not two.gpus[0].uuid
