"""``Frozen``: the base of the scheduler's frozen dataclasses, so that ``copy`` and ``pickle`` work on them when
they are compiled (``native``): a frozen dataclass compiled with mypyc refuses the field-by-field restore that
``copy`` and ``pickle`` use by default, so they rebuild it through ``__init__`` instead (same fields, same
order; fields outside ``__init__`` are derived by it)."""

from __future__ import annotations

import dataclasses
from typing import Any


class Frozen:
    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        me: Any = self
        return type(self), tuple(getattr(self, f.name) for f in dataclasses.fields(me) if f.init)
