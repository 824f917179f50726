"""Distributed runs meet using only the variables Astraeus gives them, as real processes: a
coordinator on 127.0.0.1 and agents on the fake backend run `examples/distributed/barrier.py`
(worker 0 listens on MASTER_ADDR:MASTER_PORT, the others connect, all agree on WORLD_SIZE) as
2 × 8, as 4 × 4 and as two workers stacked on one machine, while another process holds the first
port of the rendezvous range; the same with `torch.distributed` and Gloo where PyTorch is
installed; and behind a TCP forwarder standing in for a proxy."""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import WAIT_SECONDS, reserved_ports, until

from .forwarder import Forwarder
from .test_real_processes import AS_THIS_USER, FAST, Cluster

pytestmark = pytest.mark.slow  # four agents and real distributed runs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples/distributed"
PASSED = re.compile(r"rank (\d+) of (\d+) \(local rank (\d+)\): barrier at ([0-9.]+):(\d+) passed")
MACHINES = ("node-a", "node-b", "node-c", "node-d")


class Rig:
    """A coordinator and its agents as processes, and a member token for workspace e2e."""

    def __init__(self, cluster: Cluster, admin: str, member: str) -> None:
        self.cluster, self.admin, self.member = cluster, admin, member

    def astra(self, *argv: str) -> str:
        return self.cluster.astra(*argv, token=self.member)

    def run(self, name: str, *argv: str, within: float = WAIT_SECONDS) -> dict[str, Any]:
        """Submit a run and wait for it to end; answers its status."""
        self.astra("astraeus", "run", "--name", name, *argv)
        return dict(until(f"{name} to end", lambda: self._ended(name), within=within))

    def _ended(self, name: str) -> dict[str, Any] | None:
        run = json.loads(self.astra("astraeus", "status", name, "-o", "json"))
        return run if run["state"] in ("Succeeded", "Failed", "Cancelled") else None

    def passed(self, name: str, workers: int) -> list[tuple[int, int, int, str, int]]:
        """Every worker's `barrier ... passed` line from the run's logs, by rank."""

        def lines() -> list[tuple[int, int, int, str, int]] | None:
            found = PASSED.findall(self.astra("astraeus", "logs", name))
            got = sorted((int(r), int(w), int(lr), a, int(p)) for r, w, lr, a, p in found)
            return got if len(got) == workers else None

        return list(until(f"{name}'s {workers} log lines", lines))

    def machines(self) -> dict[str, dict[str, Any]]:
        listed = json.loads(self.astra("astraeus", "machines", "-o", "json"))
        return {m["name"]: m for m in listed["machines"]}


def start(
    cluster: Cluster, root: Path, *, ports: str, agents: dict[str, list[str]], via: str = ""
) -> Rig:
    """A coordinator with `rendezvous_ports` = `ports` and one fake-H100 agent per entry of
    `agents` (name: extra flags), reporting to `via` (default: the coordinator itself)."""
    state = root / "coordinator"
    cluster.start_coordinator(
        state, "--cluster-name", "e2e", env={**FAST, "ASTRAEUS_RENDEZVOUS_PORTS": ports}
    )
    admin = cluster.admin_token(state)
    member = cluster.member_of_e2e(admin)
    for name, flags in agents.items():
        secret = cluster.astra(
            "astraeus", "token", "create", "--role", "agent", "--machine", name, token=admin
        )
        token_file = root / f"{name}.token"
        token_file.write_text(secret)
        cluster.start(
            name,
            "astraeus-agent", "run", "--coordinator", via or cluster.url,
            "--token-file", str(token_file), "--name", name, "--backend", "fake:h100-sxm",
            "--state-dir", str(root / name), *flags, env=AS_THIS_USER,
        )  # fmt: skip
    rig = Rig(cluster, admin, member)
    total = 8 * len(agents)
    until("every agent's GPUs", lambda: _free(rig) == total)
    return rig


def _free(rig: Rig) -> int:
    return sum(m["gpus_free"] for m in rig.machines().values() if m["state"] == "Up")


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, int]]:
    """Four agents, and another program listening on the first port of the range (the rest of
    the range is held for the test's workers alone: `reserved_ports`)."""
    root = tmp_path_factory.mktemp("rendezvous")
    with reserved_ports(41) as first, socket.create_server(("127.0.0.1", first)):
        cluster = Cluster(root)
        try:
            agents: dict[str, list[str]] = {name: [] for name in MACHINES}
            yield start(cluster, root, ports=f"{first}-{first + 40}", agents=agents), first
        finally:
            cluster.stop()


def _barrier() -> list[str]:
    return ["--", sys.executable, str(EXAMPLES / "barrier.py")]


def _meets(rig: Rig, name: str, workers: int, busy: int) -> list[tuple[int, int, int, str, int]]:
    """The run succeeded, every worker passed the barrier at one address and port, and that
    port is not the busy one."""
    lines = rig.passed(name, workers)
    assert [(rank, world) for rank, world, _, _, _ in lines] == [
        (r, workers) for r in range(workers)
    ]
    assert len({(addr, port) for _, _, _, addr, port in lines}) == 1
    assert lines[0][4] != busy
    return lines


def test_two_workers_of_eight_gpus_meet(held: tuple[Rig, int]) -> None:
    """A 2 × 8 run meets at worker 0's machine on a port of the range other than the busy
    first one, and succeeds."""
    rig, first = held
    run = rig.run("two-by-eight", "--gpus", "16", "--machines", "2", *_barrier())
    assert (run["state"], run["shape"]["tasks"], run["shape"]["gpus_each"]) == ("Succeeded", 2, 8)
    lines = _meets(rig, "two-by-eight", 2, first)
    assert first < lines[0][4] <= first + 40


def test_four_workers_of_four_gpus_meet(held: tuple[Rig, int]) -> None:
    """A 4 × 4 run over four machines meets and succeeds."""
    rig, first = held
    run = rig.run("four-by-four", "--gpus", "16", "--machines", "4", *_barrier())
    assert (run["state"], run["shape"]["tasks"], run["shape"]["gpus_each"]) == ("Succeeded", 4, 4)
    assert {t["machine"] for t in run["tasks"]} == set(MACHINES)
    _meets(rig, "four-by-four", 4, first)


def test_two_workers_stacked_on_one_machine_meet(held: tuple[Rig, int]) -> None:
    """Two workers on one machine (`mode: Any`) get LOCAL_RANK 0 and 1 and meet."""
    rig, first = held
    argv = ["--gpus", "2", "--machines", "2", "--mode", "Any", "--names", "node-c"]
    run = rig.run("stacked", *argv, *_barrier())
    assert run["state"] == "Succeeded"
    assert [t["machine"] for t in run["tasks"]] == ["node-c", "node-c"]
    lines = _meets(rig, "stacked", 2, first)
    assert [local for _, _, local, _, _ in lines] == [0, 1]


def test_behind_a_proxy_workers_meet_at_the_advertised_addresses(tmp_path: Path) -> None:
    """Agents report through a TCP forwarder, so the coordinator's peer is the proxy's address
    (127.0.0.9); they advertise 127.0.0.2 and 127.0.0.3. The machines show those addresses, and
    a 2 × 8 run's workers meet at worker 0's advertised address, never the proxy's."""
    cluster = Cluster(tmp_path)
    forwarder = Forwarder(lambda: ("127.0.0.1", cluster.port), source="127.0.0.9")
    advertised = {"node-a": "127.0.0.2", "node-b": "127.0.0.3"}
    agents = {name: ["--advertise-address", addr] for name, addr in advertised.items()}
    with reserved_ports(21) as first:
        try:
            via = f"http://127.0.0.1:{forwarder.port}"
            rig = start(cluster, tmp_path, ports=f"{first}-{first + 20}", agents=agents, via=via)
            machines = rig.machines()
            assert {name: machines[name]["address"] for name in agents} == advertised
            run = rig.run("proxied", "--gpus", "16", "--machines", "2", *_barrier())
            assert run["state"] == "Succeeded"
            lines = rig.passed("proxied", 2)
            lead = next(t["machine"] for t in run["tasks"] if t["name"] == "proxied-0")
            assert {addr for _, _, _, addr, _ in lines} == {advertised[lead]}
        finally:
            cluster.stop()
            forwarder.close()
