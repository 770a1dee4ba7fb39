"""Reading a task file on the user's machine and making it self-contained.

``load`` accepts a directory (its tacc.yaml, else its tuxiv.conf), a
tacc.yaml, or a tuxiv.conf; ``with_overrides`` applies command-line resource
overrides through the schema (so they are validated like the file);
``snapshot`` replaces a local code directory by its content-addressed archive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tacc_hub.schema import LocalCode, SnapshotCode, SpecError, TaskSpec, load_tacc_yaml, load_tuxiv, spec_from_data
from tacc_hub.snapshot import digest_of, pack

TASK_FILES = ("tacc.yaml", "tacc.yml", "tuxiv.conf")


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


def load(path: str | Path) -> tuple[TaskSpec, Path]:
    file = find(path)
    text = file.read_bytes()
    base = file.parent.resolve()
    if file.name == "tuxiv.conf" or file.suffix == ".conf":
        default = base.name if base.name else "tacc-task"
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in default)[:64].lstrip("._-") or "tacc-task"
        return load_tuxiv(text, str(file), default_name=safe), base
    return load_tacc_yaml(text, str(file)), base


def with_overrides(spec: TaskSpec, overrides: dict[str, Any]) -> TaskSpec:
    data = spec.model_dump(mode="json", by_alias=True)
    for dotted, value in overrides.items():
        if value is None:
            continue
        target = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return spec_from_data(data)


def snapshot(spec: TaskSpec, base: Path) -> tuple[TaskSpec, bytes | None]:
    if not isinstance(spec.code, LocalCode):
        return spec, None
    root = (base / spec.code.path).resolve()
    data = pack(root)
    code = SnapshotCode(digest=digest_of(data), size=len(data))
    return spec.model_copy(update={"code": code}), data
