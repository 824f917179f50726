"""Every agent command reads its settings the same way, with the coordinator's rules."""

import json
from pathlib import Path

import pytest

from astraeus.agent.cli import main
from astraeus.agent.inventory import scanner_for
from astraeus.agent.settings import load_command, load_settings
from astraeus.coordinator.settings import load
from astraeus.shared.settings import SettingsError


def test_inspect_reads_variables_and_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`inspect` takes its backend from ASTRAEUS_BACKEND and its labels from the TOML file."""
    config = tmp_path / "agent.toml"
    config.write_text(f'state_dir = "{tmp_path}"\n[labels]\npool = "p1"\n')
    monkeypatch.setenv("ASTRAEUS_BACKEND", "fake:l40s-pcie")
    monkeypatch.setenv("ASTRAEUS_CONFIG", str(config))
    assert main(["inspect", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["name"], report["labels"]["pool"], len(report["gpus"])) == ("l40s-pcie", "p1", 4)


def test_run_sets_dev_root_and_builds_the_same_scanner(tmp_path: Path) -> None:
    """`run --dev-root` reaches the scanner, built by the one function every command uses."""
    settings = load_settings(
        ["--coordinator", "http://c", "--token-file", "/t", "--backend", "none",
         "--dev-root", str(tmp_path / "dev"), "--state-dir", str(tmp_path)],
        {},
    )  # fmt: skip
    scanner = scanner_for(settings)
    try:
        assert (settings.dev_root, scanner.dev_root) == (tmp_path / "dev", tmp_path / "dev")
    finally:
        scanner.close()


def test_serve_refuses_a_zero_scan_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve --scan-seconds 0` exits 2 naming the flag, before it scans or listens."""
    assert main(["serve", "--scan-seconds", "0", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "astraeus-agent serve: --scan-seconds: '0' is not a number of seconds more than 0\n"
    )


@pytest.mark.parametrize(
    "value", ["0", "-1", "soon", "nan"], ids=["zero", "negative", "text", "nan"]
)
def test_both_programs_refuse_the_same_report_interval(value: str) -> None:
    """The agent and the coordinator give the same answer to a bad report interval."""
    env = {"ASTRAEUS_REPORT_INTERVAL_SECONDS": value}
    expected = f"ASTRAEUS_REPORT_INTERVAL_SECONDS: {value!r} is not a number of seconds more than 0"
    with pytest.raises(SettingsError) as agent:
        load_command("run", ["--coordinator", "http://c", "--token-file", "/t"], env)
    with pytest.raises(SettingsError) as coordinator:
        load(env=env)
    assert (str(agent.value), str(coordinator.value)) == (expected, expected)
