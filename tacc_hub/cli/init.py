"""``tcloud init``: a tacc.yaml for a directory, guessed from what is in it.

Guesses: the entrypoint (main.py, train.py, run.py, then the only .py or
.ipynb file), pinned requirements (requirements.txt lines that are pinned
with ``==``; unpinned ones are pinned to the version installed here, if any),
a conda spec (environment.yml), and this interpreter's Python version.
The file is validated before it is written.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from tacc_hub.schema import spec_from_data

_NAME_FIX = re.compile(r"[^A-Za-z0-9._-]")


def _entrypoint(root: Path) -> dict[str, list[str]]:
    for name in ("main.py", "train.py", "run.py"):
        if (root / name).is_file():
            return {"argv": ["python", name]}
    pys = sorted(p.name for p in root.glob("*.py"))
    if len(pys) == 1:
        return {"argv": ["python", pys[0]]}
    nbs = sorted(p.name for p in root.glob("*.ipynb"))
    if len(nbs) == 1:
        return {"argv": ["python", "-m", "nbconvert", "--to", "notebook", "--execute", nbs[0]]}
    return {"shell": ["echo 'edit the entrypoint in tacc.yaml'"]}


def _requirements(root: Path) -> list[str]:
    req = root / "requirements.txt"
    if not req.is_file():
        return []
    out: list[str] = []
    for raw in req.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        if "==" in line:
            out.append(line)
            continue
        name = re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue  # cannot pin it here; the user adds it by hand
    return out


def _conda(root: Path) -> dict[str, Any] | None:
    for name in ("environment.yml", "environment.yaml"):
        f = root / name
        if f.is_file():
            doc = yaml.safe_load(f.read_text()) or {}
            deps = [d for d in doc.get("dependencies", []) if isinstance(d, str)]
            return {"channels": list(doc.get("channels", [])), "dependencies": deps}
    return None


def write_tacc_yaml(root: Path, *, name: str | None = None, force: bool = False) -> Path:
    target = root / "tacc.yaml"
    if target.exists() and not force:
        raise FileExistsError(str(target))
    task_name = name or (_NAME_FIX.sub("-", root.resolve().name).strip("-._")[:64] or "task")
    env: dict[str, Any] = {"python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    conda = _conda(root)
    if conda:
        env["conda"] = conda
    else:
        env["requirements"] = _requirements(root)
    doc: dict[str, Any] = {
        "name": task_name,
        "code": ".",
        "entrypoint": _entrypoint(root),
        "environment": env,
        "resources": {"nodes": 1, "gpus_per_node": 0, "cpus_per_task": 1, "time_limit": "1h"},
        "runtime": {"kind": "plain"},
        "outputs": [],
    }
    spec_from_data(doc)  # refuse to write a file that would not load
    header = "# tacc.yaml: this directory as a tacc_hub task. Reference: `tcloud schema`.\n"
    target.write_text(header + yaml.safe_dump(doc, sort_keys=False))
    return target
