"""Rendezvous ports held like GPUs: one per worker 0 of a run of several workers from the
configured range, never one another live (or Lost and held) task holds on the machine; a port an
agent finds busy is taken back and another given, skipping every port the agent found in use,
without the run failing. A world of one (a one-worker run, an array element) holds none."""

from __future__ import annotations

import contextlib
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from helpers import reserved_ports

from astraeus.agent.runtime import rendezvous_port
from astraeus.agent.runtime.rendezvous_port import PortGate
from astraeus.coordinator.scheduler.port_grants import choose_port
from astraeus.coordinator.settings import PortRange, load
from astraeus.shared import Assignment, PortSpan
from astraeus.shared.settings import SettingsError

from .conftest import ClientFactory, Cluster, make_cluster

PAIR = {
    "requested_resources": {
        "gpu_requests": {"count": 2},
        "machines": 2,
        "node_selection": {"mode": "Any", "names": ["gpu-01"]},
    }
}
"""Two workers of one GPU each, which may share a machine: a run that needs a rendezvous port."""


def _port(reply: dict[str, Any], task: str) -> int | None:
    found = [a for a in reply["assignments"] if a["task"] == task]
    return found[0]["rendezvous"]["master_port"] if found else None


def test_the_lowest_port_not_taken_is_chosen() -> None:
    """The first free port of the range, and none once every one is taken."""
    ports = PortRange(29500, 29502)
    assert choose_port(ports, {29500}) == 29501
    assert choose_port(ports, {29500, 29501, 29502}) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("29500", "'29500'", id="one-number"),
        pytest.param("30000-29000", "'30000-29000'", id="backwards"),
        pytest.param("0-10", "'0-10'", id="zero"),
        pytest.param("65000-70000", "'65000-70000'", id="past-65535"),
    ],
)
def test_a_bad_port_range_is_refused(value: str, message: str) -> None:
    """`rendezvous_ports` must be FIRST-LAST within 1-65535; the error names the setting."""
    with pytest.raises(SettingsError) as caught:
        load(env={"ASTRAEUS_RENDEZVOUS_PORTS": value})
    assert str(caught.value) == (
        f"rendezvous_ports: {message} is not FIRST-LAST with 1 <= FIRST <= LAST <= 65535,"
        " e.g. 29500-30499"
    )


async def test_runs_on_one_machine_hold_different_ports(cluster: Cluster) -> None:
    """Two runs' workers 0 on one machine get 29500 and 29501; once the first ends, its port
    is given again."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "one", gpus=0, **PAIR)
    await c.submit("vision", "two", gpus=0, **PAIR)
    await c.run_pass()
    reply = await c.report("gpu-01")
    assert (_port(reply, "one-0"), _port(reply, "two-0")) == (29500, 29501)
    await c.report("gpu-01", [{"task": "one-0", "state": "Succeeded", "exit_code": 0}])
    await c.submit("vision", "three", gpus=0, **PAIR)
    await c.run_pass()
    assert _port(await c.report("gpu-01"), "three-0") == 29500


async def test_a_lost_task_keeps_its_port(cluster: Cluster) -> None:
    """A Lost task whose worker may still run keeps its port on its machine, as its GPUs."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "old", gpus=0, **PAIR)
    await c.run_pass()
    running = [{"task": f"old-{i}", "state": "Running"} for i in (0, 1)]
    await c.report("gpu-01", running, tasks=["old-0", "old-1"])
    c.clock.advance(301)
    assert (await c.run_pass()).lost >= 1
    await c.submit("vision", "new", gpus=0, **PAIR)
    await c.report("gpu-01", tasks=["old-0", "old-1"])
    await c.run_pass()
    assert _port(await c.report("gpu-01", tasks=["old-0", "old-1"]), "new-0") == 29501


async def test_the_configured_range_is_used(aiohttp_client: ClientFactory, tmp_path: Path) -> None:
    """With `rendezvous_ports` 31000-31001 the first run gets 31000."""
    c = await make_cluster(aiohttp_client, tmp_path, rendezvous_ports="31000-31001")
    try:
        await c.workspace("vision")
        await c.report("gpu-01")
        await c.submit("vision", "one", gpus=0, **PAIR)
        await c.run_pass()
        assert _port(await c.report("gpu-01"), "one-0") == 31000
    finally:
        c.store.close()


async def test_a_busy_port_is_replaced_without_failing_the_run(cluster: Cluster) -> None:
    """Worker 0's agent reports 29500 busy: the task gives it back, is left out of the reply
    until the next pass gives 29501, and the run stays Running, its task Assigned."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "meet", gpus=0, **PAIR)
    await c.run_pass()
    uid = c.uid("gpu-01", "meet-0")
    assert _port(await c.report("gpu-01"), "meet-0") == 29500
    reply = await c.report("gpu-01", busy_ports=[{"task_uid": uid, "port": 29500}])
    assert [a["task"] for a in reply["assignments"]] == []
    await c.run_pass()
    again = await c.report("gpu-01", busy_ports=[{"task_uid": uid, "port": 29500}])
    assert _port(again, "meet-0") == 29501
    _, run = await c.call("GET", "/api/v1/runs/meet", c.tokens["vision"])
    assert (run["state"], run["tasks"][0]["state"]) == ("Running", "Assigned")


async def test_every_port_found_in_use_is_skipped_at_once(cluster: Cluster) -> None:
    """Another tenant's worker binds 29500-29510 and more: worker 0's agent reports its port
    busy with every port of the range in use there, and the very next pass gives 29511, not
    29501; ports in use reported by another machine's agent change nothing here."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "meet", gpus=0, **PAIR)
    await c.run_pass()
    uid = c.uid("gpu-01", "meet-0")
    assert _port(await c.report("gpu-01"), "meet-0") == 29500
    in_use = [{"first": 29500, "last": 29510}, {"first": 29700, "last": 29700}]
    await c.report("gpu-01", busy_ports=[{"task_uid": uid, "port": 29500}], ports_in_use=in_use)
    await c.run_pass()
    assert _port(await c.report("gpu-01"), "meet-0") == 29511
    held = c.store.database.read("SELECT port FROM tasks WHERE uid = ?", (uid,))
    assert [row["port"] for row in held] == [29511]


async def test_a_world_of_one_holds_no_port(cluster: Cluster) -> None:
    """A one-worker run and an array element are sent at once with no `master_port` and hold
    none of the range; the reply tells the agent the range."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.submit("vision", "alone", gpus=1)
    sweep = {"gpu_requests": {"count": 1}, "array": {"size": 2, "concurrency": 2}}
    await c.submit("vision", "sweep", gpus=0, requested_resources=sweep)
    await c.run_pass()
    reply = await c.report("gpu-01")
    assert reply["rendezvous_ports"] == {"first": 29500, "last": 30499}
    meets = {a["task"]: a["rendezvous"] for a in reply["assignments"]}
    assert set(meets) == {"alone-0", "sweep-0", "sweep-1"}
    assert {meet["master_port"] for meet in meets.values()} == {None}
    assert {meet["world_size"] for meet in meets.values()} == {1}
    held = c.store.database.read("SELECT port FROM tasks WHERE port IS NOT NULL")
    assert held == []


async def test_an_agent_cannot_take_back_another_machines_port(cluster: Cluster) -> None:
    """A busy report naming a task of another machine, or a port the task does not hold,
    changes nothing."""
    c = cluster
    await c.workspace("vision")
    await c.report("gpu-01")
    await c.report("gpu-02")
    await c.submit("vision", "meet", gpus=0, **PAIR)
    await c.run_pass()
    uid = c.uid("gpu-01", "meet-0")
    await c.report("gpu-02", busy_ports=[{"task_uid": uid, "port": 29500}])
    await c.report("gpu-01", busy_ports=[{"task_uid": uid, "port": 29999}])
    await c.run_pass()
    assert _port(await c.report("gpu-01"), "meet-0") == 29500


@pytest.mark.parametrize(
    ("port", "problem"),
    [
        pytest.param(0, "must be at least 1, got 0", id="zero"),
        pytest.param(70000, "must be at most 65535, got 70000", id="too-big"),
        pytest.param(
            "NaN",
            "Input should be a valid integer, unable to parse string as an integer",
            id="nan",
        ),
    ],
)
async def test_a_busy_report_with_a_bad_port_is_refused(
    cluster: Cluster, port: object, problem: str
) -> None:
    """A busy port outside 1-65535, or not a number, is a 400 naming the field."""
    c = cluster
    body = {
        "report": {"schema_version": "1.0", "name": "gpu-01", "cpu_cores": 1, "memory_bytes": 1},
        "busy_ports": [{"task_uid": "0b5c8f1e-7d2a-4c3b-9e6f-1a2b3c4d5e6f", "port": port}],
    }
    status, data = await c.call(
        "PUT", "/api/v1/machines/gpu-01/report", c.agent_token("gpu-01"), body
    )
    assert status == 400
    fields = {f["field"]: f["problem"] for f in data["fields"]}
    assert fields == {"busy_ports[0].port": problem}


async def test_ports_taken_by_another_program_cost_one_round(
    aiohttp_client: ClientFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 30: another program listens on the first 28 ports of the range (real sockets).
    Worker 0's agent finds its port in use once, reports every taken port of the range in that
    one report, and the next pass gives a port that is free: one warning and one report
    interval, not one of each per port taken."""
    with reserved_ports(40) as first, contextlib.ExitStack() as taken:
        for port in range(first, first + 28):
            with contextlib.suppress(OSError):  # in use by a connection now: busy all the same
                taken.enter_context(socket.create_server(("127.0.0.1", port)))
        c = await make_cluster(aiohttp_client, tmp_path, rendezvous_ports=f"{first}-{first + 39}")
        try:
            await c.workspace("vision")
            await c.report("gpu-01")
            await c.submit("vision", "meet", gpus=0, **PAIR)
            await c.run_pass()
            gate = PortGate()  # the agent's check, with real binds
            reply = await c.report("gpu-01")
            gate.span = PortSpan.model_validate(reply["rendezvous_ports"])
            with caplog.at_level(logging.WARNING, logger=rendezvous_port.__name__):
                assert gate.in_use(_assignment(reply, "meet-0"))
            assert len(caplog.records) == 1
            busy = [item.model_dump() for item in gate.reports()]
            in_use = [span.model_dump() for span in gate.in_use_here]
            found = {port for span in gate.in_use_here for port in span.ports()}
            assert set(range(first, first + 28)) <= found  # another connection may add more
            await c.report("gpu-01", busy_ports=busy, ports_in_use=in_use)
            await c.run_pass()
            given = _assignment(await c.report("gpu-01", busy_ports=busy), "meet-0")
            free = min(port for port in range(first, first + 40) if port not in found)
            assert given.rendezvous.master_port == free
            assert not gate.in_use(given)
        finally:
            c.store.close()


def _assignment(reply: dict[str, Any], task: str) -> Assignment:
    (found,) = [a for a in reply["assignments"] if a["task"] == task]
    return Assignment.model_validate(found)
