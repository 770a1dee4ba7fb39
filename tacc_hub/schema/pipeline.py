"""Pipelines (issue 20): named steps, each a TaskSpec (or an array), that wait for the steps they need.

A pipeline file has a top-level ``steps:`` (and no ``entrypoint``)::

    name: prep-train-eval
    steps:
      - name: prepare
        spec: prepare.yaml            # a path to a tacc.yaml (or tuxiv.conf), read by the client
      - name: train
        needs: [prepare]
        spec: {entrypoint: {argv: [python, train.py]}, inputs: [{from: prepare, path: outputs/data}]}
      - {name: evaluate, needs: [train], entrypoint: "python eval.py"}   # an inline TaskSpec plus needs

Invariants:
- Pure, no I/O: ``load_pipeline`` reads a step's file only through the ``read`` function its caller gives.
- ``PipelineSpec.order()`` is a topological order, stable (steps in the order written when free to
  choose); a need that names no step, a cycle (a step needing itself included) or a name given twice is
  a SpecError naming ``steps[i].needs`` (or ``steps[i].name``). So a valid pipeline always runs to its end.
- An input ``from`` names a step that the consuming step needs, directly or through other steps (so the
  producer has ended before the consumer starts); ``from`` is for pipelines only.
- The service gets every step's spec inline (``PipelineSpec.model_validate``, or ``pipeline_from_data`` for
  errors that name their field); it resolves ``from`` to a task or array id before it inserts.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import SpecError
from .fields import Name
from .tacc_yaml import normalize_document
from .task import LocalCode, TaskSpec

MAX_STEPS = 256
"""Most steps one pipeline may have."""


class Step(BaseModel):
    """One step: a name, the steps it waits for (each must have succeeded), and what it runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name
    needs: list[Name] = Field(default_factory=list, max_length=MAX_STEPS,
                              description="Steps that must succeed before this one starts.")
    spec: TaskSpec = Field(description="The task (or array: `array` in the spec) this step runs.")

    @model_validator(mode="before")
    @classmethod
    def _conveniences(cls, data: object) -> object:
        """tacc.yaml's shorthands (``entrypoint: "python x.py"``, ``code: dir``) hold in a step's spec too, and a
        spec without a name takes the step's."""
        if isinstance(data, dict) and isinstance(data.get("spec"), dict):
            spec = normalize_document(data["spec"])
            if "name" not in spec and isinstance(data.get("name"), str):
                spec["name"] = data["name"]
            data = {**data, "spec": spec}
        return data


class PipelineSpec(BaseModel):
    """Named steps submitted as one request and shown as one pipeline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)

    @model_validator(mode="after")
    def _check(self) -> PipelineSpec:
        self.order()
        return self

    def order(self) -> list[Step]:
        """The steps in an order where each comes after every step it needs (the order written, when free).

        SpecError naming ``steps[i].name`` (a name given twice) or ``steps[i].needs`` (an unknown step, a need
        given twice, a cycle), or ``steps[i].spec.inputs[j].from`` (a step it does not need).
        """
        where: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            if step.name in where:
                first = where[step.name]
                raise SpecError.one(f"steps[{i}].name", f"step {step.name!r} is named twice (also steps[{first}])")
            where[step.name] = i
        for i, step in enumerate(self.steps):
            if len(set(step.needs)) != len(step.needs):
                raise SpecError.one(f"steps[{i}].needs", "names a step twice")
            for need in step.needs:
                if need not in where:
                    known = ", ".join(where)
                    raise SpecError.one(f"steps[{i}].needs", f"no step is named {need!r} (steps: {known})")
                if need == step.name:
                    raise SpecError.one(f"steps[{i}].needs", f"step {step.name!r} needs itself")
        done: list[Step] = []
        placed: set[str] = set()
        left = list(self.steps)
        while left:
            ready = [s for s in left if all(n in placed for n in s.needs)]
            if not ready:
                cycle = _cycle(left)
                i = where[cycle[0]]
                raise SpecError.one(f"steps[{i}].needs", "the steps need each other in a cycle: " + " -> ".join(cycle))
            for s in ready:
                done.append(s)
                placed.add(s.name)
            left = [s for s in left if s.name not in placed]
        ancestors = self.ancestors()
        for i, step in enumerate(self.steps):
            for j, inp in enumerate(step.spec.inputs):
                if inp.from_ is not None and inp.from_ not in ancestors[step.name]:
                    raise SpecError.one(
                        f"steps[{i}].spec.inputs[{j}].from",
                        f"step {step.name!r} does not need {inp.from_!r}; add it to needs (directly or through "
                        "another step) so that it has ended before this step starts")
        return done

    def ancestors(self) -> dict[str, set[str]]:
        """Every step's needs, direct and through other steps (the steps that end before it starts)."""
        by_name = {s.name: s for s in self.steps}
        out: dict[str, set[str]] = {}

        def walk(name: str, seen: frozenset[str]) -> set[str]:
            if name in out:
                return out[name]
            acc: set[str] = set()
            for need in by_name[name].needs:
                if need in seen or need not in by_name:
                    continue  # a cycle or an unknown name: order() reports it
                acc.add(need)
                acc |= walk(need, seen | {need})
            out[name] = acc
            return acc

        for s in self.steps:
            walk(s.name, frozenset({s.name}))
        return out


def _cycle(left: list[Step]) -> list[str]:
    """A cycle among steps none of which is ready, as names, first repeated at the end."""
    by_name = {s.name: s for s in left}
    path: list[str] = []
    name = left[0].name
    while name not in path:
        path.append(name)
        name = next(n for n in by_name[name].needs if n in by_name)
    return [*path[path.index(name):], name]


def is_pipeline(doc: object) -> bool:
    """A parsed YAML document is a pipeline when it has ``steps`` and no ``entrypoint``."""
    return isinstance(doc, dict) and "steps" in doc and "entrypoint" not in doc


def pipeline_from_data(data: Any) -> PipelineSpec:
    """``PipelineSpec`` from JSON data with every step inline; SpecError naming the field (``steps[1].spec.name``)."""
    try:
        return PipelineSpec.model_validate(data)
    except ValidationError as exc:
        inner = _inner_spec_error(exc)
        if inner is not None:
            raise inner from None
        raise SpecError.from_validation(exc, "", PipelineSpec) from None


def _inner_spec_error(exc: ValidationError) -> SpecError | None:
    """order()'s SpecError, raised inside the model validator, as it was (pydantic wraps it)."""
    for err in exc.errors(include_url=False):
        ctx = err.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, SpecError):
            return cause
    return None


Reader = Callable[[str], "str | bytes"]


def load_pipeline(data: Any, *, base_dir: str | None = None, read: Reader | None = None) -> PipelineSpec:
    """A pipeline file's parsed YAML -> PipelineSpec with every step's spec inline (for the client).

    A step is ``{name, needs, spec}`` where spec is a mapping or a path to a tacc.yaml (a ``.conf`` file:
    tuxiv.conf), or an inline TaskSpec mapping plus ``needs`` (the step's name is the spec's ``name``). A
    path is read with ``read(path)``, relative to ``base_dir`` (the pipeline file's directory); a local
    ``code.path`` in such a file (relative to that file) is rewritten relative to ``base_dir``, so that the
    client snapshots every step's code from the pipeline file's directory. The pipeline's ``name``
    defaults to ``pipeline``. Errors name the field (``steps[2].spec.resources.gpus_per_node``).
    """
    from .tuxiv import load_tuxiv
    from .yamlsafe import load_yaml

    if not isinstance(data, dict):
        raise SpecError.one("", "a pipeline file is a mapping with name and steps")
    unknown = sorted(set(data) - {"name", "steps"})
    if unknown:
        raise SpecError.one(unknown[0], "unknown field (a pipeline has name and steps)")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise SpecError.one("steps", "a pipeline needs a list of steps")
    if len(steps) > MAX_STEPS:
        raise SpecError.one("steps", f"at most {MAX_STEPS} steps")
    out: list[dict[str, Any]] = []
    files: dict[int, str] = {}  # step -> the file its spec came from, named in its errors
    for i, raw in enumerate(steps):
        field = f"steps[{i}]"
        if not isinstance(raw, dict):
            raise SpecError.one(field, "a step is a mapping: {name, needs, spec} or a task spec plus needs")
        if "spec" in raw:
            extra = sorted(set(raw) - {"name", "needs", "spec"})
            if extra:
                raise SpecError.one(f"{field}.{extra[0]}", "unknown field (a step with spec has name, needs, spec)")
            spec = raw["spec"]
            if isinstance(spec, str):
                if read is None:
                    raise SpecError.one(f"{field}.spec", "a step's spec file cannot be read here; give it inline")
                path = spec if base_dir is None else posixpath.join(base_dir, spec)
                try:
                    text = read(path)
                except OSError as exc:
                    raise SpecError.one(f"{field}.spec", f"cannot read {spec!r}: {exc.strerror or exc}") from None
                try:
                    if spec.endswith(".conf"):
                        parsed = load_tuxiv(text).model_dump(mode="json", by_alias=True)
                    else:
                        parsed = normalize_document(load_yaml(text, spec))
                except SpecError as exc:
                    raise SpecError([(f"{field}.spec.{f}" if f else f"{field}.spec", f"{spec}: {m}")
                                     for f, m in exc.errors]) from None
                files[i] = spec
                spec = _rebase_code(parsed, posixpath.dirname(spec))
            step = {"name": raw.get("name"), "needs": raw.get("needs", []), "spec": spec}
        else:
            body = {k: v for k, v in raw.items() if k != "needs"}
            step = {"name": raw.get("name"), "needs": raw.get("needs", []), "spec": body}
        out.append(step)
    try:
        return pipeline_from_data({"name": data.get("name", "pipeline"), "steps": out})
    except SpecError as exc:
        raise SpecError([(f, _in_file(f, m, files)) for f, m in exc.errors]) from None


def _in_file(field: str, message: str, files: dict[int, str]) -> str:
    for i, path in files.items():
        if field == f"steps[{i}].spec" or field.startswith(f"steps[{i}].spec."):
            return f"{path}: {message}"
    return message


def _rebase_code(spec: dict[str, Any], rel_dir: str) -> dict[str, Any]:
    """A spec read from ``rel_dir/file`` with its local code path made relative to the pipeline's directory."""
    if not rel_dir:
        return spec
    code = spec.get("code", {"kind": "local", "path": "."})
    if isinstance(code, dict) and code.get("kind", "local") == "local":
        path = code.get("path", LocalCode().path)
        if isinstance(path, str) and not posixpath.isabs(path):
            rebased = posixpath.normpath(posixpath.join(rel_dir, path))
            spec = {**spec, "code": {**code, "kind": "local", "path": rebased}}
    return spec
