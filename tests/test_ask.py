"""Validation of the run's ask: every rule names the field and says what to change."""

import json
from typing import Any

import pytest
from pydantic import ValidationError

from astraeus.shared import RequestedResources, RunSpec, field_errors

GUIDE_FINETUNE = """{
  "gpu_requests": {
    "count": 8,
    "models": ["H100", "H200"],
    "min_memory_gb": 80,
    "healthy_only": true,
    "min_per_machine": 8
  },
  "per_gpu": { "cpu_cores": 12, "memory_bytes": 128849018880 }
}"""

GUIDE_PRETRAIN = """{
  "gpu_requests": { "count": 64, "min_per_machine": 8 },
  "per_gpu": { "cpu_cores": 12, "memory_bytes": 128849018880 },
  "network": { "interconnect": "infiniband", "min_gbps": 400 },
  "topology": { "keep_within": "rack", "patience_seconds": 1800 }
}"""


def _errors(ask: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        RequestedResources.model_validate(ask)
    return [str(e) for e in field_errors(RequestedResources, caught.value)]


@pytest.mark.parametrize("text", [GUIDE_FINETUNE, GUIDE_PRETRAIN], ids=["finetune", "pretrain"])
def test_guide_examples_round_trip(text: str) -> None:
    """The guide's `requested_resources` examples parse unchanged and serialise to the same JSON."""
    ask = RequestedResources.model_validate_json(text)
    again = ask.model_dump_json(exclude_unset=True)
    assert json.loads(again) == json.loads(text)
    assert again == json.dumps(json.loads(text), separators=(",", ":"))


RULES = [
    pytest.param(
        {"gpu_requests": {"count": 8, "min_memroy_gb": 80}},
        "gpu_requests.min_memroy_gb: unknown field; did you mean min_memory_gb?",
        id="misspelt-field",
    ),
    pytest.param(
        {"gpus": 8},
        "gpus: unknown field; allowed here: array, capabilities, cpu_cores, drives, "
        "gpu_requests, machines, memory_bytes, network, node_selection, per_gpu, topology",
        id="unknown-top-level",
    ),
    pytest.param(
        {"gpu_requests": {"count": -1}},
        "gpu_requests.count: must be at least 0, got -1",
        id="negative-count",
    ),
    pytest.param(
        {"gpu_requests": {"count": 8, "min_memory_gb": -4}},
        "gpu_requests.min_memory_gb: must be at least 0, got -4",
        id="negative-memory",
    ),
    pytest.param(
        {"gpu_requests": {"count": 4, "min_per_machine": 8}},
        "gpu_requests: min_per_machine (8) is more than count (4); "
        "lower min_per_machine to at most 4",
        id="min-per-machine-over-count",
    ),
    pytest.param(
        {"gpu_requests": {"count": 8, "vendor": "nvdia"}},
        "gpu_requests.vendor: 'nvdia' is not allowed; use one of 'nvidia', 'amd' or 'intel'",
        id="bad-vendor",
    ),
    pytest.param(
        {"gpu_requests": {"count": 8, "policy": "pernode"}},
        "gpu_requests.policy: 'pernode' is not allowed; use one of 'PerNode'",
        id="bad-policy",
    ),
    pytest.param(
        {"gpu_requests": {"count": 2, "ids": ["GPU-a"]}},
        "gpu_requests: ids pins 1 GPUs but count is 2; set count to 1",
        id="ids-vs-count",
    ),
    pytest.param(
        {"gpu_requests": {"count": 2, "ids": ["0", "0"]}},
        "gpu_requests: ids names a GPU more than once; list each GPU once",
        id="ids-repeated",
    ),
    pytest.param(
        {"topology": {"min_nodes": 3, "max_nodes": 2}},
        "topology: min_nodes (3) is more than max_nodes (2); make min_nodes at most max_nodes",
        id="min-nodes-over-max",
    ),
    pytest.param(
        {"topology": {"keep_within": "site"}},
        "topology.keep_within: 'site' is not allowed; "
        "use one of 'node', 'nvlink_domain', 'fabric' or 'rack'",
        id="bad-keep-within",
    ),
    pytest.param(
        {"topology": {"spread": "nvlink_domain"}},
        "topology.spread: 'nvlink_domain' is not allowed; use one of 'node', 'rack' or 'fabric'",
        id="bad-spread",
    ),
    pytest.param(
        {"topology": {"patience_seconds": -5}},
        "topology.patience_seconds: must be at least 0, got -5",
        id="negative-patience",
    ),
    pytest.param(
        {"network": {"interconnect": "ethernet"}},
        "network.interconnect: 'ethernet' is not allowed; "
        "use one of 'auto', 'rdma', 'infiniband' or 'nvlink'",
        id="bad-interconnect",
    ),
    pytest.param(
        {"node_selection": {"mode": "any"}},
        "node_selection.mode: 'any' is not allowed; use one of 'Any', 'Exact' or 'All'",
        id="bad-mode",
    ),
    pytest.param(
        {"node_selection": {"names": ["gpu-01", "gpu-01"]}},
        "node_selection: names lists gpu-01 more than once; list each machine once",
        id="names-repeated",
    ),
    pytest.param(
        {"node_selection": {"count": 0}},
        "node_selection.count: must be at least 1, got 0",
        id="zero-count",
    ),
    pytest.param(
        {"gpu_requests": {"count": 12}, "machines": 5},
        "Cannot plan workers: cannot evenly distribute 12 gpus across 5 machines",
        id="machines-do-not-divide",
    ),
    pytest.param(
        {"machines": 4, "topology": {"max_nodes": 2}},
        "machines (4) is more than topology.max_nodes (2); raise max_nodes or lower machines",
        id="machines-over-max-nodes",
    ),
    pytest.param(
        {"machines": 1, "topology": {"min_nodes": 2}},
        "machines (1) is less than topology.min_nodes (2); lower min_nodes or raise machines",
        id="machines-under-min-nodes",
    ),
    pytest.param(
        {"per_gpu": {"cpu_cores": 4}},
        "per_gpu needs GPUs: set gpu_requests.count, or use cpu_cores and memory_bytes",
        id="per-gpu-without-gpus",
    ),
    pytest.param(
        {"drives": [{"name": "ckpt", "mount_path": "ckpt"}]},
        "drives[0].mount_path: 'ckpt' does not match ^(/[A-Za-z0-9._@+-]+)+$",
        id="relative-mount",
    ),
    pytest.param(
        {"drives": [{"name": "ckpt", "mount_path": "/data,source=/etc"}]},
        "drives[0].mount_path: '/data,source=/etc' does not match ^(/[A-Za-z0-9._@+-]+)+$",
        id="mount-path-adding-a-runtime-option",
    ),
    pytest.param(
        {"drives": [{"name": "ckpt", "mount_path": "/data/../etc"}]},
        "drives[0].mount_path: '/data/../etc' has a '.' or '..' part; write the path without them",
        id="mount-path-climbing-out",
    ),
    pytest.param(
        {"drives": [{"name": "d", "mount_path": "/a"}, {"name": "d", "mount_path": "/b"}]},
        "drives lists a drive more than once; mount each drive once",
        id="drive-repeated",
    ),
    pytest.param(
        {"array": {"size": 0}},
        "array.size: must be at least 1, got 0",
        id="empty-array",
    ),
    pytest.param(
        {"capabilities": ["gpu-direct"]},
        "capabilities[0]: 'gpu-direct' is not allowed; use one of 'container', "
        "'outbound_policy', 'sandbox', 'openshell' or 'tool_gateway'",
        id="bad-capability",
    ),
]


@pytest.mark.parametrize(("ask", "expected"), RULES)
def test_validation_rule(ask: dict[str, Any], expected: str) -> None:
    """Each impossible ask is refused with a sentence naming the field and the fix."""
    assert expected in _errors(ask)


def test_unknown_field_without_close_match_lists_allowed() -> None:
    """A field with no close spelling lists what is allowed at that place."""
    assert _errors({"network": {"zzz": 1}}) == [
        "network.zzz: unknown field; allowed here: interconnect, min_gbps"
    ]


def test_run_spec_names_nested_fields() -> None:
    """A run spec's errors carry the full dotted path from the run down."""
    with pytest.raises(ValidationError) as caught:
        RunSpec.model_validate(
            {
                "name": "Fine_Tune",
                "command": [],
                "requested_resources": {"topology": {"max_nodez": 2}},
            }
        )
    errors = [str(e) for e in field_errors(RunSpec, caught.value)]
    assert "requested_resources.topology.max_nodez: unknown field; did you mean max_nodes?" in (
        errors
    )
    assert "command: List should have at least 1 item after validation, not 0" in errors
    assert any(e.startswith("name: 'Fine_Tune' does not match") for e in errors)


def test_empty_ask_is_one_cpu_worker() -> None:
    """An empty ask is valid: a run with no GPUs."""
    assert RequestedResources().gpu_count == 0
