"""The scheduler compiled with mypyc (``scheduler.native``): in use after bootstrap, decides exactly as the
Python source does, and never shadows an edited source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tacc_hub.scheduler import native
from tacc_hub.scheduler.sim.bundled import PHILLY_TRACE, PLACEMENTS

REPO = Path(__file__).resolve().parents[2]

# One replay per policy, printed as JSON: the module's file (compiled or not) and a hash of every decision.
REPLAY = """
import hashlib, json, sys
from pathlib import Path
from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import POLICIES, make
from tacc_hub.scheduler.sim import ClusterSpec, derive, load_philly, simulate
trace, placements, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
jobs = load_philly(trace, tenant="6214e9", limit=limit).jobs
out = {"compiled": native.is_compiled(), "status": native.status()}
for name in sorted(POLICIES):
    r = simulate(jobs, ClusterSpec(2, 8, 0), make(name), derive(Path(placements)))
    h = hashlib.sha1()
    for x in sorted(r.records, key=lambda x: x.id):
        h.update(repr((x.id, x.first_start, x.finish, x.preemptions)).encode())
    out[name] = [h.hexdigest(), r.metrics.avg_jct, r.metrics.preemptions]
print(json.dumps(out))
"""


def _replay(pure: bool, limit: int = 1500) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "TACC_HUB_PURE_PYTHON"}
    if pure:
        env["TACC_HUB_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, "-c", REPLAY, str(PHILLY_TRACE), str(PLACEMENTS), str(limit)],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout)


def test_bootstrap_built_the_compiled_scheduler_and_it_is_in_use() -> None:
    # bootstrap.sh (and so the README's test command) builds it whenever a C compiler is there; CI has one
    assert native.decide() == (True, "compiled with mypyc"), native.decide()
    assert native.is_compiled()
    assert {p.name.split(".")[0] for p in native.compiled_files()} >= {"tacc", "topology", "simulator", "policy"}


def test_compiled_and_python_scheduler_make_the_same_decisions_for_every_policy() -> None:
    compiled, pure = _replay(pure=False), _replay(pure=True)
    assert compiled.pop("compiled") is True and pure.pop("compiled") is False
    assert compiled.pop("status") == "compiled with mypyc"
    assert pure.pop("status") == "pure Python: TACC_HUB_PURE_PYTHON=1"
    assert set(compiled) == {"fifo", "slurm", "srpt-oracle", "tacc", "tiresias"}
    assert compiled == pure
    assert compiled["tacc"][2] > 0  # the replay is busy enough to preempt: the hot paths all ran


def test_an_edited_source_is_never_shadowed_by_an_old_build(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    stamp = tmp_path / "native.stamp"
    monkeypatch.setattr(native, "STAMP", stamp)
    monkeypatch.delenv("TACC_HUB_PURE_PYTHON", raising=False)
    stamp.write_text("0" * 64 + "\n")  # built from other sources
    ok, why = native.decide()
    assert not ok and "stale" in why
    stamp.unlink()  # no stamp: what was built is unknown
    assert native.decide()[0] is False
    stamp.write_text(native.digest() + "\n")
    assert native.decide() == (True, "compiled with mypyc")
    monkeypatch.setenv("TACC_HUB_PURE_PYTHON", "1")
    assert native.decide() == (False, "pure Python: TACC_HUB_PURE_PYTHON=1")


def test_a_stale_build_loads_the_python_source(tmp_path: Path) -> None:
    """In a process whose stamp says "other sources", the finder loads every compiled module from its .py."""
    code = (
        "import sys; from pathlib import Path\n"
        "import tacc_hub.scheduler.native as n\n"
        f"n.STAMP = Path({str(tmp_path / 'stamp')!r}); Path(n.STAMP).write_text('x')\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, n._SourceFinder)]\n"
        "n.install()\n"
        "import importlib\n"
        "mods = [importlib.import_module(m) for m in n.MODULES]\n"
        "print(all(m.__file__.endswith('.py') for m in mods), n.status())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TACC_HUB_PURE_PYTHON"}
    # -c imports tacc_hub.scheduler (and so its finder decision) first; start from a fresh interpreter
    # where only ``native`` is loaded: the package import is what runs install() for real
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split(maxsplit=1)
    assert out[0] == "True"
    assert "stale" in out[1]
