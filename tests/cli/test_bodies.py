"""`astra` builds each request body from the model the API reads it with: a bad value is refused
before anything is sent, in the words the API would have answered."""

from __future__ import annotations

import json
import urllib.error
from typing import Any

import pytest

from astraeus.coordinator.cli.errors import refusal

from .conftest import Astra
from .rig import Coordinator


def _api_refusal(coordinator: Coordinator, method: str, path: str, body: Any) -> str:
    """What `astra` prints when the coordinator refuses `body`, sent as is."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        coordinator.call(method, f"/api/v1{path}", body)
    assert refused.value.code == 400
    answer = json.loads(refused.value.read())
    return refusal(answer["error"], ((f["field"], f["problem"]) for f in answer["fields"]))


def test_a_workspace_quota_too_large_is_refused_before_sending(
    coordinator: Coordinator, astra: Astra
) -> None:
    """`workspace set --gpu-quota` above the bound exits 2 with the API's own refusal, and no
    workspace is written."""
    done = astra("astraeus", "workspace", "set", "nlp", "--gpu-quota", "20000000")
    assert done.code == 2
    assert done.err == (
        "astra: invalid WorkspaceBody\n  gpu_quota: must be at most 10000000, got 20000000\n"
    )
    body = {"pools": [], "gpu_quota": 20_000_000, "max_priority": 0}
    assert done.err == f"astra: {_api_refusal(coordinator, 'PUT', '/workspaces/nlp', body)}\n"
    assert coordinator.store is not None
    assert coordinator.store.workspaces.all() == []


def test_a_pool_name_too_long_is_refused_naming_the_item(
    coordinator: Coordinator, astra: Astra
) -> None:
    """A pool name over 253 characters is refused by the one bound the API and `astra` share."""
    long = "p" * 254
    done = astra("astraeus", "workspace", "set", "nlp", "--pool", "h100", "--pool", long)
    assert done.code == 2
    assert (
        done.err
        == "astra: invalid WorkspaceBody\n  pools[1]: String should have at most 253 characters\n"
    )
    body = {"pools": ["h100", long], "gpu_quota": None, "max_priority": 0}
    assert done.err == f"astra: {_api_refusal(coordinator, 'PUT', '/workspaces/nlp', body)}\n"


def test_a_reservation_without_labels_or_workspace_is_refused_before_sending(
    coordinator: Coordinator, astra: Astra
) -> None:
    """`reserve` with neither `--label` nor `--for-workspace` says what a reservation needs."""
    coordinator.call("PUT", "/api/v1/workspaces/vision", {"pools": []})
    done = astra("astraeus", "reserve", "gpu-01")
    assert done.code == 2
    assert done.err == (
        "astra: invalid ReservationSpec\n"
        "  : a reservation needs labels, or a workspace with starts_at and ends_at\n"
    )
    assert coordinator.store is not None
    assert coordinator.store.reservations.of() == []


def test_a_reservation_time_without_a_zone_names_the_flag_field(astra: Astra) -> None:
    """`--starts-at` without a time zone is refused naming `starts_at`, exit 2."""
    window = ["--starts-at", "2030-01-01T08:00:00", "--ends-at", "2030-01-01T20:00:00+00:00"]
    done = astra("astraeus", "reserve", "gpu-01", "--for-workspace", "vision", *window)
    assert done.code == 2
    assert done.err.startswith("astra: invalid ReservationSpec\n  starts_at: ")


def test_a_token_label_key_too_long_is_refused_as_the_api_refuses_it(
    coordinator: Coordinator, astra: Astra
) -> None:
    """`token create --label` keys are label keys, bounded as the API bounds them."""
    key = "k" * 318
    argv = ["astraeus", "token", "create", "--role", "agent", "--machine", "gpu-01"]
    done = astra(*argv, "--label", f"{key}=x")
    assert done.code == 2
    assert done.err.startswith(f"astra: invalid TokenBody\n  labels.{key}")
    body = {"role": "agent", "machine": "gpu-01", "labels": {key: "x"}}
    assert done.err == f"astra: {_api_refusal(coordinator, 'POST', '/tokens', body)}\n"
