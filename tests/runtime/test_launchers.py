"""What torchrun and `accelerate launch` read in a worker: a run's own MASTER_PORT or
MASTER_ADDR reaches the `PET_*` twin torchrun reads (and the reverse), the log's first line says
what is used, worker 0 fails at once where the run's own port is in use here, and a plain worker's
HOME holds the config `accelerate launch` reads for its shape and port."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import until_async
from runtime_rig import (
    AGENT_ENV,
    Coordinator,
    Harness,
    assignment,
    machine_report,
    python,
    uuid,
)

from astraeus.agent.environment import worker_environment
from astraeus.agent.rendezvous import (
    ACCELERATE_CONFIG,
    ACCELERATE_VARIABLE,
    accelerate_config,
    accelerate_note,
    accelerate_reads,
    runs_own,
    runs_port,
    users_own,
)
from astraeus.agent.runtime.accelerate import write_accelerate_config
from astraeus.agent.runtime.rendezvous_port import PortGate, port_free
from astraeus.agent.runtime.spec import Files, shim_spec
from astraeus.agent.runtime.users import WorkerUser
from astraeus.agent.runtime.workdir import Worker
from astraeus.shared import Assignment

FILES = Files(
    spec=Path("/state/tasks/t-0/spec.json"),
    log=Path("/state/tasks/t-0/output.log"),
    started=Path("/state/tasks/t-0/started.json"),
    status=Path("/state/tasks/t-0/status.json"),
)
WORKDIR = Path("/state-work/t-0")
HAS_ACCELERATE = importlib.util.find_spec("accelerate") is not None


def _spec(image: str | None = None, **extra: Any) -> dict[str, Any]:
    """The shim's spec of worker 0 of 2 with both GPUs of the rig's machine (port 29500)."""
    task = assignment("t-0", ["train"], image=image, assigned_gpu_ids=[uuid(0), uuid(1)], **extra)
    worker = worker_environment(task, machine_report())
    where = Worker(workdir=WORKDIR, user=None)
    return shim_spec(task, worker, FILES, where, agent_env=AGENT_ENV, runtime="/usr/bin/podman")


def _env(image: str | None = None, **extra: Any) -> dict[str, str]:
    spec = _spec(image, **extra)
    return dict(spec["env_file"]["values"] if image else spec["env"])


PORTS = ("MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT")


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        pytest.param({}, ("127.0.0.1", "29500", "127.0.0.1", "29500"), id="none"),
        pytest.param(
            {"MASTER_PORT": "29999"}, ("127.0.0.1", "29999", "127.0.0.1", "29999"), id="port"
        ),
        pytest.param(
            {"PET_MASTER_PORT": "29998"}, ("127.0.0.1", "29998", "127.0.0.1", "29998"), id="pet"
        ),
        pytest.param(
            {"MASTER_ADDR": "10.0.0.7"}, ("10.0.0.7", "29500", "10.0.0.7", "29500"), id="addr"
        ),
        pytest.param(
            {"MASTER_PORT": "29999", "PET_MASTER_PORT": "29998"},
            ("127.0.0.1", "29999", "127.0.0.1", "29998"),
            id="both-as-set",
        ),
    ],
)
@pytest.mark.parametrize("image", [None, "alpine"])
def test_a_runs_own_port_or_address_reaches_its_twin(
    own: dict[str, str], expected: tuple[str, ...], image: str | None
) -> None:
    """torchrun reads PET_MASTER_PORT, `env://` MASTER_PORT: a run that sets one gets it in
    both (a plain worker's environment and a container's file alike); one that sets both gets
    each as it set it."""
    env = _env(image, env=own)
    assert tuple(env[name] for name in PORTS) == expected


def test_runs_own_and_runs_port() -> None:
    """The run's own rendezvous variables with their twins, and the port it meets at: none
    where it chose none or set the two apart."""
    assert runs_own({"MASTER_PORT": "29999", "PATH": "/bin", "PET_NNODES": "2"}) == {
        "MASTER_PORT": "29999",
        "PET_MASTER_PORT": "29999",
        "PET_NNODES": "2",
    }
    assert runs_port({"PET_MASTER_PORT": "29998"}) == 29998
    assert runs_port({"MASTER_PORT": "29999", "PET_MASTER_PORT": "29999"}) == 29999
    assert runs_port({"MASTER_PORT": "29999", "PET_MASTER_PORT": "29998"}) is None
    assert runs_port({"MASTER_ADDR": "10.0.0.7"}) is None


def test_the_log_line_names_the_twin_that_follows() -> None:
    """The first log line says every value used: the run's MASTER_PORT, and PET_MASTER_PORT
    following it (torchrun's), so "the run's values are used" holds under torchrun too."""
    placed = {"MASTER_PORT": "29500", "PET_MASTER_PORT": "29500", "MASTER_ADDR": "10.0.0.1"}
    assert users_own({"MASTER_PORT": "29999"}, placed) == [
        "MASTER_PORT=29999 (Astraeus gave 29500)",
        "PET_MASTER_PORT=29999 (follows MASTER_PORT)",
    ]
    assert users_own({"PET_MASTER_PORT": "29500"}, placed) == []


@pytest.fixture
def listening() -> Iterator[int]:
    """A port some other program listens on, on loopback only."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield int(server.getsockname()[1])


def _worker(env: dict[str, str], rank: int = 0) -> Assignment:
    task = assignment("t-0", ["train"], env=env)
    rendezvous = task.rendezvous.model_copy(update={"rank": rank})
    return task.model_copy(update={"rendezvous": rendezvous})


def test_worker_0_checks_the_port_the_run_chose(listening: int) -> None:
    """The run's own port, in use here, stops worker 0 with the variable's name (it would die
    of EADDRINUSE at its rendezvous); other workers only connect and do not check it; a free
    one passes; a run that set MASTER_PORT and PET_MASTER_PORT apart is not checked."""
    gate = PortGate(port_free)
    for name in ("MASTER_PORT", "PET_MASTER_PORT"):
        assert gate.runs_own_in_use(_worker({name: str(listening)})) == (
            f"env.{name}: port {listening}, which the run chose, is in use"
        )
        assert not gate.in_use(_worker({name: str(listening)}))  # never waits: no other port
    assert gate.runs_own_in_use(_worker({"MASTER_PORT": str(listening)}, rank=1)) is None
    assert PortGate(lambda _port: True).runs_own_in_use(_worker({"MASTER_PORT": "29999"})) is None
    apart = {"MASTER_PORT": str(listening), "PET_MASTER_PORT": "29998"}
    assert gate.runs_own_in_use(_worker(apart)) is None


def _shape(workers: int, rank: int, gpus: int, **own: str) -> dict[str, str]:
    env = {
        "PET_NNODES": str(workers),
        "PET_NODE_RANK": str(rank),
        "PET_NPROC_PER_NODE": str(max(1, gpus)),
        "PET_MASTER_ADDR": "10.0.0.1",
        "PET_MASTER_PORT": "29517",
        "ASTRAEUS_GPU_COUNT": str(gpus),
    }
    return {**env, **own}


@pytest.mark.parametrize(
    ("env", "kind", "machines", "rank", "processes", "port"),
    [
        pytest.param(_shape(2, 1, 2), "MULTI_GPU", 2, 1, 4, 29517, id="2x2"),
        pytest.param(_shape(2, 0, 8), "MULTI_GPU", 2, 0, 16, 29517, id="2x8"),
        pytest.param(_shape(1, 0, 8), "MULTI_GPU", 1, 0, 8, 29517, id="1x8"),
        pytest.param(_shape(1, 0, 1), "NO", 1, 0, 1, 29517, id="1x1"),
        pytest.param(_shape(3, 2, 0), "MULTI_CPU", 3, 2, 3, 29517, id="3-cpu-workers"),
        pytest.param(
            _shape(2, 0, 2, PET_MASTER_PORT="29999"), "MULTI_GPU", 2, 0, 4, 29999, id="own-port"
        ),
    ],
)
def test_accelerates_config_is_the_workers_share(
    env: dict[str, str], kind: str, machines: int, rank: int, processes: int, port: int
) -> None:
    """Accelerate is told the machines (workers), this one's rank, every process of the run and
    where they meet: the PET_* values torchrun reads, the run's own included."""
    config = accelerate_config(env)
    assert config is not None
    assert (
        config["distributed_type"],
        config["num_machines"],
        config["machine_rank"],
        config["num_processes"],
        config["main_process_ip"],
        config["main_process_port"],
    ) == (kind, machines, rank, processes, "10.0.0.1", port)
    assert config["use_cpu"] is (env["ASTRAEUS_GPU_COUNT"] == "0")


def test_no_accelerate_config_for_values_it_cannot_say() -> None:
    """torchrun's elastic `PET_NNODES=1:4` has no Accelerate config: none is written, and the
    worker is not told of one."""
    assert accelerate_config(_shape(2, 0, 2, PET_NNODES="1:4")) is None
    assert ACCELERATE_VARIABLE not in _env(env={"PET_NNODES": "1:4"})


def test_where_accelerate_looks_for_its_config() -> None:
    """As Accelerate finds its default config: HF_HOME, else XDG_CACHE_HOME, else HOME."""
    home = {"HOME": "/w/t-0"}
    assert accelerate_reads(home) == "/w/t-0/" + ACCELERATE_CONFIG
    assert accelerate_reads({**home, "XDG_CACHE_HOME": "/c"}) == (
        "/c/huggingface/accelerate/default_config.yaml"
    )
    assert accelerate_reads({**home, "HF_HOME": "~/hf"}) == (
        "/w/t-0/hf/accelerate/default_config.yaml"
    )


def test_a_plain_worker_is_told_of_its_accelerate_config_and_a_container_is_not() -> None:
    """The plain worker's ASTRAEUS_ACCELERATE_CONFIG is the file in its HOME, where
    `accelerate launch` looks: no note. A run whose HF_HOME points Accelerate elsewhere gets a
    note naming both paths. A container's HOME is the image's: it gets neither."""
    env = _env()
    assert env[ACCELERATE_VARIABLE] == str(WORKDIR / ACCELERATE_CONFIG)
    assert accelerate_note(env) is None
    moved = _env(env={"HF_HOME": "/datasets/hf"})
    assert accelerate_note(moved) == (
        "astraeus: accelerate launch reads /datasets/hf/accelerate/default_config.yaml, not the"
        f" config Astraeus wrote for this worker; pass --config_file ${ACCELERATE_VARIABLE}"
        f" ({WORKDIR / ACCELERATE_CONFIG})"
    )
    assert ACCELERATE_VARIABLE not in _env("alpine")


def test_the_config_file_is_the_workers_own(tmp_path: Path) -> None:
    """Written into the fresh working directory, every folder on the way and the file owned by
    the worker's user (here the test's own ids) and private to it; the file is the config."""
    workdir = tmp_path / "t-0"
    workdir.mkdir()
    env = {**_shape(2, 1, 2), ACCELERATE_VARIABLE: str(workdir / ACCELERATE_CONFIG)}
    user = WorkerUser(uid=os.getuid(), gid=os.getgid())
    path = write_accelerate_config(Worker(workdir=workdir, user=user), env)
    assert path == workdir / ACCELERATE_CONFIG
    assert json.loads(path.read_text()) == accelerate_config(env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (workdir / ".cache", workdir / ".cache/huggingface", path.parent):
        assert folder.stat().st_uid == os.getuid()
    assert write_accelerate_config(Worker(workdir=workdir, user=None), _shape(2, 1, 2)) is None


@pytest.mark.skipif(not HAS_ACCELERATE, reason="Accelerate is not installed")
@pytest.mark.parametrize(("gpus", "per_node"), [(2, "2"), (8, "8")])
@pytest.mark.parametrize("flags", [[], ["--multi_gpu"]], ids=["no-flags", "multi-gpu"])
def test_accelerate_reads_the_config_as_a_torchrun_node(
    tmp_path: Path, gpus: int, per_node: str, flags: list[str]
) -> None:
    """Accelerate's own launcher, reading the file, starts torchrun as Astraeus's node 1 of 2:
    `gpus` processes, meeting at the run's port, not its own default 29500 (`--multi_gpu`
    alone, which hung a worker without the file, changes nothing)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    workdir = tmp_path / "t-1"
    workdir.mkdir()
    env = {**_shape(2, 1, gpus), ACCELERATE_VARIABLE: str(workdir / ACCELERATE_CONFIG)}
    path = write_accelerate_config(Worker(workdir=workdir, user=None), env)
    assert path is not None
    args = launch_command_parser().parse_args(["--config_file", str(path), *flags, "train.py"])
    args, _, _ = _validate_launch_command(args)
    assert args.multi_gpu
    prepare_multi_gpu_env(args)
    assert (args.nnodes, args.node_rank, args.nproc_per_node) == ("2", 1, per_node)
    assert (args.rdzv_backend, args.rdzv_endpoint) == ("static", "10.0.0.1:29517")


async def test_worker_0_fails_at_once_where_the_runs_own_port_is_in_use(
    harness: Harness, coordinator: Coordinator
) -> None:
    """A real agent: worker 0 of a run that chose port 29999, in use on this machine, fails
    before it starts, with the reason, instead of failing later at its rendezvous."""
    harness.port_free = lambda port: port != 29999
    coordinator.assignments["t-0"] = assignment("t-0", python("pass"), env={"MASTER_PORT": "29999"})
    await harness.start()

    def ended() -> bool:
        last = coordinator.last("t-0")
        return last is not None and last.state.ended

    await until_async("t-0 to end", ended)
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.message) == (
        "Failed",
        "env.MASTER_PORT: port 29999, which the run chose, is in use on machine gpu-01: the run"
        " cannot meet there",
    )


SEE = (
    "import json, os, sys\n"
    "config = open(os.environ['ASTRAEUS_ACCELERATE_CONFIG']).read()\n"
    "home = os.path.join(os.environ['HOME'], '.cache/huggingface/accelerate/default_config.yaml')\n"
    "json.dump({'env': dict(os.environ), 'config': json.loads(config),\n"
    "           'same': open(home).read() == config}, open(sys.argv[1], 'w'))\n"
)


async def test_a_real_worker_gets_the_twin_the_note_and_its_config(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """A real worker of a run with its own MASTER_PORT sees it as PET_MASTER_PORT too; its log
    opens with the note saying so; its HOME holds Accelerate's config meeting at that port."""
    out = tmp_path / "seen.json"
    coordinator.assignments["t-0"] = assignment(
        "t-0", python(SEE, str(out)), assigned_gpu_ids=[uuid(0), uuid(1)],
        env={"MASTER_PORT": "29999"},
    )  # fmt: skip
    await harness.start()
    await until_async("the worker's report", out.exists)
    seen = json.loads(out.read_text())
    assert (seen["env"]["MASTER_PORT"], seen["env"]["PET_MASTER_PORT"]) == ("29999", "29999")
    assert seen["same"]
    assert (seen["config"]["num_processes"], seen["config"]["main_process_port"]) == (4, 29999)
    await until_async("the log", lambda: "astraeus:" in coordinator.log("t-0"))
    assert coordinator.log("t-0").splitlines()[0] == (
        "astraeus: the run's env sets MASTER_PORT=29999 (Astraeus gave 29500), PET_MASTER_PORT"
        "=29999 (follows MASTER_PORT); the run's values are used"
    )
