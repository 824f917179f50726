"""The install guide's cast: a private CA made with the `openssl` CLI, and the release's
programs started with `env -i`, so nothing of this test's environment (the venv, PATH,
PYTHONPATH) can help them."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import until

OPENSSL = shutil.which("openssl")
WAIT_SECONDS = 90.0


def openssl(*args: str | Path, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *map(str, args)], cwd=cwd, check=True, capture_output=True)


def make_ca(folder: Path) -> Path:
    """A private CA, as docs/operator.md makes one: `ca.key` and the self-signed `ca.pem`."""
    openssl("genrsa", "-out", "ca.key", "2048", cwd=folder)
    openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-sha256", "-days", "30",
        "-subj", "/CN=Astraeus test CA", "-out", "ca.pem", cwd=folder,
    )  # fmt: skip
    return folder / "ca.pem"


def make_server_cert(folder: Path, name: str) -> tuple[Path, Path]:
    """A key and a certificate for 127.0.0.1 and localhost, signed by the CA in `folder`."""
    (folder / "san.ext").write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    openssl("genrsa", "-out", f"{name}.key", "2048", cwd=folder)
    openssl(
        "req", "-new", "-key", f"{name}.key", "-subj", "/CN=127.0.0.1", "-out", f"{name}.csr",
        cwd=folder,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "30", "-sha256", "-extfile", "san.ext",
        "-out", f"{name}.pem", cwd=folder,
    )  # fmt: skip
    return folder / f"{name}.pem", folder / f"{name}.key"


def clean(program: Path, *args: str | Path, **env: str) -> list[str]:
    """`env -i NAME=VALUE... PROGRAM ARGS...`: only what is given here reaches the program."""
    return ["env", "-i", *(f"{k}={v}" for k, v in env.items()), str(program), *map(str, args)]


@dataclass
class Astra:
    """The release's `astra`, with only ASTRA_* set."""

    program: Path
    api: str
    ca: Path
    token: str
    config: Path

    def __call__(self, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            "ASTRA_API": self.api,
            "ASTRA_CA": str(self.ca),
            "ASTRA_TOKEN": token or self.token,
            "ASTRA_CONFIG": str(self.config),
        }
        return subprocess.run(
            clean(self.program, *args, **env), capture_output=True, text=True, timeout=60
        )

    def ok(self, *args: str, token: str | None = None) -> str:
        done = self(*args, token=token)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def wait_run(self, name: str, token: str, state: str) -> dict[str, Any]:
        """Poll `astra astraeus status NAME -o json` until the run is in `state`."""

        def in_state() -> dict[str, Any] | None:
            run: dict[str, Any] = json.loads(self.ok("status", name, "-o", "json", token=token))
            return run if run["state"] == state else None

        return until(f"{name} to be {state}", in_state, within=WAIT_SECONDS, every=0.5)


def read_until(process: subprocess.Popen[str], marker: str) -> str:
    """Lines of the process's stderr up to the first holding `marker`; that line."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if marker in line:
            return line
    raise AssertionError(f"{marker!r} never printed:\n{''.join(seen)}")
