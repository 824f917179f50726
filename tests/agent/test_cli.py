"""`astraeus-agent inspect` and the command's usage and errors."""

import json
from pathlib import Path

import pytest

from astraeus.agent.cli import main, workers_line


def test_inspect_json_of_a_fake_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`inspect --json` prints exactly the report as JSON, named after the fake machine."""
    code = main(["inspect", "--backend", "fake:gb200-nvl72-tray", "--data-dir", str(tmp_path),
                 "--json", "--label", "pool=p1"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(out)
    assert (report["name"], report["labels"]["pool"], len(report["gpus"])) == (
        "gb200-tray-07", "p1", 4,
    )  # fmt: skip
    assert report["imex"]["available"] is True


def test_inspect_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table shows each GPU with its signals under it, and each port."""
    assert main(["inspect", "--backend", "fake:h100-at-risk", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Machine h100-at-risk (schema 1.0)\n")
    assert "      - Xid 79 (GPU has fallen off the bus): reset the GPU or reboot the node\n" in out
    assert "  mlx5_2:1  DOWN    Polling   InfiniBand  400 Gb/s" in out
    assert "IMEX: not available (no nvidia-caps-imex-channels in /proc/devices)\n" in out
    assert f"\nWorkers: {workers_line().removeprefix('workers ')}\n" in out


def test_inspect_without_gpus_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a machine without GPUs inspect says so and why, with no traceback."""
    code = main(["inspect", "--backend", "auto", "--sysfs-root", str(tmp_path / "sys"),
                 "--proc-root", str(tmp_path / "proc"), "--data-dir", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "GPUs: none (no GPUs: NVML: NVML Shared Library Not Found; " in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["inspect", "--backend", "cuda"],
                     "astraeus-agent inspect: --backend: 'cuda'; use auto, nvml, amdsmi, intel, "
                     "none or fake:FILE\n", id="unknown-backend"),
        pytest.param(["inspect", "--backend", "fake:nope"],
                     "astraeus-agent inspect: no fake machine named 'nope'; use a path or one of: "
                     "gb200-nvl72-tray, h100-at-risk, h100-sxm, l40s-pcie, mi300x\n",
                     id="unknown-fake"),
        pytest.param(["inspect", "--backend", "none", "--label", "pool"],
                     "astraeus-agent inspect: --label 'pool' is not KEY=VALUE\n", id="bad-label"),
    ],
)  # fmt: skip
def test_bad_arguments_are_sentences(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad arguments exit 2 with one sentence naming the problem."""
    assert main([*argv, "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == message


def test_unknown_command_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown command exits 2 and prints the usage listing the commands."""
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("astraeus-agent: unknown command 'frobnicate'\n\nusage: astraeus-agent")
    assert "  inspect   print this machine's report once" in err


@pytest.mark.parametrize("argv", [["run"], []], ids=["run", "bare-flags"])
def test_run_goes_to_the_report_loop(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`run` and bare `--` options reach the report loop, which names its missing settings."""
    assert main([*argv, "--token-file", "/nonexistent"]) == 2
    assert capsys.readouterr().err == (
        "astraeus-agent: --coordinator is required (or ASTRAEUS_COORDINATOR)\n"
    )


def test_serve_answers_on_loopback(tmp_path: Path) -> None:
    """`serve` in a real process answers /v1/health on 127.0.0.1 and stops on SIGTERM."""
    import subprocess
    import sys
    import urllib.request

    command = [sys.executable, "-m", "astraeus.agent.cli", "serve", "--backend",
               "fake:l40s-pcie", "--port", "0", "--data-dir", str(tmp_path)]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("astraeus-agent: serving on http://127.0.0.1:")
            url = line.split(" on ", 1)[1].strip().replace("/v1/machine", "/v1/health")
            with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback
                body = json.loads(response.read())
            assert body["gpus"] == {"healthy": 4, "at_risk": 0, "faulted": 0}
        finally:
            process.terminate()
    assert process.returncode == 0
