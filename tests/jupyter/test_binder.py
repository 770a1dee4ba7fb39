"""binder/start: the embedded service comes up, and the command it runs gets TACC_URL and TACC_TOKEN."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import BIN, free_port

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import os
from tacc_hub.client import TaccClient
c = TaccClient(os.environ["TACC_URL"], os.environ["TACC_TOKEN"])
print("health", c.health().get("status", "ok"))
print("tasks", c.list()["total"])
"""


def test_binder_start_runs_the_service_and_exports_url_and_token(tmp_path):
    state = tmp_path / "tacc"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(tmp_path), "USER": "jovyan",
           "TACC_STATE_DIR": str(state), "TACC_PORT": str(free_port()), "TACC_URL": "", "TACC_TOKEN": "",
           "TACC_DB_URL": ""}
    try:
        out = subprocess.run([str(ROOT / "binder" / "start"), sys.executable, "-c", CHECK], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr + (state / "service.log").read_text()
        assert "health" in out.stdout and "tasks 0" in out.stdout, out
        assert "tacc service at http://127.0.0.1:" in out.stderr
    finally:
        pidfile = state / "service.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text())
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
