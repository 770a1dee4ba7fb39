"""The web-port proxy on the Slurm dev cluster: the service reaches the task's node (NodeAddr), and asks a
step in the task's job (as its owner) which ports are the job's.

The dev cluster's nodes are all this machine (NodeAddr 127.0.0.1): bob's task's port, the service's
own port and alice's are on one network, exactly where a port check that only asked "is anything
listening there" would let alice through to bob's server.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import urllib3

from tests.e2e.conftest import Api, ServiceProcess, free_port, tcloud, write_task

pytestmark = pytest.mark.timeout(600)

SERVE = ("name: {name}\ncode: .\nports: [{port}]\nresources: {{gpus_per_node: 1}}\n"
         "entrypoint: python3 -m http.server {port} --bind 127.0.0.1\n")


def _submit(svc: ServiceProcess, user: str, d: Path) -> int:
    res = tcloud(svc, user, "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout)["id"])


def _serving(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def test_a_task_port_is_reached_on_its_node_and_no_one_elses(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    svc = slurm_service
    alice, bob = Api(svc.url, svc.token("alice")), Api(svc.url, svc.token("bob"))
    mine, theirs = free_port(), free_port()
    bob_task = _submit(svc, "bob", write_task(tmp_path / "b", SERVE.format(name="bobweb", port=theirs)))
    task = _submit(svc, "alice", write_task(tmp_path / "a", SERVE.format(name="web", port=mine),
                                            {"hello.txt": "hello from alice's job\n"}))
    for api, tid in ((alice, task), (bob, bob_task)):
        api.wait_status(tid, {"running"}, timeout=180)
    _serving(mine)
    _serving(theirs)
    http = urllib3.PoolManager()

    def get(api: Api, path: str) -> urllib3.BaseHTTPResponse:
        return http.request("GET", svc.url + path, headers=api.headers, retries=False, timeout=60)

    try:
        r = get(alice, f"/tasks/{task}/proxy/{mine}/hello.txt")
        assert r.status == 200 and r.data == b"hello from alice's job\n", (r.status, r.data[:300])
        status, out = alice.call("GET", f"/api/tasks/{task}/ports")
        assert status == 200, out
        assert {"port": mine, "declared": True, "listening": True, "label": None,
                "url": f"/tasks/{task}/proxy/{mine}/"} in out["ports"], out
        assert theirs not in [p["port"] for p in out["ports"]], out
        # bob's port on the same node, and the service's own port: not alice's task's
        for port in (theirs, svc.port):
            r = get(alice, f"/tasks/{task}/proxy/{port}/")
            assert r.status == 404, (port, r.status, r.data[:300])
            assert json.loads(r.data)["message"] == f"task {task} does not listen on port {port}"
        r = get(bob, f"/tasks/{task}/proxy/{mine}/hello.txt")
        assert r.status == 404 and json.loads(r.data)["message"] == f"no task {task}", r.data
        # bob reaches his own
        assert get(bob, f"/tasks/{bob_task}/proxy/{theirs}/").status == 200
    finally:  # cancelled and gone before the service stops (a stopping service leaves its tasks running)
        for api, tid in ((alice, task), (bob, bob_task)):
            api.call("POST", f"/api/tasks/{tid}/cancel")
        for api, tid in ((alice, task), (bob, bob_task)):
            api.wait_status(tid, {"cancelled", "failed", "succeeded"}, timeout=120)
