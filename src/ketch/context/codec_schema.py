"""The building blocks of the history codec's fast path: pydantic-core leaf validators and
``_Shape``, one SDK dataclass with the schema that validates its JSON form straight into an
instance (see ``history_codec`` for why).

Each shape checks, when it is built, that the SDK's dataclass still has exactly the fields,
annotations and defaults it was written against, and probes its ``__post_init__``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from collections.abc import Callable, Sequence
from typing import Any, get_args

from pydantic_core import core_schema as cs


# ---------------------------------------------------------------- leaf validators
# The core schemas pydantic builds for these annotations on the SDK's fields.

_STR = cs.str_schema()
_OPT_STR = cs.nullable_schema(_STR)
_INT = cs.int_schema()
_OPT_INT = cs.nullable_schema(_INT)
_FLOAT = cs.float_schema()
_ANY = cs.any_schema()
_JSON_OBJECT = cs.dict_schema(_STR, _ANY)
_OPT_JSON_OBJECT = cs.nullable_schema(_JSON_OBJECT)
_NONE = cs.none_schema()
_DATETIME = cs.datetime_schema(microseconds_precision="truncate")
_OPT_DATETIME = cs.nullable_schema(_DATETIME)


def _literal(alias: Any) -> cs.CoreSchema:
    """The literal schema of a ``Literal`` alias the SDK defines, with its values read from the SDK."""
    return cs.literal_schema(list(get_args(alias)))


_REQUIRED: Any = object()
"""Marks a field the JSON must carry: one without a default, or whose default is a factory (now,
a fresh id) that the adapter would call; a row without it goes to the adapter."""

_Field = tuple[str, str, Any, cs.CoreSchema]
"""A dataclass field as the SDK declares it: name, annotation, default, and the schema its JSON
value is validated with."""


class _Shape:
    """One SDK dataclass and the schema that validates its JSON form straight into an instance.

    ``probes`` gives sets of field values standing for what the schema lets through. When the
    class has a ``__post_init__`` and, run on instances made of each set, it changes no field and
    only adds the same attributes holding the same constants (a tool call's ``otel_metadata = None``, say), the
    schema sets those constants itself instead of calling the hook for every instance. Without
    a probe, or when the probe shows the hook doing anything else, the hook runs as under pydantic.
    """

    def __init__(self, cls: type, fields: Sequence[_Field], probes: _Probes | None = None) -> None:
        self.cls = cls
        self.names = [name for name, *_ in fields]
        self.enabled = _matches_sdk(cls, fields)
        self.defaults = tuple(
            (name, default)
            for name, _, default, _ in fields
            if default is not _REQUIRED and name not in ("kind", "part_kind")  # discriminators stay
        )
        constants = _post_init_constants(cls, probes) if hasattr(cls, "__post_init__") else {}
        post_init = constants is None
        self.post_init_skipped = hasattr(cls, "__post_init__") and not post_init
        kw_only = {f.name: f.kw_only for f in dataclasses.fields(cls)}
        # What pydantic builds for the class, less the SDK's hooks: the instance is made with
        # `__new__`, its `__dict__` set from the validated fields, then `__post_init__` is called
        # (or the constants it would add are set after the fields, in its order).
        self.schema = cs.dataclass_schema(
            cls,
            cs.dataclass_args_schema(
                cls.__name__,
                [
                    cs.dataclass_field(
                        name,
                        schema if default is _REQUIRED else cs.with_default_schema(schema, default=default),
                        kw_only=bool(kw_only.get(name)),
                        init=True,
                    )
                    for name, _, default, schema in fields
                ]
                + [
                    cs.dataclass_field(name, cs.with_default_schema(_ANY, default=value), init=False)
                    for name, value in (constants or {}).items()
                ],
                collect_init_only=post_init,
                extra_behavior="forbid",  # a key that is not a field (a legacy alias, say): adapter
            ),
            [*self.names, *(constants or {})],
            post_init=post_init,
            frozen=cls.__dataclass_params__.frozen,  # type: ignore[attr-defined]
            slots=False,
        )


def _probe_time() -> datetime:
    return datetime.now(timezone.utc)


_Probes = Callable[[], list[dict[str, Any]]]
"""Sets of field values for a class's instances, made when the shape is built."""

_CONSTANT_TYPES = (type(None), bool, int, float, str)


def _post_init_constants(cls: type, probes: _Probes | None) -> dict[str, Any] | None:
    """The attributes ``cls.__post_init__`` adds to instances built from each of ``probes``,
    when adding the same constants is all it does; ``None`` when it must run (no probes, or on
    one of them it raised, replaced or reordered a field, replaced an item of a list field, or
    added something else).
    """
    if probes is None:
        return None
    try:
        found = [_added_by_post_init(cls, values) for values in probes()]
    except Exception:
        return None
    if not found or any(added is None or list(added.items()) != list(found[0].items()) for added in found):
        return None
    return found[0]


def _added_by_post_init(cls: type, values: dict[str, Any]) -> dict[str, Any] | None:
    """What ``__post_init__`` adds to an instance of these values, if adding constants is all it does.

    The instance is made as pydantic-core makes it: ``__new__``, then the fields as ``__dict__``.
    """
    fields = {
        f.name: values[f.name]
        if f.name in values
        else f.default
        if f.default is not dataclasses.MISSING
        else f.default_factory()  # type: ignore[misc]
        for f in dataclasses.fields(cls)
    }
    instance = cls.__new__(cls)
    instance.__dict__.update(fields)
    items = {name: list(value) for name, value in fields.items() if type(value) is list}
    instance.__post_init__()  # type: ignore[attr-defined]
    after = instance.__dict__
    if list(after)[: len(fields)] != list(fields) or any(after[name] is not value for name, value in fields.items()):
        return None
    if any(len(after[name]) != len(old) or any(a is not b for a, b in zip(after[name], old)) for name, old in items.items()):
        return None
    added = {name: value for name, value in after.items() if name not in fields}
    if not all(type(value) in _CONSTANT_TYPES for value in added.values()):
        return None
    return added


def _matches_sdk(cls: type, fields: Sequence[_Field]) -> bool:
    """Whether ``cls`` still declares exactly these fields, annotations and defaults."""
    declared = dataclasses.fields(cls)
    if [(f.name, str(f.type)) for f in declared] != [(name, annotation) for name, annotation, _, _ in fields]:
        return False
    for f, (_, _, default, _) in zip(declared, fields):
        if default is _REQUIRED:
            if f.default is not dataclasses.MISSING:
                return False
        elif f.default_factory is not dataclasses.MISSING or type(f.default) is not type(default) or f.default != default:
            return False
    return True
