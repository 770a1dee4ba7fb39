"""Errors raised while reading a task description.

Invariant: every error names the field it is about (a dotted path such as
``resources.gpus_per_node``, ``job.general[2]`` or ``environment.variables.FOO``)
apart from the message, so that an API handler can answer 422 with
``{"field": ..., "message": ...}`` and a CLI can print ``field: message``
without parsing text. Paths name fields as the user writes them: pydantic's
internal location parts (union member labels such as ``git`` or ``int``,
``[key]``, ``function-after[...]``) are left out.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


class SpecError(ValueError):
    """A task description is malformed; ``errors`` holds (field, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in errors))

    @classmethod
    def one(cls, field: str, message: str) -> SpecError:
        return cls([(field, message)])

    @classmethod
    def from_validation(
        cls, exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
    ) -> SpecError:
        """``model`` (the model that was validated) lets union member labels be told from field names."""
        out: list[tuple[str, str]] = []
        for err in exc.errors(include_url=False):
            loc = _loc_to_path(err.get("loc", ()), model)
            if prefix:
                loc = f"{prefix}.{loc}" if loc else prefix
            msg = err.get("msg", "invalid value")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            if err.get("type") == "extra_forbidden":
                msg = "unknown field"
            if (loc, msg) not in out:
                out.append((loc, msg))
        return cls(out)

    def as_json(self) -> list[dict[str, str]]:
        return [{"field": f, "message": m} for f, m in self.errors]


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` (pydantic adds no location part for either)."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if _is_union(tp):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return tp


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _member(tp: Any, label: str) -> Any:
    """The union member that pydantic labelled ``label`` (a discriminator value or a class name)."""
    for m in map(_unwrap, get_args(tp)):
        if not _is_model(m):
            continue
        if m.__name__ == label:
            return m
        for f in m.model_fields.values():
            if get_origin(f.annotation) is Literal and label in get_args(f.annotation):
                return m
    return None


def _child(tp: Any, item: int | str) -> Any:
    if _is_model(tp):
        for name, f in tp.model_fields.items():
            if item in (name, f.alias):
                return f.annotation
        return None
    origin, args = get_origin(tp), get_args(tp)
    if origin in (list, tuple, set, frozenset) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _loc_to_path(loc: tuple[int | str, ...], model: type[BaseModel] | None = None) -> str:
    parts: list[str] = []
    tp: Any = model
    for item in loc:
        if isinstance(item, str) and (item == "[key]" or item.startswith(("function-", "tagged-union"))):
            continue
        tp = _unwrap(tp)
        if _is_union(tp) and isinstance(item, str):
            tp = _member(tp, item)  # a union member's label, not a field
            continue
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
        tp = _child(tp, item) if tp is not None else None
    return "".join(parts)
