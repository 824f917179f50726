"""`--why` from the grouped explanation: a few names per reason on a large cluster."""

from datetime import UTC, datetime

from astraeus.coordinator.cli.render import grouped_why_lines
from astraeus.shared import GroupedExplanation, MachineState, ReasonCount


def test_a_large_reason_names_a_few_and_counts_the_rest() -> None:
    """A reason of 5,000 machines prints its ten names and how many more; a reason whose
    machines are all named prints one line each, the closest first, machines down last."""
    explanation = GroupedExplanation(
        checked_nodes=5003,
        ready_nodes=5002,
        down_nodes=1,
        closest="gpu-9",
        closest_machines=["gpu-9"],
        reasons=[
            ReasonCount(
                reason="no H100 GPU",
                state=MachineState.UP,
                count=5000,
                machines=[f"gpu-{i:04d}" for i in range(10)],
            ),
            ReasonCount(
                reason="insufficient gpus: need 8, 4 free and usable",
                state=MachineState.UP,
                room=True,
                count=2,
                machines=["gpu-8", "gpu-9"],
            ),
            ReasonCount(reason="machine is down", state=MachineState.DOWN, count=1, machines=["a"]),
        ],
        evaluated_at=datetime(2026, 10, 1, 9, 0, tzinfo=UTC),
    )
    names = ", ".join(f"gpu-{i:04d}" for i in range(10))
    width = len(f"{names} and 4990 more")
    assert grouped_why_lines(explanation.model_dump(mode="json")) == [
        "Why it is not running yet: 5003 machines checked, 5002 ready, 1 down; closest: gpu-9",
        f"  {'gpu-9':{width}}  Up    insufficient gpus: need 8, 4 free and usable",
        f"  {names} and 4990 more  Up    no H100 GPU",
        f"  {'gpu-8':{width}}  Up    insufficient gpus: need 8, 4 free and usable",
        f"  {'a':{width}}  Down  machine is down",
    ]
