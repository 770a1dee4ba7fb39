"""The audit trail behind a real JupyterHub: rows name the hub's user (from the hub's token, never the request),
the request id comes back through the hub's proxy, and a hub user without admin gets 403."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import HubProcess
from .test_hub_auth import TASKS, api, submit, wait_status

BIN = Path(sys.executable).parent


def test_hub_admins_actions_are_rows_of_theirs(hub: HubProcess) -> None:
    admin, alice = hub.token("admin", TASKS), hub.token("alice", TASKS)
    r = api(hub, admin, "PUT", "/api/admin/quotas/group/hub-audit", json={"max_gpus": 2})
    assert r.status_code == 200, r.text
    quota_rid = r.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{16}", quota_rid)

    tid = submit(hub, alice, "sleep 60", name="audited")
    wait_status(hub, alice, tid, {"running"})
    r = api(hub, admin, "POST", f"/api/tasks/{tid}/cancel")
    assert r.status_code == 200, r.text
    cancel_rid = r.headers["X-Request-Id"]
    wait_status(hub, alice, tid, {"cancelled"})

    r = api(hub, alice, "GET", "/api/admin/audit")
    assert r.status_code == 403 and "events" not in r.json()

    r = api(hub, admin, "GET", "/api/admin/audit", params={"limit": 1000})
    assert r.status_code == 200, r.text
    rows = {e["request_id"]: e for e in r.json()["events"]}
    assert (rows[quota_rid]["actor"], rows[quota_rid]["action"], rows[quota_rid]["target"],
            rows[quota_rid]["before"], rows[quota_rid]["after"]) == (
        "admin", "quota_set", "quota:group/hub-audit", None, {"max_gpus": 2, "guaranteed_gpus": 0, "gpu_hours": None})
    assert (rows[cancel_rid]["actor"], rows[cancel_rid]["action"], rows[cancel_rid]["target"],
            rows[cancel_rid]["before"]) == ("admin", "cancel", f"task:{tid}", {"status": "running", "owner": "alice"})

    out = subprocess.run([str(BIN / "tacc-hub"), "audit", "--json", "--limit=1000", f"--state-dir={hub.state_dir}"],
                         capture_output=True, text=True, env={**os.environ, "TACC_DB_URL": ""}, timeout=60)
    assert out.returncode == 0, out.stderr
    cli_rows = {e["request_id"]: e for e in json.loads(out.stdout)["events"]}
    assert cli_rows[quota_rid] == rows[quota_rid] and cli_rows[cancel_rid] == rows[cancel_rid]
