"""Settings from the command line, ASTRAEUS_* variables and TOML; main()'s clear errors."""

import sys
from pathlib import Path

import pytest

from astraeus.agent.runtime import main
from astraeus.agent.runtime.main import check_transport
from astraeus.agent.settings import (
    Settings,
    SettingsError,
    default_state_dir,
    load_settings,
    read_token,
)

BASE_ENV = {"HOME": "/home/ops"}


def _load(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    return load_settings(argv, {**BASE_ENV, **(env or {})})


def test_command_line_wins_over_variables_over_toml(tmp_path: Path) -> None:
    """Each setting comes from the command line, else ASTRAEUS_*, else the TOML file."""
    config = tmp_path / "agent.toml"
    config.write_text(
        'coordinator = "http://toml:1"\nname = "toml-name"\nbackend = "nvml"\n'
        'stop_grace_seconds = 12\nstate_dir = "/srv/state"\n'
    )
    env = {"ASTRAEUS_NAME": "env-name", "ASTRAEUS_TOKEN_FILE": "/etc/token"}
    got = _load(["--config", str(config), "--name", "cli-name"], env)
    assert got == Settings(
        coordinator="http://toml:1",
        token_file=Path("/etc/token"),
        name="cli-name",
        state_dir=Path("/srv/state"),
        backend="nvml",
        stop_grace_seconds=12.0,
    )


def test_config_file_from_variable(tmp_path: Path) -> None:
    """ASTRAEUS_CONFIG names the TOML file when --config is not given."""
    config = tmp_path / "agent.toml"
    config.write_text('coordinator = "https://c:8443"\ntoken_file = "/t"\nname = "n"\n')
    assert _load([], {"ASTRAEUS_CONFIG": str(config)}).coordinator == "https://c:8443"


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        pytest.param([], {}, "--coordinator is required (or ASTRAEUS_COORDINATOR)", id="no-url"),
        pytest.param(
            ["--coordinator", "http://c"],
            {},
            "--token-file is required (or ASTRAEUS_TOKEN_FILE)",
            id="no-token",
        ),
        pytest.param(
            ["--coordinator", "c:8443", "--token-file", "/t"],
            {},
            "--coordinator: 'c:8443' is not an http(s) URL",
            id="not-a-url",
        ),
        pytest.param(
            ["--coordinator", "http://c", "--token-file", "/t", "--backend", "cuda"],
            {},
            "--backend: 'cuda'; use auto, nvml, amdsmi, intel, none or fake:FILE",
            id="bad-backend",
        ),
        pytest.param(
            ["--coordinator", "http://c", "--token-file", "/t", "--label", "rack"],
            {},
            "--label 'rack' is not KEY=VALUE",
            id="bad-label",
        ),
        pytest.param(
            ["--coordinator", "http://c", "--token-file", "/t"],
            {"ASTRAEUS_STOP_GRACE_SECONDS": "soon"},
            "ASTRAEUS_STOP_GRACE_SECONDS: 'soon' is not a number of seconds more than 0",
            id="bad-number",
        ),
    ],
)
def test_bad_settings(argv: list[str], env: dict[str, str], message: str) -> None:
    """A missing or wrong setting is refused with a text naming it."""
    with pytest.raises(SettingsError) as caught:
        _load(argv, env)
    assert str(caught.value) == message


def test_unknown_toml_key(tmp_path: Path) -> None:
    """A misspelt key in the TOML file is refused, naming the key."""
    config = tmp_path / "agent.toml"
    config.write_text('coordinatr = "http://c"\n')
    with pytest.raises(SettingsError) as caught:
        _load(["--config", str(config)])
    assert str(caught.value).startswith(f"config {config}: unknown setting 'coordinatr'; known:")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({"STATE_DIRECTORY": "/var/lib/astraeus"}, "/var/lib/astraeus", id="systemd"),
        pytest.param({"XDG_STATE_HOME": "/x"}, "/x/astraeus-agent", id="xdg"),
    ],
)
def test_default_state_dir(env: dict[str, str], expected: str) -> None:
    """systemd's StateDirectory= first, then the user's XDG state directory (as non-root)."""
    assert default_state_dir(env, root=False) == Path(expected)


def test_token_file(tmp_path: Path) -> None:
    """The token is the file's content without white space; an empty file is refused."""
    token = tmp_path / "token"
    token.write_text("  s3cret\n")
    assert read_token(token) == "s3cret"
    token.write_text("\n")
    with pytest.raises(SettingsError) as caught:
        read_token(token)
    assert str(caught.value) == f"token_file: {token} is empty"


def test_main_says_when_discovery_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the inventory scanner, main() exits 2 with a sentence, not a traceback."""
    monkeypatch.setitem(sys.modules, "astraeus.agent.inventory", None)
    token = tmp_path / "token"
    token.write_text("t")
    code = main(["--coordinator", "http://127.0.0.1:1", "--token-file", str(token)])
    assert code == 2
    assert capsys.readouterr().err == (
        "astraeus-agent: machine discovery (astraeus.agent.inventory) is not available: "
        "import of astraeus.agent.inventory halted; None in sys.modules\n"
    )


def test_main_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown option prints argparse's usage and returns 2."""
    assert main(["--frobnicate"]) == 2
    assert "unrecognized arguments: --frobnicate" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "env", "toml", "expected"),
    [
        pytest.param(
            ["--label", "topology.astraeus.io/rack=r1", "--label", "pool=h100"],
            {},
            "",
            (("pool", "h100"), ("topology.astraeus.io/rack", "r1")),
            id="flags",
        ),
        pytest.param(
            [],
            {"ASTRAEUS_LABELS": "pool=h100,zone=a"},
            "",
            (("pool", "h100"), ("zone", "a")),
            id="variable",
        ),
        pytest.param([], {}, '[labels]\npool = "h100"\n', (("pool", "h100"),), id="toml"),
    ],
)
def test_labels_from_every_source(
    tmp_path: Path,
    argv: list[str],
    env: dict[str, str],
    toml: str,
    expected: tuple[tuple[str, str], ...],
) -> None:
    """Labels come from repeated --label, ASTRAEUS_LABELS or a TOML [labels] table, sorted."""
    base = ["--coordinator", "http://c", "--token-file", "/t"]
    if toml:
        config = tmp_path / "agent.toml"
        config.write_text(toml)
        base += ["--config", str(config)]
    assert _load(base + argv, env).labels == expected


@pytest.mark.parametrize(
    ("argv", "env", "toml", "expected"),
    [
        pytest.param(
            ["--drive", "datasets=/mnt/datasets", "--network-drive", "shared=/mnt/nfs"],
            {},
            "",
            ((("datasets", "/mnt/datasets"),), (("shared", "/mnt/nfs"),)),
            id="flags",
        ),
        pytest.param(
            [],
            {"ASTRAEUS_DRIVES": "b=/mnt/b,a=/mnt/a", "ASTRAEUS_NETWORK_DRIVES": "n=/nfs"},
            "",
            ((("a", "/mnt/a"), ("b", "/mnt/b")), (("n", "/nfs"),)),
            id="variables",
        ),
        pytest.param(
            [],
            {},
            '[drives]\ndatasets = "/mnt/d"\n[network_drives]\nshared = "/nfs/s"\n',
            ((("datasets", "/mnt/d"),), (("shared", "/nfs/s"),)),
            id="toml",
        ),
    ],
)
def test_drives_from_every_source(
    tmp_path: Path,
    argv: list[str],
    env: dict[str, str],
    toml: str,
    expected: tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]],
) -> None:
    """Drives and network drives come from --drive/--network-drive NAME=PATH, ASTRAEUS_DRIVES
    and ASTRAEUS_NETWORK_DRIVES, or TOML tables, sorted by name."""
    base = ["--coordinator", "http://c", "--token-file", "/t"]
    if toml:
        config = tmp_path / "agent.toml"
        config.write_text(toml)
        base += ["--config", str(config)]
    got = _load(base + argv, env)
    assert (got.drives, got.network_drives) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--drive", "datasets"], "drives: 'datasets' is not NAME=PATH", id="no-path"),
        pytest.param(
            ["--drive", "d=relative"], "drives: drive d: path 'relative' is not absolute", id="rel"
        ),
        pytest.param(
            ["--drive", "a b=/x"],
            "drives: drive name 'a b': use letters, digits, '.', '_' and '-', at most 63",
            id="bad-name",
        ),
        pytest.param(
            ["--drive", "d=/x", "--network-drive", "d=/y"],
            "drives: d is configured more than once; name it once",
            id="twice",
        ),
    ],
)
def test_bad_drives_name_the_setting(argv: list[str], message: str) -> None:
    """A drive setting that cannot be used says which and why."""
    with pytest.raises(SettingsError) as raised:
        _load(["--coordinator", "http://c", "--token-file", "/t", *argv])
    assert str(raised.value) == message


def test_worker_settings_from_every_source(tmp_path: Path) -> None:
    """worker_user, worker_uids, work_root and allow_root_workers come from flags, variables
    (yes/no/true/false/1/0) or TOML (a boolean)."""
    base = ["--coordinator", "http://c", "--token-file", "/t"]
    config = tmp_path / "agent.toml"
    config.write_text('worker_uids = "70000-70999"\nallow_root_workers = true\n')
    from_toml = _load([*base, "--config", str(config)])
    assert (from_toml.worker_user, from_toml.worker_uids, from_toml.allow_root_workers) == (
        "dynamic",
        "70000-70999",
        True,
    )
    env = {"ASTRAEUS_WORKER_USER": "gpuwork", "ASTRAEUS_ALLOW_ROOT_WORKERS": "no"}
    from_env = _load([*base, "--work-root", "/srv/work"], env)
    assert (from_env.worker_user, from_env.work_root, from_env.allow_root_workers) == (
        "gpuwork",
        Path("/srv/work"),
        False,
    )
    assert _load([*base, "--allow-root-workers"]).allow_root_workers is True


def test_allow_root_workers_must_be_a_boolean() -> None:
    """A value that is neither true nor false is refused, naming the setting."""
    with pytest.raises(SettingsError) as caught:
        _load(["--coordinator", "http://c", "--token-file", "/t"],
              {"ASTRAEUS_ALLOW_ROOT_WORKERS": "maybe"})  # fmt: skip
    assert str(caught.value) == (
        "ASTRAEUS_ALLOW_ROOT_WORKERS: 'maybe' is not true or false (1, yes, on / 0, no, off)"
    )


def test_health_thresholds_from_the_toml_file(tmp_path: Path) -> None:
    """A `[health]` table sets HealthPolicy's thresholds; the rest keep their defaults."""
    from astraeus.agent.health import HealthPolicy

    config = tmp_path / "agent.toml"
    config.write_text(
        'coordinator = "http://c:1"\ntoken_file = "/t"\nname = "n"\n\n[health]\n'
        "quiet_seconds = 1200\necc_corrected_per_window = 5\nthrottle_seconds_per_window = 2.5\n"
    )
    assert _load(["--config", str(config)]).health == HealthPolicy(
        quiet_seconds=1200.0, ecc_corrected_per_window=5, throttle_seconds_per_window=2.5
    )
    assert _load(["--coordinator", "http://c", "--token-file", "/t"]).health == HealthPolicy()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        pytest.param(
            "typo_seconds = 1",
            "health.typo_seconds: not a threshold; known: window_seconds, quiet_seconds, "
            "ecc_corrected_per_window, nvlink_errors_per_window, nvlink_crc_per_window, "
            "nvlink5_errors_per_window, throttle_seconds_per_window",
            id="unknown",
        ),
        pytest.param(
            "ecc_corrected_per_window = 1.5",
            "health.ecc_corrected_per_window: 1.5 is not a whole number ≥ 0",
            id="not-whole",
        ),
        pytest.param(
            'quiet_seconds = "ten"', "health.quiet_seconds: 'ten' is not a number ≥ 0", id="text"
        ),
        pytest.param(
            "quiet_seconds = -1", "health.quiet_seconds: -1 is not a number ≥ 0", id="negative"
        ),
        pytest.param(
            "window_seconds = 0", "health.window_seconds: must be more than 0", id="no-window"
        ),
    ],
)
def test_bad_health_thresholds_are_refused(tmp_path: Path, table: str, message: str) -> None:
    """A wrong `[health]` key or value names the key and what is expected."""
    config = tmp_path / "agent.toml"
    config.write_text(f'coordinator = "http://c:1"\ntoken_file = "/t"\n\n[health]\n{table}\n')
    with pytest.raises(SettingsError) as raised:
        _load(["--config", str(config)])
    assert str(raised.value) == message


def test_the_scanner_gets_the_health_thresholds(tmp_path: Path) -> None:
    """The report loop's scanner classifies GPUs and ports with the `[health]` thresholds."""
    from astraeus.agent.runtime.main import make_scan

    config = tmp_path / "agent.toml"
    config.write_text(
        f'coordinator = "http://c:1"\ntoken_file = "/t"\nbackend = "none"\n'
        f'state_dir = "{tmp_path / "state"}"\n\n[health]\nquiet_seconds = 30\n'
    )
    settings = _load(["--config", str(config)])
    scanner = make_scan(settings).scanner
    assert scanner.tracker.policy.quiet_seconds == scanner.ports.policy.quiet_seconds == 30.0


def test_ca_file_from_flag_variable_or_toml(tmp_path: Path) -> None:
    """The CA that signed the coordinator's certificate: --ca-file, ASTRAEUS_CA_FILE or TOML."""
    config = tmp_path / "agent.toml"
    config.write_text('coordinator = "https://c:8470"\ntoken_file = "/t"\nca_file = "/toml.pem"\n')
    assert _load(["--config", str(config)]).ca_file == Path("/toml.pem")
    env = {"ASTRAEUS_CA_FILE": "/env.pem"}
    assert _load(["--config", str(config)], env).ca_file == Path("/env.pem")
    assert _load(["--config", str(config), "--ca-file", "/f.pem"], env).ca_file == Path("/f.pem")
    assert _load(["--coordinator", "https://c", "--token-file", "/t"]).ca_file is None


def test_unreadable_ca_file_is_a_settings_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CA file that does not exist stops the agent at start (exit 2), naming the setting."""
    token = tmp_path / "token"
    token.write_text("astr_x\n")
    argv = ["--coordinator", "https://c:8470", "--token-file", str(token)]
    code = main([*argv, "--ca-file", str(tmp_path / "ca.pem"), "--backend", "none"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"astraeus-agent: ca_file: {tmp_path / 'ca.pem'} does not exist\n"
    )


def test_worker_env_passthrough_from_every_source(tmp_path: Path) -> None:
    """A TOML list, or names split by commas in a flag or variable; a name that is not a
    variable's, or one of the agent's own `ASTRAEUS_*` settings, is refused naming the source."""
    base = ["--coordinator", "http://c", "--token-file", "/t"]
    config = tmp_path / "agent.toml"
    config.write_text('worker_env_passthrough = ["HTTPS_PROXY", "LD_LIBRARY_PATH"]\n')
    assert _load([*base, "--config", str(config)]).worker_env_passthrough == (
        "HTTPS_PROXY",
        "LD_LIBRARY_PATH",
    )
    env = {"ASTRAEUS_WORKER_ENV_PASSTHROUGH": "NO_PROXY, HTTPS_PROXY"}
    assert _load(base, env).worker_env_passthrough == ("NO_PROXY", "HTTPS_PROXY")
    assert _load(base).worker_env_passthrough == ()
    with pytest.raises(SettingsError) as caught:
        _load([*base, "--worker-env-passthrough", "A=B"])
    assert str(caught.value) == "--worker-env-passthrough: 'A=B' is not a variable name"
    with pytest.raises(SettingsError) as caught:
        _load([*base, "--worker-env-passthrough", "ASTRAEUS_TOKEN_FILE"])
    assert "is the agent's own setting" in str(caught.value)


def test_the_agent_refuses_plain_http_to_another_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`astraeus-agent` exits 2 before its first report rather than send its token in clear
    to another machine; `--allow-plain-http` (a trusted network) or https lets it start."""
    token = tmp_path / "token"
    token.write_text("astr_x\n")
    argv = ["--coordinator", "http://coord:8470", "--token-file", str(token), "--backend", "none"]
    assert main([*argv, "--state-dir", str(tmp_path / "state")]) == 2
    assert capsys.readouterr().err == (
        "astraeus-agent: coordinator: http://coord:8470 is plain http to another machine, so the"
        " token would cross the network unencrypted; use https:// (docs/operator.md), or"
        " allow_plain_http = true (--allow-plain-http) on a network you trust\n"
    )
    allowed = _load([*argv, "--allow-plain-http"])
    assert allowed.allow_plain_http is True
    check_transport(allowed)
    check_transport(_load(["--coordinator", "https://coord:8443", "--token-file", "/t"]))


def test_several_coordinators_from_a_flag_a_variable_or_toml(tmp_path: Path) -> None:
    """`coordinator` takes every coordinator of the cluster: `URL,URL` on the command line or
    in ASTRAEUS_COORDINATOR, or a TOML list; each is cleaned as one URL would be."""
    urls = "https://coord-a:8470,https://coord-b:8470"
    flagged = _load(["--coordinator", "https://coord-a:8470/, https://coord-b:8470/api/v1",
                     "--token-file", "/t"])  # fmt: skip
    assert flagged.coordinator == urls
    assert _load(["--token-file", "/t"], {"ASTRAEUS_COORDINATOR": urls}).coordinator == urls
    config = tmp_path / "agent.toml"
    config.write_text(
        'coordinator = ["https://coord-a:8470", "https://coord-b:8470"]\ntoken_file = "/t"\n'
    )
    assert _load(["--config", str(config)]).coordinator == urls


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("https://a:8470,file:///etc/shadow",
                     "'file:///etc/shadow' is not an http(s) URL", id="file"),
        pytest.param("https://root:hunter2@a:8470", "'https://…@a' has credentials in it; give "
                     "the token in its own setting (a token file), never in the URL",
                     id="credentials"),
        pytest.param(",".join(f"https://c{i}:8470" for i in range(500)),
                     "500 addresses; at most 16 coordinators may be listed", id="500"),
        pytest.param("https://a:8470,https://A:8470/",
                     "'https://A:8470' is listed twice (also as 'https://a:8470')", id="twice"),
    ],
)  # fmt: skip
def test_a_bad_coordinator_list_is_refused_naming_the_source(value: str, message: str) -> None:
    """A list with an address that is not http(s)://host:port, credentials, a duplicate, or
    hundreds of entries: refused before anything is sent, naming where it came from."""
    with pytest.raises(SettingsError) as refused:
        _load(["--token-file", "/t"], {"ASTRAEUS_COORDINATOR": value})
    assert str(refused.value) == f"ASTRAEUS_COORDINATOR: {message}"
    assert "hunter2" not in str(refused.value)


def test_each_coordinator_listed_is_checked_for_plain_http() -> None:
    """Plain http to another machine is refused for any coordinator of the list, not just the
    first: the token goes to whichever leads."""
    listed = _load(["--coordinator", "https://a:8470,http://b:8470", "--token-file", "/t"])
    with pytest.raises(SettingsError, match=r"^coordinator: http://b:8470 is plain http"):
        check_transport(listed)
