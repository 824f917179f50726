"""`astra astraeus run` and `status` against a real coordinator, compared to the guide."""

from __future__ import annotations

import json

import pytest

from astraeus.coordinator.api.health import package_version
from astraeus.coordinator.cli.parser import build
from astraeus.coordinator.cli.spec import build_spec, invalid_spec

from .conftest import Astra
from .rig import A100_40, CONSOLE_URL, H100, Coordinator, gpu_report

FINETUNE = [
    "astraeus", "run", "--name", "finetune", "--image", "nvcr.io/nvidia/pytorch:24.08-py3",
    "--gpus", "8", "--cpus", "12", "--mem", "120G", "--pool", "h100",
]  # fmt: skip
COMMAND = ["--", "python", "finetune.py"]
NARROW = ["--gpu-model", "H100,H200", "--gpu-memory", "80", "--healthy-only"]


@pytest.fixture
def guide_cluster(coordinator: Coordinator, astra: Astra) -> str:
    """The guide's three machines: an A100 box, an H100 box with 4 GPUs held, one cordoned."""
    for name, model, memory in (
        ("gpu-01", A100_40, 40),
        ("gpu-02", H100, 80),
        ("gpu-03", H100, 80),
    ):
        report = gpu_report(name, 8, model, memory, {"pool": "h100"})
        report["capabilities"] = ["container"]
        coordinator.report(report)
    token = coordinator.member("vision", ["h100"])
    assert astra("astraeus", "cordon", "gpu-03", "--reason", "firmware update").code == 0
    holder = ["astraeus", "run", "--name", "other", "--gpus", "4", "--names", "gpu-02"]
    assert astra(*holder, "--", "sleep", "60", token=token).code == 0
    coordinator.run_pass()
    return token


@pytest.mark.parametrize("workspace", ["vision", "nlp"])
def test_run_prints_the_guides_line_to_the_letter(
    coordinator: Coordinator, astra: Astra, workspace: str
) -> None:
    """`run` prints `<name> submitted to <cluster name>: <the run's console page>`, exits 0: with
    the guide's console URL and cluster `gpu-east`, the guide's line character for character,
    whatever the member's workspace (the page is `<console_url>jobs/<cluster>/<run>`)."""
    token = coordinator.member(workspace)
    result = astra(*FINETUNE, *COMMAND, token=token)
    assert result.code == 0, result.err
    assert result.out == (
        "finetune submitted to gpu-east: "
        "https://console.astralyx.cloud/o/acme/w/vision/jobs/gpu-east/finetune\n"
    )


def test_cluster_route_names_the_cluster(coordinator: Coordinator) -> None:
    """`GET /api/v1/cluster` answers the configured name, console URL and the version."""
    token = coordinator.member("vision")
    answer = coordinator.call("GET", "/api/v1/cluster", token=token)
    assert answer == {"name": "gpu-east", "console_url": CONSOLE_URL, "version": package_version()}


def test_run_flags_make_the_guides_ask() -> None:
    """The guide's flags give its requested_resources: per-GPU cores and 120G as bytes."""
    args = build().parse_args([*FINETUNE, *NARROW, "--gpus-per-machine", "8"])
    args.command = COMMAND[1:]
    spec = build_spec(args, None)
    assert invalid_spec(spec) is None
    assert spec["requested_resources"] == {
        "gpu_requests": {
            "count": 8,
            "models": ["H100", "H200"],
            "min_memory_gb": 80,
            "healthy_only": True,
            "min_per_machine": 8,
        },
        "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
        "node_selection": {"match_labels": {"pool": "h100"}},
    }
    assert spec["command"] == ["python", "finetune.py"]
    assert spec["image"] == "nvcr.io/nvidia/pytorch:24.08-py3"


def test_status_prints_exactly_the_guides_lines(
    coordinator: Coordinator, astra: Astra, guide_cluster: str
) -> None:
    """A run no machine fits shows the guide's headline and task line, character for character."""
    astra(*FINETUNE, *NARROW, "--gpus-per-machine", "8", *COMMAND, token=guide_cluster)
    coordinator.run_pass()
    result = astra("astraeus", "status", "finetune", token=guide_cluster)
    assert result.code == 0
    assert result.out == (
        "finetune: Pending — No machine fits: 3 of 3 machines ready\n"
        "  finetune-0  Pending  -  No machine fits: 3 of 3 machines ready\n"
    )


def test_status_why_lists_every_machine_closest_first(
    coordinator: Coordinator, astra: Astra, guide_cluster: str
) -> None:
    """`--why` adds the counts, the closest machine, and each machine's reason, closest first."""
    astra(*FINETUNE, *NARROW, "--gpus-per-machine", "8", *COMMAND, token=guide_cluster)
    coordinator.run_pass()
    result = astra("astraeus", "status", "finetune", "--why", token=guide_cluster)
    assert result.out.splitlines()[2:] == [
        "Why it is not running yet: 3 machines checked, 3 ready, 0 down; closest: gpu-02",
        "  gpu-02  Up  insufficient gpus: need 8, 4 free and usable",
        "  gpu-01  Up  no H100 or H200 with at least 80 GB GPU",
        "  gpu-03  Up  machine is cordoned: firmware update",
    ]


def test_status_json_is_the_run_with_its_placement(
    coordinator: Coordinator, astra: Astra, guide_cluster: str
) -> None:
    """`-o json` prints the API's run, whose task carries the guide's `.placement`."""
    astra(*FINETUNE, *NARROW, "--gpus-per-machine", "8", *COMMAND, token=guide_cluster)
    coordinator.run_pass()
    result = astra("astraeus", "status", "finetune", "-o", "json", token=guide_cluster)
    placement = json.loads(result.out)["tasks"][0]["placement"]
    assert {k: placement[k] for k in ("checked_nodes", "ready_nodes", "down_nodes", "closest")} == {
        "checked_nodes": 3,
        "ready_nodes": 3,
        "down_nodes": 0,
        "closest": "gpu-02",
    }


def test_dry_run_says_where_it_would_go_and_stores_nothing(
    coordinator: Coordinator, astra: Astra, guide_cluster: str
) -> None:
    """`--dry-run` names the machine and shape, and the run does not exist afterwards."""
    result = astra(
        "astraeus", "run", "--name", "probe", "--gpus", "4", "--cpus", "2", "--mem", "8G",
        "--gpu-model", "H100", "--dry-run", "--", "true", token=guide_cluster,
    )  # fmt: skip
    assert result.out == (
        "probe would start now — 1 machine × 4 GPUs on gpu-02\n"
        "  probe-0  gpu-02  4 GPUs  8 cores  32 GiB\n"
    )
    assert astra("astraeus", "status", "probe", token=guide_cluster).code == 5


def test_dry_run_of_a_run_that_would_wait_explains_why(
    coordinator: Coordinator, astra: Astra, guide_cluster: str
) -> None:
    """A dry run no machine can take prints the headline and each machine's reason."""
    result = astra(
        "astraeus", "run", "--name", "probe", "--gpus", "8", "--gpu-model", "H100",
        "--gpus-per-machine", "8", "--dry-run", "--", "true", token=guide_cluster,
    )  # fmt: skip
    assert result.code == 0
    assert result.out.splitlines() == [
        "probe would wait — No machine fits: 3 of 3 machines ready",
        "Why it is not running yet: 3 machines checked, 3 ready, 0 down; closest: gpu-02",
        "  gpu-02  Up  insufficient gpus: need 8, 4 free and usable",
        "  gpu-01  Up  no H100 GPU",
        "  gpu-03  Up  machine is cordoned: firmware update",
    ]
