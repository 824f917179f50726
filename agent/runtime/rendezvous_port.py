"""Rendezvous ports on this machine: whether worker 0's is free before it starts, every port of
the coordinator's range in use when it is not, and a free port of its own for a world of one."""

import logging
import socket
from collections.abc import Callable, Collection, Iterable

from astraeus.shared import Assignment, BusyPort, PortSpan
from astraeus.shared.assignment import MAX_BUSY_PORTS

from ..rendezvous import runs_port, user_picks_port

log = logging.getLogger(__name__)

OWN_PORT_TRIES = 16
"""Tries for a free port outside the range before a world of one fails to start."""


def port_free(port: int) -> bool:
    """True when a listening socket could bind `port` on every IPv4 address now, as
    `torch.distributed`'s TCPStore does (with SO_REUSEADDR, so connections that are merely
    closing do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def kernel_port() -> int:
    """A port the kernel finds free now, from its ephemeral range (`ip_local_port_range`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def own_port(span: PortSpan | None, pick: Callable[[], int] = kernel_port) -> int:
    """A free port for a world of one (a one-worker run, an array element), which holds none of
    the rendezvous range: the kernel's pick, never one of `span`. OSError when none is found."""
    if span is None:
        return pick()
    for _ in range(OWN_PORT_TRIES):
        port = pick()
        if port not in span:
            return port
    raise OSError(f"no free port outside the rendezvous range {span.first}-{span.last} here")


def spans(ports: Iterable[int]) -> list[PortSpan]:
    """Sorted ports as runs of consecutive ones: `29500-29510` is one span."""
    found: list[PortSpan] = []
    first = last = None
    for port in sorted(set(ports)):
        if last is not None and port == last + 1:
            last = port
            continue
        if first is not None and last is not None:
            found.append(PortSpan(first=first, last=last))
        first = last = port
    if first is not None and last is not None:
        found.append(PortSpan(first=first, last=last))
    return found


class PortGate:
    """Worker 0 checks its rendezvous port before it starts: a port in use here (another
    program, another tenant's worker, or a run the coordinator does not know of) would fail the
    whole run at its rendezvous. Such a task waits, its agent reports the port busy together
    with every other port of the range in use here (one probe of the range), and the
    coordinator gives another port, skipping all of them; the task starts once its port
    changes. A port the run chose itself (`MASTER_PORT` or `PET_MASTER_PORT` in its `env`)
    replaces the given one, which is then not checked: the run's own is, and a worker 0 that
    finds it in use fails at once (`runs_own_in_use`), for no other port will do. A world of
    one holds no port of the range and is not checked either."""

    def __init__(self, free: Callable[[int], bool] = port_free) -> None:
        self.free = free
        self.busy: dict[str, int] = {}
        """Task uid to the port found in use, while it is still the assigned one."""
        self.span: PortSpan | None = None
        """The coordinator's rendezvous range, from its last reply (None: not said)."""
        self.in_use_here: list[PortSpan] = []
        """Every port of the range found in use when a worker 0's was, while a task waits."""

    def keep(self, assigned: Collection[str]) -> None:
        """Forget tasks no longer assigned."""
        self.busy = {uid: port for uid, port in self.busy.items() if uid in assigned}
        if not self.busy:
            self.in_use_here = []

    def in_use(self, assignment: Assignment) -> bool:
        """True when `assignment` must not start now: its worker 0's port is in use."""
        rdv = assignment.rendezvous
        port, uid = rdv.master_port, assignment.task_uid
        if port is None or rdv.rank != 0 or assignment.cancel or user_picks_port(assignment.env):
            return False
        if self.busy.get(uid) == port:
            return True  # reported busy: never started on it, even if it frees meanwhile
        if self.free(port):
            self.busy.pop(uid, None)
            return False
        self.busy[uid] = port
        self.in_use_here = spans([port, *self._probe_range()])[:MAX_BUSY_PORTS]
        log.warning(
            "task %s not started: its rendezvous port %d is in use on this machine (%s of the"
            " range in use); asking the coordinator for another",
            assignment.task,
            port,
            sum(len(span.ports()) for span in self.in_use_here),
        )
        return True

    def runs_own_in_use(self, assignment: Assignment) -> str | None:
        """Why worker 0 cannot start: the port its run chose for itself is in use here, so
        its rendezvous would fail with EADDRINUSE; None when it is free, or the run chose
        none, or this is not worker 0."""
        port = runs_port(assignment.env)
        if port is None or assignment.rendezvous.rank != 0 or self.free(port):
            return None
        names = [name for name in ("MASTER_PORT", "PET_MASTER_PORT") if name in assignment.env]
        return f"env.{names[0]}: port {port}, which the run chose, is in use"

    def _probe_range(self) -> list[int]:
        """Every port of the range in use here now: one bind per port, a few ms for 1,000."""
        if self.span is None:
            return []
        return [port for port in self.span.ports() if not self.free(port)]

    def reports(self) -> list[BusyPort]:
        """What the next report says: each task waiting for another port."""
        return [BusyPort(task_uid=uid, port=port) for uid, port in sorted(self.busy.items())]
