"""A quota lowered under a waiting task, through the live service's API: the task says it can never start
(OverQuota, no estimate, the limit and by how much), stays queued, and starts once the quota is raised (issue 16,
bug 4). And a task waiting at its user's cap names the user's running tasks that hold it, the Jupyter server by
name (bug 7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import Api, ServiceProcess, tcloud
from .test_quota_enforced import submit, task, wait_queue_reason


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    s = ServiceProcess(tmp_path_factory.mktemp("quota-lowered"), "--gpus=4").start()
    yield s
    s.stop()


def _cancel(api: Api, *tids: int) -> None:
    for tid in tids:
        api.call("POST", f"/api/tasks/{tid}/cancel")
    for tid in tids:
        api.wait_status(tid, {"cancelled", "succeeded", "failed"}, timeout=30)


def test_a_lowered_cap_says_the_task_can_never_start_and_a_raise_starts_it(svc, tmp_path):
    admin = Api(svc.url, svc.token("root", admin=True))
    ann, bob = Api(svc.url, svc.token("ann")), Api(svc.url, svc.token("bob"))
    blocker = submit(svc, "ann", task(tmp_path, "blocker", 1, cmd="sleep 120"))
    ann.wait_status(blocker, {"running"})
    big = submit(svc, "bob", task(tmp_path, "big", 4, cmd="echo ran"))
    wait_queue_reason(bob, big, "Resources")  # it waits for GPUs, not for a quota
    try:
        assert admin.call("PUT", "/api/admin/quotas/user/bob", {"max_gpus": 2})[0] == 200
        t = wait_queue_reason(bob, big, "OverQuota")
        q = t["queue"]
        assert q["estimated_start"] is None, q
        assert q["detail"] == ("can never start under the current quota: needs 4 GPUs; user bob may hold at most 2 "
                               "(2 over); it stays queued and starts if the quota is raised, or cancel it"), q
        assert t["status"] == "pending" and t["reason"] == f"OverQuota: {q['detail']}", t
        # every route gives the same explanation: the list, one task, and what tcloud prints
        listed = next(x for x in bob.call("GET", "/api/tasks")[1]["tasks"] if x["id"] == big)
        assert listed["queue"] == q, (listed["queue"], q)
        shown = tcloud(svc, "bob", "show", str(big))
        assert "OverQuota" in shown.stdout and "may hold at most 2" in shown.stdout, shown.stdout + shown.stderr
        # held, not ended: with the cluster free, a later task starts and it does not
        _cancel(ann, blocker)
        probe = submit(svc, "ann", task(tmp_path, "probe", 4, cmd="echo ran"))
        ann.wait_status(probe, {"succeeded"}, timeout=30)
        assert bob.call("GET", f"/api/tasks/{big}")[1]["status"] == "pending"
        assert admin.call("PUT", "/api/admin/quotas/user/bob", {"max_gpus": 4})[0] == 200
        assert bob.wait_status(big, {"succeeded"}, timeout=30)["exit_code"] == 0
    finally:
        admin.call("DELETE", "/api/admin/quotas/user/bob")
        _cancel(ann, blocker)
        _cancel(bob, big)


def test_a_lowered_budget_that_can_never_cover_the_task_holds_it(svc, tmp_path):
    admin = Api(svc.url, svc.token("root", admin=True))
    cy = Api(svc.url, svc.token("cy"))
    blocker = submit(svc, "ann", task(tmp_path, "blocker2", 4, cmd="sleep 120"))
    Api(svc.url, svc.token("ann")).wait_status(blocker, {"running"})
    late = submit(svc, "cy", task(tmp_path, "late", 2, cmd="echo ran", limit="1h"))  # at most 2 GPU-hours
    try:
        assert admin.call("PUT", "/api/admin/quotas/user/cy", {"gpu_hours": 1.0})[0] == 200
        q = wait_queue_reason(cy, late, "OverQuota")["queue"]
        assert q["estimated_start"] is None and "needs 2.0 GPU-hours (2 GPUs x 1 h)" in q["detail"], q
        assert "user cy's budget is 1.0 GPU-hours per month (1.0 over)" in q["detail"], q
        ann = Api(svc.url, svc.token("ann"))
        _cancel(ann, blocker)
        probe = submit(svc, "ann", task(tmp_path, "probe2", 4, cmd="echo ran"))
        ann.wait_status(probe, {"succeeded"}, timeout=30)
        assert cy.call("GET", f"/api/tasks/{late}")[1]["status"] == "pending"  # it would not fit the budget
        assert admin.call("PUT", "/api/admin/quotas/user/cy", {"gpu_hours": 2.0})[0] == 200
        assert cy.wait_status(late, {"succeeded"}, timeout=30)["exit_code"] == 0
    finally:
        admin.call("DELETE", "/api/admin/quotas/user/cy")
        _cancel(Api(svc.url, svc.token("ann")), blocker)
        _cancel(cy, late)


def test_a_task_at_its_users_cap_names_the_users_jupyter_server(svc, tmp_path):
    admin = Api(svc.url, svc.token("root", admin=True))
    dee = Api(svc.url, svc.token("dee"))
    assert admin.call("PUT", "/api/admin/quotas/user/dee", {"max_gpus": 2})[0] == 200
    # a server task as TaccSpawner makes one: named jupyter-USER, its entrypoint the wrapper tacc_server.py
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    (server_dir / "tacc_server.py").write_text("import time\ntime.sleep(120)\n")
    (server_dir / "tacc.yaml").write_text("name: jupyter-dee\ncode: .\nentrypoint: {argv: [python3, tacc_server.py]}\n"
                                          "resources: {gpus_per_node: 1, time_limit: 1h}\n")
    server = submit(svc, "dee", server_dir)
    other = submit(svc, "dee", task(tmp_path, "train", 1, cmd="sleep 120"))
    waiting = submit(svc, "dee", task(tmp_path, "more", 1, cmd="echo ran"))
    try:
        for tid in (server, other):
            dee.wait_status(tid, {"running"})
        q = wait_queue_reason(dee, waiting, "Quota")["queue"]
        assert q["detail"].endswith(f": your Jupyter server jupyter-dee (task {server}) holds 1, "
                                    f"task {other} holds 1"), q
    finally:
        admin.call("DELETE", "/api/admin/quotas/user/dee")
        _cancel(dee, server, other, waiting)
