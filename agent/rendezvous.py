"""The variables a multi-worker framework meets by: `torch.distributed`'s `env://`, torchrun's own
`PET_*`, and the socket interface NCCL and Gloo bootstrap over. Pure: no I/O.

One mapping from Astraeus's shape to theirs (docs/cli.md, "Launch a distributed run"): each
worker is one torchrun *node*. `WORLD_SIZE` and `RANK` count workers; `PET_NNODES` is the number
of workers, `PET_NODE_RANK` this worker's index and `PET_NPROC_PER_NODE` its GPUs (1 without GPUs),
so a plain `torchrun train.py` starts one process per GPU and gives each its own `RANK`,
`WORLD_SIZE` (processes) and `LOCAL_RANK`, overriding ours for the processes it starts.
"""

import ipaddress
from collections.abc import Mapping, Sequence

from astraeus.shared import Assignment, NetworkInterface
from astraeus.shared.run import USER_PORT_VARIABLES

RENDEZVOUS_VARIABLES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "NODE_RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
)
"""What the placement sets for the rendezvous, and a user's `env` may set instead (theirs wins)."""


def rendezvous_variables(assignment: Assignment, gpus: int, port: int) -> dict[str, str]:
    """`env://`'s variables and torchrun's `PET_*` for the assignment's worker with `gpus` GPUs,
    meeting at `port` (its `master_port`, or for a world of one the free port its agent found)."""
    rdv = assignment.rendezvous
    addr = rdv.master_addr
    return {
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(rdv.world_size),
        "RANK": str(rdv.rank),
        "NODE_RANK": str(rdv.node_rank),
        "LOCAL_RANK": str(rdv.local_rank),
        "LOCAL_WORLD_SIZE": str(rdv.local_world_size),
        "PET_NNODES": str(rdv.world_size),
        "PET_NODE_RANK": str(rdv.rank),
        "PET_NPROC_PER_NODE": str(max(1, gpus)),
        "PET_MASTER_ADDR": addr,
        "PET_MASTER_PORT": str(port),
    }


def socket_interface(address: str | None, interfaces: Sequence[NetworkInterface]) -> dict[str, str]:
    """`NCCL_SOCKET_IFNAME` (exact-match form, `=eth0`) and `GLOO_SOCKET_IFNAME` naming the
    interface that carries `address` (the machine's advertised address); none when no reported
    interface carries it (loopback is never reported)."""
    if not address:
        return {}
    wanted = ipaddress.ip_address(address)
    for interface in interfaces:
        for text in (*interface.ipv4, *interface.ipv6):
            try:
                if ipaddress.ip_address(text) == wanted:
                    return {
                        "NCCL_SOCKET_IFNAME": "=" + interface.name,
                        "GLOO_SOCKET_IFNAME": interface.name,
                    }
            except ValueError:
                continue
    return {}


def users_own(user_env: Mapping[str, str], placed: Mapping[str, str]) -> list[str]:
    """The rendezvous variables the user set that differ from the placement's, for the note in
    the task's log: `MASTER_PORT=29999 (Astraeus gave 29517)`."""
    notes = []
    for name in RENDEZVOUS_VARIABLES:
        if name in user_env and user_env[name] != placed.get(name):
            given = placed.get(name)
            what = f"Astraeus gave {given}" if given is not None else "Astraeus sets none"
            notes.append(f"{name}={user_env[name]} ({what})")
    return notes


def user_picks_port(user_env: Mapping[str, str]) -> bool:
    """A user who sets the port picks it: the agent does not check the one it was given."""
    return any(name in user_env for name in USER_PORT_VARIABLES)
