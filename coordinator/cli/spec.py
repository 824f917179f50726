"""`astra astraeus run` flags (or a spec file) → the run spec the API takes.

The spec is sent as written (the file's JSON with the flags laid over it): the coordinator
validates it with `RunSpec`, the model `astra validate` uses. Only when the coordinator refuses
it (or cannot be asked) does `astra` load the model, to say every problem of the spec in its own
words (`invalid_spec`): a valid run never pays for pydantic and the models."""

from __future__ import annotations

from astraeus.shared.labels import POOL, SITE

from .errors import CliError, Exit
from .flags import parse_duration, parse_pairs, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def _names(items: list[str]) -> list[str]:
    return [name.strip() for item in items for name in item.split(",") if name.strip()]


def read_spec_file(path: str) -> dict[str, Any]:
    """A JSON run spec, as the API takes it."""
    import json

    try:
        with open(path) as file:
            data = json.loads(file.read())
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


def build_spec(args: argparse.Namespace, workspace: str | None) -> dict[str, Any]:
    """The file's spec (if any) with every flag given laid over it, as the API takes it; what
    the flags themselves say wrong (a size, a duration, no name, no command) is refused here,
    the rest by the coordinator (`invalid_spec` says it as before)."""
    spec = read_spec_file(args.file) if args.file else {}
    for key, value in (
        ("name", args.name),
        ("image", args.image),
        ("priority", args.priority),
        ("retries", args.retries),
        ("retry_on_failure", args.retry_on_failure),
        ("preemptible", args.preemptible),
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
    return spec


def invalid_spec(spec: dict[str, Any]) -> CliError | None:
    """Every problem of `spec` as `RunSpec` finds it, one field a line (exit 2); None for a valid
    spec. Asked once the coordinator has refused the spec or could not be asked, so a user who
    mistyped a field hears about the field, not about the network."""
    from pydantic import ValidationError  # only for a refused spec: see the module's docstring

    from astraeus.shared import RunSpec, describe

    try:
        RunSpec.model_validate(spec)
    except ValidationError as exc:
        return CliError(f"the run is not valid:\n{describe(RunSpec, exc)}", Exit.USAGE)
    return None


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
