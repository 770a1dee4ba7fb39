"""What the running environment is made of: Python, pinned packages, conda, git.

Every external program runs from an argv list (never a shell) with a timeout; git gets
``--`` before paths, NUL-separated output and no pager, external diff, textconv or
fsmonitor, so hostile file names and repository settings are inert.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tacc_hub.schema.task import _pinned

# Run by another interpreter (a kernel's): prints its version and its installed distributions.
_INVENTORY = r"""
import json, sys, importlib.metadata as md
out = []
for d in md.distributions():
    try:
        du = d.read_text("direct_url.json")
    except Exception:
        du = None
    out.append([d.metadata["Name"], d.version, du])
print(json.dumps({"python": f"{sys.version_info[0]}.{sys.version_info[1]}", "dists": out}))
"""

NEVER_PINNED = frozenset({"pip", "setuptools", "wheel"})  # the env builder brings its own


@dataclass
class Packages:
    python: str
    requirements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _inventory(python: str | None) -> dict[str, Any]:
    if not python or os.path.realpath(python) == os.path.realpath(sys.executable):
        import importlib.metadata as md

        dists = []
        for d in md.distributions():
            try:
                du = d.read_text("direct_url.json")
            except OSError:
                du = None
            dists.append([d.metadata["Name"], d.version, du])
        return {"python": f"{sys.version_info[0]}.{sys.version_info[1]}", "dists": dists}
    try:
        out = subprocess.run([python, "-c", _INVENTORY], capture_output=True, text=True, timeout=60, check=True)
        return dict(json.loads(out.stdout))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise OSError(f"cannot list the packages of {python}: {exc}") from None


def packages(python: str | None = None, *, pin: bool = True) -> Packages:
    """The interpreter's Python version and its distributions pinned as NAME==VERSION.

    Editable installs and local paths cannot be rebuilt elsewhere: they are left out, each
    with a note (their code belongs in the snapshot instead).
    """
    inv = _inventory(python)
    result = Packages(python=str(inv["python"]))
    if not pin:
        return result
    seen: set[str] = set()
    for name, version, direct_url in sorted(inv["dists"], key=lambda d: str(d[0]).lower()):
        if not name or not version:
            continue
        key = str(name).lower().replace("_", "-").replace(".", "-")
        if key in seen or key in NEVER_PINNED:
            continue
        seen.add(key)
        req = f"{name}=={version}"
        if direct_url:
            try:
                du = json.loads(direct_url)
            except ValueError:
                du = {}
            url = str(du.get("url", ""))
            if du.get("dir_info", {}).get("editable"):
                result.notes.append(f"skipped {name} {version}: an editable install ({url})")
                continue
            if "dir_info" in du or url.startswith("file:"):
                result.notes.append(f"skipped {name} {version}: installed from a local path ({url})")
                continue
            if "vcs_info" in du:
                result.notes.append(f"skipped {name} {version}: installed from version control ({url})")
                continue
            if url.startswith(("https://", "http://")):
                req = f"{name} @ {url}"
        try:
            result.requirements.append(_pinned(req))
        except ValueError as exc:
            result.notes.append(f"skipped {name}: {exc}")
    return result


def conda_environment(prefix: str | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """``conda env export`` of CONDA_PREFIX as a CondaSpec dict, or None where there is no conda env."""
    prefix = prefix or os.environ.get("CONDA_PREFIX")
    if not prefix:
        return None, []
    conda = os.environ.get("CONDA_EXE") or shutil.which("conda") or shutil.which("micromamba")
    if not conda:
        return None, [f"CONDA_PREFIX is {prefix} but no conda is on PATH: using pip packages"]
    try:
        out = subprocess.run([conda, "env", "export", "--prefix", prefix, "--no-builds", "--json"],
                             capture_output=True, text=True, timeout=120, check=True)
        doc = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, [f"conda env export failed ({exc}): using pip packages"]
    notes = []
    deps = []
    for dep in doc.get("dependencies", []):
        if isinstance(dep, str):
            deps.append(dep)
        elif isinstance(dep, dict) and dep.get("pip"):
            notes.append(f"{len(dep['pip'])} pip packages inside the conda env are not captured")
    spec = {"channels": list(doc.get("channels", [])), "dependencies": deps}
    return spec, notes


# --- git --------------------------------------------------------------------------

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_CONFIG_NOSYSTEM": "1"}
_GIT_OPTS = ["-c", "core.fsmonitor=false", "-c", "core.quotepath=off", "-c", "diff.external=",
             "-c", "core.hooksPath=/dev/null"]


def git(folder: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None) -> str | None:
    """Output of ``git -C FOLDER ARGS`` (text), or None where git is missing or fails."""
    try:
        out = subprocess.run(["git", *_GIT_OPTS, "-C", str(folder), *args], capture_output=True,
                             timeout=timeout, env={**os.environ, **_GIT_ENV, **(env or {})}, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.decode("utf-8", errors="surrogateescape")


@dataclass
class GitInfo:
    toplevel: Path
    commit: str | None
    branch: str | None
    remote: str | None
    dirty: bool
    diff: str
    files: list[str]  # tracked and untracked-not-ignored files, relative to toplevel

    def as_json(self) -> dict[str, Any]:
        return {"toplevel": str(self.toplevel), "commit": self.commit, "branch": self.branch,
                "remote": self.remote, "dirty": self.dirty}


def git_toplevel(folder: Path) -> Path | None:
    """The top folder of the git repository holding ``folder``, or None outside git."""
    top = git(folder, "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top and top.strip() else None


def git_info(folder: Path) -> GitInfo | None:
    """The repository holding ``folder`` (capture uses it only when that repository lies inside the
    user's root: ``capture``)."""
    top = git(folder, "rev-parse", "--show-toplevel")
    if not top:
        return None
    toplevel = Path(top.strip())
    commit = git(toplevel, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    branch = git(toplevel, "symbolic-ref", "--quiet", "--short", "HEAD")
    remote = git(toplevel, "remote", "get-url", "origin")
    listed = git(toplevel, "ls-files", "-z", "--cached", "--others", "--exclude-standard") or ""
    files = sorted({f for f in listed.split("\0") if f})
    diff = ""
    if commit:
        diff = git(toplevel, "diff", "--no-ext-diff", "--no-textconv", "--binary", "HEAD") or ""
    untracked = git(toplevel, "ls-files", "-z", "--others", "--exclude-standard") or ""
    dirty = bool(diff) or bool(untracked.strip("\0")) or not commit
    return GitInfo(toplevel=toplevel, commit=commit.strip() if commit else None,
                   branch=branch.strip() if branch else None, remote=remote.strip() if remote else None,
                   dirty=dirty, diff=diff, files=files)


def worktree_patch(toplevel: Path) -> str:
    """Everything that differs from HEAD, untracked-not-ignored files included, as one binary-safe patch.

    Built in a throwaway index (``GIT_INDEX_FILE``), so the user's index is left as it was.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tacc-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        staged = git(toplevel, "read-tree", "HEAD", env=env) is not None
        if not staged or git(toplevel, "add", "-A", "--", ".", env=env) is None:
            raise OSError(f"git could not stage the working tree of {toplevel}")
        out = git(toplevel, "diff", "--cached", "--binary", "--no-ext-diff", "--no-textconv", "HEAD", "--", env=env)
    if out is None:
        raise OSError(f"git diff failed in {toplevel}")
    return out


def on_a_remote(toplevel: Path, commit: str) -> bool:
    """Whether a remote-tracking branch (as last fetched) contains ``commit``."""
    out = git(toplevel, "branch", "--remotes", "--contains", commit, "--format=%(refname)")
    return bool(out and out.strip())


def new_file_patch(path: str, text: str) -> str:
    """A git patch that creates PATH (a plain name we generated) holding TEXT."""
    if not text.endswith("\n"):
        text += "\n"
    lines = text.splitlines(keepends=True)
    body = "".join("+" + line for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")
