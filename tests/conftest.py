"""The order of the suite under pytest-xdist: modules holding a slow test go first."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n ... --dist loadscope --no-loadscope-reorder` (the README's command) each
    module runs whole on one worker, in the order collected here. Modules holding a `slow` test
    go first, each still whole and in its own order, so the long ones (the release build
    above all) start at once and the hundreds of short modules fill in around them, instead of
    one long module starting last while the other workers sit idle. A run in one process
    (no xdist) keeps the plain order."""
    if not hasattr(config, "workerinput"):  # only an xdist worker has it
        return
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the rest keep their order
