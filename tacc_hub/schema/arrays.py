"""Arrays and sweeps (issue 20): an ``array`` spec's elements, and the spec of each.

``expand(spec)`` turns a TaskSpec carrying ``array`` into one TaskSpec per element: ``array`` removed,
``array_element`` set (index, size, parameters), and ``{name}`` placeholders in ``entrypoint.argv``
replaced by the element's values, each item staying one item (no shell ever sees them).

Invariants:
- Pure and deterministic: the same spec gives the same elements, in the same order, with the same digests.
- At most ``groups.MAX_ARRAY`` elements; a range, list or grid over that is refused before anything
  is built.
- Placeholders: ``{index}`` and each parameter's name; ``{{`` and ``}}`` are literal braces; an unknown
  ``{name}`` is an error naming the item (a typo is caught at submit, not at run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .groups import ArraySpec
    from .task import TaskSpec


def array_shorthand(data: object) -> object:
    """``"0-15%4"`` -> ``{range: "0-15", max_running: 4}``; a list -> ``{values: [...]}``; a mapping whose keys
    are not ArraySpec's -> ``{grid: {...}}``; anything else unchanged (pydantic then reports it)."""
    raise NotImplementedError


def check_array(array: ArraySpec) -> None:
    """Raise ValueError (naming the field) for a range that does not parse, or more than MAX_ARRAY elements."""
    raise NotImplementedError


def elements(array: ArraySpec) -> list[tuple[int, dict[str, object]]]:
    """(index, parameters) of every element, in order."""
    raise NotImplementedError


def expand(spec: TaskSpec) -> list[TaskSpec]:
    """One TaskSpec per element of ``spec.array`` (see the module docstring); SpecError naming the field
    (``entrypoint.argv[2]``) for an unknown placeholder."""
    raise NotImplementedError
