"""The victim search (`scheduler/preemption.py`) against a straightforward one, with the real
placement engine over random clusters: the fast search rules trials out by a bound and keeps
the trials' live state between searches; whatever it skips, it must choose exactly the victims
(and the placement) that asking the engine afresh at every step chooses. Then: the bound does
spare the engine the trials it cannot pass (counted, never timed)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from astraeus.coordinator.placement import (
    ClusterSnapshot,
    MachineSnapshot,
    Placement,
    PlacementSession,
    RunRequest,
)
from astraeus.coordinator.placement.cache import LiveState
from astraeus.coordinator.scheduler.preemption import (
    MAX_DROP_TRIALS,
    Plan,
    Preemption,
    cost,
    within_guarantees,
    without,
)
from astraeus.coordinator.store.preemption import LiveRun, LiveTask
from astraeus.coordinator.testing.fake_cluster import gpus, machine, rdma_port, run, snapshot
from astraeus.shared.fake_gpu import gpu_uuid

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
WORKSPACES = ("vision", "audio", "batch")
SEEDS = range(150)


def reference(
    p: Preemption,
    request: RunRequest,
    priority: int,
    exclude: frozenset[str],
    *,
    reclaim: bool,
    seq: int | None,
) -> Plan | None:
    """The rule, step by step, the engine asked afresh (a new snapshot, a new session) for
    every set of runs gone: the runs already stopping first (for this run: it stops no more;
    for others: it stops none while they make room); else the fewest cheapest
    candidates that make room (prefixes doubling, then bisection), less those with no task on
    the machines the run would then use, then each of the costliest `MAX_DROP_TRIALS` the run
    fits without dropped. Reads `p`, changes nothing."""

    def fits(gone: Sequence[LiveRun]) -> Placement | None:
        session = PlacementSession(without(p.snapshot, gone))
        for placement in p.taken:
            session.take(placement)
        result = session.place(request, NOW, exclude=exclude)
        return result if isinstance(result, Placement) else None

    leaving = [r for r in p.runs if r.leaving or r.seq in p.claimed]
    if seq is not None and any(r.preempted_for == seq for r in leaving):
        placed = fits(leaving)
        if placed is not None:
            return Plan((), placed)
    if p.budget <= 0 or p.searches <= 0:
        return None
    stoppable = [r.priority for r in p.runs if r.preemptible and not r.leaving]
    if not reclaim and (not p.by_priority or priority <= min(stoppable, default=10**9)):
        return None

    def lower(r: LiveRun) -> bool:
        if not p.by_priority or r.priority >= priority:
            return False
        return r.workspace == request.workspace or r.seq not in p.protected

    def reclaimable(r: LiveRun) -> bool:
        return reclaim and r.workspace != request.workspace and r.seq not in p.protected

    candidates = sorted(
        (
            r
            for r in p.runs
            if not (r.leaving or r.seq in p.claimed)
            and r.preemptible
            and (lower(r) or reclaimable(r))
        ),
        key=cost,
    )
    if not candidates or (leaving and fits(leaving) is not None):
        return None
    size, found = 1, fits([*leaving, *candidates[:1]])
    low = 1
    while found is None:
        if size == len(candidates):
            return None
        low, size = size + 1, min(2 * size, len(candidates))
        found = fits([*leaving, *candidates[:size]])
    high, placed = size, found
    while low < high:
        middle = (low + high) // 2
        found = fits([*leaving, *candidates[:middle]])
        if found is not None:
            high, placed = middle, found
        else:
            low = middle + 1
    victims = candidates[:high]
    used = {worker.machine for worker in placed.workers}
    there = [r for r in victims if any(task.machine in used for task in r.tasks)]
    if there and len(there) < len(victims):
        found = fits([*leaving, *there])
        if found is not None:
            victims, placed = there, found
    for r in sorted(victims, key=cost, reverse=True)[:MAX_DROP_TRIALS]:
        if len(victims) == 1:
            break
        fewer = [one for one in victims if one is not r]
        found = fits([*leaving, *fewer])
        if found is not None:
            victims, placed = fewer, found
    return Plan(tuple(victims), placed, frozenset(r.seq for r in victims if not lower(r)))


def _cluster(rng: random.Random) -> tuple[ClusterSnapshot, list[LiveRun]]:
    """A few machines of 4 or 8 GPUs (two sites, InfiniBand fabrics, racks, NVLink domains,
    a faulted GPU here and there), nearly full of runs of one to two tasks."""
    count = rng.randint(3, 12)
    names = [f"m-{i:02d}" for i in range(count)]
    size = {name: rng.choice((4, 8, 8)) for name in names}
    free = {name: list(range(size[name])) for name in names}
    for name in names:
        rng.shuffle(free[name])
    runs: list[LiveRun] = []
    for seq in range(rng.randint(2, 3 * count)):
        hosts = rng.sample(names, rng.choice((1, 1, 1, 2)))
        tasks = []
        for host in hosts:
            want = min(rng.choice((1, 2, 2, 4, 4, 8)), len(free[host]))
            if want == 0:
                continue
            taken = [free[host].pop() for _ in range(want)]
            ids = tuple(gpu_uuid(host, g) for g in sorted(taken))
            tasks.append(LiveTask(host, ids, float(rng.randint(0, 8)), rng.randint(0, 64) << 30))
        if not tasks:
            continue
        leaving = rng.random() < 0.1
        runs.append(
            LiveRun(
                seq=seq,
                workspace=rng.choice(WORKSPACES),
                name=f"r-{seq}",
                priority=rng.randint(0, 6),
                preemptible=rng.random() < 0.85,
                leaving=leaving,
                preempted_for=rng.choice((None, 999)) if leaving else None,
                started_at=(
                    None
                    if rng.random() < 0.1
                    else NOW - timedelta(seconds=rng.choice((60, 600, 3600, 7200)))
                ),
                tasks=tuple(tasks),
            )
        )
    used: dict[str, set[int]] = {name: set(range(size[name])) - set(free[name]) for name in names}
    machines = [_machine(rng, i, name, size[name], used[name]) for i, name in enumerate(names)]
    return snapshot(*machines), runs


def _machine(rng: random.Random, i: int, name: str, size: int, used: set[int]) -> MachineSnapshot:
    fabric = f"ib-{i % 2}" if rng.random() < 0.8 else None
    domain = f"nvl-{i % 3}" if rng.random() < 0.5 else None
    faulted = [rng.randrange(size)] if rng.random() < 0.1 else []
    return machine(
        name,
        gpu_list=gpus(name, size, nvlink_domain=domain, faulted=faulted),
        cpu_cores=64,
        memory_gib=512,
        rack=f"rack-{i // 4}",
        fabric=fabric,
        site=f"site-{i % 5 // 4}",
        ports=[rdma_port(subnet=f"fe80::{fabric}")] if fabric else [],
        used_gpus=sorted(used),
        used_cores=0,
        used_memory_gib=0,
    )


def _request(rng: random.Random) -> RunRequest:
    ask: dict[str, object] = {"gpu_requests": {"count": rng.choice((1, 2, 4, 8, 8, 12, 16, 24))}}
    keep = rng.choice((None, None, "node", "fabric", "nvlink_domain", "rack"))
    if keep is not None:
        ask["topology"] = {"keep_within": keep}
    interconnect = rng.choice(("auto", "auto", "nvlink", "infiniband"))
    if interconnect != "auto":
        ask["network"] = {"interconnect": interconnect}
    return run(f"urgent-{rng.randrange(100)}", workspace=rng.choice(WORKSPACES), ask=ask)


def _taken(rng: random.Random, cluster: ClusterSnapshot) -> list[Placement]:
    """Small runs this pass placed before the search (the fast search counts them taken)."""
    session = PlacementSession(cluster)
    found = []
    for i in range(rng.choice((0, 0, 1, 2))):
        result = session.place(run(f"small-{i}", ask={"gpu_requests": {"count": 1}}), NOW)
        if isinstance(result, Placement):
            session.take(result)
            found.append(result)
    return found


def _waits_for_room(p: Preemption, request: RunRequest, exclude: frozenset[str]) -> bool:
    """Whether `request` waits (off `exclude`, after what the pass placed) while the idle
    cluster would take it: the runs the walk asks `Preemption.plan` about."""
    session = PlacementSession(p.snapshot)
    for placement in p.taken:
        session.take(placement)
    result = session.place(request, NOW, exclude=exclude)
    return not isinstance(result, Placement) and bool(result.wanted_machines)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_fast_search_chooses_what_the_reference_chooses(seed: int) -> None:
    """Three runs in a row over one random cluster, each searched for when it waits for room,
    as a pass makes them (each plan
    decided counts against the rate limit, its victims are no later run's, its machines are
    held from later runs), with one live state kept across them and across a second "pass":
    each plan, victims, placement and runs reclaimed, equals the reference's."""
    rng = random.Random(seed)  # noqa: S311 - reproducible clusters, not secrets
    cluster, runs = _cluster(rng)
    guarantees = {w: rng.choice((0, 0, 4, 8)) for w in WORKSPACES}
    kept = LiveState()
    for _pass in range(2):
        p = Preemption(
            cluster,
            runs,
            budget=rng.choice((0, 1, 2, 3)),
            by_priority=rng.random() < 0.8,
            protected=within_guarantees(runs, guarantees),
            taken=_taken(rng, cluster),
            live=kept,
        )
        exclude: frozenset[str] = frozenset(
            one.name for one in cluster.machines if rng.random() < 0.15
        )
        for _ in range(3):
            request = _request(rng)
            priority = rng.randint(0, 8)
            reclaim = rng.random() < 0.3
            seq = rng.choice((None, 999))
            if not _waits_for_room(p, request, exclude):
                continue  # the queue walk searches only for a run that waits for room
            expected = reference(p, request, priority, exclude, reclaim=reclaim, seq=seq)
            got = p.plan(request, priority, exclude, NOW, reclaim=reclaim, seq=seq)
            assert got == expected, (seed, request.ask, priority, reclaim, seq)
            if got is not None:
                assert sum(len(w.gpu_ids) for w in got.placement.workers) == (request.ask.gpu_count)
                if got.victims:
                    p.spend(got)
                exclude |= got.machines


class Counted(Preemption):
    """A `Preemption` that counts the engine's trials."""

    trials = 0

    def _session(self, cluster: ClusterSnapshot) -> PlacementSession:  # type: ignore[override]
        self.trials += 1
        return super()._session(cluster)  # type: ignore[return-value]


def _full(machines: int, *, domains_stoppable: bool) -> tuple[ClusterSnapshot, list[LiveRun]]:
    """`machines` of 8 GPUs in one InfiniBand fabric, an NVLink domain on the first four, each
    machine running two 4-GPU runs of priority 0 to 3 (those in the domain stoppable or not)."""
    rng = random.Random(machines)  # noqa: S311 - reproducible
    views, runs = [], []
    for i in range(machines):
        name = f"g-{i:03d}"
        domain = "nvl-0" if i < 4 else None
        views.append(
            machine(
                name,
                gpu_list=gpus(name, 8, nvlink_domain=domain),
                rack=f"rack-{i // 8}",
                fabric="ib-0",
                ports=[rdma_port(subnet="fe80::0")],
                used_gpus=range(8),
            )
        )
        for half in (0, 1):
            ids = tuple(gpu_uuid(name, g) for g in range(4 * half, 4 * half + 4))
            runs.append(
                LiveRun(
                    seq=2 * i + half,
                    workspace="batch",
                    name=f"b-{2 * i + half}",
                    priority=rng.randint(0, 3),
                    preemptible=domains_stoppable or domain is None,
                    leaving=False,
                    preempted_for=None,
                    started_at=NOW - timedelta(seconds=rng.randrange(86_400)),
                    tasks=(LiveTask(name, ids, 0.0, 0),),
                )
            )
    return snapshot(*views), runs


def test_the_bound_spares_the_engine_the_trials_it_cannot_pass() -> None:
    """On a full cluster of 64 machines a 64-GPU run takes 16 victims of 4 GPUs: the
    straightforward search asks the engine for every prefix and every drop (24 trials), the
    fast one only for the set that frees 64 GPUs, with the same plan. A 32-GPU run kept in an
    NVLink domain whose runs may not be stopped is refused without one trial."""
    cluster, runs = _full(64, domains_stoppable=True)
    request = run("urgent", workspace="ops", ask={"gpu_requests": {"count": 64}})
    p = Counted(cluster, runs, budget=1, live=LiveState())
    expected = reference(p, request, 1000, frozenset(), reclaim=False, seq=None)
    plan = p.plan(request, 1000, frozenset(), NOW)
    assert plan == expected
    assert plan is not None
    assert (len(plan.victims), p.trials) == (16, 1)

    cluster, runs = _full(64, domains_stoppable=False)
    nvlink = {"gpu_requests": {"count": 32}, "network": {"interconnect": "nvlink"}}
    request = run("urgent", workspace="ops", ask=nvlink)
    p = Counted(cluster, runs, budget=1, live=LiveState())
    assert reference(p, request, 1000, frozenset(), reclaim=False, seq=None) is None
    assert p.plan(request, 1000, frozenset(), NOW) is None
    assert p.trials == 0

    cluster, runs = _full(64, domains_stoppable=True)  # the domain's 8 runs may be stopped
    p = Counted(cluster, runs, budget=1, live=LiveState())
    expected = reference(p, request, 1000, frozenset(), reclaim=False, seq=None)
    plan = p.plan(request, 1000, frozenset(), NOW)
    assert plan == expected
    assert plan is not None
    assert {worker.machine for worker in plan.placement.workers} == {f"g-00{i}" for i in range(4)}
    assert len(plan.victims) == 8
