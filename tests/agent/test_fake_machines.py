"""The fake machine description files: shipped machines load; bad files say what is wrong."""

from pathlib import Path

import pytest

from astraeus.agent.fake import FakeMachineError, load_fake_machine, shipped_machines
from astraeus.shared.fake_gpu import gpu_uuid

SHIPPED = ["gb200-nvl72-tray", "h100-at-risk", "h100-sxm", "l40s-pcie", "mi300x"]


def test_the_issue_machines_are_shipped() -> None:
    """The five machines the issue asks for ship in the package."""
    assert shipped_machines() == SHIPPED


def test_machine_by_name_and_by_path(tmp_path: Path) -> None:
    """A machine loads by shipped name or from a file path, overrides applied per index."""
    machine = load_fake_machine("h100-at-risk")
    assert machine.spec.gpus.count == 8
    assert machine.spec_gpu(2).pcie_replays_per_min == 41
    assert machine.spec_gpu(0).pcie_replays_per_min == 0
    assert machine.port(2).state == "1: DOWN"
    assert machine.port(0).name == "mlx5_0"
    path = tmp_path / "tiny.toml"
    path.write_text('name = "tiny"\ncores = 4\nmemory_gb = 16\n')
    assert load_fake_machine(str(path)).spec.gpus.count == 0


def test_uuids_derive_from_machine_and_index() -> None:
    """UUIDs are stable per machine and index, and differ between machines."""
    assert gpu_uuid("a", 0) == gpu_uuid("a", 0)
    assert gpu_uuid("a", 0) != gpu_uuid("a", 1) != gpu_uuid("b", 1)
    assert gpu_uuid("a", 0).startswith("GPU-")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param('name = "x"\ncores = 4\n', "tiny.toml: memory_gb: is required", id="missing"),
        pytest.param('name = "x"\ncores = 4\nmemory_gb = 8\ncorez = 1\n',
                     "tiny.toml: corez: unknown field", id="unknown-field"),
        pytest.param('name = "x"\ncores = 4\nmemory_gb = 8\n[gpus]\ncount = 2\n[gpu.5]\n'
                     'lost = true\n', "tiny.toml: gpu.5 overrides a GPU the machine lacks",
                     id="override-out-of-range"),
        pytest.param("name = ", "tiny.toml: not valid TOML", id="bad-toml"),
    ],
)  # fmt: skip
def test_bad_files_name_the_field(tmp_path: Path, text: str, problem: str) -> None:
    """A bad description names the file, the field and the problem."""
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    with pytest.raises(FakeMachineError) as raised:
        load_fake_machine(str(path))
    assert str(raised.value).startswith(str(tmp_path / problem))


def test_unknown_name_lists_the_shipped_ones() -> None:
    """An unknown machine name lists the names that exist."""
    with pytest.raises(FakeMachineError) as raised:
        load_fake_machine("dgx-z")
    assert str(raised.value) == (
        "no fake machine named 'dgx-z'; use a path or one of: " + ", ".join(SHIPPED)
    )
