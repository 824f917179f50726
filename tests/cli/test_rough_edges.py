"""What a newcomer meets first: the demo's API address, usage errors, any-case vendors, a
cancel that came late, logs of a name that is not there, and one exit code for a bad spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from astraeus.coordinator.cli.config import resolve
from astraeus.coordinator.cli.render import CONTAINER_HINT, why_lines
from astraeus.shared import MachineState, NodeReasons, PendingExplanation
from astraeus.shared.explanation import RejectionGroup

from .conftest import Astra
from .rig import H100, Coordinator, gpu_report

ASTRA = Path(sys.executable).parent / "astra"


def _astra(*argv: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    return subprocess.run([ASTRA, *argv], capture_output=True, text=True, check=False, env=clean)


@pytest.mark.parametrize("suffix", ["", "/", "/api/v1", "/api/v1/"])
def test_api_url_with_or_without_the_api_path(suffix: str, tmp_path: Path) -> None:
    """ASTRA_API may end in `/api/v1`, as the demo prints the API's address, or not."""
    env = {"ASTRA_API": f"http://127.0.0.1:8470{suffix}", "ASTRA_CONFIG": str(tmp_path / "n")}
    assert resolve(api=None, token=None, workspace=None, environ=env).api == (
        "http://127.0.0.1:8470"
    )


def test_api_with_the_demos_path_reaches_the_coordinator(
    coordinator: Coordinator, astra: Astra, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command against `http://HOST:PORT/api/v1` works, not `astra: Not Found`."""
    monkeypatch.setenv("ASTRA_API", f"{coordinator.url}/api/v1")
    result = astra("astraeus", "machines")
    assert (result.code, result.err) == (0, "")


def test_ca_file_from_the_variable_and_the_file(tmp_path: Path) -> None:
    """The CA comes from --ca-file, then ASTRA_CA, then `ca_file` in the config file."""
    config = tmp_path / "config.toml"
    config.write_text('ca_file = "/etc/astraeus/ca.pem"\n')
    env = {"ASTRA_CONFIG": str(config)}
    assert resolve(api=None, token=None, workspace=None, environ=env).ca_file == Path(
        "/etc/astraeus/ca.pem"
    )
    env["ASTRA_CA"] = "/env/ca.pem"
    assert resolve(api=None, token=None, workspace=None, environ=env).ca_file == Path("/env/ca.pem")
    flagged = resolve(api=None, token=None, workspace=None, ca_file="/f.pem", environ=env)
    assert flagged.ca_file == Path("/f.pem")


def test_usage_error_is_one_line_and_a_hint() -> None:
    """A missing argument is one sentence and a hint naming the command's --help, exit 2."""
    done = _astra("astraeus", "status")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "astra: the following arguments are required: name\n"
        "Run 'astra astraeus status --help' to see what it takes.\n"
    )


def test_unknown_command_is_one_line_and_a_hint() -> None:
    """An unknown command: one sentence and where to look, not the whole usage."""
    done = _astra("frobnicate")
    assert (done.returncode, done.stderr) == (
        2,
        "astra: unknown command 'frobnicate'\nRun 'astra --help' to see what it takes.\n",
    )


def test_vendor_in_any_case(coordinator: Coordinator, astra: Astra) -> None:
    """`--vendor NVIDIA` is `nvidia`."""
    token = coordinator.member("vision")
    result = astra(
        "astraeus", "run", "--name", "v", "--gpus", "1", "--vendor", "NVIDIA", "-o", "json",
        "--", "true", token=token,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert json.loads(result.out)["requested_resources"]["gpu_requests"]["vendor"] == "nvidia"


def test_cancel_of_a_finished_run_says_so(coordinator: Coordinator, astra: Astra) -> None:
    """Cancelling a run that already ended leaves it as it was and says it had finished."""
    token = coordinator.member("vision")
    astra("astraeus", "run", "--name", "done", "--", "true", token=token)
    first = astra("astraeus", "cancel", "done", token=token)
    assert first.out == "done: Cancelled\n"
    again = astra("astraeus", "cancel", "done", token=token)
    assert (again.code, again.out) == (0, "done had already finished: Cancelled\n")


def test_cancel_of_a_succeeded_run(coordinator: Coordinator, astra: Astra) -> None:
    """A run whose worker exited 0 stays Succeeded after `cancel`."""
    coordinator.report(gpu_report("gpu-01", 8, H100, 80))
    token = coordinator.member("vision")
    astra("astraeus", "run", "--name", "ok", "--gpus", "1", "--", "true", token=token)
    coordinator.run_pass()
    updates = [
        {"task": "ok-0", "state": "Running"},
        {"task": "ok-0", "state": "Succeeded", "exit_code": 0},
    ]
    coordinator.report(gpu_report("gpu-01", 8, H100, 80), updates)
    result = astra("astraeus", "cancel", "ok", token=token)
    assert result.out == "ok had already finished: Succeeded\n"


def test_logs_of_an_unknown_name_says_no_run_named(coordinator: Coordinator, astra: Astra) -> None:
    """`logs NAME` of neither a run nor a task: `no run named 'NAME'`, exit 5."""
    token = coordinator.member("vision")
    result = astra("astraeus", "logs", "ghost", token=token)
    assert (result.code, result.err) == (5, "astra: no run named 'ghost'\n")


def test_validate_and_run_f_agree_on_a_bad_spec(
    coordinator: Coordinator, astra: Astra, tmp_path: Path
) -> None:
    """The same bad file is exit 2 from `validate` and from `run -f`."""
    spec = tmp_path / "bad.json"
    spec.write_text('{"name": "x", "command": ["true"], "priority": "high"}')
    token = coordinator.member("vision")
    checked = astra("validate", str(spec))
    submitted = astra("astraeus", "run", "-f", str(spec), token=token)
    assert checked.code == submitted.code == 2
    assert "priority" in checked.err
    assert "priority" in submitted.err


def test_why_counts_one_machine_in_the_singular() -> None:
    """`1 machine checked`, `2 machines checked`; a missing container runtime gets its hint."""
    one = PendingExplanation(
        checked_nodes=1,
        ready_nodes=1,
        down_nodes=0,
        closest="gpu-01",
        nodes=[
            NodeReasons(
                name="gpu-01", state=MachineState.UP, reasons=["machine lacks capability container"]
            )
        ],
        evaluated_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    container = RejectionGroup(
        filter="capabilities", code="NoContainerRuntime", room=False, machines=["gpu-01"]
    )
    lines = why_lines(one.model_dump(mode="json"), None, [container.model_dump(mode="json")])
    assert lines[0] == (
        "Why it is not running yet: 1 machine checked, 1 ready, 0 down; closest: gpu-01"
    )
    assert lines[2:] == CONTAINER_HINT
    two = one.model_copy(update={"checked_nodes": 2, "nodes": []})
    assert why_lines(two.model_dump(mode="json")) == [
        "Why it is not running yet: 2 machines checked, 1 ready, 0 down; closest: gpu-01"
    ]


def test_a_hostile_agents_escapes_are_printed_escaped(
    coordinator: Coordinator, astra: Astra
) -> None:
    """A GPU model and a label with terminal escapes (retitle the window, clear the screen), as a
    hostile agent reports them: `astra` shows each as its escape, never the control character
    itself; `-o json` escapes them as JSON does."""
    title, clear = "\x1b]0;pwned\x07", "\x1b[2J"
    coordinator.report(gpu_report("gpu-01", 1, f"H100{title}", 80, {"rack": f"r1{clear}"}))
    shown = astra("astraeus", "machine", "gpu-01")
    assert shown.code == 0, shown.err
    assert "H100\\x1b]0;pwned\\x07" in shown.out
    assert "r1\\x1b[2J" in shown.out
    assert not any(char in shown.out for char in "\x1b\x07")
    listed = astra("astraeus", "machines")
    assert "\x1b" not in listed.out
    as_json = astra("astraeus", "machine", "gpu-01", "-o", "json")
    assert "\x1b" not in as_json.out
    assert json.loads(as_json.out)["gpus"][0]["model"] == f"H100{title}"
