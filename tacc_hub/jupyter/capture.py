"""Turn the environment a notebook runs in into a TaskSpec and its code snapshot.

``capture`` is shared by the server extension and the ``%tacc`` magic. The code is the
notebook's git repository (its tracked and untracked-not-ignored files, so the uncommitted
state is what runs) or, outside git, its folder; a notebook becomes a script (nbconvert)
next to it; ``.tacc-capture/`` in the snapshot records the git commit, branch and uncommitted diff.
The spec's code is the snapshot's digest, as ``tcloud submit`` makes it, so the spec digest
changes whenever a file of the code does.

Paths: with ``root_dir`` (the server's), the target must resolve inside it (symlinks
included); otherwise ``CaptureError`` with status 403.

Whose project: a git repository whose top lies above ``project_root`` (the server's root
directory: the panel passes ``root_dir``, the magic asks its server; without one, the home
folder) is not the user's project (a home inside someone's checkout, a dotfiles repository
above the notebooks): it is ignored and the folder is sent as it is, as ``tcloud submit``
sends a folder. The script the task runs is always sent, even where git ignores it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tacc_hub.schema import GitCode, SnapshotCode, SpecError, TaskSpec, spec_from_data
from tacc_hub.snapshot import DEFAULT_EXCLUDES, SnapshotError, digest_of, pack

from .envinfo import (
    GitInfo,
    conda_environment,
    git_info,
    git_toplevel,
    new_file_patch,
    on_a_remote,
    packages,
    worktree_patch,
)

CELL_SCRIPT = "tacc_cell.py"
PROVENANCE = ".tacc-capture/"  # generated: git.json (commit, branch, remote, dirty) and git.diff
# Request keys -> spec fields (resources and the runtime the user may choose).
RESOURCE_FIELDS = {
    "nodes": "resources.nodes", "gpus": "resources.gpus_per_node", "gpus_per_node": "resources.gpus_per_node",
    "gpu_type": "resources.gpu_type", "tasks_per_node": "resources.tasks_per_node",
    "cpus": "resources.cpus_per_task", "cpus_per_task": "resources.cpus_per_task", "memory": "resources.memory",
    "time": "resources.time_limit", "time_limit": "resources.time_limit", "partition": "resources.partition",
}


class CaptureError(ValueError):
    def __init__(self, message: str, status: int = 400, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.errors = message, status, errors or []


@dataclass
class Captured:
    spec: TaskSpec
    archive: bytes
    files: list[str]
    diff: str = ""
    git: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return self.spec.digest

    def preview(self) -> dict[str, Any]:
        return {"digest": self.digest, "spec": self.spec.model_dump(mode="json", by_alias=True),
                "files": self.files, "snapshot_bytes": len(self.archive), "git": self.git, "diff": self.diff,
                "notes": self.notes}


def resolve_inside(root_dir: Path | None, path: str | Path) -> Path:
    """``path`` (relative to root_dir, or absolute without one) resolved; 403 if it leaves root_dir."""
    raw = str(path)
    if "\x00" in raw:
        raise CaptureError("path contains a NUL byte")
    if root_dir is None:
        return Path(path).expanduser().resolve()
    root = Path(root_dir).resolve()
    if Path(raw).is_absolute():
        raise CaptureError(f"{raw!r}: give a path relative to the server's root", 403)
    target = (root / raw).resolve()
    if not target.is_relative_to(root):
        raise CaptureError(f"{raw!r} is outside the server's root directory", 403)
    return target


def _safe_name(text: str) -> str:
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in text)[:64].strip("._-")
    return name or "tacc-task"


# Lines of a notebook that drive tacc_hub from the notebook itself: the task must not run them.
_TACC_LINE = re.compile(r"^\s*(\w+\s*=\s*)?%tacc\b|^\s*%(re)?load_ext\s+tacc_hub\s*$")


def _own_lines_dropped(source: str) -> str:
    """A code cell without its ``%tacc`` / ``%load_ext tacc_hub`` lines; a ``%%tacc`` cell (its own task) goes."""
    if source.lstrip().startswith("%%tacc"):
        return ""
    return "".join(line for line in source.splitlines(keepends=True) if not _TACC_LINE.match(line))


def has_code(source: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in source.splitlines())


def notebook_to_script(notebook: Path) -> tuple[str, list[str]]:
    """The notebook's code cells as a Python script (nbconvert), with notes on IPython-only syntax.

    The lines that submit the notebook (``%tacc ...``) are left out: run as a task they would
    submit it again. A notebook with no other code is refused: its task would run nothing.
    """
    import nbformat
    from nbconvert.exporters import ScriptExporter

    try:
        nb = nbformat.read(str(notebook), as_version=4)
    except Exception as exc:  # nbformat raises many kinds for a broken file
        raise CaptureError(f"{notebook.name} is not a readable notebook: {exc}") from None
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell["source"] = _own_lines_dropped(str(cell.get("source", "")))
    if not any(cell.get("cell_type") == "code" and has_code(cell["source"]) for cell in nb.cells):
        raise CaptureError(f"{notebook.name} has no code to run (as saved: save the notebook first if you "
                           "just wrote some)")
    body, _ = ScriptExporter().from_notebook_node(nb)
    notes = []
    if "get_ipython()" in body:
        notes.append(f"{notebook.name} uses IPython magics or shell escapes: its script needs IPython to run")
    return body, notes


def _code_files(folder: Path, info: GitInfo | None) -> tuple[Path, list[str]]:
    """The code root and its files (relative): the repository's where there is one, else the folder's."""
    if info is not None:
        top = info.toplevel.resolve()
        files = []
        for rel in info.files:
            p = top / rel
            if any(part in DEFAULT_EXCLUDES for part in Path(rel).parts):
                continue
            try:
                st = p.lstat()
            except OSError:
                continue  # deleted in the working tree
            if stat.S_ISREG(st.st_mode):
                files.append(rel)
        return top, files
    files = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in DEFAULT_EXCLUDES)
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if f in DEFAULT_EXCLUDES or f.endswith(".pyc") or not p.is_file() or p.is_symlink():
                continue
            files.append(p.relative_to(folder).as_posix())
    return folder, files


def capture(
    path: str | Path | None = None,
    *,
    root_dir: str | Path | None = None,
    cell: str | None = None,
    cwd: str | Path | None = None,
    name: str | None = None,
    resources: dict[str, Any] | None = None,
    runtime: str | None = None,
    args: list[str] | None = None,
    pin_packages: bool = True,
    python: str | None = None,
    code: str = "snapshot",
    project_root: str | Path | None = None,
) -> Captured:
    """Capture PATH (a notebook or a script) or a cell's code run from ``cwd``.

    ``project_root``: where the user's projects start (see the module's docstring); ``root_dir``
    implies it.

    ``code="git"``: instead of a snapshot, the repository's ``origin`` at HEAD (which must be on a
    remote branch) plus a patch of everything uncommitted (untracked files and the generated script
    included); nothing is uploaded and the service clones it.
    """
    if code not in ("snapshot", "git"):
        raise CaptureError(f"code must be 'snapshot' or 'git', not {code!r}")
    root = Path(root_dir).resolve() if root_dir is not None else None
    notes: list[str] = []
    if cell is not None:
        folder = resolve_inside(root, cwd or ".") if root or cwd else Path.cwd().resolve()
        target = None
    else:
        if not path:
            raise CaptureError("give a notebook or a script to capture")
        target = resolve_inside(root, path)
        if not target.is_file():
            raise CaptureError(f"{path} is not a file")
        if target.suffix not in (".ipynb", ".py"):
            raise CaptureError(f"{path}: capture a notebook (.ipynb) or a Python script (.py)")
        folder = target.parent
    if not folder.is_dir():
        raise CaptureError(f"{folder} is not a directory")

    info, why = _users_repository(folder, root or (Path(project_root).resolve() if project_root else None))
    if why:
        notes.append(why)
    code_root, files = _code_files(folder, info)
    workdir = folder.relative_to(code_root).as_posix() if folder != code_root else "."
    if target is not None and target.suffix == ".py":
        rel = target.relative_to(code_root).as_posix()
        if rel not in files:  # ignored by git (or in an excluded folder): the task runs it all the same
            if code == "git":
                raise CaptureError(f"code 'git': {rel} is ignored by git, so a clone would not have it; "
                                   "stop ignoring it or send a snapshot")
            files = sorted([*files, rel])
            notes.append(f"{rel} is ignored by git: sent anyway, as the task runs it")

    extra: dict[str, str] = {}  # generated files, relative to code_root
    if cell is not None:
        script = CELL_SCRIPT
        extra[posixjoin(workdir, CELL_SCRIPT)] = cell if cell.endswith("\n") else cell + "\n"
        default_name = "cell"
    else:
        assert target is not None
        default_name = target.stem
        if target.suffix == ".ipynb":
            body, nb_notes = notebook_to_script(target)
            notes += nb_notes
            script = (target.stem if code == "snapshot" else _safe_name(target.stem)) + ".tacc.py"
            extra[posixjoin(workdir, script)] = body
        else:
            script = target.name
    git_json: dict[str, Any] | None = None
    diff = ""
    if info is not None:
        git_json = info.as_json()
        diff = info.diff
        # Not the repository's path: the same code checked out elsewhere keeps its digest.
        recorded = {k: v for k, v in git_json.items() if k != "toplevel"}
        extra[PROVENANCE + "git.json"] = json.dumps(recorded, indent=2, sort_keys=True) + "\n"
        if diff:
            extra[PROVENANCE + "git.diff"] = diff

    env: dict[str, Any] = {}
    conda, conda_notes = conda_environment() if pin_packages and not python else (None, [])
    notes += conda_notes
    try:
        pk = packages(python, pin=pin_packages and conda is None)
    except OSError as exc:
        raise CaptureError(str(exc)) from None
    notes += pk.notes
    env["python"] = pk.python
    if conda is not None:
        env["conda"] = conda
    elif pk.requirements:
        env["requirements"] = pk.requirements

    data: dict[str, Any] = {
        "name": _safe_name(name or default_name),
        "code": {"kind": "local", "path": "."},
        "entrypoint": {"argv": ["python", script, *(args or [])]},
        "workdir": workdir,
        "environment": env,
    }
    for key, value in (resources or {}).items():
        if value is None:
            continue
        dotted = RESOURCE_FIELDS.get(key)
        if dotted is None:
            raise CaptureError(f"unknown resource {key!r}", errors=[{"field": f"resources.{key}",
                                                                    "message": "unknown field"}])
        section, leaf = dotted.split(".")
        data.setdefault(section, {})[leaf] = value
    if runtime:
        data["runtime"] = {"kind": runtime}
    try:
        spec = spec_from_data(data)
    except SpecError as exc:
        raise CaptureError("the captured task is invalid",
                           errors=[{"field": f, "message": m} for f, m in exc.errors]) from None

    if code == "git":
        git_code = _git_code(info, code_root, {k: v for k, v in extra.items() if not k.startswith(PROVENANCE)})
        spec = spec.model_copy(update={"code": git_code})
        files = sorted(set(files) | {k for k in extra if not k.startswith(PROVENANCE)})
        return Captured(spec=spec, archive=b"", files=files, diff=git_code.patch or "", git=git_json, notes=notes)
    archive, all_files = _snapshot(code_root, files, extra)
    spec = spec.model_copy(update={"code": SnapshotCode(digest=digest_of(archive), size=len(archive))})
    return Captured(spec=spec, archive=archive, files=all_files, diff=diff, git=git_json, notes=notes)


def _users_repository(folder: Path, project_root: Path | None) -> tuple[GitInfo | None, str]:
    """The git repository of ``folder`` where it is the user's project, else None and why not."""
    if project_root is None:
        home = Path.home().resolve()
        project_root = home if folder.is_relative_to(home) else None
    top = git_toplevel(folder)
    if top is None:
        return None, ""
    if project_root is not None and not top.resolve().is_relative_to(project_root):
        return None, (f"the git repository at {top} starts above your Jupyter root {project_root}: "
                      f"not your project, so {folder} is sent as it is")
    return git_info(folder), ""


def _git_code(info: GitInfo | None, code_root: Path, generated: dict[str, str]) -> GitCode:
    if info is None or not info.commit:
        raise CaptureError("code 'git' needs a git repository (inside your Jupyter root) with at least one commit")
    if not info.remote:
        raise CaptureError("code 'git': the repository has no 'origin' remote to clone from")
    url = f"file://{info.remote}" if info.remote.startswith("/") else info.remote
    clash = sorted(p for p in generated if (code_root / p).exists())
    if clash:
        raise CaptureError(f"code 'git': {clash[0]} already exists; remove it or send a snapshot")
    if not on_a_remote(info.toplevel, info.commit):
        raise CaptureError(f"code 'git': commit {info.commit[:12]} is on no remote branch; push it first")
    try:
        patch = worktree_patch(info.toplevel) + "".join(new_file_patch(p, t) for p, t in sorted(generated.items()))
        return GitCode(url=url, commit=info.commit, patch=patch or None)
    except OSError as exc:
        raise CaptureError(str(exc)) from None
    except ValueError as exc:  # pydantic: a URL the schema refuses, a patch too large
        raise CaptureError(f"code 'git': {exc}") from None


def posixjoin(folder: str, name: str) -> str:
    return name if folder in ("", ".") else f"{folder}/{name}"


def _snapshot(code_root: Path, files: list[str], extra: dict[str, str]) -> tuple[bytes, list[str]]:
    """The deterministic archive of ``files`` under code_root plus the generated ``extra`` files."""
    with tempfile.TemporaryDirectory(prefix="tacc-capture-") as tmp:
        stage = Path(tmp) / "code"
        stage.mkdir()
        for rel in files:
            if rel in extra:
                continue
            dest = stage / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(code_root / rel, dest, follow_symlinks=False)
        for rel, text in extra.items():
            dest = stage / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            archive = pack(stage)
        except SnapshotError as exc:
            raise CaptureError(str(exc)) from None
    return archive, sorted(set(files) | set(extra))


def submit_captured(client: Any, cap: Captured) -> dict[str, Any]:
    """Upload the snapshot (unless the service has it) and submit the spec, as tcloud does."""
    code = cap.spec.code
    if isinstance(code, SnapshotCode) and not client.has_code(code.digest):
        client.upload_code(code.digest, cap.archive)
    return dict(client.submit(cap.spec.model_dump(mode="json", by_alias=True)))


def client_from_env(url: str | None = None, token: str | None = None) -> Any:
    """A TaccClient for TACC_URL and TACC_TOKEN (or JUPYTERHUB_API_TOKEN, or the tcloud config)."""
    from tacc_hub.cli.settings import resolve
    from tacc_hub.client import TaccClient

    return TaccClient(*resolve(url, token))
