"""Arrays and sweeps (issue 20): an ``array`` spec's elements, and the spec of each.

``expand(spec)`` turns a TaskSpec carrying ``array`` into one TaskSpec per element: ``array`` removed,
``array_element`` set (index, size, parameters), and ``{name}`` placeholders in ``entrypoint.argv``
replaced by the element's values, each item staying one item (no shell ever sees them).

Invariants:
- Pure and deterministic: the same spec gives the same elements, in the same order, with the same digests.
- At most ``groups.MAX_ARRAY`` elements; a range, list or grid over that is refused before anything
  is built (a range and a grid are counted arithmetically).
- Placeholders: ``{index}`` and each parameter's name; ``{{`` and ``}}`` are literal braces; an unknown
  ``{name}`` is an error naming the item (a typo is caught at submit, not at run). A value is put in
  once: a ``{x}`` inside a value stays as written. Braces around anything that is not an identifier
  (``{}``, ``{"a": 1}``) are left alone.
- A shell entrypoint is never substituted (a value would then be shell text): a known ``{name}`` in a
  shell line is an error telling to use ``"$TACC_PARAM_NAME"``.
- Fast: elements are made with ``model_copy`` from the validated array spec (its values were validated
  once); only each ``ArrayElement`` is validated (1,000 elements in a few milliseconds).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import SpecError
from .groups import MAX_ARRAY, ArrayElement

if TYPE_CHECKING:
    from .groups import ArraySpec
    from .task import TaskSpec

MAX_INDEX = 10**9
"""Largest index a range may name (``ArrayElement.index``'s bound)."""

_FIELDS = ("range", "values", "param", "grid", "max_running")
_PIECE_RE = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,10})(?::([0-9]{1,10}))?)?")
_PERCENT_RE = re.compile(r"(.*)%([0-9]{1,6})", re.DOTALL)
# ``{{``, ``}}``, or ``{identifier}``; anything else with braces is literal text.
_PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
# In a shell line: ``{name}`` not preceded by ``$`` (``${HOME}`` is the shell's own).
_SHELL_PLACEHOLDER_RE = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MAX_ITEM = 65536  # entrypoint items are Text (at most 65,536 characters)


def array_shorthand(data: object) -> object:
    """``"0-15%4"`` -> ``{range: "0-15", max_running: 4}``; a list -> ``{values: [...]}``; a mapping whose keys
    are not ArraySpec's -> ``{grid: {...}}`` (with ``max_running`` kept if given beside the names); a mapping
    whose ``range`` ends in ``%N`` (and gives no ``max_running``) -> the same split; anything else unchanged
    (pydantic then reports it)."""
    if isinstance(data, str):
        return _split_percent({"range": data})
    if isinstance(data, list | tuple):
        return {"values": list(data)}
    if isinstance(data, dict):
        keys = [k for k in data if k not in _FIELDS]
        if not keys:
            if isinstance(data.get("range"), str) and data.get("max_running") is None:
                return _split_percent(dict(data))
            return data
        if all(k == "max_running" or k not in _FIELDS for k in data):
            out: dict[str, object] = {"grid": {k: data[k] for k in keys}}
            if "max_running" in data:
                out["max_running"] = data["max_running"]
            return out
    return data


def _split_percent(data: dict[str, object]) -> dict[str, object]:
    text = data["range"]
    assert isinstance(text, str)
    m = _PERCENT_RE.fullmatch(text)
    if m is not None:
        data["range"], data["max_running"] = m.group(1), int(m.group(2))
    return data


def parse_range(text: str) -> list[tuple[int, int, int]]:
    """Slurm ``--array`` syntax (without ``%``) -> (first, last, step) pieces; ValueError (for array.range).

    ``N``, ``A-B`` and ``A-B:S`` separated by commas; no negative numbers, last >= first, step >= 1, every
    number at most 10**9. Nothing is built: the pieces are counted with ``range_size``.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("is empty; write it as Slurm's --array: 0-15, 0-15:2 or 1,3,8-10")
    pieces: list[tuple[int, int, int]] = []
    for raw in text.split(","):
        part = raw.strip()
        m = _PIECE_RE.fullmatch(part)
        if m is None:
            raise ValueError(f"{part[:40]!r} is not N, A-B or A-B:S (Slurm --array syntax: 0-15, "
                             "0-15:2, 1,3,8-10; no negative numbers; '%N' only at the end of the shorthand)")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        step = int(m.group(3)) if m.group(3) is not None else 1
        if last < first:
            raise ValueError(f"{part!r} ends before it starts")
        if step < 1:
            raise ValueError(f"{part!r} has a step of 0")
        if last > MAX_INDEX:
            raise ValueError(f"{part!r} names an index over {MAX_INDEX}")
        pieces.append((first, last, step))
    return pieces


def range_size(pieces: list[tuple[int, int, int]]) -> int:
    """How many numbers the pieces name (duplicates counted), without building them."""
    return sum((last - first) // step + 1 for first, last, step in pieces)


def size(array: ArraySpec) -> int:
    """How many elements ``array`` has, counted without building them."""
    if array.range is not None:
        return range_size(parse_range(array.range))
    if array.values is not None:
        return len(array.values)
    assert array.grid is not None
    return math.prod(len(v) for v in array.grid.values())


def check_array(array: ArraySpec) -> None:
    """Raise ValueError (naming the field) for a range that does not parse, an index named twice, a grid
    parameter without values or two names that are one variable, or more than MAX_ARRAY elements."""
    if array.param != "value" and array.values is None:
        raise ValueError("array.param names the parameter of array.values; give it only with values")
    if array.range is not None:
        pieces = parse_range(array.range)
        n = range_size(pieces)
        if n > MAX_ARRAY:
            raise ValueError(f"array.range names {n} elements; an array has at most {MAX_ARRAY}")
        seen: set[int] = set()
        for first, last, step in pieces:
            for i in range(first, last + 1, step):
                if i in seen:
                    raise ValueError(f"array.range names index {i} twice")
                seen.add(i)
        return
    if array.grid is not None:
        upper: dict[str, str] = {}
        for name, vals in array.grid.items():
            if not vals:
                raise ValueError(f"array.grid.{name} has no values")
            if name.upper() in upper:
                raise ValueError(f"array.grid: {upper[name.upper()]} and {name} are both TACC_PARAM_{name.upper()}")
            upper[name.upper()] = name
        n = size(array)
        if n > MAX_ARRAY:
            raise ValueError(f"array.grid has {n} elements (the product of its lists); an array has at most "
                             f"{MAX_ARRAY}")
    for name in ([array.param] if array.values is not None else list(array.grid or ())):
        if name == "index":
            raise ValueError("array: 'index' is the element's index ({index}, TACC_ARRAY_INDEX); name the parameter "
                             "otherwise")


def elements(array: ArraySpec) -> list[tuple[int, dict[str, object]]]:
    """(index, parameters) of every element, in order: a range's numbers ascending (the index is the number,
    no parameters); values' and a grid's elements numbered 0.. (a grid: the product of its lists, the names in
    the order written, the first name varying slowest)."""
    if array.range is not None:
        idx = sorted(i for first, last, step in parse_range(array.range) for i in range(first, last + 1, step))
        return [(i, {}) for i in idx]
    if array.values is not None:
        return [(i, {array.param: v}) for i, v in enumerate(array.values)]
    assert array.grid is not None
    names = list(array.grid)
    return [(i, dict(zip(names, combo, strict=True)))
            for i, combo in enumerate(itertools.product(*array.grid.values()))]


def value_text(value: object) -> str:
    """A parameter's value as a program sees it (argv, TACC_PARAM_<NAME>): text as is, true/false, str(int),
    repr(float) (which Python's str is too: the shortest text that reads back as the same float)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def template(item: str, names: list[str], field: str) -> list[tuple[str, str | None]]:
    """``item`` cut into (literal text, placeholder name or None) pieces: ``{{``/``}}`` become one brace in the
    text; SpecError naming ``field`` for a ``{name}`` not in ``names``. Cut once per item, filled per element."""
    pieces: list[tuple[str, str | None]] = []
    text: list[str] = []
    pos = 0
    for m in _PLACEHOLDER_RE.finditer(item):
        text.append(item[pos:m.start()])
        pos = m.end()
        tok = m.group(0)
        if tok in ("{{", "}}"):
            text.append(tok[0])
            continue
        name = m.group(1)
        if name not in names:
            known = ", ".join("{" + k + "}" for k in names)
            raise SpecError.one(field, f"unknown placeholder {{{name}}}; known: {known} (write {{{{ and }}}} for "
                                       "literal braces)")
        pieces.append(("".join(text), name))
        text = []
    text.append(item[pos:])
    pieces.append(("".join(text), None))
    return pieces


def fill(pieces: list[tuple[str, str | None]], values: dict[str, str], field: str) -> str:
    """A ``template``'s text with each placeholder replaced by its value, once (a value is never read again)."""
    out = "".join(lit + values[name] if name is not None else lit for lit, name in pieces)
    if len(out) > _MAX_ITEM:
        raise SpecError.one(field, f"is {len(out)} characters once its placeholders are filled in; at most {_MAX_ITEM}")
    return out


def substitute(item: str, values: dict[str, str], field: str) -> str:
    """``item`` with ``{name}`` replaced by ``values[name]`` (once), ``{{``/``}}`` by one brace; SpecError naming
    ``field`` for a name not in ``values``."""
    return fill(template(item, list(values), field), values, field)


def _check_shell(lines: list[str], names: list[str]) -> None:
    known = set(names)
    for i, line in enumerate(lines):
        for m in _SHELL_PLACEHOLDER_RE.finditer(line):
            name = m.group(1)
            if name in known:
                var = "TACC_ARRAY_INDEX" if name == "index" else f"TACC_PARAM_{name.upper()}"
                raise SpecError.one(
                    f"entrypoint.shell[{i}]",
                    f"placeholders are filled in argv only (a shell line would run the value as shell text); "
                    f'write "${var}" (in double quotes) instead of {{{name}}}')


def expand(spec: TaskSpec) -> list[TaskSpec]:
    """One TaskSpec per element of ``spec.array`` (see the module docstring); SpecError naming the field
    (``entrypoint.argv[2]``) for an unknown placeholder. A spec without ``array`` is returned alone."""
    array = spec.array
    if array is None:
        return [spec]
    elems = elements(array)
    n = len(elems)
    names = ["index", *(elems[0][1] if elems else ())]
    if spec.entrypoint.shell is not None:
        _check_shell(spec.entrypoint.shell, names)
    argv = spec.entrypoint.argv
    # The argv items with a brace, cut once (unknown names fail here, once, not per element).
    templated: list[tuple[int, list[tuple[str, str | None]]]] = []
    if argv is not None:
        for i, item in enumerate(argv):
            if "{" in item or "}" in item:
                templated.append((i, template(item, names, f"entrypoint.argv[{i}]")))
    out: list[TaskSpec] = []
    for index, params in elems:
        element = ArrayElement(index=index, size=n, params=params)
        update: dict[str, object] = {"array": None, "array_element": element}
        if templated:
            assert argv is not None
            values = {"index": str(index), **{k: value_text(v) for k, v in params.items()}}
            new_argv = list(argv)
            for i, pieces in templated:
                new_argv[i] = fill(pieces, values, f"entrypoint.argv[{i}]")
            update["entrypoint"] = spec.entrypoint.model_copy(update={"argv": new_argv})
        out.append(spec.model_copy(update=update))
    return out


def sweep_value(text: str) -> int | float | str:
    """A ``--sweep`` value (tcloud, %tacc): a whole number, else a finite decimal number, else the text as it is."""
    t = text.strip()
    if re.fullmatch(r"[+-]?[0-9]{1,18}", t):
        return int(t)
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", t):
        v = float(t)
        if math.isfinite(v):
            return v
    return text


def sweep_grid(items: Iterable[str]) -> dict[str, list[int | float | str]]:
    """``--sweep lr=1e-3,3e-4 --sweep bs=32,64`` -> ``{"lr": [0.001, 0.0003], "bs": [32, 64]}``; ValueError naming
    the item when it is not NAME=V1[,V2...] or names a parameter twice."""
    grid: dict[str, list[int | float | str]] = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
            raise ValueError(f"--sweep {item[:60]!r}: write NAME=VALUE[,VALUE...], NAME a parameter name (lr, bs)")
        if name in grid:
            raise ValueError(f"--sweep {name}: given twice")
        parts = values.split(",")
        if not values or any(not v.strip() for v in parts):
            raise ValueError(f"--sweep {item[:60]!r}: give at least one value, separated by commas")
        grid[name] = [sweep_value(v) for v in parts]
    return grid
