"""The address this machine advertises: the setting, else the source of the route to the
coordinator; and NCCL's and Gloo's socket interface, the one that carries it."""

from typing import Any

import pytest

from astraeus.agent.environment import worker_environment
from astraeus.agent.rendezvous import socket_interface
from astraeus.agent.runtime.settings import SettingsError, load_settings
from astraeus.agent.topology.route import route_source
from astraeus.shared import NetworkInterface

ARGV = ["--coordinator", "http://coord:8470", "--token-file", "/etc/token"]


def _iface(name: str, *ipv4: str, **extra: Any) -> NetworkInterface:
    return NetworkInterface(name=name, state="up", ipv4=list(ipv4), **extra)


def test_the_route_to_a_loopback_coordinator_leaves_from_loopback() -> None:
    """A coordinator on 127.0.0.1 is reached from 127.0.0.1; a name that does not resolve gives
    no address."""
    assert route_source("http://127.0.0.1:8470") == "127.0.0.1"
    assert route_source("https://no-such-host.invalid") is None


def test_the_setting_must_be_an_ip_address() -> None:
    """--advertise-address takes an IP address (normalised) and refuses a name."""
    got = load_settings([*ARGV, "--advertise-address", "2001:DB8::5"], {"HOME": "/h"})
    assert got.advertise_address == "2001:db8::5"
    with pytest.raises(SettingsError) as caught:
        load_settings([*ARGV, "--advertise-address", "gpu-01"], {"HOME": "/h"})
    assert str(caught.value) == "advertise_address: 'gpu-01' is not an IP address, e.g. 10.0.0.5"


def test_the_interface_carrying_the_address_is_nccls_and_glooss() -> None:
    """The interface whose addresses include the advertised one is NCCL's (exact-match form) and
    Gloo's; none without an advertised address or when no reported interface carries it."""
    interfaces = [_iface("eth0", "10.0.0.5"), _iface("ib0", "192.168.1.5")]
    assert socket_interface("192.168.1.5", interfaces) == {
        "NCCL_SOCKET_IFNAME": "=ib0",
        "GLOO_SOCKET_IFNAME": "ib0",
    }
    assert socket_interface(None, interfaces) == {}
    assert socket_interface("127.0.0.1", interfaces) == {}


def test_the_worker_gets_the_socket_interface() -> None:
    """A worker on a machine advertising 10.0.0.5 over eth0 gets NCCL_SOCKET_IFNAME=`=eth0`."""
    from runtime_rig import assignment, machine_report

    report = machine_report().model_copy(
        update={
            "advertise_address": "10.0.0.5",
            "network_interfaces": [_iface("eth0", "10.0.0.5")],
        }
    )
    env = worker_environment(assignment("t-0", ["train"]), report).env
    assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == ("=eth0", "eth0")
