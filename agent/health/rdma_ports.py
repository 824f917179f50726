"""RDMA port health: a port is at risk while its link flaps, recovers from errors or counts
receive errors, and for a quiet window after (the same windows as GPUs)."""

from datetime import datetime

from astraeus.shared import RdmaPort

from .book import CounterHistory, SignalBook
from .signals import HealthPolicy, Window

_ERRORS = (
    "symbol_error",
    "port_rcv_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


def port_signals(port: RdmaPort, window: Window) -> dict[str, str]:
    """`{kind: message}` for what the port's state and counter growth show."""
    found: dict[str, str] = {}
    span = f"{window.seconds:.0f} s"
    if port.physical_state == "LinkErrorRecovery":
        found["link_error_recovery_now"] = "Port is in link error recovery"
    downed = window.growth("link_downed")
    if downed:
        found["link_downed"] = f"Link went down {downed:.0f} times in the last {span}"
    recovered = window.growth("link_error_recovery")
    if recovered:
        found["link_error_recovery"] = f"Link error recoveries: {recovered:.0f} in the last {span}"
    errors = {name: window.growth(name) or 0 for name in _ERRORS}
    if any(errors.values()):
        parts = ", ".join(f"{name} {n:.0f}" for name, n in errors.items() if n)
        found["port_errors"] = (
            f"Port errors: {sum(errors.values()):.0f} new in the last {span} ({parts})"
        )
    return found


class PortHealthTracker:
    def __init__(self, policy: HealthPolicy | None = None) -> None:
        self.policy = policy or HealthPolicy()
        self._history: dict[str, CounterHistory] = {}
        self._books: dict[str, SignalBook] = {}

    def classify(
        self, ports: list[RdmaPort], counters: dict[str, dict[str, float]], now: datetime
    ) -> list[RdmaPort]:
        """The ports with `at_risk` and `signals` set from their history."""
        return [self._one(port, counters.get(port.hca_name, {}), now) for port in ports]

    def _one(self, port: RdmaPort, counters: dict[str, float], now: datetime) -> RdmaPort:
        history = self._history.setdefault(port.hca_name, CounterHistory())
        book = self._books.setdefault(port.hca_name, SignalBook())
        window = history.add(now, counters, self.policy.window_seconds)
        for kind, message in port_signals(port, window).items():
            book.seen(kind, message, now)
        book.expire(now, self.policy.quiet_seconds)
        signals = book.signals()
        return port.model_copy(update={"at_risk": bool(signals), "signals": signals})
