"""Reading JSON request bodies that cannot be abused.

``load_json`` refuses, as ``SpecError`` (so a handler answers 4xx, never 500): invalid UTF-8 (and other
encodings, a BOM), duplicate keys (named with their path, ``resources.nodes``: the stdlib keeps the last
one silently, another reader might keep the first), nesting deeper than ``MAX_JSON_DEPTH`` (checked by a
scan before parsing, so ``[[[[...`` 100,000 deep never reaches the recursive C parser; a RecursionError
is caught as well), ``NaN``/``Infinity`` literals and numbers that overflow to infinity (``1e999``),
integers too long to convert, and strings holding lone surrogates (``"\\ud800"``), which cannot be
stored or encoded later.

Fast path: a body with no more than ``MAX_JSON_DEPTH`` brackets cannot be too deep, so the scan is skipped,
and the checks for duplicates and surrogates walk the result only when the parse saw one.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import SpecError

MAX_JSON_DEPTH = 64

_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET_RE = re.compile(r"[\[\]{}]")
_SURROGATE_RE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Duplicate(dict[str, Any]):
    """An object that had a key twice; ``key`` names it (found afterwards, with its path)."""

    key = ""


def _too_deep(text: str) -> bool:
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    for m in _BRACKET_RE.finditer(_STRING_RE.sub('""', text)):
        if m.group(0) in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        else:
            depth -= 1
    return False


class _Unreadable:
    """Put where a value JSON allows but we refuse was read (NaN, 1e999, a 5000-digit integer), so that the
    error can name its place."""

    def __init__(self, why: str) -> None:
        self.why = why


_MAYBE_UNREADABLE_RE = re.compile(r"NaN|Infinity|[0-9]{20}|[eE][+-]?[0-9]{3}")
"""Only a text with one of these can hold an unreadable value: the walk is skipped for every other."""


def _constant(name: str) -> Any:
    return _Unreadable(f"{name} is not a JSON number")


def _float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _Unreadable(f"the number {text[:40]} is too large")


def _int(text: str) -> Any:
    return int(text) if len(text) <= 4300 else _Unreadable(f"an integer of {len(text)} digits is too large")


def _unreadable_at(what: str) -> Any:
    def hit(parts: list[str | int], value: Any) -> SpecError | None:
        if isinstance(value, _Unreadable):
            return SpecError.one(_path(parts), f"{what} holds a value that cannot be read: {value.why}")
        return None

    return hit


def _path(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _find(doc: Any, hit: Any) -> SpecError | None:
    """The first offending place below ``doc`` (iterative: no recursion), as a SpecError naming its path."""
    stack: list[tuple[list[str | int], Any]] = [([], doc)]
    while stack:
        parts, value = stack.pop()
        err = hit(parts, value)
        if err is not None:
            return err
        if isinstance(value, dict):
            stack.extend(([*parts, k], v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(([*parts, i], v) for i, v in reversed(list(enumerate(value))))
    return None


def _duplicate_at(what: str) -> Any:
    def hit(parts: list[str | int], value: Any) -> SpecError | None:
        if isinstance(value, _Duplicate):
            return SpecError.one(_path([*parts, value.key]), f"duplicate key {value.key[:80]!r} in {what}")
        return None

    return hit


def _surrogate_at(what: str) -> Any:
    def bad(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    def hit(parts: list[str | int], value: Any) -> SpecError | None:
        if isinstance(value, str) and bad(value):
            return SpecError.one(_path(parts), f"{what} holds a lone surrogate (\\ud800-\\udfff) in a string")
        if isinstance(value, dict):
            for k in value:
                if bad(k):
                    return SpecError.one(_path(parts), f"{what} holds a lone surrogate in a key")
        return None

    return hit


def load_json(data: bytes | str, what: str = "request body") -> Any:
    """``data`` (a UTF-8 JSON text) as Python values; every refusal is a ``SpecError`` (see the docstring)."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError.one("", f"{what} is not UTF-8: {exc}") from None
    else:
        text = data
    if _too_deep(text):
        raise SpecError.one("", f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    dupes = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal dupes
        out = dict(items)
        if len(out) != len(items):
            dupes = True
            seen: set[str] = set()
            marked = _Duplicate(out)
            for k, _ in items:
                if k in seen:
                    marked.key = k
                    break
                seen.add(k)
            return marked
        return out

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_constant=_constant, parse_float=_float,
                         parse_int=_int)
    except json.JSONDecodeError as exc:
        raise SpecError.one("", f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise SpecError.one("", f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # NaN/Infinity, 1e999, an integer of more than 4300 digits
        raise SpecError.one("", f"{what} holds a value that cannot be read: {' '.join(str(exc).split())[:200]}") \
            from None
    if _MAYBE_UNREADABLE_RE.search(text):
        err = _find(doc, _unreadable_at(what))
        if err is not None:
            raise err
    if dupes:
        err = _find(doc, _duplicate_at(what))
        if err is not None:
            raise err
    if _SURROGATE_RE.search(text):
        err = _find(doc, _surrogate_at(what))
        if err is not None:
            raise err
    return doc
