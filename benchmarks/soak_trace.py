"""`astraeus-coordinator` under tracemalloc, for `soak_bench.py --trace`.

    python benchmarks/soak_trace.py DIR [astraeus-coordinator arguments...]

The n-th signal writes `DIR/<n>.snapshot` (a `tracemalloc.Snapshot`) and `DIR/<n>.json` (the
traced bytes, SQLite's own memory, the objects the collector tracks, and those frozen by the
gc policy). SIGUSR1 changes nothing; SIGUSR2 first hands the frozen objects back and collects
them (`gc.unfreeze`, `gc.collect`, then `gc.freeze` again) and also says how many objects and
traced bytes that freed: the garbage that was frozen at that moment.
"""

from __future__ import annotations

import ctypes
import gc
import json
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

FRAMES = 12


def sqlite_bytes() -> int:
    """What SQLite itself holds (its page caches, statements): tracemalloc does not see it.
    -1 where the library cannot be loaded by that name."""
    try:
        library = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        return -1
    library.sqlite3_memory_used.restype = ctypes.c_int64
    return int(library.sqlite3_memory_used())


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    count = 0

    def dump(signum: int, _frame: FrameType | None) -> None:
        nonlocal count
        count += 1
        found: dict[str, object] = {}
        if signum == signal.SIGUSR2:
            before = tracemalloc.get_traced_memory()[0]
            frozen = gc.get_freeze_count()
            gc.unfreeze()
            found["freed_objects"] = gc.collect()
            found["freed_bytes"] = before - tracemalloc.get_traced_memory()[0]
            found["frozen_before"] = frozen
            gc.freeze()
        found["traced_bytes"] = tracemalloc.get_traced_memory()[0]
        found["sqlite_bytes"] = sqlite_bytes()
        found["frozen"] = gc.get_freeze_count()
        found["tracked"] = len(gc.get_objects())
        tracemalloc.take_snapshot().dump(str(out / f"{count}.snapshot"))
        (out / f"{count}.tmp").write_text(json.dumps(found))
        (out / f"{count}.tmp").rename(out / f"{count}.json")

    signal.signal(signal.SIGUSR1, dump)
    signal.signal(signal.SIGUSR2, dump)
    tracemalloc.start(FRAMES)
    from astraeus.coordinator.service import main as serve

    return serve(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
