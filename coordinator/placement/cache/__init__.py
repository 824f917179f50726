"""Every memo the engine keeps, in three levels (kube-scheduler's Cache → Snapshot → CycleState).

1. **The cluster cache** (`live.LiveState`), kept between passes and brought up to date by the
   change feed: each pass or dry run hands it the newest `ClusterSnapshot`, whose unchanged
   machines are the same view objects as before (`scheduler/snapshot.py` reuses them for
   machines the records' `changes` / `changed_since` do not name), so only changed machines are
   read again. It holds one `live.Frame` per generation of what the machines are (facts,
   network places, idle capacity, each machine's `kinds.Kind`, the ladder's clusters), what is
   free on each machine, and the `free_index.FreeIndex` of machines alike for the single-worker
   search. Per ask it keeps, in the frame, the verdicts of the filters that read only what a
   machine is (`Reads.MACHINE`: `prepared.StaticVerdicts`, keyed by the ask's `static_key`) and
   the run's evaluation against the idle cluster. A new generation starts when a machine's
   description changes; what only its holdings change moves it in the free index.
2. **The snapshot** one pass or dry run reads (`snapshot.SessionCache`, kept by its
   `PlacementSession`): the frame, shared and never changed, and its own copy-on-write list of
   free capacity and fork of the free index, which its `take` changes without changing the
   cluster cache. Its `prepared.Prepared` per (ask, moment, machines held for runs ahead) reads
   the frame's static verdicts.
3. **The cycle state** of one run (`cycle.CycleState`, kept by its `RunEvaluation`): the
   verdicts of the filters that read where the run's workers are or what is free
   (`Reads.RUN`, `Reads.FREE`), decided once per (a worker of the run already here, the
   machine's free kind), and the GPUs, caps, slots and scores worked out for it.

Where a filter's verdict is kept follows from what it declares it reads (`filters.Reads`, one
`READS` per filter module): `Reads.MACHINE` verdicts in the cluster cache per ask, the others in
the run's cycle state per free kind. So a filter may read only what its `Reads` allows
(`reads.READABLE`; of the run, a `Reads.MACHINE` filter only `needs.STATIC_READS`, of which the
static key is made): `tests/placement/conftest.py` runs every filter of every placement test
through `reads.guarded`, which fails, naming the filter and the attribute, on any other read.

The scheduler keeps one more memo above these, `scheduler/memo.py`'s `PassMemo` (a pass with
no change since the last decides nothing again), keyed by the cluster cache's `generation`; it
lives with the scheduler because its key is the queue's.
"""

from .live import KEPT_ASKS, Frame, LiveState, forget_oldest

__all__ = ["KEPT_ASKS", "Frame", "LiveState", "forget_oldest"]
