"""IMEX channel availability from /proc/devices and the channel directory."""

from pathlib import Path

from astraeus.agent.topology.imex import device_major, imex_status

DEVICES = (
    "Character devices:\n  1 mem\n234 nvidia-caps\n507 nvidia-caps-imex-channels\n\n"
    "Block devices:\n  8 sd\n"
)


def test_major_found_by_exact_name() -> None:
    """The channel device's major is found, and `nvidia-caps` does not match it."""
    assert device_major(DEVICES) == 507
    assert device_major(DEVICES, "nvidia-caps") == 234
    assert device_major(DEVICES.replace("507 nvidia-caps-imex-channels\n", "")) is None


def test_block_devices_do_not_count() -> None:
    """A name that appears only among block devices is not a character device."""
    text = "Character devices:\n  1 mem\n\nBlock devices:\n507 nvidia-caps-imex-channels\n"
    assert device_major(text) is None


def _proc(tmp_path: Path, text: str) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/devices").write_text(text)
    return tmp_path / "proc"


def test_channel_present_is_available(tmp_path: Path) -> None:
    """A channel0 node that exists makes IMEX available."""
    channels = tmp_path / "dev/nvidia-caps-imex-channels"
    channels.mkdir(parents=True)
    (channels / "channel0").touch()
    status = imex_status(_proc(tmp_path, DEVICES), tmp_path / "dev")
    assert status.available is True
    assert status.detail == "channel0 present (major 507)"


def test_channel_creatable_is_available(tmp_path: Path) -> None:
    """No channel0 yet, but a writable directory to make it in, is available."""
    (tmp_path / "dev").mkdir()
    status = imex_status(_proc(tmp_path, DEVICES), tmp_path / "dev")
    assert (status.available, status.detail) == (True, "channel0 can be created (major 507)")


def test_no_driver_registration_is_unavailable(tmp_path: Path) -> None:
    """Without the driver's registration there is no IMEX, and the detail says so."""
    status = imex_status(_proc(tmp_path, "Character devices:\n\nBlock devices:\n"), tmp_path)
    assert (status.available, status.detail) == (
        False,
        "no nvidia-caps-imex-channels in /proc/devices",
    )
