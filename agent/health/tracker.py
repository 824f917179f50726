"""The agent keeps each GPU's history, because only history shows a counter *growing*:
healthy, at risk (with the signals that put it there) or faulted (with the reason).

Fatal Xids fault a GPU until it is reset (its cumulative counters start again from zero) or
re-validated (`revalidate`); they are kept in a small JSON file so an agent restart does not
forget them. At-risk signals clear after a quiet window."""

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from astraeus.agent.backends import GpuSample, XidEvent
from astraeus.shared import GpuHealth, GpuHealthState, HealthSignal

from .book import CounterHistory, SignalBook
from .signals import HealthPolicy, counter_signals, fault_signals, state_signals
from .xid import XidClass, classify_xid, describe_xid

log = logging.getLogger(__name__)

__all__ = ["HealthPolicy", "HealthTracker"]


@dataclass
class _Gpu:
    history: CounterHistory = field(default_factory=CounterHistory)
    at_risk: SignalBook = field(default_factory=SignalBook)
    xid_faults: dict[str, HealthSignal] = field(default_factory=dict)
    throttled_since: datetime | None = None
    xids: dict[XidClass, int] = field(default_factory=dict)
    """Xid events heard since the agent started, by class (for /metrics)."""
    last_xid: int | None = None


class HealthTracker:
    def __init__(
        self,
        policy: HealthPolicy | None = None,
        *,
        state_file: Path | None = None,
        read_only: bool = False,
    ):
        """`state_file` keeps the fatal Xids; `read_only` reads it and never writes it."""
        self.policy = policy or HealthPolicy()
        self._gpus: dict[str, _Gpu] = {}
        self._state_file, self._read_only = state_file, read_only
        self._load()

    def record_xid(self, event: XidEvent) -> None:
        """A fatal Xid faults the GPU; an application Xid is ignored; the rest put it at risk."""
        kind, gpu = classify_xid(event.xid), self._gpu(event.uuid)
        gpu.xids[kind] = gpu.xids.get(kind, 0) + 1
        gpu.last_xid = event.xid
        text = describe_xid(event.xid)
        if kind == XidClass.FATAL:
            message = f"{text}: reset the GPU or reboot the node"
            gpu.xid_faults[f"xid_{event.xid}"] = HealthSignal(
                kind="xid", message=message, since=event.at
            )
            self._save()
        elif kind == XidClass.AT_RISK:
            gpu.at_risk.seen(f"xid_{event.xid}", text, event.at)

    def update(self, sample: GpuSample, now: datetime) -> GpuHealth:
        """Add one sample to the GPU's history and classify it."""
        gpu = self._gpu(sample.uuid)
        if gpu.history.restarted(sample.counters) and gpu.xid_faults:
            log.info("GPU %s: counters restarted (reset); clearing its Xid faults", sample.uuid)
            gpu.xid_faults.clear()
            self._save()
        window = gpu.history.add(now, sample.counters, self.policy.window_seconds)
        found = {**state_signals(sample), **counter_signals(sample, window, self.policy)}
        found.update(self._throttling(gpu, sample, now))
        for kind, message in found.items():
            gpu.at_risk.seen(kind, message, now)
        gpu.at_risk.expire(now, self.policy.quiet_seconds)
        faults = [
            HealthSignal(kind=k, message=m, since=now) for k, m in fault_signals(sample).items()
        ]
        return self._health(gpu, faults)

    def _throttling(self, gpu: _Gpu, sample: GpuSample, now: datetime) -> dict[str, str]:
        """Throttling without a break for a whole window, for backends that only say "now"."""
        if not sample.throttled_now:
            gpu.throttled_since = None
            return {}
        gpu.throttled_since = gpu.throttled_since or now
        seconds = (now - gpu.throttled_since).total_seconds()
        if seconds < self.policy.window_seconds:
            return {}
        return {"throttle": f"Throttling: for {seconds:.0f} s without a break"}

    def xid_counts(self, uuid: str) -> tuple[dict[XidClass, int], int | None]:
        """Xid events heard on the GPU since the agent started, by class, and the last one."""
        gpu = self._gpus.get(uuid)
        return (dict(gpu.xids), gpu.last_xid) if gpu else ({}, None)

    def missing(self, uuid: str, where: str, now: datetime) -> GpuHealth:
        """A GPU that was there before and is no longer listed: faulted."""
        message = f"GPU missing: it was at {where} and the driver no longer lists it"
        return self._health(
            self._gpu(uuid), [HealthSignal(kind="missing", message=message, since=now)]
        )

    def revalidate(self, uuid: str) -> bool:
        """Forget the GPU's Xid faults (an operator checked it); True when there were some."""
        gpu = self._gpus.get(uuid)
        if gpu is None or not gpu.xid_faults:
            return False
        gpu.xid_faults.clear()
        self._save()
        return True

    def _health(self, gpu: _Gpu, faults: list[HealthSignal]) -> GpuHealth:
        faults = list(gpu.xid_faults.values()) + faults
        if faults:
            return GpuHealth(state=GpuHealthState.FAULTED, signals=faults)
        signals = gpu.at_risk.signals()
        state = GpuHealthState.AT_RISK if signals else GpuHealthState.HEALTHY
        return GpuHealth(state=state, signals=signals)

    def _gpu(self, uuid: str) -> _Gpu:
        return self._gpus.setdefault(uuid, _Gpu())

    def _load(self) -> None:
        if self._state_file is None or not self._state_file.exists():
            return
        try:
            saved = json.loads(self._state_file.read_text())
            for uuid, faults in saved.get("xid_faults", {}).items():
                self._gpu(uuid).xid_faults = {
                    key: HealthSignal.model_validate(value) for key, value in faults.items()
                }
        except (OSError, ValueError) as exc:
            log.warning("cannot read saved GPU faults from %s: %s", self._state_file, exc)

    def _save(self) -> None:
        if self._state_file is None or self._read_only:
            return
        faults = {
            uuid: {key: s.model_dump(mode="json") for key, s in gpu.xid_faults.items()}
            for uuid, gpu in self._gpus.items()
            if gpu.xid_faults
        }
        try:
            self._state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"xid_faults": faults}, indent=1))
            tmp.replace(self._state_file)
        except OSError as exc:
            log.warning("cannot save GPU faults to %s: %s", self._state_file, exc)
