"""`astraeus-coordinator`: settings from file, environment and flags; tokens; first start."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from astraeus.coordinator.machine_records import MachineRecords
from astraeus.coordinator.service import main
from astraeus.coordinator.settings import SCHEMA, load
from astraeus.coordinator.startup import first_admin_token, start
from astraeus.coordinator.store import Store
from astraeus.shared.settings import SettingsError

BIN = Path(sys.executable).parent / "astraeus-coordinator"


def test_later_sources_win(tmp_path: Path) -> None:
    """Defaults, then the TOML file, then ASTRAEUS_* variables, then flags."""
    config = tmp_path / "coordinator.toml"
    config.write_text(
        'listen = "10.0.0.5:9000"\nallow_plain_http = true\ndown_after_seconds = 10\ndb = "/a.db"\n'
    )
    settings = load(
        config=config,
        env={"ASTRAEUS_DOWN_AFTER_SECONDS": "20", "ASTRAEUS_GPU_COUNT": "8", "HOME": "/x"},
        overrides={"db": Path("/b.db"), "listen": None},
    )
    assert (settings.listen, settings.down_after_seconds, settings.db) == (
        "10.0.0.5:9000",
        20.0,
        Path("/b.db"),
    )
    assert (settings.host, settings.port) == ("10.0.0.5", 9000)


def test_a_silent_machines_tasks_are_lost_after_five_minutes_by_default() -> None:
    """Silence is not death (issue 25.3): tasks of a silent machine become Lost only after 300 s,
    Slurm's `SlurmdTimeout` and Kubernetes' eviction timeout; the machine is Down after 30 s."""
    settings = load(env={})
    assert (settings.down_after_seconds, settings.lost_after_seconds) == (30.0, 300.0)


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ("nonsense = 1\n", {}, f"unknown setting 'nonsense'; known: {', '.join(sorted(SCHEMA))}"),
        (
            "",
            {"ASTRAEUS_DOWN_AFTER_SECONDS": "soon"},
            "ASTRAEUS_DOWN_AFTER_SECONDS: 'soon' is not a number of seconds more than 0",
        ),
        ("", {"ASTRAEUS_DOWN_AFTER_SECONDS": "0"}, "'0' is not a number of seconds more than 0"),
        (
            'pass_process = "maybe"\n',
            {},
            "pass_process: 'maybe' is not true or false (1, yes, on / 0, no, off)",
        ),
        ("", {"ASTRAEUS_LISTEN": "8470"}, "listen: '8470' is not HOST:PORT, e.g. 0.0.0.0:8470"),
        (
            'listen = "0.0.0.0:8470"\n',
            {},
            "listen: 0.0.0.0:8470 is reachable from other machines and would serve plain HTTP; "
            "give tls_cert and tls_key (--tls-cert, --tls-key), or set allow_plain_http = true "
            "(--allow-plain-http) to send tokens in clear text",
        ),
        ('tls_cert = "/c.pem"\n', {}, "tls_cert and tls_key: give both, or neither"),
        (
            "",
            {"ASTRAEUS_LOST_AFTER_SECONDS": "-1"},
            "ASTRAEUS_LOST_AFTER_SECONDS: '-1' is not a number of seconds, 0 or more",
        ),
        (
            "",
            {"ASTRAEUS_ACCESS_LABELS": "tenant,,zone"},
            "ASTRAEUS_ACCESS_LABELS: 'tenant,,zone' is not a comma-separated list of label names",
        ),
    ],
    ids=[
        "unknown-key",
        "not-a-number",
        "zero-seconds",
        "toml-flag",
        "listen-without-port",
        "plain",
        "half-tls",
        "negative",
        "access-labels",
    ],
)
def test_bad_settings_name_the_setting(
    tmp_path: Path, toml: str, env: dict[str, str], message: str
) -> None:
    """A bad setting is refused with its name and where it came from."""
    config = tmp_path / "c.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load(config=config, env=env)
    assert str(caught.value).endswith(message)


def test_first_start_writes_an_admin_token_once(tmp_path: Path) -> None:
    """An empty database gets an admin token in a 0600 file; a second start makes none."""
    store = Store.open(tmp_path / "a.db")
    path = first_admin_token(store, tmp_path / "state")
    assert path == tmp_path / "state" / "admin.token"
    assert path.stat().st_mode & 0o777 == 0o600
    principal = store.tokens.authenticate(path.read_text().strip())
    assert principal is not None
    assert principal.role.value == "admin"
    assert first_admin_token(store, tmp_path / "state") is None
    store.close()


def test_start_hides_the_loaded_store_from_the_collector(tmp_path: Path) -> None:
    """A started coordinator's loaded records are frozen for the collector before any request."""
    gc.unfreeze()
    settings = load(env={}, overrides={"db": tmp_path / "a.db", "state_dir": tmp_path / "state"})
    started = start(settings)
    try:
        assert not isinstance(started, str), started
        lock, store, _ = started
        assert gc.get_freeze_count() > 0
        store.close()
        lock.release()
    finally:
        gc.unfreeze()


def test_token_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`token create` prints a working secret, `token list` shows it, `token revoke` ends it."""
    db = str(tmp_path / "a.db")
    assert main(["token", "create", "--db", db, "--role", "agent", "--machine", "gpu-01"]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("astr_")
    assert main(["token", "list", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert "\tagent\tgpu-01\t" in listed
    token_id = listed.split("\t", 1)[0]
    assert main(["token", "revoke", "--db", db, token_id]) == 0
    assert main(["token", "revoke", "--db", db, token_id]) == 1
    store = Store.open(Path(db))
    assert store.tokens.authenticate(secret) is None
    assert [m.name for m in MachineRecords(store).all()] == ["gpu-01"]
    store.close()


def test_member_token_needs_an_existing_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`token create --role member` for an unknown workspace is a usage error."""
    db = str(tmp_path / "a.db")
    assert main(["token", "create", "--db", db, "--role", "member", "--workspace", "x"]) == 2
    assert "--workspace must name an existing workspace" in capsys.readouterr().err


def test_bad_flag_value_is_a_usage_error(tmp_path: Path) -> None:
    """A bad --listen exits 2 with the setting named, not a traceback."""
    out = subprocess.run(
        [BIN, "--listen", "nowhere", "--db", tmp_path / "a.db"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr == (
        "astraeus-coordinator: listen: 'nowhere' is not HOST:PORT, e.g. 0.0.0.0:8470\n"
    )


def test_access_labels_always_hold_pool(tmp_path: Path) -> None:
    """`access_labels` from the variable or a TOML array adds to `pool`, which is always one."""
    assert load(env={"ASTRAEUS_ACCESS_LABELS": "tenant, zone"}).access_labels == (
        "pool",
        "tenant",
        "zone",
    )
    config = tmp_path / "c.toml"
    config.write_text('access_labels = ["pool", "clearance"]\n')
    assert load(config=config, env={}).access_labels == ("pool", "clearance")
    assert load(env={}).access_labels == ("pool",)


@pytest.mark.parametrize(
    ("env", "state_dir"),
    [
        ({"STATE_DIRECTORY": "/var/lib/astraeus", "HOME": "/home/x"}, "/var/lib/astraeus"),
        ({"XDG_DATA_HOME": "/data", "HOME": "/home/x"}, "/data/astraeus"),
        ({"HOME": "/home/x"}, "/home/x/.local/share/astraeus"),
    ],
    ids=["systemd", "xdg", "home"],
)
def test_state_and_database_default_to_the_service_directory(
    env: dict[str, str], state_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no db or state_dir given, both live in $STATE_DIRECTORY, else (not root) the XDG
    data directory; never in the working directory. (Root's: tests/test_state_dirs.py.)"""
    monkeypatch.setattr("astraeus.coordinator.settings.os.geteuid", lambda: 1000)
    settings = load(env=env)
    assert settings.state_dir == Path(state_dir)
    assert settings.db == Path(state_dir) / "astraeus.db"


def test_a_given_state_dir_carries_the_database(tmp_path: Path) -> None:
    """`--state-dir` alone moves the database with it; `--db` still wins."""
    moved = load(env={"HOME": "/h"}, overrides={"state_dir": tmp_path})
    assert moved.db == tmp_path / "astraeus.db"
    pinned = load(env={"HOME": "/h"}, overrides={"state_dir": tmp_path, "db": Path("/x.db")})
    assert pinned.db == Path("/x.db")


def test_state_directory_is_private(tmp_path: Path) -> None:
    """The state directory the coordinator creates is 0700, the admin token in it 0600."""
    store = Store.open(tmp_path / "a.db")
    path = first_admin_token(store, tmp_path / "new" / "state")
    store.close()
    assert path is not None
    assert (tmp_path / "new" / "state").stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600


def test_plain_http_off_loopback_warns_at_every_start(tmp_path: Path) -> None:
    """With allow_plain_http, a non-loopback listen starts and logs a warning about clear-text
    tokens; then SIGTERM stops it."""
    process = subprocess.Popen(
        [BIN, "--listen", "0.0.0.0:0", "--allow-plain-http", "--state-dir", tmp_path],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "astraeus-coordinator: listening on" in line:
            break
    process.terminate()
    process.communicate(timeout=30)
    warning = [line for line in seen if "WARNING" in line and "plain HTTP" in line]
    assert warning, seen
    assert (
        warning[0]
        .split(": ", 1)[1]
        .startswith(
            "serving plain HTTP on 0.0.0.0:0 (allow_plain_http): tokens cross the network in clear "
            "text; give tls_cert and tls_key"
        )
    )


def test_unusable_certificate_is_a_usage_error(tmp_path: Path) -> None:
    """A certificate file that is not PEM stops the start with exit 2 and names the files."""
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("not a certificate\n")
    key.write_text("not a key\n")
    out = subprocess.run(
        [BIN, "--tls-cert", cert, "--tls-key", key, "--state-dir", tmp_path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.startswith(
        f"astraeus-coordinator: tls_cert {cert}, tls_key {key}: cannot be used together: "
    )


def test_an_unreadable_config_names_the_user_that_must_read_it() -> None:
    """Issue 30's blocker: a config written under `umask 077` is root's alone, and the
    coordinator runs as its own user. It exits 2 saying which user may not read the file, its
    mode and owner, and the command that fixes it. (As root, the coordinator runs as nobody;
    otherwise the file is made unreadable to the test's own user.)"""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)  # noqa: S103 - nobody must reach the file, not read it
        config = Path(folder) / "coordinator.toml"
        config.write_text('cluster_name = "gpu-east"\n')
        as_other: list[str] = []
        if os.geteuid() == 0:
            config.chmod(0o600)
            as_other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        else:
            config.chmod(0o000)
        out = subprocess.run(
            [*as_other, BIN, "--config", config, "--db", Path(folder) / "a.db"],
            capture_output=True,
            text=True,
            check=False,
        )
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(
        f"astraeus-coordinator: config {config}: Permission denied: this program runs as user "
    )
    assert f"which may not read it (it is mode 0{'600' if as_other else '000'}, owned by " in (
        out.stderr
    )
    assert f"let that user read it, e.g. chmod 0644 {config} (a config holds no secret" in (
        out.stderr
    )
