"""`Needs.most_gpus` remembers its answers; a remembered answer is the one worked out afresh."""

from hypothesis import given, settings
from hypothesis import strategies as st

from astraeus.coordinator.placement.needs import Needs
from astraeus.coordinator.testing.fake_cluster import run

GIB = 1024**3

free = st.tuples(
    st.integers(0, 8),
    st.sampled_from([0.0, 3.5, 8.0, 16.0, 64.0, 128.0]),
    st.sampled_from([0, GIB, 64 * GIB, 512 * GIB]),
)


@settings(max_examples=100, deadline=None)
@given(
    cores=st.sampled_from([None, 2, 8]),
    memory=st.sampled_from([None, 4 * GIB]),
    per_gpu_cores=st.sampled_from([0, 4, 8]),
    asked=st.lists(free, min_size=1, max_size=12),
)
def test_a_remembered_answer_is_the_fresh_one(
    cores: int | None,
    memory: int | None,
    per_gpu_cores: int,
    asked: list[tuple[int, float, int]],
) -> None:
    """Asked in any order and again, `most_gpus` gives what a fresh `Needs` works out for the
    same free GPUs, cores and memory."""
    ask: dict[str, object] = {
        "gpu_requests": {"count": 1},
        "per_gpu": {"cpu_cores": per_gpu_cores, "memory_bytes": 16 * GIB},
    }
    if cores is not None:
        ask["cpu_cores"] = cores
    if memory is not None:
        ask["memory_bytes"] = memory
    kept = Needs(run(ask=ask))
    for limit, free_cores, free_memory in [*asked, *reversed(asked)]:
        fresh = Needs(run(ask=ask))._most_gpus(limit, free_cores, free_memory)
        assert kept.most_gpus(limit, free_cores, free_memory) == fresh
