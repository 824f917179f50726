"""A machine's report in the compact form stored beside its JSON, read back without validation.

Every stored report was checked once, on the wire (`MachineReport` in `api/agents.py`); parsing
it again with pydantic at each start, in the service and again in the pass worker, was most of
a start (58 % at 50,000 machines). So the coordinator stores, beside the report's JSON, the
same report as it wrote it (defaults left out) with its fingerprint (`machines.compact`,
migration 17), and reads that back by assignment, not validation (`decode`): the JSON's values
become the model's fields as they are, converted only where JSON has no type of its own
(enums, datetimes, nested models). A row without it (stored before migration 17) or whose
form this coordinator does not know is parsed in full, as before; the form is trusted only
because only `encode`, given a validated report, writes it.

Alike parts of alike machines share one object (a healthy GPU's health, a fabric's ports,
drives, the backend; strings interned), as `placement/kinds.py` shares kinds: 50,000 machines
of a few models hold a few of each, not 50,000. Shared parts must never be changed in place;
nothing does (a changed report is a new one, `model_copy`)."""

from __future__ import annotations

import json
import sys
import types
import typing
import weakref
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, Final, NamedTuple, TypeVar

from pydantic import BaseModel

from astraeus.shared import MachineReport
from astraeus.shared.report import (
    BackendStatus,
    DriveInfo,
    GpuHealth,
    GpuInfo,
    HealthSignal,
    ImexStatus,
    NetworkInterface,
    RdmaPort,
)

FORM: Final = 1
"""The compact form's version: a stored form of another version is not read (the report's
JSON is parsed instead), so changing the form needs no migration of the rows."""

SHARED: Final = frozenset({GpuHealth, HealthSignal, RdmaPort, DriveInfo, BackendStatus, ImexStatus})
"""The parts alike machines share one object of: the ones without a per-machine identity (a
GPU has its UUID, an interface its addresses)."""

UNIQUE: Final = frozenset(
    {
        (GpuInfo, "uuid"),
        (MachineReport, "name"),
        (MachineReport, "hostname"),
        (MachineReport, "advertise_address"),
        (NetworkInterface, "mac"),
    }
)
"""String fields no two machines share: kept as JSON read them, not interned. Interning shares
a string alike machines repeat (a GPU model, a label); a string seen once only adds an entry to
the interpreter's table of interned strings (400,000 GPU UUIDs at 50,000 machines: ~20 MB in
each process, for nothing)."""

Model = TypeVar("Model", bound=BaseModel)
Convert = Callable[[Any], Any]


class FormError(ValueError):
    """A stored compact form this coordinator cannot read: its report is parsed in full."""


PREFIX: Final = f'{{"form":{FORM},'
"""How every form `encode` writes begins: a store read can leave out the JSON of such rows."""


def encode(report: MachineReport, fingerprint: str) -> str:
    """The compact form of a validated `report`, with its fingerprint."""
    printed = report.model_dump_json(exclude_defaults=True)
    return f'{{"form":{FORM},"fingerprint":{json.dumps(fingerprint)},"report":{printed}}}'


def decode(text: str) -> tuple[MachineReport, str]:
    """The report and fingerprint `encode` stored; `FormError` when `text` is not a form this
    coordinator writes (another version, or not one at all)."""
    try:
        stored = json.loads(text)
        if not isinstance(stored, dict) or stored.get("form") != FORM:
            raise FormError(f"not compact form {FORM}")
        return build(MachineReport, stored["report"]), str(stored["fingerprint"])
    except FormError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise FormError(f"compact form {FORM} unreadable: {error}") from error


class _Plan(NamedTuple):
    """How one model is built from its compact form."""

    template: dict[str, Any]
    """Every field, in the model's order, with its default (a shared part's one object);
    copied for each instance, then the stored fields written over it."""
    converters: dict[str, Convert | None]
    """How each field's JSON value becomes the field's (None: as it is)."""
    factories: tuple[tuple[str, Callable[[], Any]], ...]
    """Fields whose default is made for each instance (an empty list) when not stored."""
    required: frozenset[str]


_PLANS: dict[type[BaseModel], _Plan] = {}
_FIELDS_SET: dict[type[BaseModel], set[str]] = {}
"""One set of field names per model, shared by the instances built here (pydantic keeps which
fields were given; here every field is, and nothing reads it but `exclude_unset`)."""
_SHARED: weakref.WeakValueDictionary[tuple[object, ...], BaseModel] = weakref.WeakValueDictionary()
"""The shared parts in use, by model and value; a part no machine holds any more is dropped."""


def build(model: type[Model], value: dict[str, Any]) -> Model:
    """`model` with `value`'s fields, assigned as they are (see the module)."""
    key: tuple[object, ...] | None = None
    if model in SHARED:
        key = (model, _frozen(value))
        found = _SHARED.get(key)
        if found is not None:
            return typing.cast(Model, found)
    plan = _plan(model)
    if not plan.required <= value.keys():
        raise FormError(f"{model.__name__}: {sorted(plan.required - value.keys())} missing")
    fields = plan.template.copy()
    for name, factory in plan.factories:
        if name not in value:
            fields[name] = factory()
    converters = plan.converters
    for name, raw in value.items():
        convert = converters[name]  # a field the model has not: KeyError, not this form
        fields[name] = raw if convert is None or raw is None else convert(raw)
    built = _assigned(model, fields)
    if key is not None:
        _SHARED[key] = built
    return built


def _assigned(model: type[Model], fields: dict[str, Any]) -> Model:
    """What `model.model_construct` makes of every field given, without its loop over them
    again (a report's GPUs are 8 to 112 models).

    The fields are set one by one, not given as the instance's `__dict__`: so CPython keeps
    them as the instance's inline values, whose keys all instances of the model share (`_prime`),
    ~200 bytes a GPU instead of ~550 with a dict of its own (400,000 GPUs at 50,000 machines:
    ~140 MB in each process). Reading `__dict__` (pydantic's `==`, a dump) makes a small dict
    over the same values; nothing else changes: the instance is the same model with the same
    fields either way."""
    built = model.__new__(model)
    assign = object.__setattr__
    for name, value in fields.items():
        assign(built, name, value)
    assign(built, "__pydantic_fields_set__", _FIELDS_SET[model])
    assign(built, "__pydantic_extra__", None)
    assign(built, "__pydantic_private__", None)
    return built


def _prime(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    """Teach `model` (and the models inside it) its fields' names as the keys its instances
    share, before anything else makes one. CPython 3.11 shares an instance's attribute keys with
    its class only while the class's shared keys have room; each instance made without attributes
    (pydantic's validation makes them so, then gives each a `__dict__`) shrinks that room, and
    after ~30 of them none is left and every later instance gets a dict of its own. Once the
    names are in the shared keys they stay, whatever is made after. Run at import, so the
    coordinator's processes (which import this before they read a report) are primed in time;
    where it comes too late, instances take a dict each, as before: more memory, same answers."""
    if model in seen:
        return
    seen.add(model)
    instance = model.__new__(model)
    for name in model.model_fields:
        object.__setattr__(instance, name, None)
    for info in model.model_fields.values():
        for part in _models_in(info.annotation):
            _prime(part, seen)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation names (in lists, unions, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [part for arg in typing.get_args(annotation) for part in _models_in(arg)]


def _plan(model: type[BaseModel]) -> _Plan:
    plan = _PLANS.get(model)
    if plan is not None:
        return plan
    plain = model.model_config.get("extra") != "allow" and not model.__pydantic_post_init__
    if not plain or model.__pydantic_root_model__ or model.__private_attributes__:
        raise FormError(f"{model.__name__} is not built by assignment")
    template: dict[str, Any] = {}
    factories = []
    required = []
    for name, info in model.model_fields.items():
        template[name] = None
        factory = info.default_factory
        if factory is not None:
            made = factory()  # type: ignore[call-arg]  # a factory of no arguments
            if isinstance(made, BaseModel) and type(made) in SHARED:
                template[name] = build(
                    type(made), made.model_dump(mode="json", exclude_defaults=True)
                )
            else:
                factories.append((name, typing.cast(Callable[[], Any], factory)))
        elif info.is_required():
            required.append(name)
        else:
            template[name] = info.default
    converters = {
        name: None if (model, name) in UNIQUE else _converter(info.annotation)
        for name, info in model.model_fields.items()
    }
    _FIELDS_SET[model] = set(model.model_fields)
    plan = _PLANS[model] = _Plan(template, converters, tuple(factories), frozenset(required))
    return plan


def _converter(annotation: Any) -> Convert | None:
    """How a JSON value becomes a field of `annotation`'s type (None: as it is)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _converter(args[0])
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in args if arg is not type(None)]
        if len(inner) != 1:
            raise FormError(f"no compact reading of {annotation!r}")
        return _converter(inner[0])  # None is kept as it is (`build`)
    if origin is list:
        if isinstance(args[0], type) and issubclass(args[0], BaseModel):
            part = args[0]  # a report's GPUs, ports, drives: one call each, not two
            return lambda value: [build(part, one) for one in value]
        each = _converter(args[0])
        if each is None:
            return None  # JSON's list, as it is
        return lambda value: [each(one) for one in value]
    if origin is dict:
        key, item = _converter(args[0]) or _same, _converter(args[1]) or _same
        return lambda value: {key(k): item(v) for k, v in value.items()}
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return lambda value: build(annotation, value)
        if issubclass(annotation, Enum):
            return {member.value: member for member in annotation}.__getitem__
        if annotation is datetime:
            return datetime.fromisoformat
        if annotation is str:
            return sys.intern
        if annotation is float:
            return float
        if annotation in (int, bool):
            return None
    raise FormError(f"no compact reading of {annotation!r}")


def _same(value: Any) -> Any:
    return value


def _frozen(value: Any) -> object:
    """`value` (JSON) as a key: dicts and lists made tuples."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(one) for one in value)
    return value


_prime(MachineReport, set())
