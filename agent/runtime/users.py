"""Who a worker runs as: never the agent's user, never root, and by default a uid of its own.

A root agent starts each worker as an unprivileged uid picked for its task from a range that no
account uses (`dynamic`, the default), so no two tasks share a uid: one cannot signal another,
read its `/proc/<pid>/environ` or its files. An operator may name one user for every worker
instead. An agent that cannot switch users (not root: a developer's demo) runs workers as itself
and says so. Workers run as root only where an operator allows it explicitly.
"""

import json
import logging
import os
import pwd
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DYNAMIC = "dynamic"
UID_BASE = 0x7000_0000
DEFAULT_UIDS = range(UID_BASE, UID_BASE + 0x1_0000)
"""1879048192-1879113727: above systemd-nspawn's container ranges (which end at 0x6FFFFFFF),
below the "foreign" range at 0x7FFE0000, far above accounts and /etc/subuid allocations."""
CAP_CHOWN, CAP_SETGID, CAP_SETUID = 0, 6, 7
STATUS = Path("/proc/self/status")
PROC = Path("/proc")
AGENT_IS_ROOT = "workers would run as root, this agent's own user"
ROOT_REFUSED = (
    "workers never run as root unless allow_root_workers = true (ASTRAEUS_ALLOW_ROOT_WORKERS=1)"
)


class WorkerUserError(ValueError):
    """The worker-user settings cannot be honoured here; the text names the setting."""


@dataclass(frozen=True)
class WorkerUser:
    """The credentials one worker's process gets."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    name: str | None = None

    def with_groups(self, extra: Iterable[int]) -> "WorkerUser":
        groups = tuple(sorted({*self.groups, *extra}))
        return WorkerUser(self.uid, self.gid, groups, self.name)

    def as_spec(self) -> dict[str, object]:
        return {"uid": self.uid, "gid": self.gid, "groups": list(self.groups)}


@dataclass(frozen=True)
class WorkerUsers:
    """The policy: `dynamic` (a uid per task from `uids`), `fixed` (one user for all), or
    `agent` (the agent's own user, because it cannot switch)."""

    mode: str
    uids: range = DEFAULT_UIDS
    fixed: WorkerUser | None = None
    root_allowed: bool = False

    @classmethod
    def agents_own(cls, *, root_allowed: bool = False) -> "WorkerUsers":
        """Workers as the agent's own user: a demo's or a test's agent. As root only if allowed."""
        return cls("agent", root_allowed=root_allowed)

    @property
    def switches(self) -> bool:
        return self.mode != "agent"

    def check(self, euid: int | None = None) -> None:
        """Refuse a policy that would start workers as root without the operator's say-so."""
        euid = os.geteuid() if euid is None else euid
        as_root = (self.mode == "agent" and euid == 0) or (
            self.fixed is not None and self.fixed.uid == 0
        )
        if as_root and not self.root_allowed:
            why = "worker_user is root" if self.switches else AGENT_IS_ROOT
            raise WorkerUserError(f"{why}: {ROOT_REFUSED}")

    def describe(self, euid: int | None = None) -> str:
        """One sentence for the log and for `inspect`: who workers run as, and what that means."""
        euid = os.geteuid() if euid is None else euid
        if self.mode == DYNAMIC:
            return (
                f"workers run as unprivileged users, one uid per task from "
                f"{self.uids.start}-{self.uids.stop - 1}"
            )
        if self.fixed is not None:
            who = self.fixed.name or f"uid {self.fixed.uid}"
            if self.fixed.uid == 0:
                return f"workers run as root because allow_root_workers is set: {ROOT_EXPOSED}"
            return f"workers run as {who}, all tasks alike: {SHARED_USER}"
        if euid == 0:
            return f"workers run as root because allow_root_workers is set: {ROOT_EXPOSED}"
        return (
            f"workers run as this agent's own user (uid {euid}): the agent is not root, so it "
            f"cannot switch users; {NOT_ISOLATED} (docs/security.md)"
        )

    def assign(self, taken: set[int], cursor: Path, proc: Path = PROC) -> WorkerUser | None:
        """The user for a new task; None means the agent's own. `taken` holds the uids of tasks
        this agent still has; `cursor` remembers where the last pick was, so uids come round
        again only after the whole range was used."""
        if self.fixed is not None:
            return self.fixed
        if self.mode != DYNAMIC:
            return None
        uid = _free_uid(self.uids, taken | _running_uids(proc), _read_cursor(cursor, self.uids))
        _write_cursor(cursor, uid + 1)
        return WorkerUser(uid=uid, gid=uid)


ROOT_EXPOSED = "they can read the agent's token and every task's files"
SHARED_USER = "one task can signal another's processes and read their environment"
NOT_ISOLATED = (
    "workers can read the agent's state directory (other tasks' specs, variables and logs) "
    "and forge their exit status"
)


def worker_users(
    setting: str,
    uids: str = "",
    *,
    root_allowed: bool = False,
    can_switch: Callable[[], bool] | None = None,
) -> WorkerUsers:
    """The policy from the settings `worker_user` (`dynamic`, a name or a uid) and `worker_uids`
    (`FIRST-LAST`); a WorkerUserError names what is wrong. Checked against root (`check`)."""
    able = can_switch_users() if can_switch is None else can_switch()
    if not able:
        policy = WorkerUsers.agents_own(root_allowed=root_allowed)
    elif setting == DYNAMIC:
        policy = WorkerUsers(DYNAMIC, _uid_range(uids), root_allowed=root_allowed)
    else:
        policy = WorkerUsers("fixed", fixed=_named(setting), root_allowed=root_allowed)
    policy.check()
    return policy


def device_groups(devices: Iterable[str]) -> set[int]:
    """The groups that own the worker's device nodes (e.g. `render` for `/dev/kfd` and
    `/dev/dri/renderD128`, mode 0660), except root's; a node that is not here adds none."""
    groups = set()
    for device in devices:
        try:
            gid = os.stat(device).st_gid
        except OSError:
            continue
        if gid != 0:
            groups.add(gid)
    return groups


def can_switch_users(status: Path = STATUS) -> bool:
    """True when this process may start others as any user: CAP_SETUID, CAP_SETGID and
    CAP_CHOWN (for their working directories) in its effective set."""
    return all(has_capability(status, bit) for bit in (CAP_SETUID, CAP_SETGID, CAP_CHOWN))


def has_capability(status: Path, bit: int) -> bool:
    """Whether capability `bit` is in `CapEff` of a `/proc/<pid>/status` file."""
    found = re.search(r"^CapEff:\s*([0-9a-fA-F]+)$", status.read_text(), re.M)
    return found is not None and bool(int(found.group(1), 16) >> bit & 1)


def _named(setting: str) -> WorkerUser:
    try:
        entry = pwd.getpwuid(int(setting)) if setting.isdigit() else pwd.getpwnam(setting)
    except KeyError:
        if setting.isdigit():  # a bare uid needs no account, like systemd's User=
            return WorkerUser(uid=int(setting), gid=int(setting))
        raise WorkerUserError(
            f"worker_user: no user {setting!r} here; create it, or use {DYNAMIC!r}"
        ) from None
    groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
    return WorkerUser(entry.pw_uid, entry.pw_gid, groups, entry.pw_name)


def _uid_range(text: str) -> range:
    if not text:
        return DEFAULT_UIDS
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if match is None or not 0 < int(match.group(1)) <= int(match.group(2)) < 2**32 - 1:
        raise WorkerUserError(f"worker_uids: {text!r} is not FIRST-LAST (two uids above 0)")
    return range(int(match.group(1)), int(match.group(2)) + 1)


def _free_uid(uids: range, taken: set[int], start: int) -> int:
    for step in range(len(uids)):
        uid = uids.start + (start - uids.start + step) % len(uids)
        if uid not in taken and not _has_account(uid):
            return uid
    raise WorkerUserError(f"worker_uids: all {len(uids)} uids are in use")


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _running_uids(proc: Path) -> set[int]:
    """Every real, effective, saved and file-system uid of a running process."""
    uids: set[int] = set()
    for entry in proc.glob("[0-9]*/status"):
        try:
            found = re.search(r"^Uid:\s*(.+)$", entry.read_text(), re.M)
        except OSError:  # it ended meanwhile
            continue
        if found:
            uids.update(int(uid) for uid in found.group(1).split())
    return uids


def _read_cursor(path: Path, uids: range) -> int:
    try:
        value = json.loads(path.read_text()).get("next")
    except (OSError, ValueError, AttributeError):
        return uids.start
    return value if isinstance(value, int) and value in uids else uids.start


def _write_cursor(path: Path, value: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"next": value}))
    os.replace(tmp, path)
