"""Map the top-level folders to `astraeus.agent`, `astraeus.coordinator` and `astraeus.shared`."""

from pathlib import Path

from setuptools import find_packages, setup

TOP_LEVEL = ("agent", "coordinator", "shared")


def _packages() -> dict[str, str]:
    found = {}
    for folder in TOP_LEVEL:
        found[f"astraeus.{folder}"] = folder
        for sub in find_packages(folder):
            found[f"astraeus.{folder}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"
    return found


PACKAGES = _packages()

DOC = "share/doc/astraeus"
"""Installed beside the programs (`<venv>/share/doc/astraeus`), as in the release tarball: the
systemd units' Documentation= points there."""
DATA_FILES = [
    (DOC, ["README.md"]),
    (f"{DOC}/docs", sorted(str(p) for p in Path("docs").glob("*.md"))),
    (f"{DOC}/systemd", ["systemd/README.md"]),
]

SCRIPTS = ["launchers/astra"]
"""`astra`'s launcher, which imports only `sys` and the CLI (`[project.scripts]` would have pip
write one that imports `re` first)."""

setup(
    packages=list(PACKAGES),
    scripts=SCRIPTS,
    package_dir={f"astraeus.{folder}": folder for folder in TOP_LEVEL},
    package_data={"": ["py.typed", "*.json", "*.toml", "*.html", "*.js", "*.css", "*.svg"]},
    include_package_data=True,
    data_files=DATA_FILES,
)
