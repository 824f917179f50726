"""The install guide, tested: build the release, unpack it into an empty folder, and run a TLS
cluster of the release's coordinator, two agents and `astra`. The coordinator's config is
written by the guide's own command (docs/operator.md §3) under the umask its §2 leaves, and the
coordinator runs as a user of its own (nobody, when the test runs as root), as its unit does."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .rig import OPENSSL, Astra, clean, make_ca, make_server_cert, read_until

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = [
    pytest.mark.slow,  # the release build (PyInstaller) alone takes minutes
    pytest.mark.skipif(
        OPENSSL is None, reason="the openssl command is not installed (apt-get install openssl)"
    ),
]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`scripts/release.py` once for this module: its output folder."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, ROOT / "scripts" / "release.py", "--out", out],
        check=True,
        capture_output=True,
        timeout=540,
    )
    return out


@pytest.fixture(scope="module")
def opened() -> Iterator[Path]:
    """A folder every user may enter (pytest's own are root's alone when run as root), as /opt
    and /etc are: the coordinator runs as another user and must reach its program and files."""
    folder = Path(tempfile.mkdtemp(prefix="astraeus-guide-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def installed(release: Path, opened: Path) -> Path:
    """The tarball unpacked into an empty folder, as the guide does into /opt/astraeus."""
    (tarball,) = release.glob("astraeus-*-linux-*.tar.gz")
    with tarfile.open(tarball) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(opened / "unpack", filter="tar")
    (opened / "unpack" / top).rename(opened / "opt-astraeus")
    return opened / "opt-astraeus"


SERVICE_UID = 65534
"""nobody: the coordinator's user when the test runs as root (its unit's is a dynamic one)."""


def as_service_user() -> list[str]:
    """The prefix that runs a command as the coordinator's own user: nobody when this test is
    root, else the test's own user, which is not root either."""
    if os.geteuid() != 0:
        return []
    ids = [f"--reuid={SERVICE_UID}", f"--regid={SERVICE_UID}", "--clear-groups"]
    return ["setpriv", *ids]


def guide_section(number: int) -> str:
    """The shell blocks of docs/operator.md's section `number`, as one text."""
    text = (ROOT / "docs" / "operator.md").read_text()
    section = re.search(rf"^## {number}\. .*?(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert section is not None, f"docs/operator.md has no section {number}"
    return "".join(re.findall(r"^```sh\n(.*?)^```", section.group(0), re.MULTILINE | re.DOTALL))


def write_coordinator_config(etc: Path) -> Path:
    """coordinator.toml as the guide writes it: §3's command, under the umask §2 sets in the
    same shell, with /etc/astraeus moved to `etc`."""
    umask = re.search(r"\bumask (0?[0-7]{3})\b", guide_section(2))
    assert umask is not None, "docs/operator.md §2 no longer sets a umask: update this test"
    command = re.search(
        r"^[^\n]*/etc/astraeus/coordinator\.toml <<'END'\n.*?^END$",
        guide_section(3),
        re.MULTILINE | re.DOTALL,
    )
    assert command is not None, "docs/operator.md §3 no longer writes coordinator.toml"
    script = f"umask {umask.group(1)}\n" + command.group(0).replace("/etc/astraeus", str(etc))
    subprocess.run(["sh", "-c", script], check=True)
    return etc / "coordinator.toml"


def test_release_holds_every_artifact(release: Path, installed: Path) -> None:
    """One command makes the wheel, the sdist, the tarball and its checksums; the tarball holds
    one program under the three names, the units and the documentation they point at."""
    names = sorted(p.name for p in release.iterdir())
    assert names == [
        "SHA256SUMS",
        f"astraeus-0.1.0-linux-{os.uname().machine}.tar.gz",
        "astraeus-0.1.0-py3-none-any.whl",
        "astraeus-0.1.0.tar.gz",
    ]
    bin_dir = installed / "bin"
    assert sorted(p.name for p in bin_dir.iterdir()) == [
        "astra",
        "astraeus",
        "astraeus-agent",
        "astraeus-coordinator",
    ]
    tools = ("astra", "astraeus-agent", "astraeus-coordinator")
    assert all(os.readlink(bin_dir / n) == "astraeus" for n in tools)
    # The program is a directory bundle (nothing unpacked at each start): docs/decisions.md.
    assert os.readlink(bin_dir / "astraeus") == "../lib/astraeus/astraeus"
    assert (installed / "lib" / "astraeus" / "astraeus").is_file()
    # Nothing the programs never import, whatever the environment that built it holds
    # (scripts/release.py's NOT_BUNDLED: numpy comes with the launcher tests' PyTorch).
    bundled = {p.name for p in (installed / "lib" / "astraeus" / "_internal").iterdir()}
    assert not {"numpy", "numpy.libs"} & bundled
    for unit in ("astraeus-agent.service", "astraeus-coordinator.service"):
        text = (installed / "lib" / "systemd" / "system" / unit).read_text()
        assert "Documentation=file:///opt/astraeus/share/doc/astraeus/systemd/README.md" in text
    assert (installed / "share" / "doc" / "astraeus" / "systemd" / "README.md").is_file()
    assert (installed / "share" / "doc" / "astraeus" / "docs" / "operator.md").is_file()


@dataclass
class Cluster:
    astra: Astra
    coordinator: subprocess.Popen[str]
    pki: Path
    api: str


@pytest.fixture
def cluster(installed: Path, opened: Path, tmp_path: Path) -> Iterator[Cluster]:
    """A coordinator over TLS with a private CA, and two agents on fake H100 machines. The
    coordinator is started as its unit starts it: the guide's config, the certificate and key
    named by ASTRAEUS_TLS_CERT/KEY (the drop-in's credentials, which only it may read), state
    in a folder of its own user's, and the test's loopback address and short intervals as
    variables and flags on top."""
    bin_dir = installed / "bin"
    etc = Path(tempfile.mkdtemp(prefix="etc-astraeus-", dir=opened))
    etc.chmod(0o755)
    pki = etc / "tls"
    pki.mkdir(mode=0o755)
    ca = make_ca(pki)
    cert, key = make_server_cert(pki, "coordinator")
    state = etc / "state"  # StateDirectory=, mode 0700, the service user's
    state.mkdir(mode=0o700)
    if os.geteuid() == 0:
        for path in (cert, key, state):
            os.chown(path, SERVICE_UID, SERVICE_UID)
    config = write_coordinator_config(etc)
    service_env = {
        "ASTRAEUS_TLS_CERT": str(cert),
        "ASTRAEUS_TLS_KEY": str(key),
        "ASTRAEUS_REPORT_INTERVAL_SECONDS": "1",
        "ASTRAEUS_PASS_INTERVAL_SECONDS": "1",
    }
    processes: list[subprocess.Popen[str]] = []
    logs: list[Path] = []
    try:
        coordinator = subprocess.Popen(
            [
                *as_service_user(),
                *clean(
                    bin_dir / "astraeus-coordinator", "serve", "--config", config,
                    "--db", state / "astraeus.db", "--state-dir", state,
                    "--listen", "127.0.0.1:0", **service_env,
                ),
            ],
            stderr=subprocess.PIPE,
            text=True,
            cwd=etc,
        )  # fmt: skip
        processes.append(coordinator)
        line = read_until(coordinator, "astraeus-coordinator: listening on https://")
        api = line.rsplit(" ", 1)[1].strip()
        admin = (state / "admin.token").read_text().strip()
        astra = Astra(bin_dir / "astra", api, ca, admin, tmp_path / "no-astra-config.toml")
        for machine in ("gpu-1", "gpu-2"):
            token = pki / f"{machine}.token"
            token.write_text(astra.ok("token", "create", "--role", "agent", "--machine", machine))
            logs.append(tmp_path / f"{machine}.log")
            agent = subprocess.Popen(
                clean(
                    bin_dir / "astraeus-agent", "--coordinator", api, "--ca-file", ca,
                    "--token-file", token, "--name", machine, "--backend", "fake:h100-sxm",
                    "--state-dir", tmp_path / machine,
                ),
                stderr=logs[-1].open("w"),
                text=True,
            )  # fmt: skip
            processes.append(agent)
        yield Cluster(astra, coordinator, pki, api)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            _, err = process.communicate(timeout=30)
            assert "Traceback" not in (err or ""), err
        for log in logs:
            assert "Traceback" not in log.read_text(), log.read_text()


def _served_certificate(api: str, ca: Path) -> bytes:
    host, port = api.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        served = tls.getpeercert(binary_form=True)
    assert served is not None
    return served


def _der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


def test_tls_cluster_from_the_release_runs_a_run(cluster: Cluster) -> None:
    """The release's programs in a clean environment, over TLS with a CA made here: a member's
    run on both machines succeeds; after the certificate is renewed and SIGHUP reloads it, the
    same agents (never restarted) run the next run."""
    astra = cluster.astra
    astra.ok("workspace", "set", "team")
    member = astra.ok("token", "create", "--role", "member", "--for-workspace", "team").strip()
    command = ["--", "/bin/sh", "-c", "echo hello from rank $RANK of $WORLD_SIZE"]
    submitted = astra.ok("run", "--name", "hello", "--gpus", "16", *command, token=member)
    # The guide's cluster_name, and the console at the https address astra was given.
    assert submitted == f"hello submitted to gpu-east: {cluster.api}/console/jobs/gpu-east/hello\n"
    run = astra.wait_run("hello", member, "Succeeded")
    assert sorted(task["machine"] for task in run["tasks"]) == ["gpu-1", "gpu-2"]
    logs = astra.ok("logs", "hello", token=member)
    assert "hello-0: hello from rank 0 of 2\n" in logs
    assert "hello-1: hello from rank 1 of 2\n" in logs

    pki, coordinator, api = cluster.pki, cluster.coordinator, cluster.api
    old = _served_certificate(api, pki / "ca.pem")
    assert old == _der(pki / "coordinator.pem")
    renewed, renewed_key = make_server_cert(pki, "renewed")
    (pki / "coordinator.key").write_bytes(renewed_key.read_bytes())
    (pki / "coordinator.pem").write_bytes(renewed.read_bytes())
    coordinator.send_signal(signal.SIGHUP)
    read_until(coordinator, "TLS certificate reloaded")
    assert _served_certificate(api, pki / "ca.pem") == _der(renewed) != old
    astra.ok("run", "--name", "again", "--gpus", "16", *command, token=member)
    astra.wait_run("again", member, "Succeeded")


def test_the_release_moves_a_cluster_to_postgresql(
    installed: Path, tmp_path: Path, postgresql_url: str
) -> None:
    """The release carries the PostgreSQL driver (psycopg and its libpq): its coordinator moves
    a SQLite file into a PostgreSQL database (§12, "Moving to PostgreSQL") with nothing but the
    bundle, as the guide's two coordinators on PostgreSQL need (§13)."""
    from astraeus.coordinator.store import Store

    db = tmp_path / "astraeus.db"
    Store.open(db).close()
    done = subprocess.run(
        clean(installed / "bin" / "astraeus-coordinator", "migrate", "--db", db, "--to",
              postgresql_url, HOME=tmp_path),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"copied {db} (schema ")
