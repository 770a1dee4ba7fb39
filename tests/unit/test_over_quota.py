"""A waiting task that a lowered quota rules out for good: reason OverQuota, no estimate, never started, and
started as usual once the quota is raised again (issue 16, bug 4)."""

from __future__ import annotations

import pytest

from tacc_hub.scheduler import ClusterState, Node
from tacc_hub.scheduler.explain import explain, over_quota
from tacc_hub.scheduler.policies import FifoGang, Tacc
from tacc_hub.scheduler.policy import REASONS, Limits, Quotas, TaskView
from tacc_hub.scheduler.queue import LiveQueue
from tacc_hub.scheduler.quota import refusal


def tv(i: int, gpus: int, owner: str = "bob", group: str = "g", time_limit: float = 3600.0) -> TaskView:
    return TaskView(id=i, owner=owner, group=group, submit=float(i), nodes=1, gpus_per_node=gpus,
                    predicted=100.0, time_limit=time_limit)


def queue(policy) -> LiveQueue:
    return LiveQueue(ClusterState([Node("n0", 8)]), policy)


def test_the_detail_is_the_submit_checks_own_words_and_says_what_happens():
    q = Quotas(users={"bob": Limits(max_gpus=2)})
    why = over_quota(tv(1, 4), q)
    assert why == ("can never start under the current quota: needs 4 GPUs; user bob may hold at most 2 (2 over); "
                   "it stays queued and starts if the quota is raised, or cancel it")
    assert refusal(q, "bob", "g", 4, 3600.0) in why  # one check, one wording: the submit refusal's
    assert over_quota(tv(2, 2), q) is None and over_quota(tv(3, 4), None) is None
    assert "OverQuota" in REASONS


def test_a_budget_that_can_never_cover_gpus_times_the_time_limit():
    q = Quotas(groups={"g": Limits(gpu_hours=1.0)}, period="week")
    why = over_quota(tv(1, 2, time_limit=3600.0), q)
    assert why is not None and "needs 2.0 GPU-hours (2 GPUs x 1 h); group g's budget is 1.0 GPU-hours per week" in why
    assert over_quota(tv(2, 1, time_limit=3600.0), q) is None  # exactly the budget: it can run


@pytest.mark.parametrize("policy", [Tacc, FifoGang], ids=["tacc", "fifo"])
def test_lowered_cap_holds_the_task_says_so_and_a_raise_lets_it_start(policy):
    lq = queue(policy())
    lq.add(tv(1, 4))
    lq.add(tv(2, 1, owner="ann"))
    low = Quotas(users={"bob": Limits(max_gpus=2)})
    assert [s.task_id for s in lq.plan(0.0, low).starts] == [2]  # bob holds nothing, yet 4 > 2 can never start
    ex = lq.explain(1.0, low)[1]
    assert ex.reason == "OverQuota" and ex.estimated_start is None, ex
    assert "needs 4 GPUs; user bob may hold at most 2 (2 over)" in ex.detail and "at its cap" not in ex.detail
    assert lq.plan(2.0, low).starts == []
    raised = Quotas(users={"bob": Limits(max_gpus=4)})
    assert [s.task_id for s in lq.plan(3.0, raised).starts] == [1]


@pytest.mark.parametrize("policy", [Tacc, FifoGang], ids=["tacc", "fifo"])
def test_lowered_budget_holds_the_task_instead_of_starting_it(policy):
    lq = queue(policy())
    lq.add(tv(1, 2, time_limit=3600.0))  # 2 GPU-hours at most
    low = Quotas(users={"bob": Limits(gpu_hours=1.0)})  # not spent, but it can never cover 2 GPU-hours
    assert lq.plan(0.0, low).starts == []
    ex = lq.explain(0.0, low)[1]
    assert ex.reason == "OverQuota" and ex.estimated_start is None and "GPU-hours" in ex.detail, ex
    assert [s.task_id for s in lq.plan(1.0, Quotas(users={"bob": Limits(gpu_hours=2.0)})).starts] == [1]


def test_over_quota_comes_before_a_spent_budget_and_takes_no_gpus_in_the_projection():
    lq = queue(FifoGang())
    lq.add(tv(1, 8, owner="bob"))
    lq.add(tv(2, 8, owner="ann"))
    q = Quotas(users={"bob": Limits(max_gpus=2)}, exhausted=frozenset({"user:bob"}))
    view = lq.views(0.0, q)[0]
    view = type(view)(view.now, dict(lq.waiting), view.running, view.nodes, q)  # bob's task in view: pure explain
    ex = explain(view, list(view.waiting.values()))
    assert ex[1].reason == "OverQuota" and ex[1].estimated_start is None
    assert ex[2].estimated_start == 0.0  # bob's 8 GPUs are not counted ahead of ann's task
    assert Tacc().explain(view)[1].reason == "OverQuota"


def test_a_server_tasks_progress_says_it_can_never_start_without_an_estimate():
    from tacc_spawner.progress import task_event, timeout_message

    detail = over_quota(tv(1, 4), Quotas(users={"bob": Limits(max_gpus=2)}))
    task = {"id": 12, "status": "pending",
            "queue": {"reason": "OverQuota", "position": 1, "estimated_start": None, "detail": detail}}
    msg = task_event(task)["message"]
    assert msg == f"Task 12 queued at position 1, but {detail} (reason OverQuota)", msg
    assert "estimated start" not in msg
    assert f"task 12 is still queued at position 1, but {detail}" in timeout_message(task, 300)


def test_the_api_document_names_the_over_quota_reason():
    from tacc_hub.service.app import ROUTES
    from tacc_hub.service.openapi import build_openapi

    queue_out = build_openapi(ROUTES)["components"]["schemas"]["QueueOut"]["properties"]
    assert "OverQuota" in queue_out["reason"]["description"]
    assert "OverQuota" in queue_out["estimated_start"]["description"]
