"""Errors raised while reading a task description.

Invariant: every error names the field it is about (a dotted path such as
``resources.gpus_per_node`` or ``job.general[2]``) apart from the message, so
that an API handler can answer 422 with ``{"field": ..., "message": ...}`` and a
CLI can print ``field: message`` without parsing text.
"""

from __future__ import annotations

from pydantic import ValidationError


class SpecError(ValueError):
    """A task description is malformed; ``errors`` holds (field, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in errors))

    @classmethod
    def one(cls, field: str, message: str) -> SpecError:
        return cls([(field, message)])

    @classmethod
    def from_validation(cls, exc: ValidationError, prefix: str = "") -> SpecError:
        out: list[tuple[str, str]] = []
        for err in exc.errors(include_url=False):
            loc = _loc_to_path(err.get("loc", ()))
            if prefix:
                loc = f"{prefix}.{loc}" if loc else prefix
            msg = err.get("msg", "invalid value")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            if err.get("type") == "extra_forbidden":
                msg = "unknown field"
            out.append((loc, msg))
        return cls(out)

    def as_json(self) -> list[dict[str, str]]:
        return [{"field": f, "message": m} for f, m in self.errors]


def _loc_to_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("function-after", "function-before") or str(item).startswith(("function-", "tagged-union")):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)
