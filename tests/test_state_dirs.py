"""One scheme for the state directories (docs/operator.md, *State directories*): systemd's
`$STATE_DIRECTORY`; as root the unit's own `/var/lib/<StateDirectory=>`; else the user's XDG
directory. The coordinator's and the agent's never nest, and an install made under an earlier
default keeps its state."""

from __future__ import annotations

import configparser
import logging
from pathlib import Path

import pytest

from astraeus.agent import settings as agent_settings
from astraeus.coordinator import settings as coordinator_settings
from astraeus.shared import settings as shared_settings

ROOT = Path(__file__).resolve().parent.parent


def _unit_state_directory(unit: str) -> str:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(ROOT / "systemd" / unit)
    return parser["Service"]["StateDirectory"]


@pytest.fixture
def var_lib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`/var/lib`, moved into the test's folder."""
    folder = tmp_path / "var-lib"
    folder.mkdir()
    monkeypatch.setattr(shared_settings, "SYSTEM_STATE", folder)
    return folder


def test_as_root_each_program_uses_its_units_directory(var_lib: Path, tmp_path: Path) -> None:
    """By hand as root, each program keeps its state where its unit does, and the two are
    siblings: the agent's is no longer inside the coordinator's."""
    env = {"HOME": str(tmp_path / "root-home")}
    coordinator = coordinator_settings.default_state_dir(env, root=True)
    agent = agent_settings.default_state_dir(env, root=True)
    assert coordinator == var_lib / _unit_state_directory("astraeus-coordinator.service")
    assert agent == var_lib / _unit_state_directory("astraeus-agent.service")
    assert coordinator == var_lib / "astraeus"
    assert agent == var_lib / "astraeus-agent"
    assert not agent.is_relative_to(coordinator)


def test_under_systemd_both_take_state_directory(var_lib: Path) -> None:
    env = {"STATE_DIRECTORY": "/var/lib/x:/var/lib/y", "HOME": "/home/u"}
    assert coordinator_settings.default_state_dir(env, root=True) == Path("/var/lib/x")
    assert agent_settings.default_state_dir(env, root=False) == Path("/var/lib/x")


def test_as_a_user_both_are_in_the_users_xdg_directories(var_lib: Path) -> None:
    env = {"HOME": "/home/u", "XDG_STATE_HOME": "/state", "XDG_DATA_HOME": "/data"}
    assert coordinator_settings.default_state_dir(env, root=False) == Path("/data/astraeus")
    assert agent_settings.default_state_dir(env, root=False) == Path("/state/astraeus-agent")
    assert coordinator_settings.default_state_dir({"HOME": "/home/u"}, root=False) == Path(
        "/home/u/.local/share/astraeus"
    )


def test_a_root_coordinators_earlier_state_is_kept(
    var_lib: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A coordinator run by hand as root before kept its database in root's XDG folder: it
    keeps it there, saying how to move, until the new directory exists."""
    home = tmp_path / "root-home"
    earlier = home / ".local" / "share" / "astraeus"
    earlier.mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        chosen = coordinator_settings.default_state_dir({"HOME": str(home)}, root=True)
    assert chosen == earlier
    assert f"mv {earlier} {var_lib / 'astraeus'}" in caplog.text
    (var_lib / "astraeus").mkdir()
    assert coordinator_settings.default_state_dir({"HOME": str(home)}, root=True) == (
        var_lib / "astraeus"
    )


def test_a_root_agents_earlier_state_is_kept(
    var_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's earlier root default, `/var/lib/astraeus/agent`, holds the records of
    workers it started: it stays in use (running work is watched again) until moved."""
    earlier = var_lib / "astraeus" / "agent"
    earlier.mkdir(parents=True)
    monkeypatch.setattr(agent_settings, "LEGACY_ROOT_STATE", earlier)
    assert agent_settings.default_state_dir({}, root=True) == earlier
    (var_lib / "astraeus-agent").mkdir()
    assert agent_settings.default_state_dir({}, root=True) == var_lib / "astraeus-agent"
