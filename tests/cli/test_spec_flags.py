"""Each `run` flag lands in the field of the ask the guide names."""

from __future__ import annotations

from typing import Any

import pytest

from astraeus.coordinator.cli.parser import build
from astraeus.coordinator.cli.spec import build_spec, invalid_spec


def _spec(*flags: str) -> dict[str, Any]:
    args = build().parse_args(["astraeus", "run", "--name", "r", *flags])
    args.command = ["python", "train.py"]
    spec = build_spec(args, None)  # what `astra` sends, as written ...
    assert invalid_spec(spec) is None  # ... which the coordinator's RunSpec takes
    return spec


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--gpus", "16", "--machines", "2"], {"machines": 2}),
        (
            ["--gpus", "16", "--min-machines", "2", "--max-machines", "4"],
            {"topology": {"min_nodes": 2, "max_nodes": 4}},
        ),
        (
            ["--gpus", "8", "--interconnect", "infiniband", "--rdma-gbps", "400"],
            {"network": {"interconnect": "infiniband", "min_gbps": 400}},
        ),
        (
            ["--gpus", "8", "--keep-within", "rack", "--patience", "30m"],
            {"topology": {"keep_within": "rack", "patience_seconds": 1800}},
        ),
        (["--gpus", "8", "--spread", "fabric"], {"topology": {"spread": "fabric"}}),
        (
            ["--gpus", "2", "--site", "fra-1", "--label", "gpu-class=big"],
            {
                "node_selection": {
                    "match_labels": {"gpu-class": "big", "topology.astraeus.io/site": "fra-1"}
                }
            },
        ),
        (
            ["--gpus", "2", "--names", "gpu-07,gpu-08", "--names", "gpu-09", "--mode", "Any"],
            {"node_selection": {"names": ["gpu-07", "gpu-08", "gpu-09"], "mode": "Any"}},
        ),
        (["--cpus", "2", "--mem", "8G"], {"cpu_cores": 2, "memory_bytes": 8 * 1024**3}),
        (
            ["--gpus", "1", "--vendor", "amd", "--gpu-memory", "191.5"],
            {"gpu_requests": {"count": 1, "vendor": "amd", "min_memory_gb": 191.5}},
        ),
        (
            ["--cpus", "2", "--drive", "datasets=/data", "--drive", "ckpt=/ckpt"],
            {
                "drives": [
                    {"name": "datasets", "mount_path": "/data"},
                    {"name": "ckpt", "mount_path": "/ckpt"},
                ]
            },
        ),
    ],
    ids=[
        "machines",
        "machine-range",
        "interconnect-speed",
        "keep-within-patience",
        "spread",
        "site-labels",
        "names-mode",
        "cpu-only-per-worker",
        "vendor-memory",
        "drives",
    ],
)
def test_flag_sets_the_guides_field(flags: list[str], expected: dict[str, Any]) -> None:
    """The flag's value appears under the guide's field name, whole numbers whole."""
    ask = _spec(*flags)["requested_resources"]
    assert {key: ask[key] for key in expected} == expected


def test_priority_time_limit_and_env() -> None:
    """`--priority`, `--time-limit 2h` and `--env` set the run's own fields."""
    spec = _spec("--priority", "5", "--time-limit", "2h", "--env", "SEED=1")
    assert (spec["priority"], spec["time_limit_seconds"], spec["env"]) == (5, 7200, {"SEED": "1"})


def test_retries_and_retry_on_failure() -> None:
    """`--retries 3 --retry-on-failure` set the run's retries; left out, neither is sent."""
    spec = _spec("--retries", "3", "--retry-on-failure")
    assert (spec["retries"], spec["retry_on_failure"]) == (3, True)
    assert "retries" not in _spec()


def test_not_preemptible() -> None:
    """`--not-preemptible` marks the run never to be stopped for another; left out, the
    coordinator's default (preemptible) holds and nothing is sent."""
    assert _spec("--not-preemptible")["preemptible"] is False
    assert "preemptible" not in _spec()
    assert "retry_on_failure" not in _spec()
