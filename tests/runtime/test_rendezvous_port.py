"""Worker 0's rendezvous port is checked before it starts: a port in use holds the task back and
is reported until the coordinator gives another; a port the run chose itself is not checked."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from helpers import reserved_ports
from runtime_rig import assignment

from astraeus.agent.runtime.rendezvous_port import PortGate, own_port, port_free
from astraeus.shared import Assignment, BusyPort, PortSpan


@pytest.fixture
def listening() -> Iterator[int]:
    """A port some other program listens on, on loopback only."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield int(server.getsockname()[1])


def _worker(port: int, rank: int = 0, **extra: object) -> Assignment:
    task = assignment("t-0", ["train"], **extra)
    rendezvous = task.rendezvous.model_copy(update={"master_port": port, "rank": rank})
    return task.model_copy(update={"rendezvous": rendezvous})


def test_a_port_listened_on_anywhere_is_not_free(listening: int) -> None:
    """A socket listening on 127.0.0.1 makes the port busy for a bind on every address; once it
    closes, the port is free. (The port is held by a bound socket that does not listen all the
    while, so no other program can take it in between.)"""
    assert not port_free(listening)
    with reserved_ports(1) as port:
        assert port_free(port)
        with socket.create_server(("127.0.0.1", port)):
            assert not port_free(port)
        assert port_free(port)


def test_worker_0_waits_and_reports_a_busy_port_until_it_changes(listening: int) -> None:
    """Worker 0 on a busy port is held back and reported; it stays held back on that port even
    once it frees; with another port it starts and the report is dropped."""
    free = {listening: False}
    gate = PortGate(lambda port: free.get(port, True))
    first = _worker(listening)
    assert gate.in_use(first)
    assert gate.reports() == [BusyPort(task_uid=first.task_uid, port=listening)]
    free[listening] = True
    assert gate.in_use(first)
    assert not gate.in_use(_worker(listening + 1))
    assert gate.reports() == []


def test_only_worker_0_checks_and_not_a_port_the_run_chose(listening: int) -> None:
    """Workers other than 0 do not check (they only connect); nor does a run whose env sets
    MASTER_PORT; a task no longer assigned is forgotten."""
    gate = PortGate(port_free)
    assert not gate.in_use(_worker(listening, rank=1))
    assert not gate.in_use(_worker(listening, env={"MASTER_PORT": str(listening)}))
    task = _worker(listening)
    assert gate.in_use(task)
    gate.keep([])
    assert gate.reports() == []


def test_every_port_of_the_range_in_use_is_reported_at_once() -> None:
    """Another tenant holds 29500-29510 and 29700: worker 0's port found busy sends one probe of
    the whole range, and the report carries every port in use as spans, so the coordinator
    skips them all in one step; once no task waits, nothing more is said."""
    taken = {*range(29500, 29511), 29700}
    gate = PortGate(lambda port: port not in taken)
    gate.span = PortSpan(first=29500, last=30499)
    task = _worker(29500)
    assert gate.in_use(task)
    assert gate.in_use_here == [
        PortSpan(first=29500, last=29510),
        PortSpan(first=29700, last=29700),
    ]
    gate.keep(set())
    assert (gate.reports(), gate.in_use_here) == ([], [])


def test_a_real_listener_in_the_range_is_found_by_the_probe() -> None:
    """With a real socket: the task's own port, taken by a listener, is found busy and is
    among the ports reported in use (its neighbours may be in use too, by anything on this
    machine: they are not asserted either way)."""
    with socket.create_server(("127.0.0.1", 0)) as one:
        low = int(one.getsockname()[1])
        gate = PortGate(port_free)
        gate.span = PortSpan(first=low, last=low + 3)
        assert gate.in_use(_worker(low))
        assert any(span.first <= low <= span.last for span in gate.in_use_here)


def test_a_world_of_one_is_not_checked_and_gets_a_port_outside_the_range() -> None:
    """A world of one (no `master_port`) holds no port and is never held back; its own port
    is the kernel's pick, never one of the range (a pick inside it is tried again)."""
    alone = assignment("solo-0", ["train"])
    rendezvous = alone.rendezvous.model_copy(update={"master_port": None, "world_size": 1})
    gate = PortGate(lambda port: False)
    assert not gate.in_use(alone.model_copy(update={"rendezvous": rendezvous}))
    span = PortSpan(first=29500, last=30499)
    picks = iter([29600, 29999, 41000])
    assert own_port(span, lambda: next(picks)) == 41000
    with pytest.raises(OSError, match="no free port outside the rendezvous range 29500-30499"):
        own_port(span, lambda: 29501)
    assert 1 <= own_port(None) <= 65535
