"""The variables a multi-worker framework meets by: `torch.distributed`'s `env://`, torchrun's own
`PET_*`, and the socket interface NCCL and Gloo bootstrap over. Pure: no I/O.

One mapping from Astraeus's shape to theirs (docs/cli.md, "Launch a distributed run"): each
worker is one torchrun *node*. `WORLD_SIZE` and `RANK` count workers; `PET_NNODES` is the number
of workers, `PET_NODE_RANK` this worker's index and `PET_NPROC_PER_NODE` its GPUs (1 without GPUs),
so a plain `torchrun train.py` starts one process per GPU and gives each its own `RANK`,
`WORLD_SIZE` (processes) and `LOCAL_RANK`, overriding ours for the processes it starts.

A run that sets `MASTER_ADDR` or `MASTER_PORT` itself gets the same value in its `PET_*` twin (and
the reverse), so `env://` and torchrun meet at one place. `accelerate launch` takes the shape and
port from its flags or its config file (the `PET_*` only for what those leave unset: it sets
port 29500 itself), so a plain worker gets a config file built from the same values.
"""

import ipaddress
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

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


TWINS = (("MASTER_ADDR", "PET_MASTER_ADDR"), ("MASTER_PORT", "PET_MASTER_PORT"))
"""`env://`'s name and torchrun's for one value: a run that sets one gets it in the other."""


def runs_own(user_env: Mapping[str, str]) -> dict[str, str]:
    """The rendezvous variables the run's `env` sets, each one's twin following it where the
    run set only one of the two (`MASTER_PORT=29999` gives `PET_MASTER_PORT=29999` too): what
    wins over the placement's values."""
    own = {name: user_env[name] for name in RENDEZVOUS_VARIABLES if name in user_env}
    for first, second in TWINS:
        for name, twin in ((first, second), (second, first)):
            if name in user_env and twin not in user_env:
                own[twin] = user_env[name]
    return own


def users_own(user_env: Mapping[str, str], placed: Mapping[str, str]) -> list[str]:
    """The rendezvous variables the user set that differ from the placement's, for the note in
    the task's log: `MASTER_PORT=29999 (Astraeus gave 29517)`, and a twin that follows one:
    `PET_MASTER_PORT=29999 (follows MASTER_PORT)`."""
    notes = []
    own = runs_own(user_env)
    for name in RENDEZVOUS_VARIABLES:
        if name in user_env and user_env[name] != placed.get(name):
            given = placed.get(name)
            what = f"Astraeus gave {given}" if given is not None else "Astraeus sets none"
            notes.append(f"{name}={user_env[name]} ({what})")
    for first, second in TWINS:
        for name, twin in ((first, second), (second, first)):
            if name in user_env and twin not in user_env and own[twin] != placed.get(twin):
                notes.append(f"{twin}={own[twin]} (follows {name})")
    return notes


def user_picks_port(user_env: Mapping[str, str]) -> bool:
    """A user who sets the port picks it: the agent does not hold it for the run, and checks
    it is free where the run meets (`runs_port`)."""
    return any(name in user_env for name in USER_PORT_VARIABLES)


def runs_port(user_env: Mapping[str, str]) -> int | None:
    """The port the run chose for itself, where `MASTER_PORT` and `PET_MASTER_PORT` (after the
    one follows the other) agree; None where it chose none, or set the two apart (torchrun
    then meets at one and a plain script at the other: the agent checks neither)."""
    own = runs_own(user_env)
    port, pet = own.get("MASTER_PORT"), own.get("PET_MASTER_PORT")
    if port is None or port != pet or not (port.isascii() and port.isdigit()):
        return None
    return int(port)


ACCELERATE_CONFIG = ".cache/huggingface/accelerate/default_config.yaml"
"""Where a plain worker's config for `accelerate launch` is written, under its working directory
(its `HOME`): where Accelerate looks when `HF_HOME` and `XDG_CACHE_HOME` are not set."""

ACCELERATE_VARIABLE = "ASTRAEUS_ACCELERATE_CONFIG"
"""The path of that file, for `accelerate launch --config_file` where Accelerate looks elsewhere."""


def accelerate_config(env: Mapping[str, str]) -> dict[str, Any] | None:
    """What `accelerate launch` with no flags needs to start the worker's share of the run as
    torchrun would: this worker is machine `PET_NODE_RANK` of `PET_NNODES`, starting
    `PET_NPROC_PER_NODE` processes, meeting at `PET_MASTER_ADDR:PET_MASTER_PORT`. Read from the
    worker's final environment (the run's own values included); None where the run set one of
    them to something other than a whole number (torchrun's elastic `PET_NNODES=1:4`), which
    Accelerate's config cannot say. Without it Accelerate counts the GPUs it sees, calls this
    one machine of one and meets at port 29500 (its own default, which Astraeus neither holds
    nor checks). The file is JSON, which YAML reads as it is."""
    numbers = {}
    for name in ("PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_PORT"):
        value = env.get(name, "")
        if not (value.isascii() and value.isdigit()):
            return None
        numbers[name] = int(value)
    machines, per_machine = numbers["PET_NNODES"], numbers["PET_NPROC_PER_NODE"]
    gpus = env.get("ASTRAEUS_GPU_COUNT", "0") != "0"
    processes = machines * per_machine
    if processes <= 1:
        kind = "NO"
    elif gpus:
        kind = "MULTI_GPU"  # Accelerate's launcher for GPUs of any vendor: torchrun's
    else:
        kind = "MULTI_CPU"  # one process per worker, started as it is
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": kind,
        "num_machines": machines,
        "machine_rank": numbers["PET_NODE_RANK"],
        "num_processes": processes,
        "main_process_ip": env.get("PET_MASTER_ADDR", ""),
        "main_process_port": numbers["PET_MASTER_PORT"],
        "rdzv_backend": "static",  # torchrun's own: the endpoint hosts the store
        "gpu_ids": "all",
        "use_cpu": not gpus,
        "mixed_precision": "no",
        "debug": False,
    }


def accelerate_reads(env: Mapping[str, str]) -> str:
    """The config file `accelerate launch` reads without `--config_file` in a process with
    `env`, as its `commands/config/config_args.py` finds it: `$HF_HOME/accelerate/`, else
    `$XDG_CACHE_HOME/huggingface/accelerate/`, else `$HOME/.cache/huggingface/accelerate/`."""
    home = env.get("HOME", "")
    hf_home = env.get("HF_HOME") or posixpath.join(
        env.get("XDG_CACHE_HOME") or posixpath.join(home, ".cache"), "huggingface"
    )
    if hf_home == "~" or hf_home.startswith("~/"):
        hf_home = home + hf_home[1:]
    return posixpath.join(hf_home, "accelerate", "default_config.yaml")


def accelerate_note(env: Mapping[str, str]) -> str | None:
    """The log's line where `accelerate launch` will not find the config Astraeus wrote: the
    worker's environment points Accelerate elsewhere (the run's `HF_HOME`, say)."""
    ours = env.get(ACCELERATE_VARIABLE)
    if ours is None or accelerate_reads(env) == ours:
        return None
    return (
        f"astraeus: accelerate launch reads {accelerate_reads(env)}, not the config Astraeus"
        f" wrote for this worker; pass --config_file ${ACCELERATE_VARIABLE} ({ours})"
    )
