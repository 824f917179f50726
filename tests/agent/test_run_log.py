"""`astraeus-agent run` logs which GPU backend it chose and why as its very first lines, before
anything else (a machine that joins with 0 GPUs says why in its log)."""

import asyncio
import importlib.util
import os
import signal
import sys
from pathlib import Path

import pytest
from helpers import refusing_port

from .conftest import require_capture

LOGGER = "INFO astraeus.agent.backends.select: "


async def _first_lines(tmp_path: Path, *args: str, count: int) -> list[str]:
    """Start `astraeus-agent run` against a coordinator that is not there; read `count` lines
    of its log, then stop it with SIGTERM."""
    (tmp_path / "token").write_text("token\n")
    with refusing_port() as port:
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "astraeus.agent.cli", "run", *args,
            "--coordinator", f"http://127.0.0.1:{port}", "--name", "gpu-01",
            "--token-file", str(tmp_path / "token"), "--state-dir", str(tmp_path / "state"),
            env={**os.environ, "ASTRAEUS_REPORT_INTERVAL_SECONDS": "0.1"},
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert agent.stderr is not None
        try:
            lines = [
                (await asyncio.wait_for(agent.stderr.readline(), 30)).decode().rstrip("\n")
                for _ in range(count)
            ]
        finally:
            agent.send_signal(signal.SIGTERM)
            await agent.communicate()
    return lines


async def test_fake_backend_choice_is_the_first_line(tmp_path: Path) -> None:
    """A fake machine's backend: one line naming it, the driver and the GPU count."""
    [first] = await _first_lines(tmp_path, "--backend", "fake:h100-sxm", count=1)
    assert first == (
        LOGGER + "GPU backend fake chosen: fake machine gpu-01: NVML, driver 570.86.15, 8 GPUs"
    )


async def test_amdgpu_without_amd_smi_says_why_first(tmp_path: Path) -> None:
    """On the real capture with no AMD SMI: why AMD SMI was passed over, then the amdgpu sysfs
    backend with what is unknown and the Intel GPU left unused."""
    capture = require_capture()
    if importlib.util.find_spec("amdsmi") is not None:
        pytest.skip("the amdsmi package is installed here; this test is about its absence")
    lines = await _first_lines(
        tmp_path, "--backend", "amdsmi", "--sysfs-root", str(capture / "sys"),
        "--proc-root", str(capture / "proc"), count=2,
    )  # fmt: skip
    assert lines == [
        LOGGER + "GPU backend amdsmi not used: the amdsmi package is not installed; reading the "
        "amdgpu cards from sysfs",
        LOGGER + "GPU backend amdgpu chosen: sysfs amdgpu, 1 GPU; amdgpu present without AMD SMI "
        "(the amdsmi package is not installed): ECC, retired pages, throttling and XGMI are "
        "unknown; also present, not used: 1 Intel GPU (one GPU backend per machine)",
    ]
