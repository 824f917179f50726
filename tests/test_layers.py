"""The layers' import rules, read from the source with `ast` (nothing is imported).

`shared/` is the contract both programs build on; the agent and the coordinator never import
each other (the demo alone, which runs a whole cluster in one process, starts agents); the
placement engine is pure (no store, no HTTP, no clock); `astra` reads the API through the shared
models and never loads the server; test-only code (`coordinator/testing/`) is imported by tests
and benchmarks alone. What crosses a process boundary is a model of `shared/`, defined there once:
the store keeps no request body, and no program defines a wire model of its own."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("agent", "coordinator", "shared")
CLOCK_CALLS = frozenset({"now", "utcnow", "today", "time", "monotonic", "perf_counter"})

ENGINE = ("astraeus.coordinator.placement",)
CLI = ("astraeus.coordinator.cli",)
STORE = ("astraeus.coordinator.store",)
TESTING = ("astraeus.coordinator.testing",)
OUTSIDE = ("scripts", "examples")
"""Folders outside the packages that ship or run beside them: not tests, not benchmarks."""
PYDANTIC_BASE = frozenset({"pydantic.BaseModel", "pydantic.main.BaseModel"})
WIRE_BASES = frozenset({"astraeus.shared.base.UserModel", "astraeus.shared.base.WireModel"})


@dataclass(frozen=True)
class Edge:
    """`module` (the file `path`) imports `target` at `line`."""

    module: str
    path: str
    line: int
    target: str

    def __str__(self) -> str:
        return f"{self.module} ({self.path}:{self.line}) imports {self.target}"


def _module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["astraeus", *parts])


def _targets(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        # `from pkg import sub` may name a submodule: count both, so a rule on either holds.
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


@functools.cache
def edges(root: Path = ROOT, folders: tuple[str, ...] = FOLDERS) -> tuple[Edge, ...]:
    """Every import in `folders` under `root` (the three packages by default), with its line.
    A module outside the packages is named as if it were one (`astraeus.scripts.release`)."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            module = _module_of(path, root)
            where = str(path.relative_to(root))
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                for target in _targets(node, module, path.name == "__init__.py"):
                    found.append(Edge(module, where, getattr(node, "lineno", 0), target))
    return tuple(found)


def clock_reads(root: Path, package: str) -> list[str]:
    """Calls such as `datetime.now()` or `time.monotonic()` in `package`'s modules."""
    found = []
    folder = root / package.removeprefix("astraeus.").replace(".", "/")
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in CLOCK_CALLS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("datetime", "date", "time")
            ):
                call = f"{node.func.value.id}.{node.func.attr}()"
                where = f"{path.relative_to(root)}:{node.lineno}"
                found.append(f"{_module_of(path, root)} ({where}) reads a clock: {call}")
    return found


def _within(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


def violations(
    importers: tuple[str, ...],
    forbidden: tuple[str, ...],
    *,
    allowed: tuple[str, ...] = (),
    root: Path = ROOT,
) -> list[str]:
    """Each import from a module under `importers` (but not `allowed`) of one under
    `forbidden`, as a sentence naming the module, the file and the line."""
    return sorted(
        {
            str(edge)
            for edge in edges(root)
            if _within(edge.module, importers)
            and not _within(edge.module, allowed)
            and _within(edge.target, forbidden)
        }
    )


def test_the_engine_imports_no_store_no_http_and_no_clock() -> None:
    """The placement engine imports neither the store, aiohttp, `time` nor the coordinator's
    clock, and calls no `datetime.now()`: `now` is an argument."""
    clocks = ("time", "astraeus.shared.clock")
    found = violations(ENGINE, (*STORE, "aiohttp", *clocks))
    found += clock_reads(ROOT, ENGINE[0])
    assert found == [], "the engine must stay pure:\n" + "\n".join(found)


def test_shared_imports_neither_program() -> None:
    """`shared/` imports neither the agent nor the coordinator."""
    found = violations(("astraeus.shared",), ("astraeus.agent", "astraeus.coordinator"))
    assert found == [], "shared/ is below both programs:\n" + "\n".join(found)


def test_the_agent_does_not_import_the_coordinator() -> None:
    """No agent module imports the coordinator."""
    found = violations(("astraeus.agent",), ("astraeus.coordinator",))
    assert found == [], "the agent must not import the coordinator:\n" + "\n".join(found)


def test_the_coordinator_does_not_import_the_agent() -> None:
    """No coordinator module imports the agent, but the demo, which starts fake agents."""
    found = violations(
        ("astraeus.coordinator",), ("astraeus.agent",), allowed=("astraeus.coordinator.demo",)
    )
    assert found == [], "the coordinator must not import the agent:\n" + "\n".join(found)


def test_the_store_imports_no_layer_above_it() -> None:
    """The store imports neither the scheduler (whose `QueueItem`, `Placed` and `Waiting` it
    writes through narrow protocols), the API, the CLI, the service, the report service nor the
    machines' records: it stores."""
    above = (
        "astraeus.coordinator.scheduler",
        "astraeus.coordinator.api",
        *CLI,
        "astraeus.coordinator.service",
        "astraeus.coordinator.reports",
        "astraeus.coordinator.machine_records",
    )
    found = violations(STORE, above)
    assert found == [], "the store must not import the layers above it:\n" + "\n".join(found)


def test_the_store_imports_no_domain_rule() -> None:
    """The store writes what `coordinator/domain/` decides and imports none of it: the rules are
    applied above it (`coordinator/reports.py`)."""
    found = violations(STORE, ("astraeus.coordinator.domain",))
    assert found == [], "the store must not decide what a task may do:\n" + "\n".join(found)


def test_the_domain_imports_no_store_no_http_and_no_clock() -> None:
    """The domain's rules (`coordinator/domain/`: the task state machine, the rendezvous)
    import neither the store, sqlite3, aiohttp, the scheduler, the API nor a clock."""
    domain = ("astraeus.coordinator.domain",)
    forbidden = (
        *STORE,
        "sqlite3",
        "aiohttp",
        "astraeus.coordinator.scheduler",
        "astraeus.coordinator.api",
        "time",
        "astraeus.shared.clock",
    )
    found = violations(domain, forbidden) + clock_reads(ROOT, domain[0])
    assert found == [], "the domain must stay pure:\n" + "\n".join(found)


def test_one_place_builds_a_scanner() -> None:
    """Every program that scans a machine (the agent's commands, the demo's fake agents) builds
    its `Scanner` through `scanner_for`, so none can drift from the settings (`dev_root`, say)."""
    found = [
        str(path.relative_to(ROOT))
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Scanner"
    ]
    assert found == ["agent/inventory.py"]


def test_the_schedulers_types_live_in_the_scheduler() -> None:
    """`QueueItem`, `Placed`, `Waiting` and `Reshaped` are defined in `scheduler/items.py`,
    and no store module defines a class of those names again."""
    names = ("Placed", "QueueItem", "Reshaped", "Waiting")
    owners = sorted(
        (node.name, str(path.relative_to(ROOT)))
        for folder in ("coordinator/scheduler", "coordinator/store")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef) and node.name in names
    )
    assert owners == [(name, "coordinator/scheduler/items.py") for name in names]


def test_only_tests_and_benchmarks_import_test_only_code() -> None:
    """No module of the agent, the coordinator (but the testing package itself) or `shared/`,
    and no script or example, imports `coordinator/testing/`: the programs never load fakes."""
    packages = ("astraeus.agent", "astraeus.coordinator", "astraeus.shared")
    found = violations(packages, TESTING, allowed=TESTING)
    outside = tuple(f"astraeus.{folder}" for folder in OUTSIDE)
    found += sorted(
        {
            str(edge)
            for edge in edges(ROOT, OUTSIDE)
            if _within(edge.module, outside) and _within(edge.target, TESTING)
        }
    )
    assert found == [], "test-only code is for tests and benchmarks:\n" + "\n".join(found)


def test_a_planted_import_of_test_only_code_is_named(tmp_path: Path) -> None:
    """A scheduler module importing the fakes is named with its line; the testing package
    importing the engine is not a finding."""
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "coordinator" / "scheduler").mkdir()
    (tmp_path / "coordinator" / "scheduler" / "bad.py").write_text(
        "import json\nfrom ..testing.fake_cluster import machine\n"
    )
    (tmp_path / "coordinator" / "testing").mkdir()
    (tmp_path / "coordinator" / "testing" / "fake_cluster.py").write_text(
        "from astraeus.coordinator.placement import ClusterSnapshot\n"
    )
    packages = ("astraeus.agent", "astraeus.coordinator", "astraeus.shared")
    assert violations(packages, TESTING, allowed=TESTING, root=tmp_path) == [
        "astraeus.coordinator.scheduler.bad (coordinator/scheduler/bad.py:2) imports "
        "astraeus.coordinator.testing.fake_cluster",
        "astraeus.coordinator.scheduler.bad (coordinator/scheduler/bad.py:2) imports "
        "astraeus.coordinator.testing.fake_cluster.machine",
    ]


def test_the_cli_does_not_import_the_server() -> None:
    """`astra` imports neither the store, the API app, the scheduler nor the engine."""
    server = (*STORE, "astraeus.coordinator.api", "astraeus.coordinator.scheduler", *ENGINE)
    found = violations(CLI, server)
    assert found == [], "astra must not load the server:\n" + "\n".join(found)


@dataclass(frozen=True)
class ClassDef:
    """A class `name` defined in `module` (file `path`, `line`), its bases as qualified names."""

    name: str
    module: str
    path: str
    line: int
    bases: tuple[str, ...]

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.name}"

    def __str__(self) -> str:
        return f"{self.name} ({self.path}:{self.line})"


def _bound_names(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """What each name a module binds by import or class statement stands for, qualified."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = next(_targets(node, module, is_package))
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    bound[head] = head
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bound[node.name] = f"{module}.{node.name}"
    return bound


def _qualified(expr: ast.expr, bound: dict[str, str], module: str) -> str:
    """`BaseModel` or `pydantic.BaseModel` as the qualified name it stands for in `module`."""
    if isinstance(expr, ast.Subscript):  # Generic[T], RootModel[X]
        return _qualified(expr.value, bound, module)
    text = ast.unparse(expr)
    head, _, rest = text.partition(".")
    found = bound.get(head, f"{module}.{head}")
    return f"{found}.{rest}" if rest else found


@functools.cache
def class_defs(root: Path = ROOT) -> tuple[ClassDef, ...]:
    """Every class in the three packages under `root`, with its bases resolved."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            module = _module_of(path, root)
            tree = ast.parse(path.read_text(), str(path))
            bound = _bound_names(tree, module, path.name == "__init__.py")
            where = str(path.relative_to(root))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = tuple(_qualified(base, bound, module) for base in node.bases)
                    found.append(ClassDef(node.name, module, where, node.lineno, bases))
    return tuple(found)


def pydantic_models(root: Path = ROOT) -> dict[ClassDef, bool]:
    """Each pydantic model of the three packages → whether it is a wire model (a subclass of
    `shared/base.py`'s `UserModel` or `WireModel`, or one of those two). A base imported
    through a package (`from astraeus.shared import Run`) is found in the package's modules."""
    defined = {c.qualified: c for c in class_defs(root)}

    def resolve(name: str) -> ClassDef | None:
        if name in defined:
            return defined[name]
        package, _, short = name.rpartition(".")
        inside = [
            c for c in defined.values() if c.name == short and c.module.startswith(f"{package}.")
        ]
        return inside[0] if len(inside) == 1 else None

    @functools.cache
    def roots(name: str) -> frozenset[str]:
        if name in PYDANTIC_BASE:
            return frozenset({"pydantic"})
        found = resolve(name)
        if found is None:
            return frozenset()
        own = {"wire"} if found.qualified in WIRE_BASES else set()
        return frozenset(own).union(*(roots(base) for base in found.bases))

    return {
        c: "wire" in roots(c.qualified)
        for c in defined.values()
        if "pydantic" in roots(c.qualified)
    }


def stored_models(root: Path = ROOT) -> list[str]:
    """Pydantic models defined in the store, which should be none."""
    return sorted(str(c) for c in pydantic_models(root) if c.path.startswith("coordinator/store/"))


def wire_model_problems(root: Path = ROOT) -> list[str]:
    """Wire models defined outside `shared/`, and pydantic model names defined twice."""
    models = pydantic_models(root)
    found = [
        f"{c} is a wire model outside shared/"
        for c, wire in models.items()
        if wire and not c.path.startswith("shared/")
    ]
    by_name: dict[str, list[str]] = {}
    for c in models:
        by_name.setdefault(c.name, []).append(str(c))
    found += [
        f"{name} is defined {len(places)} times: {', '.join(places)}"
        for name, places in by_name.items()
        if len(places) > 1
    ]
    return sorted(found)


def test_the_store_holds_no_request_bodies() -> None:
    """No class in `coordinator/store/` is a pydantic model: a request body is `shared/`'s, and
    the store's methods take it (or plain values) from the API."""
    found = stored_models()
    assert found == [], "the store defines pydantic models:\n" + "\n".join(found)


def test_one_definition_per_wire_model() -> None:
    """Every wire model (a subclass of `UserModel` or `WireModel`: what a user, an agent or a
    client sends or reads) is defined in `shared/`, and no two pydantic models of the three
    packages share a name, so `invalid WorkspaceBody` or an OpenAPI schema name means one class.

    A program may keep pydantic models of its own where nothing crosses a process boundary: the
    agent's state file (`agent/runtime/state.py`, read back by the same agent) and a fake
    machine's description (`agent/fake/`). Those subclass pydantic's `BaseModel` directly, never
    `UserModel` or `WireModel`, and their names are unique too."""
    found = wire_model_problems()
    assert found == [], "wire models must be defined once, in shared/:\n" + "\n".join(found)


def test_the_models_rule_reads_what_it_should() -> None:
    """The rule above sees the shared models, the agent's own models, and no dataclass."""
    models = {c.name: wire for c, wire in pydantic_models().items()}
    assert models["WorkspaceBody"] is True
    assert models["ClusterMap"] is True
    assert models["TaskRecord"] is False
    assert "Edge" not in models


def test_a_planted_request_body_in_the_store_is_named(tmp_path: Path) -> None:
    """A store module defining a `UserModel`, or an API module a `WireModel` that `shared/`
    also defines, is named with its file and line."""
    for folder in ("agent", "shared", "coordinator/store", "coordinator/api"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "shared" / "base.py").write_text(
        "from pydantic import BaseModel\n\n\nclass UserModel(BaseModel):\n    pass\n\n\n"
        "class WireModel(BaseModel):\n    pass\n"
    )
    (tmp_path / "shared" / "views.py").write_text(
        "from .base import WireModel\n\n\nclass Answer(WireModel):\n    pass\n"
    )
    (tmp_path / "coordinator" / "store" / "bad.py").write_text(
        "from astraeus.shared.base import UserModel\n\n\nclass Spec(UserModel):\n    pass\n"
    )
    (tmp_path / "coordinator" / "api" / "bad.py").write_text(
        "from astraeus.shared import base\n\n\nclass Answer(base.WireModel):\n    pass\n"
    )
    assert stored_models(tmp_path) == ["Spec (coordinator/store/bad.py:4)"]
    assert wire_model_problems(tmp_path) == [
        "Answer (coordinator/api/bad.py:4) is a wire model outside shared/",
        "Answer is defined 2 times: Answer (coordinator/api/bad.py:4), Answer (shared/views.py:4)",
        "Spec (coordinator/store/bad.py:4) is a wire model outside shared/",
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "from ..store import Store\n",
            "astraeus.coordinator.placement.bad (coordinator/placement/bad.py:1) imports "
            "astraeus.coordinator.store",
            id="relative",
        ),
        pytest.param(
            "def f():\n    import aiohttp\n",
            "astraeus.coordinator.placement.bad (coordinator/placement/bad.py:2) imports aiohttp",
            id="inside-a-function",
        ),
    ],
)
def test_a_planted_import_is_named_with_its_line(
    tmp_path: Path, source: str, expected: str
) -> None:
    """The walker finds a forbidden import wherever it is written, and names file and line."""
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "coordinator" / "placement").mkdir()
    (tmp_path / "coordinator" / "placement" / "bad.py").write_text(source)
    assert expected in violations(ENGINE, (*STORE, "aiohttp"), root=tmp_path)


def test_a_planted_clock_read_is_found(tmp_path: Path) -> None:
    """`datetime.now()` in the engine is reported with its file and line."""
    (tmp_path / "coordinator" / "placement").mkdir(parents=True)
    (tmp_path / "coordinator" / "placement" / "bad.py").write_text(
        "from datetime import datetime\n\nstamp = datetime.now()\n"
    )
    assert clock_reads(tmp_path, ENGINE[0]) == [
        "astraeus.coordinator.placement.bad (coordinator/placement/bad.py:3) reads a clock: "
        "datetime.now()"
    ]


def test_one_clock_type() -> None:
    """Every `clock` parameter or attribute is a `Clock` (shared/clock.py), never a bare
    callable returning a datetime or a float."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
                    name = node.arg if isinstance(node, ast.arg) else ast.unparse(node.target)
                    kind = ast.unparse(node.annotation)
                    if "clock" in name.lower() and "Callable" in kind:
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        found.append(f"{where}: {name}: {kind}")
    assert found == [], "a clock is a Clock:\n" + "\n".join(found)
