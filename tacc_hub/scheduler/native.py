"""The scheduler's hot modules compiled with mypyc when built, their Python source otherwise.

The policies, the placement map, the live queue and the simulator are plain, fully typed Python. ``build()`` (run by
``scripts/bootstrap.sh`` through ``scripts/build-native.sh --if-stale``) compiles
``MODULES`` in place with mypyc into C extensions, which Python then imports instead of the ``.py`` files;
decisions are the same (``tests/unit/test_native.py`` replays both and compares every decision), the
replays 1.4-1.6x faster. It writes ``native.stamp`` beside this file: the digest of the sources it
compiled.

``install()`` runs when ``tacc_hub.scheduler`` is imported. When the compiled modules are stale (a source
changed since the build, or no stamp) or ``TACC_HUB_PURE_PYTHON=1`` is set, it puts a finder first on
``sys.meta_path`` that loads ``MODULES`` from their ``.py`` files: an edit is never shadowed by an old
build. ``status()`` says which is in use, and why.

Without a C compiler or Python's headers the build is skipped with a message; everything still runs, as
Python.

Usage: scripts/build-native.sh [--if-stale | --status | --clean]
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import shutil
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent  # tacc_hub/scheduler
ROOT = PACKAGE.parents[1]  # the directory holding tacc_hub/
STAMP = PACKAGE / "native.stamp"
GROUP = "tacc_hub.scheduler._native"  # mypyc's shared library: tacc_hub/scheduler/_native__mypyc*.so

MODULES = (
    "tacc_hub.scheduler.frozen",
    "tacc_hub.scheduler.history",
    "tacc_hub.scheduler.policy",
    "tacc_hub.scheduler.explain",
    "tacc_hub.scheduler.queue",
    "tacc_hub.scheduler.topology",
    "tacc_hub.scheduler.policies.admission",
    "tacc_hub.scheduler.policies.fifo",
    "tacc_hub.scheduler.policies.oracle",
    "tacc_hub.scheduler.policies.slurm",
    "tacc_hub.scheduler.policies.tiresias",
    "tacc_hub.scheduler.policies.tacc",
    "tacc_hub.scheduler.policies.tacc_explain",
    "tacc_hub.scheduler.policies.tacc_model",
    "tacc_hub.scheduler.policies.tacc_queue",
    "tacc_hub.scheduler.policies.tacc_running",
    "tacc_hub.scheduler.sim.metrics",
    "tacc_hub.scheduler.sim.predict",
    "tacc_hub.scheduler.sim.simulator",
    "tacc_hub.scheduler.sim.slowdown",
)

_why = "not checked yet"


def source(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digest() -> str:
    """The digest the compiled modules must have been built from: their sources, Python's and mypyc's tags."""
    h = hashlib.sha256(sys.implementation.cache_tag.encode())
    for m in MODULES:
        h.update(m.encode())
        h.update(source(m).read_bytes())
    return h.hexdigest()


def compiled_files() -> list[Path]:
    """The extension files a build left (the modules' and the shared library's)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = []
    for m in MODULES:
        base = source(m).with_suffix("")
        found += [base.with_name(base.name + s) for s in suffixes if base.with_name(base.name + s).exists()]
    found += [p for p in PACKAGE.glob("_native__mypyc*") if p.name.endswith(suffixes)]
    return found


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Loads ``MODULES`` from their ``.py`` files, past any compiled extension beside them."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(name, source(name))


def decide() -> tuple[bool, str]:
    """Whether the compiled modules may be imported, and why (see the module docstring)."""
    if os.environ.get("TACC_HUB_PURE_PYTHON") == "1":
        return False, "pure Python: TACC_HUB_PURE_PYTHON=1"
    if not compiled_files():
        return False, "pure Python: not built (scripts/build-native.sh)"
    if not STAMP.exists() or STAMP.read_text().strip() != digest():
        return False, "pure Python: the compiled modules are stale (rebuild: scripts/build-native.sh)"
    return True, "compiled with mypyc"


def install() -> None:
    """Once per process, before the modules are imported: a finder that skips the compiled ones unless
    ``decide`` allows them."""
    global _why
    if any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        return
    ok, _why = decide()
    if not ok:
        sys.meta_path.insert(0, _SourceFinder())


def is_compiled() -> bool:
    """Whether this process runs the compiled modules (imports the ``tacc`` policy to see)."""
    import tacc_hub.scheduler.policies.tacc as tacc

    return not (tacc.__file__ or "").endswith(".py")


def status() -> str:
    """Which the scheduler's modules are in this process: compiled, or Python and why."""
    return "compiled with mypyc" if is_compiled() else _why


def clean() -> None:
    for p in compiled_files():
        p.unlink()
    STAMP.unlink(missing_ok=True)


def _toolchain() -> str | None:
    """Why a build cannot run here (None: it can)."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler ({cc.split()[0]})"
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        return f"no Python headers ({include}/Python.h; Debian: apt-get install python3-dev)"
    try:
        import mypyc.build  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed (pip install mypy setuptools)"
    return None


def build(if_stale: bool = False) -> int:
    """Compile ``MODULES`` in place; 0 when built (or fresh, or not buildable here: then it says why)."""
    want = digest()
    if if_stale and STAMP.exists() and STAMP.read_text().strip() == want and compiled_files():
        print("native: compiled modules are up to date")
        return 0
    why = _toolchain()
    if why is not None:
        print(f"native: not built, {why}; the scheduler runs as pure Python")
        return 0
    from mypyc.build import mypycify
    from setuptools import Distribution

    clean()
    temp = ROOT / "build" / "native"
    cwd = os.getcwd()
    os.chdir(ROOT)  # mypycify and build_ext --inplace work on paths relative to the tree's root
    try:
        paths = [str(source(m).relative_to(ROOT)) for m in MODULES]
        exts = mypycify(paths, opt_level="3", target_dir=str(temp / "c"), group_name=GROUP)
        dist = Distribution({"name": "tacc_hub_native", "ext_modules": exts})
        dist.script_args = ["-q", "build_ext", "--inplace", "--build-temp", str(temp / "obj")]
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(cwd)
    STAMP.write_text(want + "\n")
    print(f"native: compiled {len(MODULES)} scheduler modules with mypyc")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["build"]:
        return build(if_stale="--if-stale" in args)
    if args[:1] == ["clean"]:
        clean()
        return 0
    if args[:1] == ["status"]:
        print(status())
        return 0
    print(__doc__.strip().splitlines()[-1])
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
