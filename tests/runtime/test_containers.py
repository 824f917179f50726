"""Runs with an image: the exact runtime command, and what a stand-in podman is really given."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import until_async
from runtime_rig import AGENT_ENV, Coordinator, Harness, assignment, uid_of, uuid

from astraeus.agent.environment import worker_environment
from astraeus.agent.runtime import container_command
from astraeus.agent.runtime.users import WorkerUser
from astraeus.shared import SCHEMA_VERSION, DriveInfo, MachineReport, Mount

ENV_FILE = "/var/lib/astraeus-agent/tasks/t-0/container.env"


def _report() -> MachineReport:
    return MachineReport.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "name": "gpu-01",
            "cpu_cores": 8,
            "memory_bytes": 1,
            "gpus": [
                {"index": i, "uuid": uuid(i), "vendor": "nvidia", "model": "m", "memory_bytes": 1,
                 "device_node": f"/dev/nvidia{i + 4}"}
                for i in range(2)
            ],
            "rdma_ports": [
                {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand",
                 "rate_gbps": 400}
            ],
            "imex": {"available": True},
        }
    )  # fmt: skip


RUN = assignment(
    "t-0",
    ["python", "train.py"],
    image="nvcr.io/nvidia/pytorch:24.05-py3",
    env={"EPOCHS": "3"},
    assigned_gpu_ids=[uuid(0), uuid(1)],
    network="infiniband",
    cpu_cores=16,
    memory_bytes=2 * 1024**3,
)


@pytest.mark.parametrize("runtime", ["/usr/bin/podman", "/usr/bin/docker"])
def test_container_command(runtime: str) -> None:
    """The container runs as the task's user with its devices' groups, gets its GPUs by CDI name
    and every other node of its set by path, and the image and command come after `--`."""
    worker = worker_environment(RUN, _report(), uverbs={"mlx5_0": "/dev/infiniband/uverbs2"})
    user = WorkerUser(uid=1879048200, gid=1879048200, groups=(109,))
    assert container_command(runtime, RUN, worker, env_file=ENV_FILE, user=user) == [
        runtime,
        "run",
        "--rm",
        f"--name=astraeus-vision-t-0-{uid_of('t-0')}",
        "--network=host",
        "--shm-size=1073741824",
        "--security-opt=no-new-privileges",
        "--ulimit=memlock=-1:-1",
        "--cap-add=IPC_LOCK",
        "--user=1879048200:1879048200",
        "--group-add=109",
        f"--device=nvidia.com/gpu={uuid(0)}",
        f"--device=nvidia.com/gpu={uuid(1)}",
        "--device=/dev/infiniband/rdma_cm",
        "--device=/dev/infiniband/uverbs2",
        "--cpus=16",
        "--memory=2147483648",
        f"--env-file={ENV_FILE}",
        "--",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "python",
        "train.py",
    ]


def test_amd_container_gets_render_nodes_and_kfd() -> None:
    """An AMD container gets /dev/kfd and the render node of each of its GPUs, never /dev/dri."""
    amd = {"vendor": "amd", "device_node": "/dev/dri/renderD130"}
    report = _report().model_copy(update={"gpus": [_report().gpus[0].model_copy(update=amd)]})
    task = RUN.model_copy(update={"assigned_gpu_ids": [uuid(0)], "network": "local"})
    command = container_command("podman", task, worker_environment(task, report), env_file="f")
    assert [a for a in command if a.startswith("--device")] == [
        "--device=/dev/dri/renderD130",
        "--device=/dev/kfd",
    ]


@pytest.mark.parametrize(
    "image",
    ["--privileged", "-v", "alpine --privileged", "--volume=/:/host", "Alpine", "a:b:c", " x"],
)
def test_an_image_that_is_not_a_reference_is_refused(image: str) -> None:
    """Whatever is not an OCI image reference never reaches the runtime's command line."""
    task = RUN.model_copy(update={"image": image})
    with pytest.raises(ValueError, match="is not an OCI image reference"):
        container_command("podman", task, worker_environment(task, _report()), env_file="f")


FAKE_RUNTIME = """#!{python} -S
import json, os, sys
env_file = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--env-file=")]
call = {{"argv": sys.argv[1:], "env": dict(os.environ),
        "env_file": open(env_file[0]).read() if env_file else None,
        "env_file_mode": os.stat(env_file[0]).st_mode & 0o777 if env_file else None}}
with open({calls!r}, "a") as out:
    out.write(json.dumps(call) + "\\n")
"""


def _fake_runtime(tmp_path: Path) -> tuple[str, Path]:
    """A stand-in `podman` that writes down each call: arguments, environment, variables file."""
    calls = tmp_path / "calls.jsonl"
    runtime = tmp_path / "podman"
    runtime.write_text(FAKE_RUNTIME.format(python=sys.executable, calls=str(calls)))
    runtime.chmod(0o755)
    return str(runtime), calls


def _calls(calls: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def _ended(coordinator: Coordinator, task: str) -> bool:
    last = coordinator.last(task)
    return last is not None and last.state.ended


async def test_hostile_image_never_reaches_the_runtime(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """The issue's `image: "--privileged"` with `--volume=/:/host … chroot /host id` fails the
    task with the reason, and the runtime is never started."""
    harness.container_runtime, calls = _fake_runtime(tmp_path)
    coordinator.assignments["t-0"] = assignment(
        "t-0", ["--volume=/:/host", "alpine", "chroot", "/host", "id"], image="--privileged"
    )
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    last = coordinator.last("t-0")
    assert last is not None
    assert (last.state, last.message) == (
        "Failed",
        "image: '--privileged' is not an OCI image reference: use "
        "[registry/]name[:tag][@digest], e.g. nvcr.io/nvidia/pytorch:24.08-py3",
    )
    assert _calls(calls) == []


async def test_runtime_gets_the_agents_environment_and_the_container_the_users(
    harness: Harness, coordinator: Coordinator, tmp_path: Path
) -> None:
    """The runtime process runs with the agent's variables only (no user LD_PRELOAD); the user's
    and the placement's go to the container through a 0600 file; flag-like words in the command
    stay after the image; the container is removed once the task ends."""
    harness.container_runtime, calls = _fake_runtime(tmp_path)
    command = ["--volume=/:/host", "--privileged"]
    env = {"LD_PRELOAD": "/tmp/evil.so", "WANDB_API_KEY": "k-123"}
    coordinator.assignments["t-0"] = assignment("t-0", command, image="alpine:3.20", env=env)
    await harness.start()
    await until_async("t-0 to end", lambda: _ended(coordinator, "t-0"))
    run, cleanup = _calls(calls)
    assert run["argv"][-4:] == ["--", "alpine:3.20", "--volume=/:/host", "--privileged"]
    assert [a for a in run["argv"] if a.startswith("--privileged")] == ["--privileged"]
    assert run["env"] == {"PATH": AGENT_ENV["PATH"], "LANG": AGENT_ENV["LANG"]}
    lines = run["env_file"].splitlines()
    assert {"LD_PRELOAD=/tmp/evil.so", "WANDB_API_KEY=k-123", "ASTRAEUS_TASK=t-0"} <= set(lines)
    assert run["env_file_mode"] == 0o600
    assert cleanup["argv"] == ["rm", "--force", "--", f"astraeus-vision-t-0-{uid_of('t-0')}"]
    assert cleanup["env"] == run["env"]


def test_container_command_bind_mounts_the_drives() -> None:
    """Each drive is a bind mount from its path on the machine to the run's mount_path, among
    the agent's own flags, before `--` and the image."""
    run = RUN.model_copy(update={"drives": [Mount(name="datasets", mount_path="/data")]})
    report = _report().model_copy(
        update={"drives": [DriveInfo(name="datasets", path="/mnt/datasets")]}
    )
    worker = worker_environment(run, report, uverbs={"mlx5_0": "/dev/infiniband/uverbs2"})
    command = container_command("/usr/bin/podman", run, worker, env_file=ENV_FILE)
    mount = "--mount=type=bind,source=/mnt/datasets,target=/data"
    assert command.index(mount) < command.index("--") < command.index(run.image or "")
    assert worker.env["ASTRAEUS_DRIVE_DATASETS"] == "/data"
