"""``GET /api/usage`` on a real service whose GPUs are sampled (a fake nvidia-smi): efficiency and GPU-hours.

The service's sampler reads ``tests/fake_nvidia_smi.py`` (slot 0 at 37 %, slot 1 at 91 %) every 0.5 s;
alice's one-GPU task runs until it has samples, and her usage shows its mean utilization and GPU-hours.
bob, asking with every parameter that could name alice, sees only his own.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .conftest import Api, ServiceProcess, tcloud, write_task

FAKE = str(Path(__file__).resolve().parents[1] / "fake_nvidia_smi.py")
READINGS = {0: 37.0, 1: 91.0}


def test_my_usage_shows_gpu_hours_and_mean_utilization_of_my_tasks_only(tmp_path: Path) -> None:
    command = [sys.executable, FAKE, *(f"{i}={u:g},1000" for i, u in READINGS.items())]
    svc = ServiceProcess(tmp_path / "svc", "--gpus=2", "--TaccHub.grace_period=1",
                         "--TaccHub.gpu_sample_interval=0.5",
                         *(f"--TaccHub.gpu_query_command={arg}" for arg in command)).start()
    try:
        d = write_task(tmp_path / "alice", "name: sampled\ncode: .\nentrypoint: sleep 300\n"
                       "resources: {gpus_per_node: 1}\n")
        res = tcloud(svc, "alice", "submit", str(d), "--json")
        assert res.returncode == 0, res.stderr
        tid = json.loads(res.stdout)["id"]
        alice, bob = Api(svc.url, svc.token("alice")), Api(svc.url, svc.token("bob"))
        (slot,) = alice.wait_status(tid, {"running"})["placement"]["nodes"][0]["gpus"]
        deadline = time.monotonic() + 60
        while len(alice.call("GET", f"/api/tasks/{tid}/usage")[1].get("samples", [])) < 2:
            assert time.monotonic() < deadline, "no samples"
            time.sleep(0.1)
        assert alice.call("POST", f"/api/tasks/{tid}/cancel")[0] == 200
        alice.wait_status(tid, {"cancelled"})

        status, mine = alice.call("GET", "/api/usage")
        assert status == 200 and mine["user"] == "alice"
        (task,) = [t for t in mine["recent"] if t["id"] == tid]
        assert task["util_mean"] == READINGS[slot] and task["samples"] >= 2 and task["gpus"] == 1
        assert task["gpu_hours"] > 0 and abs(mine["gpu_hours"][-1] - task["gpu_hours"]) < 1e-3
        assert abs(mine["used_gpu_hours"] - alice.call("GET", "/api/quota")[1]["used_gpu_hours"]["user"]) < 1e-3
        assert len(mine["days"]) == 30 and len(mine["gpu_hours"]) == 30 and mine["budget_gpu_hours"] is None

        for query in ("", "?user=alice", "?owner=alice", "?all=1", "?user=alice&all=1", f"?task={tid}"):
            status, theirs = bob.call("GET", f"/api/usage{query}")
            assert status == 200 and theirs["user"] == "bob", query
            assert theirs["recent"] == [] and theirs["used_gpu_hours"] == 0 and sum(theirs["gpu_hours"]) == 0, query
        assert bob.call("GET", "/api/usage?days=0")[0] == 400
    finally:
        svc.stop()
