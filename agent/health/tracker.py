"""The agent keeps each GPU's history, because only history shows a counter *growing*:
healthy, at risk (with the signals that put it there) or faulted (with the reason).

Fatal Xids fault a GPU until it is reset (its cumulative counters start again from zero) or
re-validated (`revalidate`); they are kept in a small JSON file so an agent restart does not
forget them. At-risk signals clear after a quiet window."""

import json
import logging
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from astraeus.agent.backends import GpuSample, XidEvent
from astraeus.shared import GpuHealth, GpuHealthState, HealthSignal

from .signals import HealthPolicy, Window, counter_signals, fault_signals, state_signals
from .xid import XidClass, classify_xid, describe_xid

log = logging.getLogger(__name__)

__all__ = ["HealthPolicy", "HealthTracker"]


@dataclass
class _Active:
    message: str
    since: datetime
    last_seen: datetime


@dataclass
class _Gpu:
    history: deque[tuple[datetime, dict[str, float]]] = field(default_factory=deque)
    at_risk: dict[str, _Active] = field(default_factory=dict)
    xid_faults: dict[str, HealthSignal] = field(default_factory=dict)


class HealthTracker:
    def __init__(self, policy: HealthPolicy | None = None, *, state_file: Path | None = None):
        self.policy = policy or HealthPolicy()
        self._gpus: dict[str, _Gpu] = {}
        self._state_file = state_file
        self._load()

    def record_xid(self, event: XidEvent) -> None:
        """A fatal Xid faults the GPU; an application Xid is ignored; the rest put it at risk."""
        kind, gpu = classify_xid(event.xid), self._gpu(event.uuid)
        text = describe_xid(event.xid)
        if kind == XidClass.FATAL:
            message = f"{text}: reset the GPU or reboot the node"
            gpu.xid_faults[f"xid_{event.xid}"] = HealthSignal(
                kind="xid", message=message, since=event.at
            )
            self._save()
        elif kind == XidClass.AT_RISK:
            self._seen(gpu, f"xid_{event.xid}", text, event.at)

    def update(self, sample: GpuSample, now: datetime) -> GpuHealth:
        """Add one sample to the GPU's history and classify it."""
        gpu = self._gpu(sample.uuid)
        if self._was_reset(gpu, sample):
            log.info("GPU %s: counters restarted (reset); clearing its Xid faults", sample.uuid)
            gpu.history.clear()
            gpu.xid_faults.clear()
            self._save()
        window = self._window(gpu, sample, now)
        found = {**state_signals(sample), **counter_signals(sample, window, self.policy)}
        for kind, message in found.items():
            self._seen(gpu, kind, message, now)
        self._expire(gpu, now)
        faults = [
            HealthSignal(kind=k, message=m, since=now) for k, m in fault_signals(sample).items()
        ]
        return self._health(gpu, faults)

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
        signals = [
            HealthSignal(kind=kind.split("_")[0] if kind.startswith("xid_") else kind,
                         message=a.message, since=a.since)
            for kind, a in sorted(gpu.at_risk.items())
        ]  # fmt: skip
        state = GpuHealthState.AT_RISK if signals else GpuHealthState.HEALTHY
        return GpuHealth(state=state, signals=signals)

    def _window(self, gpu: _Gpu, sample: GpuSample, now: datetime) -> Window:
        gpu.history.append((now, dict(sample.counters)))
        start = now.timestamp() - self.policy.window_seconds
        # keep the newest sample at or before the window's start, so a full window is measurable
        while len(gpu.history) > 1 and gpu.history[1][0].timestamp() <= start:
            gpu.history.popleft()
        first_at, first = gpu.history[0]
        return Window(first=first, last=sample.counters, seconds=(now - first_at).total_seconds())

    @staticmethod
    def _was_reset(gpu: _Gpu, sample: GpuSample) -> bool:
        if not gpu.history:
            return False
        before = gpu.history[-1][1]
        return any(sample.counters.get(k, v) < v for k, v in before.items())

    def _seen(self, gpu: _Gpu, kind: str, message: str, at: datetime) -> None:
        active = gpu.at_risk.get(kind)
        if active is None:
            gpu.at_risk[kind] = _Active(message, since=at, last_seen=at)
        else:
            active.message, active.last_seen = message, max(active.last_seen, at)

    def _expire(self, gpu: _Gpu, now: datetime) -> None:
        for kind, active in list(gpu.at_risk.items()):
            if (now - active.last_seen).total_seconds() >= self.policy.quiet_seconds:
                del gpu.at_risk[kind]

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
        if self._state_file is None:
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
