"""Reading ``tacc.yaml``: the native task file.

It is the TaskSpec's own fields, with three conveniences that mirror how
people write task files by hand:

- ``code: some/dir`` is short for ``code: {kind: local, path: some/dir}``;
- ``entrypoint: "python train.py"`` or a list of strings is a list of shell
  lines, each its own command (unlike tuxiv.conf, whose items are one command);
  ``entrypoint: {argv: [...]}`` is an exact argv;
- ``resources.time_limit`` and ``resources.memory`` accept ``2h`` / ``16G``.

A file with a top-level ``steps:`` (and no ``entrypoint``) is a pipeline (``pipeline.load_pipeline``).

Invariant: pure (text in, spec out); errors name the field.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .errors import SpecError
from .task import TaskSpec
from .yamlsafe import load_yaml


def normalize_document(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise SpecError.one("", "a task file must be a mapping of fields (name, entrypoint, ...)")
    data = dict(doc)
    code = data.get("code")
    if isinstance(code, str):
        data["code"] = {"kind": "local", "path": code}
    ep = data.get("entrypoint")
    if isinstance(ep, str):
        data["entrypoint"] = {"shell": [ep]}
    elif isinstance(ep, list):
        data["entrypoint"] = {"shell": ep}
    return data


def spec_from_data(data: Any, prefix: str = "") -> TaskSpec:
    try:
        return TaskSpec.model_validate(normalize_document(data))
    except ValidationError as exc:
        raise SpecError.from_validation(exc, prefix, TaskSpec) from None


def load_tacc_yaml(text: str | bytes, source: str = "tacc.yaml") -> TaskSpec:
    """One task from a tacc.yaml; a pipeline file (top-level ``steps:``, see ``pipeline``) is refused, saying so."""
    doc = load_yaml(text, source)
    if isinstance(doc, dict) and "steps" in doc and "entrypoint" not in doc:
        raise SpecError.one("steps", "this is a pipeline file (steps:), not one task: read it with load_pipeline "
                                     "(tcloud submit does)")
    return spec_from_data(doc)
