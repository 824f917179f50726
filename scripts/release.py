#!/usr/bin/env python3
"""Build every release artifact into one folder (default `dist/`):

- the wheel and the sdist (`python -m build`);
- `astraeus-VERSION-linux-ARCH.tar.gz`: one self-contained program (PyInstaller's directory
  bundle, with its own Python inside) in `lib/astraeus/`, answering as `astra`,
  `astraeus-coordinator` and `astraeus-agent` through symbolic links of those names in `bin/`,
  the systemd units in `lib/systemd/system/`, and the documentation in `share/doc/astraeus/`;
  unpacked into /opt/astraeus it is what the units run;
- `SHA256SUMS`.

Run it from the development environment (`pip install -e '.[dev]'` brings PyInstaller and build):
`.venv/bin/python scripts/release.py`. It prints each step's seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from astraeus.coordinator.cli.parser import command_modules

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = "astraeus"
TOOLS = ("astra", "astraeus-coordinator", "astraeus-agent")
HIDDEN = (
    "astraeus.coordinator.cli",  # the programs: multicall.py's TOOLS, each imported by name
    "astraeus.coordinator.service",
    "astraeus.agent.cli",
    "astraeus.agent.runtime.shim",
    "astraeus.coordinator.demo.worker",
    *command_modules(),
)
"""Modules run by name (`astraeus -m MODULE`) or imported by name when a command runs (the
three programs, only the one called; `astra`'s commands, listed in its command table, so
`astra --help` loads none of them), which PyInstaller cannot see by itself."""
DEV_ONLY = ("mypy", "hypothesis", "pytest", "_pytest")
"""Tools of the development environment that pydantic's plugins (`pydantic.mypy`, its
hypothesis plugin) would pull in: never used by the programs, and each start of the bundle would
index their thousands of modules."""
NOT_BUNDLED = ("numpy",)
"""Packages the programs never import that PyInstaller would still bundle when the development
environment holds them: psycopg names numpy (it dumps numpy integers, but only when the program
has imported numpy itself), and `.ci/launcher-deps` installs numpy with PyTorch. Bundled, it
was 41 MB of the program's 114 MB (the tarball 52 MB, without it 36 MB; the build's CPU time
51 s, without it 42 s), and the release differed with the environment that built it."""
UNUSED_RUNTIME_HOOKS = ("pyi_rth_inspect", "pyi_rth_pkgutil")
"""PyInstaller's runtime hooks that teach `inspect.getsource` and `pkgutil.iter_modules` the
bundle's modules. The programs call neither, and the hooks import both modules at every start:
about a fifth of `astra --help`'s time (docs/benchmarks.md)."""
DOCS = ("README.md", "docs", "systemd/README.md")


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


@contextmanager
def step(what: str) -> Iterator[None]:
    started = time.monotonic()
    print(f"release: {what} ...", flush=True)
    yield
    print(f"release: {what}: {time.monotonic() - started:.1f} s", flush=True)


def run(*command: str | Path) -> None:
    subprocess.run([str(part) for part in command], check=True, cwd=ROOT)  # noqa: S603


def python_packages(out: Path) -> None:
    run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, ROOT)


def executable(work: Path) -> Path:
    """One program from scripts/multicall.py, with the packages' data files, as a directory
    bundle (`PROGRAM` and `_internal/`): nothing is unpacked at each start, which a one-file
    build does (docs/decisions.md). Its folder is returned. The spec is written first and
    `UNUSED_RUNTIME_HOOKS` taken out of it (PyInstaller has no flag for that)."""
    hidden = [arg for module in HIDDEN for arg in ("--hidden-import", module)]
    run(
        Path(sys.executable).parent / "pyi-makespec", "--onedir",
        "--log-level", "WARN", "--name", PROGRAM, "--collect-data", "astraeus",
        # dateutil's Windows zones load user32.dll through ctypes: never on Linux, and the
        # build would warn that the library is missing.
        "--exclude-module", "dateutil.tz.win",
        *(arg for module in (*DEV_ONLY, *NOT_BUNDLED) for arg in ("--exclude-module", module)),
        *hidden, "--specpath", work, ROOT / "scripts" / "multicall.py",
    )  # fmt: skip
    spec = work / f"{PROGRAM}.spec"
    text = spec.read_text()
    marker = "\npyz = PYZ("
    if marker not in text:
        raise SystemExit(f"release: {spec} has no {marker.strip()!r}: PyInstaller changed")
    keep = f"a.scripts = [s for s in a.scripts if s[0] not in {UNUSED_RUNTIME_HOOKS!r}]"
    spec.write_text(text.replace(marker, f"\n{keep}{marker}", 1))
    run(
        sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
        "--distpath", work / "dist", "--workpath", work / "build", spec,
    )  # fmt: skip
    return work / "dist" / PROGRAM


def tree(bundle: Path, top: Path) -> None:
    """lib/astraeus/ (the bundle), bin/ (links to its program under every name),
    lib/systemd/system/, share/doc/astraeus/."""
    shutil.copytree(bundle, top / "lib" / PROGRAM, symlinks=True)
    bin_dir = top / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / PROGRAM).symlink_to(Path("..") / "lib" / PROGRAM / PROGRAM)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(PROGRAM)
    units = top / "lib" / "systemd" / "system"
    units.mkdir(parents=True)
    for unit in sorted((ROOT / "systemd").glob("*.service")):
        shutil.copy2(unit, units / unit.name)
    doc = top / "share" / "doc" / "astraeus"
    for item in DOCS:
        source, target = ROOT / item, doc / item
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)


GZIP_LEVEL = 6
"""gzip's own default (`tar czf`): the program's tarball is as small as at tarfile's 9 (32 MB
either way) and is written in 4 s instead of 15."""


def tarball(top: Path, out: Path) -> Path:
    path = out / f"{top.name}.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=GZIP_LEVEL) as archive:
        archive.add(top, arcname=top.name)
    return path


def checksums(out: Path) -> None:
    lines = []
    for path in sorted(p for p in out.iterdir() if p.is_file() and p.name != "SHA256SUMS"):
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")
    (out / "SHA256SUMS").write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/release.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="default: dist/")
    out = parser.parse_args(argv).out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    work = out / ".work"
    name = f"{PROGRAM}-{version()}-linux-{platform.machine()}"
    started = time.monotonic()
    with step("wheel and sdist"):
        python_packages(out)
    with step("the program (PyInstaller, one folder)"):
        bundle = executable(work)
    with step(f"{name}.tar.gz"):
        tree(bundle, work / name)
        tarball(work / name, out)
    shutil.rmtree(work)
    checksums(out)
    print(f"release: done in {time.monotonic() - started:.1f} s:", flush=True)
    for path in sorted(out.iterdir()):
        print(f"  {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    os.umask(0o022)  # artifacts readable by everyone, whatever the caller's umask
    sys.exit(main())
