"""The server wrapper with the user's extra packages: the server on its own interpreter, the kernel in the venv."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tacc_spawner.server import own_kernel, server_command, site_dirs


def test_the_server_command_moves_to_the_servers_interpreter(tmp_path: Path) -> None:
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (base / "jupyterhub-singleuser").write_text("#!/bin/sh\n")
    (base / "jupyterhub-singleuser").chmod(0o755)
    py = str(base / "python")
    assert server_command(["python3", "-c", "x", "--port=1"], "python3", py) == [py, "-c", "x", "--port=1"]
    assert server_command(["jupyterhub-singleuser"], "python3", py) == [str(base / "jupyterhub-singleuser")]
    assert server_command(["my-server"], "python3", py) == ["my-server"]  # not beside it: as configured
    assert server_command(["python3", "-c", "x"], "python3", None) == ["python3", "-c", "x"]  # no extra packages


def test_the_kernel_runs_in_the_venv_with_the_servers_packages_after_its_own(tmp_path: Path) -> None:
    env = {"JUPYTER_PATH": "/elsewhere"}
    spec = own_kernel(tmp_path / ".tacc-jupyter", "/venv/bin/python3", env, ["/base/site-packages", "/b2"])
    kernel = json.loads((spec / "kernel.json").read_text())
    assert kernel["argv"][0] == "/venv/bin/python3" and kernel["argv"][-2:] == ["-f", "{connection_file}"]
    assert kernel["argv"][3] == os.pathsep.join(["/base/site-packages", "/b2"])
    assert env["JUPYTER_PATH"] == os.pathsep.join([str(tmp_path / ".tacc-jupyter"), "/elsewhere"])
    assert site_dirs(sys.executable) and all(Path(d).is_dir() for d in site_dirs(sys.executable))
    assert site_dirs(str(tmp_path / "missing")) == []
