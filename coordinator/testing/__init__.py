"""Code for tests and benchmarks only, shipped so that benchmarks run against an installed
coordinator: fake machines, snapshots and runs in a line each (`fake_cluster`).

No module of the programs imports it (`tests/test_layers.py`): it may change with the tests."""
