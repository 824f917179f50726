"""Who workers run as: the settings, the refusal of root, and how a task's uid is picked."""

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import until_async
from runtime_rig import TOKEN, Coordinator

from astraeus.agent.runtime import main
from astraeus.agent.runtime.users import (
    DEFAULT_UIDS,
    WorkerUser,
    WorkerUserError,
    WorkerUsers,
    can_switch_users,
    device_groups,
    worker_users,
)

REFUSED = (
    "workers never run as root unless allow_root_workers = true (ASTRAEUS_ALLOW_ROOT_WORKERS=1)"
)


def _able() -> bool:
    return True


def _unable() -> bool:
    return False


def test_default_is_a_uid_per_task() -> None:
    """`dynamic` picks from 1879048192-1879113727 and says so."""
    users = worker_users("dynamic", can_switch=_able)
    assert (users.mode, users.uids) == ("dynamic", DEFAULT_UIDS)
    assert users.describe() == (
        "workers run as unprivileged users, one uid per task from 1879048192-1879113727"
    )


@pytest.mark.parametrize(
    ("setting", "able", "euid", "message"),
    [
        pytest.param("root", _able, 0, f"worker_user is root: {REFUSED}", id="root-by-name"),
        pytest.param("0", _able, 0, f"worker_user is root: {REFUSED}", id="root-by-uid"),
        pytest.param(
            "dynamic",
            _unable,
            0,
            f"workers would run as root, this agent's own user: {REFUSED}",
            id="root-agent-that-cannot-switch",
        ),
    ],
)
def test_root_workers_are_refused_unless_allowed(
    setting: str, able: object, euid: int, message: str
) -> None:
    """Workers would run as root: refused with the setting that allows it; allowed, it is said."""
    if os.geteuid() != euid:
        pytest.skip("the refusal of an agent's own root needs a root test process")
    with pytest.raises(WorkerUserError) as caught:
        worker_users(setting, can_switch=able)  # type: ignore[arg-type]
    assert str(caught.value) == message
    allowed = worker_users(setting, root_allowed=True, can_switch=able)  # type: ignore[arg-type]
    assert allowed.describe() == (
        "workers run as root because allow_root_workers is set: they can read the agent's "
        "token and every task's files"
    )


def test_an_agent_that_cannot_switch_says_what_is_not_enforced() -> None:
    """A developer's agent (not root) runs workers as itself and says what that leaves open."""
    assert WorkerUsers.agents_own().describe(euid=1000) == (
        "workers run as this agent's own user (uid 1000): the agent is not root, so it cannot "
        "switch users; workers can read the agent's state directory (other tasks' specs, "
        "variables and logs) and forge their exit status (docs/security.md)"
    )


def test_a_named_user_is_resolved_with_its_groups() -> None:
    """A user name becomes its uid, primary group and supplementary groups."""
    users = worker_users("nobody", can_switch=_able)
    assert users.fixed is not None
    assert (users.fixed.uid, users.fixed.name) == (65534, "nobody")
    assert users.describe() == (
        "workers run as nobody, all tasks alike: one task can signal another's processes and "
        "read their environment"
    )


@pytest.mark.parametrize(
    ("setting", "uids", "message"),
    [
        pytest.param(
            "no-such-user-here",
            "",
            "worker_user: no user 'no-such-user-here' here; create it, or use 'dynamic'",
            id="unknown-user",
        ),
        pytest.param(
            "dynamic", "5", "worker_uids: '5' is not FIRST-LAST (two uids above 0)", id="one"
        ),
        pytest.param(
            "dynamic", "0-9", "worker_uids: '0-9' is not FIRST-LAST (two uids above 0)", id="root"
        ),
        pytest.param(
            "dynamic", "9-3", "worker_uids: '9-3' is not FIRST-LAST (two uids above 0)", id="back"
        ),
    ],
)
def test_bad_worker_user_settings(setting: str, uids: str, message: str) -> None:
    """A user that does not exist or a malformed range is refused, naming the setting."""
    with pytest.raises(WorkerUserError) as caught:
        worker_users(setting, uids, can_switch=_able)
    assert str(caught.value) == message


def _proc(tmp_path: Path, *uids: int) -> Path:
    """A /proc with one process per uid, its status file in the kernel's format."""
    proc = tmp_path / "proc"
    for pid, uid in enumerate(uids, start=100):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "status").write_text(
            f"Name:\tsleep\nPid:\t{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n"
        )
    return proc


def test_uids_come_round_only_after_the_whole_range(tmp_path: Path) -> None:
    """Picks move on from the last one, skipping uids of tasks still here, of running
    processes and of accounts (65534 is nobody), and wrap at the end of the range."""
    users = worker_users("dynamic", "65530-65535", can_switch=_able)
    cursor, proc = tmp_path / "worker-uids.json", _proc(tmp_path, 65531)
    picks = [users.assign({65532}, cursor, proc) for _ in range(3)]
    assert [p.uid for p in picks if p is not None] == [65530, 65533, 65535]
    again = users.assign(set(), cursor, proc)
    assert again == WorkerUser(uid=65530, gid=65530)


def test_a_full_range_is_a_clear_error(tmp_path: Path) -> None:
    """When every uid is taken the task fails with the setting to widen."""
    users = worker_users("dynamic", "70000-70001", can_switch=_able)
    with pytest.raises(WorkerUserError) as caught:
        users.assign({70000, 70001}, tmp_path / "cursor", _proc(tmp_path))
    assert str(caught.value) == "worker_uids: all 2 uids are in use"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another group needs root")
def test_device_groups_are_those_owning_the_nodes(tmp_path: Path) -> None:
    """The worker gets the group of each device node it is given (render for /dev/kfd), never
    root's, and none for a node that is not here."""
    kfd, render, null = tmp_path / "kfd", tmp_path / "renderD128", tmp_path / "null"
    for node, gid in ((kfd, 4242), (render, 4242), (null, 0)):
        node.touch()
        os.chown(node, 0, gid)
    assert device_groups([str(kfd), str(render), str(null), str(tmp_path / "gone")]) == {4242}


@pytest.mark.parametrize(
    ("capeff", "able"),
    [
        pytest.param("000001ffffffffff", True, id="root"),
        pytest.param("000001fffeffff3f", False, id="root-without-setuid-setgid"),
        pytest.param("0000000000000000", False, id="a-user"),
    ],
)
def test_can_switch_users_reads_the_capabilities(tmp_path: Path, capeff: str, able: bool) -> None:
    """Switching needs CAP_SETUID, CAP_SETGID and CAP_CHOWN in the effective set."""
    status = tmp_path / "status"
    status.write_text(f"Name:\tastraeus-agent\nCapEff:\t{capeff}\n")
    assert can_switch_users(status) is able


@pytest.mark.skipif(not can_switch_users(), reason="needs a process that may switch users")
def test_main_refuses_root_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--worker-user root` without `--allow-root-workers` exits 2 with the reason."""
    token = tmp_path / "token"
    token.write_text("t")
    argv = ["--coordinator", "http://127.0.0.1:1", "--token-file", str(token)]
    assert main([*argv, "--worker-user", "root"]) == 2
    assert capsys.readouterr().err == f"astraeus-agent: worker_user is root: {REFUSED}\n"


async def _agent_without_setuid(
    tmp_path: Path, coordinator: Coordinator, *extra: str
) -> tuple[int, str]:
    """Run the agent as root without CAP_SETUID and CAP_SETGID; stop it after its first report."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    process = await asyncio.create_subprocess_exec(
        "setpriv", "--bounding-set=-setuid,-setgid", "--",
        sys.executable, "-m", "astraeus.agent.cli", "run", "--backend", "fake:h100-sxm",
        "--coordinator", coordinator.url, "--token-file", str(token), "--name", "gpu-01",
        "--state-dir", str(tmp_path / "state"), *extra,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    before = coordinator.reports
    await until_async(
        "an end", lambda: process.returncode is not None or coordinator.reports > before
    )
    if process.returncode is None:
        process.terminate()
    _, stderr = await process.communicate()
    return process.returncode or 0, stderr.decode()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run an agent as root without CAP_SETUID",
)
async def test_root_agent_that_cannot_switch_refuses_then_warns_when_allowed(
    tmp_path: Path, coordinator: Coordinator
) -> None:
    """A root agent without CAP_SETUID will not start workers as root: it exits 2 saying so;
    with `--allow-root-workers` it runs and its log says workers run as root."""
    code, err = await _agent_without_setuid(tmp_path, coordinator)
    assert (code, err) == (2, f"astraeus-agent: workers would run as root, this agent's own "
                              f"user: {REFUSED}\n")  # fmt: skip
    code, err = await _agent_without_setuid(tmp_path, coordinator, "--allow-root-workers")
    assert code == 0
    assert (
        "WARNING astraeus.agent: workers run as root because allow_root_workers is set: they "
        "can read the agent's token and every task's files\n" in err
    )
