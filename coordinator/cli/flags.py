"""`astra astraeus run`'s flags and the parsers of their values; no models (the choices come
from the standard-library `shared/choices.py`), so `astra --help` loads no pydantic."""

from __future__ import annotations

from .errors import CliError, Exit

TYPE_CHECKING = False
if TYPE_CHECKING:  # `spec.py` reads the values with these parsers on `run`'s quick path
    import argparse
    from enum import StrEnum

_SIZE = r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?B?)?\s*$"
_DURATION = r"^\s*(\d+)\s*([smhd]?)\s*$"
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(text: str, flag: str) -> int:
    """`120G` → 128849018880: K, M, G, T are powers of 1024, as the guide's example counts."""
    import re  # only for a size given: `re` loads `enum`, a fifth of `astra status`

    match = re.match(_SIZE, text, re.IGNORECASE)
    if not match:
        raise CliError(f"{flag}: {text!r} is not a size; write e.g. 120G, 512M or 2T", Exit.USAGE)
    number, unit = float(match.group(1)), match.group(2).upper()
    return int(number * 1024 ** _POWERS[unit])


def parse_duration(text: str, flag: str) -> int:
    """`1800`, `30m`, `2h` or `1d` → seconds."""
    import re

    match = re.match(_DURATION, text, re.IGNORECASE)
    if not match:
        raise CliError(
            f"{flag}: {text!r} is not a duration; write e.g. 1800, 30m or 2h", Exit.USAGE
        )
    return int(match.group(1)) * _SECONDS[match.group(2).lower()]


def number(text: str) -> int | float:
    """`12` stays whole, `0.5` does not, so the spec reads back as it was written."""
    try:
        value = float(text)
    except ValueError:
        import argparse  # only the full parser calls this

        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    return int(value) if value.is_integer() else value


def parse_pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{flag}: {item!r} is not KEY=VALUE", Exit.USAGE)
        pairs[key] = value
    return pairs


def _words(choices: type[StrEnum]) -> list[str]:
    """An enum's values, as `--help` lists them."""
    return [choice.value for choice in choices]


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of `run`: the guide's, then one per field of the ask."""
    from astraeus.shared.choices import Interconnect, KeepWithin, SelectionMode, Spread, Vendor

    add = parser.add_argument
    add("-f", "--file", metavar="SPEC.json", help="a run spec file; flags given override it")
    add("--name", help="the run's name (a DNS label: a-z, 0-9, -)")
    add("--image", help="container image for the workers")
    add("--gpus", type=int, metavar="N", help="GPUs for the whole run, not per worker")
    add("--cpus", type=number, metavar="N", help="cores: per GPU with --gpus, else per worker")
    add("--mem", metavar="SIZE", help="memory (120G, 512M): per GPU with --gpus, else per worker")
    add("--pool", help="only machines with pool=POOL")
    add("--gpu-model", action="append", default=[], metavar="MODEL", help="H100,H200: any of")
    add("--gpu-memory", type=number, metavar="GB", help="at least this much memory per GPU")
    add("--vendor", type=str.lower, choices=_words(Vendor), help="any case")
    add("--healthy-only", action="store_true", help="never take a GPU at risk; wait instead")
    add(
        "--machines",
        type=int,
        metavar="N",
        help="exactly N machines (N workers, which may share machines with --mode Any), "
        "GPUs split evenly",
    )
    add("--min-machines", type=int, metavar="N", help="topology.min_nodes")
    add("--max-machines", type=int, metavar="N", help="topology.max_nodes")
    add("--gpus-per-machine", type=int, metavar="N", help="never fewer than N GPUs on a machine")
    add("--interconnect", choices=_words(Interconnect))
    add("--rdma-gbps", type=number, metavar="GBPS", help="RDMA port speed at least")
    add("--keep-within", choices=_words(KeepWithin))
    add("--spread", choices=_words(Spread), help="one worker per …")
    add("--patience", metavar="DURATION", help="wait this long for a better network (30m)")
    add("--label", action="append", default=[], metavar="KEY=VALUE", help="only machines with it")
    add("--names", action="append", default=[], metavar="NAME[,NAME]", help="only these machines")
    add("--mode", choices=_words(SelectionMode), help="node_selection.mode")
    add("--site", help="one site (topology.astraeus.io/site)")
    add("--priority", type=int)
    add("--time-limit", metavar="DURATION", help="stop the run after this long (2h)")
    add(
        "--retries",
        type=int,
        metavar="N",
        help="place the run again, up to N times (0-10), when a GPU faults or a machine is lost",
    )
    add(
        "--retry-on-failure",
        action="store_true",
        default=None,
        help="with --retries: retry also when a worker exits non-zero by itself",
    )
    add(
        "--not-preemptible",
        dest="preemptible",
        action="store_false",
        default=None,
        help="never stop this run for a higher-priority one (preemption)",
    )
    add("--env", action="append", default=[], metavar="KEY=VALUE", help="worker environment")
    add(
        "--drive",
        action="append",
        default=[],
        metavar="NAME=MOUNT_PATH",
        help="mount a drive (datasets=/data); runs go where it is, or near",
    )
    add("--dry-run", action="store_true", help="say where it would go now; submit nothing")
