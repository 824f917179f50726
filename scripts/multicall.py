"""The release executable's entry: one program answering as `astra`, `astraeus-coordinator` or
`astraeus-agent` by the name it is called by (busybox style), or by its first argument."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import sys
from collections.abc import Callable
from pathlib import Path

TOOLS = {
    "astra": "astraeus.coordinator.cli",
    "astraeus-coordinator": "astraeus.coordinator.service",
    "astraeus-agent": "astraeus.agent.cli",
}
"""Each name's module, whose `main(argv)` it runs. Only the one called is imported: the
coordinator's and the agent's modules take seconds to import on a busy machine, and `astra`
(typed all day) needs neither."""


def _tool(name: str) -> Callable[[list[str]], int]:
    main: Callable[[list[str]], int] = importlib.import_module(TOOLS[name]).main
    return main


ALIASES = {"agent": "astraeus-agent", "coordinator": "astraeus-coordinator"}
"""`astraeus agent ...` is `astraeus-agent ...` for a copy of the program without its links."""


def _restore_library_path() -> None:
    """The bootloader points LD_LIBRARY_PATH at its unpacked libraries; workers and tools that
    the agent starts get the machine's own value back."""
    original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is not None:
        os.environ["LD_LIBRARY_PATH"] = original
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)


def main() -> int:
    multiprocessing.freeze_support()  # the coordinator's pass worker is this program, spawned
    _restore_library_path()
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "-m":  # `-m MODULE ARGS`: the worker shim, the demo worker
        import runpy  # here: a tool's start does not need it

        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return 0
    tools = TOOLS
    name = Path(sys.argv[0]).name
    if name not in tools and args and ALIASES.get(args[0], args[0]) in tools:
        name, args = ALIASES.get(args[0], args[0]), args[1:]
    if name not in tools:
        print(
            f"usage: {name} {{astra,coordinator,agent}} [ARGS...]; or link this file as "
            "astra, astraeus-coordinator or astraeus-agent and run it by that name",
            file=sys.stderr,
        )
        return 2
    sys.argv[0] = name
    return _tool(name)(args)


if __name__ == "__main__":
    sys.exit(main())
