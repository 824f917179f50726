"""`astra astraeus run` flags (or a spec file) → the run spec the API takes."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from astraeus.shared import RunSpec, describe
from astraeus.shared.labels import POOL, SITE

from .errors import CliError, Exit

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?B?)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(text: str, flag: str) -> int:
    """`120G` → 128849018880: K, M, G, T are powers of 1024, as the guide's example counts."""
    match = _SIZE.match(text)
    if not match:
        raise CliError(f"{flag}: {text!r} is not a size; write e.g. 120G, 512M or 2T", Exit.USAGE)
    number, unit = float(match.group(1)), match.group(2).upper()
    return int(number * 1024 ** _POWERS[unit])


def parse_duration(text: str, flag: str) -> int:
    """`1800`, `30m`, `2h` or `1d` → seconds."""
    match = _DURATION.match(text)
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


def _names(items: list[str]) -> list[str]:
    return [name.strip() for item in items for name in item.split(",") if name.strip()]


def read_spec_file(path: str) -> dict[str, Any]:
    """A JSON run spec, as the API takes it."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"-f: cannot read {path}: {exc.strerror}", Exit.USAGE) from None
    except json.JSONDecodeError as exc:
        raise CliError(f"-f: {path} is not valid JSON: {exc}", Exit.USAGE) from None
    if not isinstance(data, dict):
        raise CliError(f"-f: {path} must hold a JSON object (a run spec)", Exit.USAGE)
    return data


def _section(spec: dict[str, Any], *path: str) -> dict[str, Any]:
    """The nested dict at `path`, created on the way."""
    here = spec
    for key in path:
        here = here.setdefault(key, {})
    return here


def build_spec(args: argparse.Namespace, workspace: str | None) -> RunSpec:
    """The file's spec (if any) with every flag given laid over it, validated."""
    spec = read_spec_file(args.file) if args.file else {}
    for key, value in (
        ("name", args.name),
        ("image", args.image),
        ("priority", args.priority),
        ("workspace", workspace),
    ):
        if value is not None:
            spec[key] = value
    if args.command:
        spec["command"] = args.command
    if args.time_limit is not None:
        spec["time_limit_seconds"] = parse_duration(args.time_limit, "--time-limit")
    if args.env:
        spec.setdefault("env", {}).update(parse_pairs(args.env, "--env"))
    _resources(args, _section(spec, "requested_resources"))
    if "name" not in spec:
        raise CliError("name: give the run a name with --name (or in the -f file)", Exit.USAGE)
    if "command" not in spec:
        raise CliError("command: put the command after --, e.g. -- python train.py", Exit.USAGE)
    try:
        return RunSpec.model_validate(spec)
    except ValidationError as exc:
        raise CliError(f"the run is not valid:\n{describe(RunSpec, exc)}", Exit.USAGE) from None


def _resources(args: argparse.Namespace, ask: dict[str, Any]) -> None:
    gpus = _gpus(args, ask)
    memory = parse_size(args.mem, "--mem") if args.mem is not None else None
    if gpus:  # with GPUs, --cpus and --mem are per GPU, as in the console
        if args.cpus is not None:
            _section(ask, "per_gpu")["cpu_cores"] = args.cpus
        if memory is not None:
            _section(ask, "per_gpu")["memory_bytes"] = memory
    else:
        if args.cpus is not None:
            ask["cpu_cores"] = args.cpus
        if memory is not None:
            ask["memory_bytes"] = memory
    if args.machines is not None:
        ask["machines"] = args.machines
    if args.drive:
        mounts = parse_pairs(args.drive, "--drive")
        ask["drives"] = [{"name": name, "mount_path": path} for name, path in mounts.items()]
    _network_and_topology(args, ask)
    _selection(args, ask)


def _gpus(args: argparse.Namespace, ask: dict[str, Any]) -> int:
    wanted = {
        "count": args.gpus,
        "min_memory_gb": args.gpu_memory,
        "vendor": args.vendor,
        "min_per_machine": args.gpus_per_machine,
    }
    if any(v is not None for v in wanted.values()) or args.gpu_model or args.healthy_only:
        gpu = _section(ask, "gpu_requests")
        gpu.update({k: v for k, v in wanted.items() if v is not None})
        if args.gpu_model:
            gpu["models"] = _names(args.gpu_model)
        if args.healthy_only:
            gpu["healthy_only"] = True
    count = (ask.get("gpu_requests") or {}).get("count", 0)
    return int(count) if isinstance(count, int) else 0


def _network_and_topology(args: argparse.Namespace, ask: dict[str, Any]) -> None:
    if args.interconnect is not None:
        _section(ask, "network")["interconnect"] = args.interconnect
    if args.rdma_gbps is not None:
        _section(ask, "network")["min_gbps"] = args.rdma_gbps
    topology = {
        "keep_within": args.keep_within,
        "spread": args.spread,
        "min_nodes": args.min_machines,
        "max_nodes": args.max_machines,
    }
    if args.patience is not None:
        topology["patience_seconds"] = parse_duration(args.patience, "--patience")
    if any(v is not None for v in topology.values()):
        _section(ask, "topology").update({k: v for k, v in topology.items() if v is not None})


def _selection(args: argparse.Namespace, ask: dict[str, Any]) -> None:
    labels = parse_pairs(args.label, "--label")
    if args.pool is not None:
        labels[POOL] = args.pool
    if args.site is not None:
        labels[SITE] = args.site
    if labels:
        _section(ask, "node_selection", "match_labels").update(labels)
    if args.names:
        _section(ask, "node_selection")["names"] = _names(args.names)
    if args.mode is not None:
        _section(ask, "node_selection")["mode"] = args.mode


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of `run`: the guide's, then one per field of the ask."""
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
    add("--vendor", type=str.lower, choices=["nvidia", "amd", "intel"], help="any case")
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
    add("--interconnect", choices=["auto", "rdma", "infiniband", "nvlink"])
    add("--rdma-gbps", type=number, metavar="GBPS", help="RDMA port speed at least")
    add("--keep-within", choices=["node", "nvlink_domain", "fabric", "rack"])
    add("--spread", choices=["node", "rack", "fabric"], help="one worker per …")
    add("--patience", metavar="DURATION", help="wait this long for a better network (30m)")
    add("--label", action="append", default=[], metavar="KEY=VALUE", help="only machines with it")
    add("--names", action="append", default=[], metavar="NAME[,NAME]", help="only these machines")
    add("--mode", choices=["Any", "Exact", "All"], help="node_selection.mode")
    add("--site", help="one site (topology.astraeus.io/site)")
    add("--priority", type=int)
    add("--time-limit", metavar="DURATION", help="stop the run after this long (2h)")
    add("--env", action="append", default=[], metavar="KEY=VALUE", help="worker environment")
    add(
        "--drive",
        action="append",
        default=[],
        metavar="NAME=MOUNT_PATH",
        help="mount a drive (datasets=/data); runs go where it is, or near",
    )
    add("--dry-run", action="store_true", help="say where it would go now; submit nothing")
