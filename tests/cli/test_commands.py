"""`list`, `logs`, `cancel`, `machines`, `machine`, `cordon`, `label`, and the admin commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Astra
from .rig import H100, Coordinator, gpu_report

RACKED = {
    "pool": "h100",
    "topology.astraeus.io/fabric": "ib-a",
    "topology.astraeus.io/rack": "r1",
    "topology.astraeus.io/site": "fra-1",
}

SUMMARY = (
    "gpu_models",
    "gpu_health",
    "conditions",
    "rack",
    "fabric",
    "rdma_fabrics",
    "rdma_link_layers",
    "nvlink_domains",
)


@pytest.fixture
def running(coordinator: Coordinator, astra: Astra) -> str:
    """Workspace vision with run `train` (4 GPUs) running on gpu-01, which printed two lines."""
    coordinator.report(gpu_report("gpu-01", 8, H100, 80, RACKED))
    token = coordinator.member("vision", ["h100"])
    astra("astraeus", "run", "--name", "train", "--gpus", "4", "--", "python", "t.py", token=token)
    coordinator.run_pass()
    updates = [{"task": "train-0", "state": "Running"}]
    logs = [{"task": "train-0", "offset": 0, "data": "step 1\nstep 2\n"}]
    coordinator.report(gpu_report("gpu-01", 8, H100, 80, RACKED), updates, logs)
    return token


def test_list_shows_each_run_with_state_and_shape(astra: Astra, running: str) -> None:
    """`list` is a table of runs: name, state, GPUs, running tasks, reason or shape."""
    assert astra("astraeus", "list", token=running).out.splitlines() == [
        "NAME   STATE    GPUS  TASKS  REASON",
        "train  Running  4     1/1    1 machine × 4 GPUs on gpu-01",
    ]


def test_status_of_a_running_run_names_its_machine(astra: Astra, running: str) -> None:
    """A running task's line names the machine and its GPU count."""
    assert astra("astraeus", "status", "train", token=running).out == (
        "train: Running — 1 machine × 4 GPUs on gpu-01\n  train-0  Running  gpu-01  4 GPUs\n"
    )


def test_logs_print_the_tasks_output(astra: Astra, running: str) -> None:
    """`logs RUN` prints what the agent shipped for its task, as it was written."""
    assert astra("astraeus", "logs", "train", token=running).out == "step 1\nstep 2\n"
    assert astra("astraeus", "logs", "train-0", token=running).out == "step 1\nstep 2\n"


def test_logs_follow_stops_when_the_run_ends(
    coordinator: Coordinator, astra: Astra, running: str
) -> None:
    """`logs -f` of an ended run prints everything once and returns."""
    updates = [{"task": "train-0", "state": "Succeeded", "exit_code": 0}]
    logs = [{"task": "train-0", "offset": 14, "data": "done\n"}]
    coordinator.report(gpu_report("gpu-01", 8, H100, 80, RACKED), updates, logs)
    result = astra("astraeus", "logs", "train", "-f", token=running)
    assert result.out == "step 1\nstep 2\ndone\n"
    status = astra("astraeus", "status", "train", token=running).out
    assert status.splitlines()[1] == "  train-0  Succeeded  gpu-01  exit 0"


def test_cancel_reports_the_new_state(astra: Astra, running: str) -> None:
    """`cancel` answers with the run's state after the cancel."""
    assert astra("astraeus", "cancel", "train", token=running).out == "train: Cancelled\n"


def test_machines_table_has_gpus_by_model_health_and_topology(astra: Astra, running: str) -> None:
    """`machines` shows state, free/total GPUs by model, health, fabric, Ethernet speed, rack
    and site."""
    assert astra("astraeus", "machines", token=running).out.splitlines() == [
        "NAME    STATE  GPUS FREE/TOTAL            HEALTH     FABRIC  ETHERNET  RACK  SITE",
        "gpu-01  Up     4/8 NVIDIA H100 80GB HBM3  8 healthy  ib-a    -         r1    fra-1",
    ]


def test_machines_json_is_the_list_with_its_summary(astra: Astra, running: str) -> None:
    """`machines -o json` prints the API's list: GPUs by model (held ones not free) and health."""
    data = json.loads(astra("astraeus", "machines", "-o", "json", token=running).out)
    machine = data["machines"][0]
    assert machine["gpu_models"] == [{"model": H100, "total": 8, "free": 4, "idle": 4}]
    assert machine["gpu_health"] == {"healthy": 8, "at_risk": 0, "faulted": 0}
    assert (machine["rack"], machine["fabric"]) == ("r1", "ib-a")
    assert "gpus" not in machine


def test_machine_list_summarises_models_health_ports_and_domains(
    coordinator: Coordinator, astra: Astra
) -> None:
    """The list item counts GPUs by model and health (faulted neither free nor idle; under
    memory pressure, idle but not free), and names the pressure conditions, the ports' fabrics
    and active link layers, and the NVLink domains."""
    report = gpu_report("gpu-09", 3, H100, 80)
    report["gpus"].append({**report["gpus"][0], "index": 3, "uuid": "GPU-x", "model": "B200"})
    report["gpus"][1]["health"] = {"state": "at_risk", "signals": []}
    report["gpus"][2]["health"] = {"state": "faulted", "signals": []}
    report["gpus"][0]["nvlink_domain"] = "c1/0"
    report["conditions"] = ["MemoryPressure"]
    port = {"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "rate_gbps": 400}
    report["rdma_ports"] = [
        {**port, "state": "ACTIVE", "fabric": "ib-9"},
        {**port, "port": 2, "state": "DOWN", "link_layer": "Ethernet"},
    ]
    coordinator.report(report)
    machine = coordinator.call("GET", "/api/v1/machines")["machines"][0]
    summary = {key: machine[key] for key in SUMMARY}
    assert summary == {
        "gpu_models": [
            {"model": H100, "total": 3, "free": 0, "idle": 2},
            {"model": "B200", "total": 1, "free": 0, "idle": 1},
        ],
        "gpu_health": {"healthy": 2, "at_risk": 1, "faulted": 1},
        "conditions": ["MemoryPressure"],
        "rack": None,
        "fabric": None,
        "rdma_fabrics": ["ib-9"],
        "rdma_link_layers": ["InfiniBand"],
        "nvlink_domains": ["c1/0"],
    }
    assert astra("astraeus", "machines").out.splitlines()[1].split("  ")[:4] == [
        "gpu-09",
        "Up, MemoryPressure",
        f"0/3 {H100} (2 idle), 0/1 B200 (1 idle)",
        "2 healthy, 1 at risk, 1 faulted",
    ]


def test_cordon_shows_on_the_machine_page_until_uncordon(astra: Astra, running: str) -> None:
    """An admin cordons with a reason, the machine page shows it, uncordon clears it."""
    assert astra("astraeus", "cordon", "gpu-01", "--reason", "firmware update").out == (
        "gpu-01: cordoned: firmware update\n"
    )
    page = astra("astraeus", "machine", "gpu-01", token=running).out.splitlines()
    assert page[0] == "gpu-01: Up, cordoned — firmware update"
    assert "  runs        train" in page
    # Free means usable by a run now: a cordoned machine's idle GPUs are shown apart.
    listed = astra("astraeus", "machines", token=running).out.splitlines()[1]
    assert f"0/8 {H100} (4 idle)" in listed
    machine = json.loads(astra("astraeus", "machines", "-o", "json").out)["machines"][0]
    assert (machine["gpus_free"], machine["gpus_idle"]) == (0, 4)
    assert astra("astraeus", "uncordon", "gpu-01").out == "gpu-01: accepting runs\n"
    machine = json.loads(astra("astraeus", "machines", "-o", "json").out)["machines"][0]
    assert (machine["gpus_free"], machine["gpus_idle"]) == (4, 4)


def test_label_sets_admin_labels(astra: Astra, running: str) -> None:
    """`label NAME KEY=VALUE` sets the admin labels, which win over the agent's."""
    result = astra("astraeus", "label", "gpu-01", "topology.astraeus.io/rack=r9")
    assert result.code == 0
    assert "topology.astraeus.io/rack=r9" in result.out


def test_workspace_and_token_admin_commands(coordinator: Coordinator, astra: Astra) -> None:
    """An admin sets a workspace, mints a member token for it, sees it listed, and revokes it."""
    quotas = ("--gpu-quota", "16", "--cpu-quota", "64", "--memory-quota", "512G")
    made = astra("astraeus", "workspace", "set", "nlp", "--pool", "a100", *quotas)
    assert made.out == "workspace nlp: a100\n"
    assert astra("astraeus", "workspaces").out.splitlines() == [
        "NAME  POOLS  GPU QUOTA  CPU QUOTA  MEMORY QUOTA  MAX PRIORITY  WEIGHT  GUARANTEED",
        "nlp   a100   16         64         512G          0             1       0",
    ]
    created = astra("astraeus", "token", "create", "--role", "member", "--for-workspace", "nlp")
    secret = created.out.strip()
    assert astra("astraeus", "list", token=secret).code == 0
    listing = json.loads(astra("astraeus", "token", "list", "-o", "json").out)
    member = next(t for t in listing["tokens"] if t["workspace"] == "nlp")
    revoked = astra("astraeus", "token", "revoke", str(member["id"]))
    assert revoked.out == f"token {member['id']} revoked\n"
    assert astra("astraeus", "list", token=secret).code == 4


def test_spec_file_with_flags_over_it(
    coordinator: Coordinator, astra: Astra, running: str, tmp_path: Path
) -> None:
    """`-f` reads a run spec; flags given as well replace its fields."""
    spec = {
        "name": "from-file",
        "command": ["python", "train.py"],
        "requested_resources": {"gpu_requests": {"count": 2}},
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(spec))
    result = astra(
        "astraeus", "run", "-f", str(path), "--name", "second", "-o", "json", token=running
    )
    run = json.loads(result.out)
    assert (run["name"], run["requested_resources"]["gpu_requests"]["count"]) == ("second", 2)
    assert run["command"] == ["python", "train.py"]


def test_dry_run_json_says_would_start(astra: Astra, running: str) -> None:
    """`--dry-run -o json` prints the API's answer: would_start and the workers."""
    argv = ["astraeus", "run", "--name", "probe", "--gpus", "4", "--dry-run", "-o", "json"]
    dry = json.loads(astra(*argv, "--", "true", token=running).out)
    assert dry["would_start"] is True
    assert [w["machine"] for w in dry["workers"]] == ["gpu-01"]


def test_reserve_and_unreserve(astra: Astra, running: str) -> None:
    """An admin reserves a machine for labels; the machine page lists it until it is dropped."""
    added = astra("astraeus", "reserve", "gpu-01", "--label", "gpu-class=big", "-o", "json")
    reservation = json.loads(added.out)["id"]
    page = astra("astraeus", "machine", "gpu-01").out.splitlines()
    assert f"  reserved    #{reservation} for gpu-class=big" in page
    removed = astra("astraeus", "unreserve", "gpu-01", str(reservation))
    assert removed.out == f"gpu-01: reservation #{reservation} removed\n"


def test_reserve_for_a_workspace_window(astra: Astra, running: str) -> None:
    """A reservation for a workspace carries its window and shows on the machine page."""
    window = ["--starts-at", "2030-01-01T08:00:00+00:00", "--ends-at", "2030-01-01T20:00:00+00:00"]
    added = astra("astraeus", "reserve", "gpu-01", "--for-workspace", "vision", *window)
    assert added.code == 0, added.err
    page = astra("astraeus", "machine", "gpu-01").out.splitlines()
    assert any(line.endswith(" for workspace vision") for line in page)


def test_logs_of_a_run_with_several_tasks_name_each_line(
    coordinator: Coordinator, astra: Astra
) -> None:
    """With several tasks, each printed line starts with its task's name."""
    for name in ("gpu-01", "gpu-02"):
        coordinator.report(gpu_report(name, 8, H100, 80, RACKED))
    token = coordinator.member("vision", ["h100"])
    astra("astraeus", "run", "--name", "wide", "--gpus", "16", "--", "python", "t.py", token=token)
    coordinator.run_pass()
    for index, machine in enumerate(("gpu-01", "gpu-02")):
        task = f"wide-{index}"
        coordinator.report(
            gpu_report(machine, 8, H100, 80, RACKED),
            [{"task": task, "state": "Running"}],
            [{"task": task, "offset": 0, "data": f"rank {index}\n"}],
        )
    assert astra("astraeus", "logs", "wide", token=token).out == (
        "wide-0: rank 0\nwide-1: rank 1\n"
    )


def test_validate_checks_a_file_without_a_coordinator(astra: Astra, tmp_path: Path) -> None:
    """`astra validate FILE` says the run is valid, by name."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"name": "ok", "command": ["true"]}))
    assert astra("validate", str(path)).out == "ok: valid\n"


def test_usage_shows_the_members_workspace_and_the_cluster(
    coordinator: Coordinator, astra: Astra, running: str
) -> None:
    """`usage`: a member sees their workspace's line and the cluster's, never another
    workspace; an admin sees every workspace with its weight."""
    coordinator.run_pass()  # usage is counted at each pass
    assert astra("astraeus", "workspace", "set", "nlp", "--fair-share-weight", "2").code == 0
    mine = astra("astraeus", "usage", token=running).out.splitlines()
    assert mine[0].split() == [
        "WORKSPACE", "GPU-H", "24H", "GPU-H", "7D", "DECAYED", "GPU-H", "WEIGHT", "SHARE", "NOW",
        "WAITING",
    ]  # fmt: skip
    assert [line.split()[0] for line in mine[1:3]] == ["vision", "(cluster)"]
    assert "50% (4 GPUs)" in mine[1]
    assert "50% (4 of 8 GPUs)" in mine[2]
    assert "nlp" not in "\n".join(mine)
    assert mine[3] == "decayed: each GPU-hour counts half after 7 days (fair share)"
    every = astra("astraeus", "usage", "-o", "json").out
    rows = json.loads(every)["workspaces"]
    assert [(r["workspace"], r["weight"]) for r in rows] == [("nlp", 2.0), ("vision", 1.0)]
