"""The jobs :class:`~tacc_hub.service.offload.HeavyWork` runs in its worker processes.

Each takes and returns plain, picklable data; a refusal comes back as a value (:class:`Refused`),
not as an exception, so that nothing depends on how an exception class pickles. Imported by the
workers only through these functions: keep the module light.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tacc_hub.schema import SpecError, load_tuxiv, load_yaml, spec_from_data
from tacc_hub.schema.jsonsafe import load_json
from tacc_hub.snapshot import ArchiveLimits, ArchiveRefused, CodeStore, SnapshotError

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


@dataclass(frozen=True)
class Refused:
    """What a job refused: ``kind`` spec (a SpecError's ``errors``) or archive (``member`` named, or None)."""

    kind: str
    message: str
    errors: tuple[tuple[str, str], ...] = ()
    member: str | None = None


def parse_spec(body: bytes, fmt: str, ctype: str) -> Any:
    """A TaskSpec from a request body (tuxiv.conf text, YAML or JSON); ``SpecError`` naming the field."""
    if fmt == "tuxiv":  # from the text, so that errors name their line
        return load_tuxiv(body, "request body")
    doc = load_yaml(body, "request body") if ctype in YAML_TYPES else load_json(body or b"null", "request body")
    return spec_from_data(doc)


MAX_STEPS = 64
"""Most steps one pipeline may have (checked before the steps are validated)."""


def parse_pipeline(body: bytes, ctype: str) -> Any:
    """A PipelineSpec (every step's spec inline) from a YAML or JSON body; ``SpecError`` naming the field.

    More than ``MAX_STEPS`` steps is refused before any step is validated; the steps' order (unknown
    needs, cycles, an input from a step not needed) is checked here too, so nothing is stored for it.
    """
    from tacc_hub.schema.pipeline import pipeline_from_data

    doc = load_yaml(body, "request body") if ctype in YAML_TYPES else load_json(body or b"null", "request body")
    if not isinstance(doc, dict):
        raise SpecError.one("", "a pipeline is a mapping: {name: ..., steps: [...]}")
    steps = doc.get("steps")
    if isinstance(steps, list) and len(steps) > MAX_STEPS:
        raise SpecError.one("steps", f"a pipeline has at most {MAX_STEPS} steps, not {len(steps)}")
    return pipeline_from_data(doc)


def parse_pipeline_job(body: bytes, ctype: str) -> Any:
    """:func:`parse_pipeline`, with a refusal returned as :class:`Refused`."""
    try:
        return parse_pipeline(body, ctype)
    except SpecError as exc:
        return Refused("spec", str(exc), tuple(exc.errors))


def parse_spec_job(body: bytes, fmt: str, ctype: str) -> Any:
    """:func:`parse_spec`, with a refusal returned as :class:`Refused`."""
    try:
        return parse_spec(body, fmt, ctype)
    except SpecError as exc:
        return Refused("spec", str(exc), tuple(exc.errors))


def store_code_job(root: str, digest: str, path: str, limits: ArchiveLimits) -> Any:
    """Check the upload spooled at ``path`` and store it as snapshot ``digest`` in the code store at ``root``."""
    try:
        with Path(path).open("rb") as fh:
            return CodeStore(root).put_file(digest, fh, limits)
    except ArchiveRefused as exc:
        return Refused("archive", str(exc), member=exc.member)
    except SnapshotError as exc:
        return Refused("archive", str(exc))
