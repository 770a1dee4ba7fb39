"""The JupyterLab side panel's own checks, run by pytest so that CI's scripts/test.sh runs them:
the jest suite of its state logic (task-list merge and notifications, log offsets and resume,
times and ETAs), the committed bundle being built from the current sources, and the wheel's
mapping that installs it where Lab looks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "build-labextension.sh"
NAME = "tacc-hub-labextension"
# jlpm and jupyter come with this interpreter's jupyterlab
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def _need_node() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is missing: the Lab panel's jest suite needs Node.js "
                    "(scripts/test.sh installs Debian's nodejs and npm; or apt-get install nodejs npm)")


@pytest.mark.timeout(900)  # a cold `jlpm install` takes minutes on a small machine
def test_jest_suite_passes():
    _need_node()
    r = subprocess.run([str(BUILD), "--test"], cwd=ROOT, capture_output=True, text=True, timeout=880, env=ENV)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "Tests:" in out and "failed" not in out.split("Tests:")[-1].splitlines()[0], out[-3000:]


def test_committed_bundle_is_built_from_the_sources():
    r = subprocess.run([str(BUILD), "--check"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0, r.stderr
    pkg = json.loads((ROOT / "tacc_hub" / "labextension" / "package.json").read_text())
    assert pkg["name"] == NAME
    remote = pkg["jupyterlab"]["_build"]["load"]
    assert (ROOT / "tacc_hub" / "labextension" / remote).is_file()


def test_the_wheel_installs_it_where_lab_looks():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shared = conf["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["tacc_hub/labextension"] == f"share/jupyter/labextensions/{NAME}"
    src = json.loads((ROOT / "labextension" / "package.json").read_text())
    assert src["name"] == NAME and src["jupyterlab"]["outputDir"] == "../tacc_hub/labextension"


def test_lab_lists_the_bundle_enabled(tmp_path: Path):
    """What `jupyter labextension list` says of the bundle where an install puts it (here: a data dir)."""
    data = tmp_path / "share" / "jupyter"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / NAME).symlink_to(ROOT / "tacc_hub" / "labextension")
    env = {**ENV, "JUPYTER_PATH": str(data), "NO_COLOR": "1"}
    r = subprocess.run([str(Path(sys.executable).parent / "jupyter"), "labextension", "list"], env=env,
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    line = next((x for x in out.splitlines() if NAME in x), "")
    assert "enabled" in line and "OK" in line and "(python, tacc_hub)" in line, out
