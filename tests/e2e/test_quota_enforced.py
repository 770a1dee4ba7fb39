"""Quotas enforced by the live service: refusal at submit, waiting at a cap, waiting on a spent budget."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from .conftest import Api, ServiceProcess, tcloud, write_task


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    s = ServiceProcess(tmp_path_factory.mktemp("quota-enforced"), "--gpus=2").start()
    yield s
    s.stop()


def task(tmp, name: str, gpus: int, cmd: str = "sleep 30", limit: str = "1h"):
    return write_task(tmp / name, f"name: {name}\ncode: .\nentrypoint: {cmd}\n"
                                  f"resources: {{gpus_per_node: {gpus}, time_limit: {limit}}}\n")


def submit(svc: ServiceProcess, user: str, path) -> int:
    res = tcloud(svc, user, "submit", str(path), "--json")
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout)["id"])


def wait_queue_reason(api: Api, tid: int, reason: str, timeout: float = 15) -> dict:
    deadline = time.monotonic() + timeout
    t: dict = {}
    while time.monotonic() < deadline:
        _, t = api.call("GET", f"/api/tasks/{tid}")
        if t["status"] == "pending" and (t.get("queue") or {}).get("reason") == reason:
            return t
        time.sleep(0.1)
    raise AssertionError(f"task {tid} never waited for {reason}: {t}")


def test_a_request_over_a_cap_is_refused_at_submit_saying_by_how_much(svc, tmp_path):
    admin = Api(svc.url, svc.token("root", admin=True))
    assert admin.call("PUT", "/api/admin/quotas/user/quinn", {"max_gpus": 1})[0] == 200
    res = tcloud(svc, "quinn", "submit", str(task(tmp_path, "big", 2)))
    assert res.returncode != 0
    assert "over quota" in res.stderr and "at most 1" in res.stderr and "1 over" in res.stderr
    dry = tcloud(svc, "quinn", "submit", str(task(tmp_path, "big2", 2)), "--dry-run")
    assert dry.returncode != 0 and "over quota" in dry.stderr
    quinn = Api(svc.url, svc.token("quinn"))
    assert quinn.call("GET", "/api/tasks")[1]["total"] == 0  # nothing stored

    # within the cap it is accepted, and a second task waits for the cap, saying so
    first = submit(svc, "quinn", task(tmp_path, "one", 1))
    second = submit(svc, "quinn", task(tmp_path, "two", 1))
    quinn.wait_status(first, {"running"})
    t = wait_queue_reason(quinn, second, "Quota")
    detail = t["queue"]["detail"]
    assert "quinn" in detail and "1 GPU" in detail and t["reason"].startswith("Quota: "), detail
    # raising the cap lets it start at once: the service reloads quotas when they change
    assert admin.call("PUT", "/api/admin/quotas/user/quinn", {"max_gpus": 2})[0] == 200
    quinn.wait_status(second, {"running"})
    for tid in (first, second):
        quinn.call("POST", f"/api/tasks/{tid}/cancel")
        quinn.wait_status(tid, {"cancelled"}, timeout=30)


def test_a_spent_gpu_hour_budget_makes_tasks_wait_until_it_is_raised(svc, tmp_path):
    admin = Api(svc.url, svc.token("root", admin=True))
    # 0.002 GPU-hours = 7.2 GPU-seconds for the group; two 1-GPU tasks of 4 s spend it
    assert admin.call("PUT", "/api/admin/quotas/group/lab-b", {"gpu_hours": 0.002})[0] == 200
    assert admin.call("PUT", "/api/admin/users/rita/group", {"group": "lab-b"})[0] == 200
    rita = Api(svc.url, svc.token("rita"))
    res = tcloud(svc, "rita", "submit", str(task(tmp_path, "long", 1, limit="1h")))
    assert res.returncode != 0 and "GPU-hours" in res.stderr  # 1 GPU x 1 h can never fit 0.002 GPU-hours
    spend = [submit(svc, "rita", task(tmp_path, f"spend{i}", 1, cmd="sleep 4", limit="5s")) for i in range(2)]
    for tid in spend:
        rita.wait_status(tid, {"succeeded"}, timeout=30)
    late = submit(svc, "rita", task(tmp_path, "late", 1, cmd="echo ran", limit="5s"))
    t = wait_queue_reason(rita, late, "Quota")
    assert "GPU-hours" in t["queue"]["detail"] and t["queue"]["estimated_start"] is None
    shown = tcloud(svc, "rita", "quota")
    assert shown.returncode == 0, shown.stderr
    assert "user rita in group lab-b" in shown.stdout
    group_row = next(line for line in shown.stdout.splitlines() if line.startswith("group "))
    assert group_row.split()[3] == "0.002" and group_row.split()[-1] == "0.00"  # 0.002 budget, nothing left
    ps = tcloud(svc, "rita", "ps", "--plain")
    row = next(line for line in ps.stdout.splitlines() if line.startswith(f"{late} "))
    assert " ? " in row and "Quota" in row
    assert admin.call("PUT", "/api/admin/quotas/group/lab-b", {"gpu_hours": 1.0})[0] == 200
    assert rita.wait_status(late, {"succeeded"}, timeout=30)["exit_code"] == 0
