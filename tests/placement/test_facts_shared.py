"""What the live state keeps per machine is shared where machines are alike (`facts.py`):
an idle machine's free capacity is its idle capacity, one object; sets of drive names are one
object per distinct set; GPUs by id are made when asked. Sharing never lets a session's `take`
change the state, nor one machine's answer another's."""

from datetime import UTC, datetime

from astraeus.coordinator.placement import Placement, PlacementSession
from astraeus.coordinator.placement.cache.live import LiveState
from astraeus.coordinator.testing.fake_cluster import machine, run, snapshot
from astraeus.shared import DriveInfo

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
SCRATCH = DriveInfo(name="scratch", path="/scratch")


def _live() -> LiveState:
    live = LiveState()
    live.update(
        snapshot(
            machine("gpu-01", drives=[SCRATCH]),
            machine("gpu-02", drives=[SCRATCH]),
            machine("gpu-03", used_gpus=[0, 1], used_cores=8, workers=[("vision", "a")]),
        )
    )
    return live


def test_an_idle_machine_keeps_one_free_capacity() -> None:
    live = _live()
    assert live.free[0] is live.frame.idle[0]
    assert live.free[1] is live.frame.idle[1]
    assert live.free[2] is not live.frame.idle[2]  # something is held there
    assert len(live.free[2].gpu_ids) == 6
    assert len(live.frame.idle[2].gpu_ids) == 8


def test_a_session_s_take_changes_neither_the_state_nor_the_idle_capacity() -> None:
    live = _live()
    session = PlacementSession(live=live)
    placed = session.place(
        run("r", ask={"gpu_requests": {"count": 8}, "per_gpu": {"cpu_cores": 1}}), NOW
    )
    assert isinstance(placed, Placement)
    session.take(placed)
    [worker] = placed.workers
    i = live.frame.index[worker.machine]
    assert len(live.free[i].gpu_ids) == len(live.frame.idle[i].gpu_ids) == 8
    again = PlacementSession(live=live).place(run("s", ask={"gpu_requests": {"count": 8}}), NOW)
    assert isinstance(again, Placement)
    assert again.workers[0].machine == worker.machine  # the state still has it all free


def test_alike_machines_share_their_drive_names() -> None:
    one, two, three = _live().frame.facts
    assert one.local_drives == frozenset({"scratch"})
    assert one.local_drives is two.local_drives
    assert one.reported_drives is two.reported_drives
    assert three.local_drives == frozenset()


def test_gpus_by_id_are_each_gpu_under_its_uuid_and_index() -> None:
    facts = _live().frame.facts[0]
    by_id = facts.gpu_by_id
    assert facts.gpu_by_id == by_id
    assert facts.gpu_by_id is not by_id  # made when asked, not kept for every machine
    assert not hasattr(facts, "__dict__")  # slotted: nothing per machine beyond its fields
    assert len(by_id) == 16
    for gpu in facts.gpus:
        assert by_id[gpu.uuid] is gpu
        assert by_id[str(gpu.index)] is gpu
