"""The address a machine advertises: checked on the wire, used for MASTER_ADDR and the site,
never the TCP peer; a machine without a usable one is flagged in `astra astraeus machines`."""

from __future__ import annotations

from typing import Any

import pytest

from astraeus.coordinator.api.agents import usable_address
from astraeus.coordinator.cli.machines_view import state_text
from astraeus.shared.machines import MachineView

from .conftest import Cluster


@pytest.mark.parametrize(
    ("advertised", "peer", "usable"),
    [
        pytest.param("10.0.0.5", "192.0.2.10", "10.0.0.5", id="behind-a-proxy"),
        pytest.param("127.0.0.2", "127.0.0.1", "127.0.0.2", id="loopback-cluster"),
        pytest.param("127.0.0.1", "10.9.9.9", None, id="loopback-through-a-tunnel"),
        pytest.param(None, "10.0.0.5", None, id="none-advertised-peer-never-used"),
    ],
)
def test_the_usable_address(advertised: str | None, peer: str, usable: str | None) -> None:
    """What the agent advertises, never the peer; loopback only when the peer is loopback too."""
    assert usable_address(advertised, peer) == usable


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        pytest.param("gpu-01", "Value error, 'gpu-01' is not an IP address", id="a-name"),
        pytest.param(
            "0.0.0.0",  # noqa: S104 - an address refused, not bound
            "Value error, 0.0.0.0 is not an address other machines can reach (unspecified,"
            " multicast or IPv6 link-local)",
            id="unspecified",
        ),
        pytest.param(
            "fe80::1",
            "Value error, fe80::1 is not an address other machines can reach (unspecified,"
            " multicast or IPv6 link-local)",
            id="link-local",
        ),
        pytest.param("1" * 46, "String should have at most 45 characters", id="huge"),
    ],
)
async def test_a_bad_advertised_address_is_refused(
    fake_cluster: Cluster, address: str, problem: str
) -> None:
    """An advertised address that is no IP, or none other machines can reach, is a 400 naming
    report.advertise_address, and nothing is stored."""
    c = fake_cluster
    body = {
        "report": {
            "schema_version": "1.0", "name": "gpu-01", "cpu_cores": 1, "memory_bytes": 1,
            "advertise_address": address,
        }
    }  # fmt: skip
    path = "/api/v1/machines/gpu-01/report"
    status, data = await c.call("PUT", path, c.agent_token("gpu-01"), body)
    assert status == 400
    fields = {f["field"]: f["problem"] for f in data["fields"]}
    assert fields == {"report.advertise_address": problem.removeprefix("Value error, ")}


async def _machines(c: Cluster) -> dict[str, Any]:
    _, listed = await c.call("GET", "/api/v1/machines", c.tokens["vision"])
    return {m["name"]: m for m in listed["machines"]}


async def test_the_advertised_address_is_master_addr_and_site(fake_cluster: Cluster) -> None:
    """A machine advertising 10.1.2.3 (reporting from 127.0.0.1) shows that address and the
    site 10.1.2.0/24, and a run led there gets it as MASTER_ADDR."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01", advertise_address="10.1.2.3")
    machine = (await _machines(c))["gpu-01"]
    assert (machine["address"], machine["site"]) == ("10.1.2.3", "10.1.2.0/24")
    await c.submit("vision", "lead", gpus=1)
    await c.run_pass()
    reply = await c.report("gpu-01", advertise_address="10.1.2.3")
    assert reply["assignments"][0]["rendezvous"]["master_addr"] == "10.1.2.3"


async def test_a_machine_without_an_address_is_flagged(fake_cluster: Cluster) -> None:
    """An agent advertising no address (one from before the field) leaves its machine without
    one, site none, flagged `no address`; a run led there gets the machine's name."""
    c = fake_cluster
    await c.workspace("vision")
    await c.report("gpu-01", advertise_address=None)
    machine = (await _machines(c))["gpu-01"]
    assert (machine["address"], machine["site"]) == (None, None)
    assert (
        state_text(MachineView.model_validate(machine).model_dump(mode="json")) == "Up, no address"
    )
    await c.submit("vision", "lead", gpus=1)
    await c.run_pass()
    reply = await c.report("gpu-01", advertise_address=None)
    assert reply["assignments"][0]["rendezvous"]["master_addr"] == "gpu-01"
