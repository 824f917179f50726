"""Whether a rendezvous port is free on this machine, checked before worker 0 starts."""

import logging
import socket
from collections.abc import Callable, Collection

from astraeus.shared import Assignment, BusyPort

from ..rendezvous import user_picks_port

log = logging.getLogger(__name__)


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


class PortGate:
    """Worker 0 checks its rendezvous port before it starts: a port in use here (another
    program, or a run the coordinator does not know of) would fail the whole run at its
    rendezvous. Such a task waits, its agent reports the port busy, and the coordinator gives
    another; the task starts once its port changes. A port the run chose itself (`MASTER_PORT`
    in its `env`) is the run's own business and is not checked."""

    def __init__(self, free: Callable[[int], bool] = port_free) -> None:
        self.free = free
        self.busy: dict[str, int] = {}
        """Task uid to the port found in use, while it is still the assigned one."""

    def keep(self, assigned: Collection[str]) -> None:
        """Forget tasks no longer assigned."""
        self.busy = {uid: port for uid, port in self.busy.items() if uid in assigned}

    def in_use(self, assignment: Assignment) -> bool:
        """True when `assignment` must not start now: its worker 0's port is in use."""
        rdv = assignment.rendezvous
        if rdv.rank != 0 or assignment.cancel or user_picks_port(assignment.env):
            return False
        port, uid = rdv.master_port, assignment.task_uid
        if self.busy.get(uid) == port:
            return True  # reported busy: never started on it, even if it frees meanwhile
        if self.free(port):
            self.busy.pop(uid, None)
            return False
        self.busy[uid] = port
        log.warning(
            "task %s not started: its rendezvous port %d is in use on this machine; asking the"
            " coordinator for another",
            assignment.task,
            port,
        )
        return True

    def reports(self) -> list[BusyPort]:
        """What the next report says: each task waiting for another port."""
        return [BusyPort(task_uid=uid, port=port) for uid, port in sorted(self.busy.items())]
