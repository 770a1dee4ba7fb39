"""Reading a task file on the user's machine and making it self-contained.

``load`` accepts a directory (its tacc.yaml, else its tuxiv.conf), a
tacc.yaml, or a tuxiv.conf, and applies command-line overrides to the file's
raw mapping *before* validation: an override replaces a bad value in the file
(``--gpus 4`` over ``gpus_per_node: 99``) and is itself checked like the file.
``OptionError`` reports a bad override by its option; ``snapshot`` replaces a
local code directory by its content-addressed archive.

A pipeline file (a YAML file whose top level has ``steps:`` and no ``entrypoint``; ``pipeline_file``
tells) is read by ``load_pipeline``: a step's spec given as a path is read relative to the pipeline
file, and its local code path rebased onto the pipeline file's directory, so every step's code is
snapshotted from there.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tacc_hub.schema import LocalCode, SnapshotCode, SpecError, TaskSpec, load_yaml, spec_from_data
from tacc_hub.schema.tuxiv import read_tuxiv
from tacc_hub.snapshot import digest_of, pack

TASK_FILES = ("tacc.yaml", "tacc.yml", "tuxiv.conf")


class OptionError(SpecError):
    """Overrides that fail validation: (option as typed, message) pairs; ``file_errors`` are the file's own."""

    def __init__(self, errors: list[tuple[str, str]], file_errors: list[tuple[str, str]]) -> None:
        super().__init__(errors)
        self.file_errors = file_errors


def find(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        for name in TASK_FILES:
            if (p / name).is_file():
                return p / name
        raise SpecError.one("", f"{p} has no tacc.yaml or tuxiv.conf (run `tcloud init` there)")
    if not p.is_file():
        raise SpecError.one("", f"{p} does not exist")
    return p


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a raw mapping; a parent that is there but not a mapping is left for validation to report."""
    *parents, leaf = dotted.split(".")
    target = data
    for key in parents:
        child = target.setdefault(key, {})
        if not isinstance(child, dict):
            return
        target = child
    target[leaf] = value


def with_overrides(data: Any, overrides: dict[str, Any], options: dict[str, str] | None = None,
                   validate: Callable[[Any], TaskSpec] = spec_from_data) -> TaskSpec:
    """Validate a raw task mapping (or a spec) with ``overrides`` (dotted path -> value) applied first.

    ``options`` maps a dotted path to how the user typed it (``--time 5x``): errors about an
    overridden field then raise ``OptionError`` naming the option. ``validate`` turns the
    mapping into a spec (a tuxiv.conf's names the file's lines in its errors).
    """
    if isinstance(data, TaskSpec):
        data = data.model_dump(mode="json", by_alias=True)
    if isinstance(data, dict) and overrides:
        data = copy.deepcopy(data)
        for dotted, value in overrides.items():
            if value is not None:
                _set(data, dotted, value)
    try:
        return validate(data)
    except SpecError as exc:
        options = options or {}
        mine: list[tuple[str, str]] = []
        rest: list[tuple[str, str]] = []
        for field, message in exc.errors:
            hit = next((o for d, o in options.items() if field == d or field.startswith(d + ".")), None)
            (mine if hit else rest).append((hit or field, message))
        if mine:
            raise OptionError(mine, rest) from None
        raise


def load(path: str | Path, overrides: dict[str, Any] | None = None,
         options: dict[str, str] | None = None) -> tuple[TaskSpec, Path]:
    file = find(path)
    text = file.read_bytes()
    base = file.parent.resolve()
    if file.name == "tuxiv.conf" or file.suffix == ".conf":
        default = base.name if base.name else "tacc-task"
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in default)[:64].lstrip("._-") or "tacc-task"
        tuxiv = read_tuxiv(text, str(file), default_name=safe)
        given = [k for k, v in (overrides or {}).items() if v is not None]
        return with_overrides(tuxiv.data, overrides or {}, options,
                              lambda data: tuxiv.validate(data, overridden=given)), base
    return with_overrides(load_yaml(text, str(file)), overrides or {}, options), base


def pipeline_file(path: str | Path) -> Path | None:
    """The pipeline file ``path`` names (itself, or a directory's tacc.yaml), or None for a task file.

    A file that cannot be read or parsed is left to :func:`load`, which says why."""
    from tacc_hub.schema.pipeline import is_pipeline

    try:
        file = find(path)
    except SpecError:
        return None
    if file.suffix == ".conf":
        return None
    try:
        doc = load_yaml(file.read_bytes(), str(file))
    except (SpecError, OSError):
        return None
    return file if is_pipeline(doc) else None


def load_pipeline(file: Path) -> tuple[Any, Path]:
    """The PipelineSpec in ``file``, every step's spec inline, and the directory its code paths are relative to."""
    from tacc_hub.schema.pipeline import load_pipeline as from_data

    base = file.parent.resolve()

    def read(p: str) -> bytes:
        return Path(p).read_bytes()

    return from_data(load_yaml(file.read_bytes(), str(file)), base_dir=str(base), read=read), base


def snapshot(spec: TaskSpec, base: Path) -> tuple[TaskSpec, bytes | None]:
    if not isinstance(spec.code, LocalCode):
        return spec, None
    root = (base / spec.code.path).resolve()
    data = pack(root)
    code = SnapshotCode(digest=digest_of(data), size=len(data))
    return spec.model_copy(update={"code": code}), data
