"""One pass's decisions over a snapshot: what to place, and why each other run waits.

No database, and `now` is an argument; the one clock read is `time.perf_counter` in
`decide_within`, which bounds how long a pass may take. The rule that keeps big gangs from
starving is here: the first run in queue order that waits only for room is the head; the
machines that let it start soonest (by the time limits of the tasks on them) are held for it,
and runs behind it may start only elsewhere. Holds are
per set of machines: a later run that waits only for room on machines no head holds (another
pool's) becomes a head of its own there, so a head in one pool never lifts the protection of
another.

Backfill: a run behind a head may use the head's machines when its own time limit ends, with
`BACKFILL_MARGIN` to spare, before those machines free up: before every task on them reaches
its time limit (`Usage.frees_at`). A run without a time limit never does, and a head whose
machines hold a task without one has no expected start.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Generic, Protocol

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    Pending,
    Placement,
    RunRequest,
)
from astraeus.coordinator.store.queue import Usage, WorkspaceUse
from astraeus.shared import reasons
from astraeus.shared.admin import Workspace
from astraeus.shared.reasons import ReasonKind

from .items import Candidate, Item, Placed, Preempting, QueueItem, Reshaped, Waiting

if TYPE_CHECKING:
    from .preemption import Plan, Preemption


class EngineSession(Protocol):
    """What a pass needs of the placement engine over one snapshot; the real one is
    `placement.PlacementSession`, tests pass fakes."""

    def place(
        self, run: RunRequest, now: datetime, *, exclude: frozenset[str] = frozenset()
    ) -> Placement | Pending: ...

    def idle_machines(
        self, run: RunRequest, now: datetime, exclude: frozenset[str]
    ) -> tuple[str, ...]: ...

    def take(self, placement: Placement) -> None: ...


GIB = 1024**3

BACKFILL_MARGIN = timedelta(seconds=60)
"""How long before the head's expected start a backfilled run's time limit must end: its
worker starts a report or two after it is placed, and its time limit counts from that start."""
"""Memory quotas are read in GiB."""

SessionFactory = Callable[[ClusterSnapshot], EngineSession]


@dataclass(frozen=True)
class PassContext:
    """What the queue rules need besides the snapshot."""

    workspaces: Mapping[str, Workspace]
    use_by_workspace: Mapping[str, WorkspaceUse]
    live_by_run: Mapping[int, int]
    max_pending_evaluations: int = 500
    usage: Mapping[str, Usage] = field(default_factory=dict)
    """What live tasks hold on each machine, with their time limits (backfill)."""
    preemption: Preemption | None = None
    """Preemption by priority and reclaim of guarantees (`preemption.py`); None: preemption
    is off and no workspace has a guarantee."""
    backfill: bool = True
    """False (the `backfill` setting): a head's machines are held from every run behind it,
    whatever its time limit."""


@dataclass
class PassOutcome(Generic[Item]):
    """A pass's decisions about `Item`s (`QueueItem`s; a dry run's also its `Candidate`)."""

    placed: list[Placed[Item]] = field(default_factory=list)
    waiting: list[Waiting[Item]] = field(default_factory=list)
    skipped: int = 0
    """Waiting runs not explained this pass (past the evaluation budget)."""
    reshaped: list[Reshaped] = field(default_factory=list)
    """Placed, unstarted runs to move to a tighter shape."""
    preempting: list[Preempting[Item]] = field(default_factory=list)
    """Runs that start once lower-priority runs are stopped: the runs to stop now."""


def make_explanations(outcome: PassOutcome[Item]) -> None:
    """Make each waiting run's explanation in the guide's form where the pass was decided: the
    service stores it as made, in a write transaction, where making one entry per machine would
    hold up every other write (and, in the pass worker, the service's only core)."""
    for waiting in outcome.waiting:
        if waiting.explained is not None:
            waiting.explained.full()
            waiting.explained.groups()


def request_for(item: Candidate, workspace: Workspace | None) -> RunRequest:
    return RunRequest(
        name=item.run,
        workspace=item.workspace,
        ask=item.ask,
        pools=tuple(workspace.pools) if workspace else (),
        image=item.image,
        time_limit_seconds=item.time_limit_seconds,
        first_evaluated_at=item.first_evaluated_at,
        array_index=item.index if item.is_array else None,
    )


def decide(
    items: Sequence[Item],
    session: EngineSession,
    now: datetime,
    context: PassContext,
) -> PassOutcome[Item]:
    """Walk the queue in order, placing what fits without taking what the head waits for."""
    out: PassOutcome[Item] = PassOutcome()
    for _ in steps(items, session, now, context, out):
        pass
    return out


def decide_within(
    items: Sequence[Item],
    session: EngineSession,
    now: datetime,
    context: PassContext,
    seconds: float,
    stopping: Callable[[], bool] = lambda: False,
) -> tuple[PassOutcome[Item], bool]:
    """`decide` for at most `seconds`; the flag says it stopped before the end of the queue.

    `stopping` is asked between runs: true raises `InterruptedError` (the service is stopping)."""
    out: PassOutcome[Item] = PassOutcome()
    walk = steps(items, session, now, context, out)
    deadline = time.perf_counter() + seconds
    for done, _ in enumerate(walk, start=1):
        if stopping():
            raise InterruptedError("the scheduler is stopping")
        if time.perf_counter() > deadline and done < len(items):
            out.skipped += len(items) - done
            walk.close()
            return out, True
    return out, False


def steps(
    items: Sequence[Item],
    session: EngineSession,
    now: datetime,
    context: PassContext,
    out: PassOutcome[Item],
) -> Generator[None, None, None]:
    """`decide`, one queue item per step, so the event loop can answer requests in between."""
    walk = _Walk(session, now, context, out)
    try:
        for position, item in enumerate(items):
            walk.step(position, item)
            yield
    finally:  # also when the caller stops early: the heads' explanations are still written
        for head in reversed(walk.heads):
            behind = head.position < len(items) - 1
            out.waiting.insert(0, _head_waiting(head, now, behind=behind))


class _Walk(Generic[Item]):
    """The state of one walk down the queue."""

    def __init__(
        self, session: EngineSession, now: datetime, context: PassContext, out: PassOutcome[Item]
    ):
        self.session, self.now, self.context, self.out = session, now, context, out
        self.held = dict(context.use_by_workspace)
        self.live = dict(context.live_by_run)
        self.heads: list[_Head[Item]] = []
        """The runs waiting only for room, each holding machines no earlier head holds."""
        self.reserved: frozenset[str] = frozenset()
        """Every head's machines."""
        self.claimed: frozenset[str] = frozenset()
        """Every head's idle fit (`Pending.wanted_machines`): a later run whose idle fit meets
        one, or a head's machines, waits behind that head rather than heading a pool of its
        own. So which runs are heads costs no search, and only a head looks for the machines
        that free up first (`_earliest`)."""
        self._frees: dict[str, datetime | None] | None = None
        """When each busy machine frees up by its tasks' time limits (`_moments`)."""
        self._sorted: list[datetime] = []
        self.evaluated = 0
        self.known: dict[str, Waiting[Item]] = {}
        """Waiting decisions by ask: a run asking exactly what a run ahead asked, which had to
        wait, waits too (a pass only ever takes capacity), so it is not evaluated again."""

    def step(self, position: int, item: Item) -> None:
        workspace = self.context.workspaces.get(item.workspace)
        held = _queue_rule(item, workspace, self.held, self.live)
        if held is not None:
            text, kind = held
            self.out.waiting.append(Waiting(item, text, None, kind))
            return
        key = _same_ask(item, workspace)
        if key is not None and key in self.known:
            known = self.known[key]
            self.out.waiting.append(replace(known, item=item))
            return
        if self.evaluated >= self.context.max_pending_evaluations:
            self.out.skipped += 1
            return
        waiting = self._place(position, item, workspace)
        if waiting is not None:
            self.out.waiting.append(waiting)
            if key is not None:
                self.known[key] = waiting

    def _place(
        self, position: int, item: Item, workspace: Workspace | None
    ) -> Waiting[Item] | None:
        request = request_for(item, workspace)
        held = self._held_for(item.time_limit_seconds)
        result = self.session.place(request, self.now, exclude=held)
        if isinstance(result, Placement):
            placed = _placed_use(result)
            over = _over_quota(workspace, self.held.get(item.workspace, WorkspaceUse()), placed)
            if over is not None:  # the run's actual shape is past a quota its estimate was not
                return Waiting(item, over, None, ReasonKind.WAITS_FOR_QUOTA)
            self.session.take(result)
            if self.context.preemption is not None:
                self.context.preemption.taken.append(result)
            self.out.placed.append(Placed(item, result))
            self.held[item.workspace] = self.held.get(item.workspace, WorkspaceUse()).plus(
                placed.gpus, placed.cpu_cores, placed.memory_bytes
            )
            if isinstance(item, QueueItem):  # `concurrency` counts live elements, one task each
                self.live[item.seq] = self.live.get(item.seq, 0) + 1
            return None
        self.evaluated += 1  # placements are never limited, explanations are
        plan = self._preemption(request, item, workspace, result)
        if plan is not None and _over_quota(
            workspace, self.held.get(item.workspace, WorkspaceUse()), _placed_use(plan.placement)
        ):
            plan = None  # it could not start there anyway: no run is stopped for it
        if plan is not None:
            self._preempting(position, item, result, plan)
            return None
        head = self._held_by(request, held)
        if head is not None:
            # A reason is read by the run's own workspace: another's run is never named.
            label = head.label if head.workspace == item.workspace else reasons.ANOTHER_WORKSPACE
            text = reasons.queued_behind(label)
            kind = ReasonKind.QUEUED_BEHIND
            return Waiting(item, text, result.explained, kind)
        wanted = frozenset(result.wanted_machines)
        if wanted and not wanted & (self.reserved | self.claimed):
            machines, expected = self._earliest(request, wanted)
            self.heads.append(_Head(item, result, position, machines, expected))
            self.reserved |= machines
            self.claimed |= wanted
            return None
        return Waiting(item, result.headline, result.explained, result.kind)

    def _preemption(
        self, request: RunRequest, item: Item, workspace: Workspace | None, result: Pending
    ) -> Plan | None:
        """How the run would start by stopping lower-priority runs (preemption on), or runs
        of workspaces over their guarantee (its own workspace below its guarantee, and within
        it with this run: reclaim), when it waits only for room (it fits the idle cluster);
        never on machines a head ahead holds."""
        preemption = self.context.preemption
        if preemption is None or not result.wanted_machines:
            return None
        guarantee = workspace.guaranteed_gpus if workspace is not None else 0
        held = self.held.get(item.workspace, WorkspaceUse()).gpus
        reclaim = item.ask.gpu_count > 0 and held + item.ask.gpu_count <= guarantee
        seq = item.seq if isinstance(item, QueueItem) else None
        return preemption.plan(
            request, item.priority, self.reserved, self.now, reclaim=reclaim, seq=seq
        )

    def _preempting(self, position: int, item: Item, result: Pending, plan: Plan) -> None:
        """The run holds the machines it would use once its victims are gone, as a head does
        (nothing behind it takes them meanwhile); the victims are stopped after the pass."""
        if plan.victims:
            assert self.context.preemption is not None  # noqa: S101 - a plan came from it
            self.context.preemption.spend(plan)
            seqs = tuple(run.seq for run in plan.victims)
            self.out.preempting.append(Preempting(item, seqs, plan.gpus, plan.reclaimed))
            text = reasons.preempting(len(seqs), plan.gpus)
        else:
            text = reasons.preempting_leaving()
        reason = (text, ReasonKind.PREEMPTING)
        self.heads.append(_Head(item, result, position, plan.machines, None, reason))
        self.reserved |= plan.machines
        # What it will hold counts for its workspace from now: a later run of the workspace
        # neither passes a quota nor reclaims a guarantee with GPUs this one is to take.
        use = _placed_use(plan.placement)
        held = self.held.get(item.workspace, WorkspaceUse())
        self.held[item.workspace] = held.plus(use.gpus, use.cpu_cores, use.memory_bytes)

    def _earliest(
        self, request: RunRequest, wanted: frozenset[str]
    ) -> tuple[frozenset[str], datetime | None]:
        """The machines a run waiting only for room would hold as a head, and when they free
        up: of the idle-cluster placements, one whose machines all free up soonest (Slurm's
        backfill reserves the earliest-available resources for the top job). The idle fit
        (`wanted`) is the same on every pass and, among alike machines, always the first by
        name, however long that one stays busy. The soonest is the least moment T at which
        the run fits the idle cluster without the machines freeing up after T (by `frees_at`:
        a machine with a task without a time limit never does). It is searched for from the
        first moment on, doubling the step, then halving between the last two steps: one idle
        search each, only for a head, and the searches near the first moments pass over most
        machines at once. `wanted` stays when it frees up as soon, or when nothing frees up
        in time (tasks without a time limit). Machines another head holds are left out: holds
        never overlap."""
        expected = self._frees_at(wanted)
        moments = self._moments()
        limit = len(moments) if expected is None else bisect.bisect_left(moments, expected)
        found: tuple[str, ...] = ()
        low = probe = 0
        while probe < limit:
            found = self._fits_by(request, moments[probe])
            if found:
                break
            low = probe + 1
            probe = min(2 * probe + 1, limit - 1) if probe < limit - 1 else limit
        high = probe
        while low < high:  # it fits by moments[high], not by moments[low - 1]
            middle = (low + high) // 2
            machines = self._fits_by(request, moments[middle])
            if machines:
                found, high = machines, middle
            else:
                low = middle + 1
        if not found:
            return wanted, expected
        chosen = frozenset(found)
        return chosen, self._frees_at(chosen)

    def _moments(self) -> list[datetime]:
        """The distinct moments busy machines free up, earliest first (kept for the pass, with
        when each machine frees up: what runs hold does not change within it)."""
        if self._frees is None:
            self._frees = {m: u.frees_at(self.now) for m, u in self.context.usage.items()}
            ends = {max(end, self.now) for end in self._frees.values() if end is not None}
            self._sorted = sorted(ends)
        return self._sorted

    def _fits_by(self, request: RunRequest, moment: datetime) -> tuple[str, ...]:
        """Where the run would go on the idle cluster with only the machines that free up by
        `moment` (`_moments` first), none a head holds."""
        frees = self._frees or {}
        late = frozenset(m for m, end in frees.items() if end is None or end > moment)
        return self.session.idle_machines(request, self.now, self.reserved | late)

    def _frees_at(self, machines: frozenset[str]) -> datetime | None:
        """When every task on `machines` has reached its time limit; None when one has none."""
        ends = [
            self.context.usage[m].frees_at(self.now) for m in machines if m in self.context.usage
        ]
        if any(end is None for end in ends):
            return None
        return max((end for end in ends if end is not None), default=self.now)

    def _held_for(self, time_limit: int | None) -> frozenset[str]:
        """The machines held from a run with this time limit: every head's, but those of heads
        whose machines free up only after the run would have ended (backfill)."""
        if time_limit is None or not self.heads or not self.context.backfill:
            return self.reserved
        ends = self.now + timedelta(seconds=time_limit) + BACKFILL_MARGIN
        held = frozenset[str]()
        for head in self.heads:
            if head.expected is None or ends > head.expected:
                held |= head.machines
        return held

    def _held_by(self, request: RunRequest, held: frozenset[str]) -> Item | None:
        """The head whose held machines keep this run from starting now: the first head holding
        a machine the run would use without the holds; None when it would not start anyway."""
        if not held:
            return None
        unheld = self.session.place(request, self.now)
        if not isinstance(unheld, Placement):
            return None
        used = {worker.machine for worker in unheld.workers}
        blocking = [h for h in self.heads if h.machines & held]
        return next((h.item for h in blocking if h.machines & used), blocking[0].item)


@dataclass(frozen=True)
class _Head(Generic[Item]):
    """A run first in queue order to wait only for room on `machines`, which it holds."""

    item: Item
    pending: Pending
    position: int
    machines: frozenset[str]
    expected: datetime | None
    """When its machines free up (every task there at its time limit); None: not known."""
    reason: tuple[str, ReasonKind] | None = None
    """Its own reason instead of `Next to run: ...` (a run whose victims are stopping)."""


def _same_ask(item: Candidate, workspace: Workspace | None) -> str | None:
    """A key for runs that place alike; None when the run's own history matters (patience)."""
    if item.is_array or (item.ask.topology and item.ask.topology.patience_seconds):
        return None
    pools = ",".join(workspace.pools) if workspace else ""
    return f"{item.workspace}|{pools}|{item.image}|{item.time_limit_seconds}|" + (
        item.ask.model_dump_json()
    )


def _queue_rule(
    item: Candidate,
    workspace: Workspace | None,
    held: Mapping[str, WorkspaceUse],
    live: Mapping[int, int],
) -> tuple[str, ReasonKind] | None:
    """The quota or array limit that holds this item back, if any, and its kind."""
    over = _over_quota(workspace, held.get(item.workspace, WorkspaceUse()), _least_use(item))
    if over is not None:
        return over, ReasonKind.WAITS_FOR_QUOTA
    array = item.ask.array
    concurrency = array.concurrency if array is not None else None
    running = live.get(item.seq, 0) if isinstance(item, QueueItem) else 0  # a dry run's: none
    if concurrency is not None and running >= concurrency:
        return reasons.array_at_most(concurrency), ReasonKind.ARRAY_LIMIT
    return None


def _least_use(item: Candidate) -> WorkspaceUse:
    """The least the run holds once placed: its GPUs, and the cores and memory of its fewest
    workers (`machines`, else `topology.min_nodes`, else one; the placement decides the rest,
    and `_over_quota` checks the placement itself)."""
    ask = item.ask
    workers = ask.machines or (ask.topology.min_nodes if ask.topology else None) or 1
    gpus = ask.gpu_count
    cores, memory = ask.worker_cpu_cores * workers, ask.worker_memory_bytes * workers
    if ask.per_gpu is not None:
        cores += float(ask.per_gpu.cpu_cores) * gpus
        memory += ask.per_gpu.memory_bytes * gpus
    return WorkspaceUse(gpus, cores, memory)


def _placed_use(placement: Placement) -> WorkspaceUse:
    """What a placement holds: every worker's GPUs, cores and memory."""
    return WorkspaceUse(
        sum(len(worker.gpu_ids) for worker in placement.workers),
        sum(worker.cpu_cores for worker in placement.workers),
        sum(worker.memory_bytes for worker in placement.workers),
    )


def _over_quota(workspace: Workspace | None, used: WorkspaceUse, need: WorkspaceUse) -> str | None:
    """The quota reason when `need` on top of `used` passes one of the workspace's quotas
    (GPUs first, then cores, then memory); None when every one holds."""
    if workspace is None:
        return None
    gpu_quota, cpu_quota, memory_quota = (
        workspace.gpu_quota,
        workspace.cpu_quota,
        workspace.memory_quota,
    )
    if gpu_quota is not None and need.gpus and used.gpus + need.gpus > gpu_quota:
        return reasons.waits_for_quota(used.gpus, gpu_quota, need.gpus)
    if cpu_quota is not None and need.cpu_cores and used.cpu_cores + need.cpu_cores > cpu_quota:
        return reasons.waits_for_quota(used.cpu_cores, cpu_quota, need.cpu_cores, reasons.CPU_CORES)
    if (
        memory_quota is not None
        and need.memory_bytes
        and used.memory_bytes + need.memory_bytes > memory_quota
    ):
        return reasons.waits_for_quota(
            used.memory_bytes / GIB,
            memory_quota / GIB,
            need.memory_bytes / GIB,
            reasons.GIB_OF_MEMORY,
        )
    return None


def _head_waiting(head: _Head[Item], now: datetime, *, behind: bool) -> Waiting[Item]:
    item, pending = head.item, head.pending
    if head.reason is not None:
        return Waiting(item, head.reason[0], pending.explained, head.reason[1])
    # "Next to run" only means something when other runs wait behind it; alone, the room reason
    # is the whole story (the guide's example: `No machine fits: 3 of 3 machines ready`).
    text, kind = pending.headline, pending.kind
    if behind:
        text, kind = (
            reasons.next_to_run(pending.headline, _expected(head, now)),
            ReasonKind.NEXT_TO_RUN,
        )
    return Waiting(item, text, pending.explained, kind)


def _expected(head: _Head[Item], now: datetime) -> str | None:
    """The head's expected start in words, when it is known and still ahead."""
    if head.expected is None or head.expected <= now:
        return None
    return reasons.expected_start(_clock_time(head.expected), sorted(head.machines))


def _clock_time(at: datetime) -> str:
    """`2026-12-07 14:05 UTC`, rounded up to the minute (the head starts *by* then)."""
    at = at.astimezone(UTC)
    if at.second or at.microsecond:
        at = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return at.strftime("%Y-%m-%d %H:%M UTC")
