"""The machines as the coordinator keeps them: one `MachineRecord` each, parsed once, in memory.

Built from the store's reads of the `machines` table and kept up to it: every change is written
through to SQLite first (`coordinator/store/machines.py`), except a plain heartbeat, which is
kept here until the next pass writes it (`flush_seen`). Counts every change (`changes`,
`changed_since`) so a pass rebuilds only what changed, and a process that does not write (the
pass worker) follows the file by its change stamp (`reload`). Access labels an agent claims are
taken out of its report here (`admit`)."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import ipaddress
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from astraeus.coordinator import compact
from astraeus.coordinator.store import StorageError, Store
from astraeus.coordinator.store.db import Row
from astraeus.coordinator.store.dialect import Connection
from astraeus.coordinator.store.machines import COLUMNS, MachineRow
from astraeus.shared import MachineReport, MachineState, PressureCondition
from astraeus.shared.labels import POOL, SITE

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MachineRecord:
    """One machine as the coordinator keeps it: the parsed report and what admins set on it.
    Slotted, as are the other per-machine objects kept for every machine in both processes
    (`MachineSnapshot`, `Free`): no `__dict__` each (~300 bytes a machine, 15 MB per process
    at 50,000 machines)."""

    name: str
    report: MachineReport | None = None
    address: str | None = None
    last_seen: datetime | None = None
    acked_seq: int = -1
    cordon_reason: str | None = None
    admin_labels: dict[str, str] = field(default_factory=dict)
    fingerprint: str = ""
    """What in the report decides placement; a change of it triggers a scheduler pass."""

    @property
    def labels(self) -> dict[str, str]:
        """The agent's labels, with the ones admins set winning."""
        reported = self.report.labels if self.report else {}
        return {**reported, **self.admin_labels}

    def silent_since(self, heard_since: datetime | None = None) -> datetime | None:
        """Since when the machine counts as silent: its last report, or `heard_since` (when the
        coordinator could hear reports: its start, or the end of a storage fault) if later.
        An outage of the coordinator is never the machine's silence."""
        if self.last_seen is None:
            return None
        return max(self.last_seen, heard_since) if heard_since else self.last_seen

    def state(
        self, now: datetime, down_after: timedelta, heard_since: datetime | None = None
    ) -> MachineState:
        since = self.silent_since(heard_since)
        if self.report is None or since is None or now - since > down_after:
            return MachineState.DOWN
        return MachineState.UP

    @property
    def site(self) -> str | None:
        return self.labels.get(SITE) or network_site(self.address)


@functools.lru_cache(maxsize=65536)
def network_site(address: str | None) -> str | None:
    """The site of a machine without a site label: the /24 (IPv4) or /64 (IPv6) it connects from."""
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


VOLATILE = frozenset({"reported_at", "free_cpu_cores", "free_memory_bytes"})
"""Report fields that change with every heartbeat and never change where runs fit."""


def fingerprint(report: MachineReport) -> str:
    """Everything but timestamps and free counters (a change there may change where runs fit),
    as a SHA-256 digest: 64 characters kept per machine instead of its whole report again."""
    printed = report.model_dump_json(exclude=set(VOLATILE))
    return hashlib.sha256(printed.encode()).hexdigest()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while every machine is read (or the live state built from them):
    such a read makes millions of objects that all live on, and each of the collector's
    generation-2 passes meanwhile walks all made so far, to free nothing (40 % of reading
    20,000 machines). What it leaves is collected and frozen right after (`settle_loaded`,
    `GcPolicy.settle`). Left as it was found: a collector already off stays off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class MachineRecords:
    """Reads come from memory; every change is written through to SQLite first."""

    def __init__(self, store: Store, access_labels: Iterable[str] = (POOL,)) -> None:
        self._rows = store.machines
        self.access_labels = frozenset({POOL, *access_labels})
        """Labels only admins set: taken out of every report, whatever the agent says."""
        self._ignored: dict[str, dict[str, str]] = {}
        """Access labels each machine's agent reported (and we ignored), to log each once."""
        self._records: dict[str, MachineRecord] = {}
        self.changes = 0
        """Counts every change to a record held in memory (a report, a heartbeat, a cordon, new
        labels, a new machine, a reload that found one): equal counts, the same records."""
        self._changed: dict[str, int] = {}
        """Each machine's last change (the value of `changes` then), oldest first."""
        self._listed_since = 0
        """`changed_since` can name every change after this count (a full reload, which may
        drop machines, is not named per machine)."""
        self._stamp = -1
        """The highest `machines.stamp` read by `reload`: the file's change feed."""
        self._versions: dict[str, int] = {}
        """The `report_version` each record's report was read at (for `reload`)."""
        self._row_of: dict[str, MachineRow] = {}
        """Each machine's row as `reload` last read it."""
        self._seen: dict[str, tuple[str | None, datetime]] = {}
        """Heartbeats not written yet: address and time, by machine (see `flush_seen`)."""
        self._lock = threading.Lock()
        """Held (never across a write) to change a record or `_seen`: heartbeats change them on
        the event loop while the writer thread writes cordons, labels and flushes."""
        store.database.closing.append(self.close)
        self.reload()

    def reload(self) -> None:
        """Bring the records up to the file, for a process that does not write them (the pass
        worker). Only rows stamped since the last reload are read (`Machines.since`). Of those,
        only reports whose `report_version` moved are parsed again, and a machine whose row did
        not change keeps its record, the same object (so what is built from it, such as a pass's
        view of it, can be kept too). A machine gone from the file (the count differs) makes it
        read every row again."""
        with collector_paused() if self._stamp < 0 else contextlib.nullcontext():
            rows = self._rows.since(self._stamp)
            if rows:
                self._apply([row[:-1] for row in rows], full=self._stamp < 0)
                self._stamp = max(self._stamp, *(row[-1] for row in rows))
        if self._rows.count() != len(self._records):
            with collector_paused():
                rows = self._rows.every()
                self._apply([row[:-1] for row in rows], full=True)
                self._stamp = max((row[-1] for row in rows), default=-1)

    def _apply(self, rows: list[MachineRow], *, full: bool) -> None:
        """Records for `rows`; `full`: they are every machine of the file."""
        version = COLUMNS.index("report_version")
        stale = [str(row[0]) for row in rows if self._versions.get(str(row[0])) != row[version]]
        texts = self._rows.reports(stale, compact.PREFIX)  # no JSON where the form is read
        records = {} if full else dict(self._records)
        versions = {} if full else dict(self._versions)
        kept = {} if full else dict(self._row_of)
        changed = []
        for row in rows:
            name = str(row[0])
            old = self._records.get(name)
            versions[name], kept[name] = int(str(row[version])), row
            if name not in texts and old is not None and self._row_of.get(name) == row:
                records[name] = old
                continue
            found = dict(zip(COLUMNS, row, strict=True))
            if name in texts:
                found["report"], found["compact"] = texts[name]
                old = None
            records[name] = self._read(found, old)
            changed.append(name)
        with self._lock:
            self._records, self._versions, self._row_of = records, versions, kept
            if full:
                self.changes += 1
                self._changed, self._listed_since = {}, self.changes
            else:
                for name in changed:
                    self._touch(name)

    def _touch(self, name: str) -> None:
        """Count a change of `name`'s record (the caller holds `_lock`)."""
        self.changes += 1
        self._changed.pop(name, None)
        self._changed[name] = self.changes

    def changed_since(self, changes: int) -> list[str] | None:
        """The machines whose records changed after `changes` (a value of `changes`), the
        latest first; None when that cannot be told (a full reload since)."""
        with self._lock:
            if changes < self._listed_since:
                return None
            found = []
            for name in reversed(self._changed):
                if self._changed[name] <= changes:
                    break
                found.append(name)
            return found

    def _read(self, row: Row, same: MachineRecord | None) -> MachineRecord:
        """The machine's record; one whose row cannot be read back is set aside (no report:
        Down, so nothing is placed there) with a logged reason, and the rest of the cluster
        keeps working. Its agent's next report, checked on the wire, replaces the row."""
        try:
            record = _record(row, same, self._json)
        except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
            reason = str(error).splitlines()[:3]
            log.warning(
                "machine %s is set aside: its stored row cannot be read (%s); it takes no work"
                " until its agent reports again",
                row["name"],
                " ".join(reason),
            )
            return MachineRecord(row["name"])
        report = record.report
        if report is not None and self.access_labels & report.labels.keys():
            # Stored before access labels were taken out (or before this one was listed).
            report = self.admit(report)
            record = replace(record, report=report, fingerprint=fingerprint(report))
        return record

    def _json(self, name: str) -> str | None:
        """The stored JSON of `name`'s report, for a compact form that could not be read (its
        JSON was left out of the read: `Machines.reports`)."""
        return self._rows.reports([name]).get(name, (None, None))[0]

    def admit(self, report: MachineReport) -> MachineReport:
        """The report without the access labels its agent claims (Kubernetes' NodeRestriction:
        a node never labels itself into a pool); logged once per machine and change."""
        claimed = {k: v for k, v in report.labels.items() if k in self.access_labels}
        if self._ignored.get(report.name, {}) != claimed:
            self._ignored[report.name] = claimed
            if claimed:
                listed = ", ".join(f"{k}={v}" for k, v in sorted(claimed.items()))
                log.warning(
                    "machine %s reports %s; ignored: access labels are set by admins"
                    " (PUT /api/v1/machines/%s/labels)",
                    report.name,
                    listed,
                    report.name,
                )
        if not claimed:
            return report
        kept = {k: v for k, v in report.labels.items() if k not in self.access_labels}
        return report.model_copy(update={"labels": kept})

    def get(self, name: str) -> MachineRecord | None:
        return self._records.get(name)

    def all(self) -> list[MachineRecord]:
        return [self._records[name] for name in sorted(self._records)]

    def heartbeat(
        self, report: MachineReport, address: str | None, now: datetime
    ) -> MachineRecord | None:
        """A report with nothing new for placement, kept in memory only; None when it is new
        (the caller writes it with `write_report`).

        Its time and address reach the file at the next `flush_seen`, in one transaction with
        every other machine's: 500 heartbeats a second need not be 500 transactions."""
        printed = fingerprint(report)
        with self._lock:
            old = self._records.get(report.name)
            if old is None or old.report is None or old.fingerprint != printed:
                return None
            # The old report with the new volatile fields: the same content as `report`, but it
            # shares the old one's GPUs and ports, so a heartbeat leaves a couple of new objects
            # behind, not hundreds (the collector's full passes grow with what survives).
            volatile = {field: getattr(report, field) for field in VOLATILE}
            kept = old.report.model_copy(update=volatile)
            updated = replace(old, report=kept, address=address, last_seen=now)
            self._records[report.name] = updated
            self._touch(report.name)
            self._seen[report.name] = (address, now)
        return updated

    def heard(self, name: str, now: datetime) -> MachineRecord | None:
        """A report refused (shed under overload, or its write failed on a storage fault)
        still says its machine is alive: its last-seen time moves, in memory and at the next
        `flush_seen` in the file, as a heartbeat's does; its report and address stay. None for
        a machine that never reported (it is not Up either way)."""
        with self._lock:
            old = self._records.get(name)
            if old is None or old.report is None:
                return None
            if old.last_seen is not None and old.last_seen >= now:
                return old
            updated = replace(old, last_seen=now)
            self._records[name] = updated
            self._touch(name)
            self._seen[name] = (old.address, now)
        return updated

    def flush_seen(self, limit: int | None = None) -> int:
        """Write the heartbeats kept in memory (at most `limit` machines' in this transaction,
        the oldest first); returns how many machines."""
        with self._lock:
            if limit is None or limit >= len(self._seen):
                seen, self._seen = self._seen, {}
            else:
                names = list(self._seen)[:limit]
                seen = {name: self._seen.pop(name) for name in names}
        if seen:
            try:
                self._rows.write_seen(seen)
            except Exception:
                # Not written (the disk is full…): kept for the next flush, unless a newer
                # heartbeat came meanwhile.
                with self._lock:
                    self._seen = {**seen, **self._seen}
                raise
        return len(seen)

    def close(self) -> None:
        """Write the heartbeats kept in memory (as the file closes: `Database.closing`). During a
        storage fault they are dropped (logged): the next start counts silence from its own start
        anyway."""
        try:
            self.flush_seen()
        except StorageError as error:
            log.warning("heartbeats since the last pass not saved: %s", error)

    def write_report(
        self,
        conn: Connection,
        report: MachineReport,
        address: str | None,
        now: datetime,
        acked_seq: int,
    ) -> tuple[MachineRecord, MachineRecord | None]:
        """Store a report inside the caller's transaction; returns the new and the old record.

        The caller commits, then calls `remember`, so memory never runs ahead of the file."""
        old = self._records.get(report.name)
        with self._lock:
            self._seen.pop(report.name, None)  # written now; a later flush must not set it back
        printed = fingerprint(report)
        if old is not None and old.report is not None and old.fingerprint == printed:
            # Nothing that matters changed: a heartbeat, not a new report worth writing.
            self._rows.write_beat(conn, report.name, address, now, acked_seq)
            # Memory keeps the newest report (timestamps, free counters); the file keeps the
            # newest one that could change placement. The old report's parts are kept (the
            # same content), as a heartbeat keeps them: a fresh parse is ~3 times the memory.
            volatile = {field: getattr(report, field) for field in VOLATILE}
            kept = old.report.model_copy(update=volatile)
            updated = replace(old, report=kept, address=address, last_seen=now, acked_seq=acked_seq)
            return updated, old
        report_json = report.model_dump_json()
        form = compact.encode(report, printed)
        self._rows.write_report(conn, report.name, report_json, form, address, now, acked_seq)
        base = old or MachineRecord(report.name)
        new = replace(
            base,
            # Kept as a start reads it (`compact.decode`: alike parts shared), not as parsed
            # from the wire, so a long-running service holds what a fresh one does.
            report=compact.decode(form)[0],
            address=address,
            last_seen=now,
            acked_seq=acked_seq,
            fingerprint=printed,
        )
        return new, old

    def remember(self, record: MachineRecord) -> None:
        with self._lock:
            self._records[record.name] = record
            self._touch(record.name)

    def cordon(self, name: str, reason: str | None) -> MachineRecord | None:
        """Cordon with a reason (None uncordons)."""
        record = self._records.get(name)
        if record is None:
            return None
        self._rows.cordon(name, reason)
        return self._changed_to(record, cordon_reason=reason)

    def set_labels(self, name: str, labels: dict[str, str]) -> MachineRecord | None:
        record = self._records.get(name)
        if record is None:
            return None
        self._rows.set_labels(name, labels)
        return self._changed_to(record, admin_labels=dict(labels))

    def _changed_to(self, record: MachineRecord, **changes: object) -> MachineRecord:
        """The newest record (a heartbeat may have come meanwhile), changed as written."""
        name = record.name
        with self._lock:
            updated = replace(self._records.get(name, record), **changes)  # type: ignore[arg-type]
            self._records[name] = updated
            self._touch(name)
        return updated

    def forget(self, name: str) -> bool:
        """Drop a machine whose row is gone (`Machines.remove`, once committed); False when it
        was not kept. Counted as a full reload: what was built from every machine (snapshots,
        the placement state) is built again without it."""
        with self._lock:
            found = self._records.pop(name, None)
            self._seen.pop(name, None)
            self._versions.pop(name, None)
            self._row_of.pop(name, None)
            self._ignored.pop(name, None)
            self.changes += 1
            self._changed, self._listed_since = {}, self.changes
        return found is not None

    def ensure(self, name: str, now: datetime) -> MachineRecord:
        """A machine known by name before it reports (its agent token was just made)."""
        record = self._records.get(name)
        if record is not None:
            return record
        self._rows.ensure(name, now)
        record = MachineRecord(name)
        with self._lock:
            self._records[name] = record
            self._touch(name)
        return record


def _record(
    row: Row, same: MachineRecord | None, stored_json: Callable[[str], str | None]
) -> MachineRecord:
    """A machine from its row; `same` is its previous record when the report did not change,
    whose parsed report and fingerprint are kept (parsing 5,000 reports is slow)."""
    report, printed = (same.report, same.fingerprint) if same else _stored(row, stored_json)
    return MachineRecord(
        name=row["name"],
        report=report,
        address=row["address"],
        last_seen=datetime.fromisoformat(row["last_seen"]) if row["last_seen"] else None,
        acked_seq=row["acked_seq"],
        cordon_reason=row["cordon_reason"],
        admin_labels=json.loads(row["labels"]),
        fingerprint=printed,
    )


def _stored(row: Row, stored_json: Callable[[str], str | None]) -> tuple[MachineReport | None, str]:
    """The row's report and its fingerprint: from the compact form the coordinator stored
    beside it (`compact.py`: no parse, alike parts shared), else (a report stored before
    migration 17, or a form of another version) the JSON parsed and checked in full. The row
    may have been read without its JSON (a form this coordinator reads): a form that then
    cannot be read has it read now (`stored_json`)."""
    if row.get("compact"):
        try:
            return compact.decode(row["compact"])
        except compact.FormError as error:
            log.info("machine %s: its report is parsed in full (%s)", row["name"], error)
            if row.get("report") is None:
                row = {**row, "report": stored_json(row["name"])}
    if not row.get("report"):
        return None, ""
    report = MachineReport.model_validate_json(row["report"])
    return report, fingerprint(report)


BLOCKING: tuple[PressureCondition, ...] = (PressureCondition.MEMORY, PressureCondition.DISK)
"""The conditions under which the scheduler places nothing on a machine (its first filter)."""


def takes_runs(state: MachineState, record: MachineRecord) -> bool:
    """Whether a run could be placed on the machine now: Up, not cordoned, under no memory or
    disk pressure. Its idle GPUs count as free only then: free means usable by a run now (the
    machine views' `gpus_free`, the console's Free, `astraeus_gpus{state="free"}`)."""
    report = record.report
    if state is not MachineState.UP or report is None or record.cordon_reason is not None:
        return False
    return not any(condition in report.conditions for condition in BLOCKING)
