"""Pipelines and dependencies (issue 20), through the real service and the real ``tcloud``.

- examples/pipeline/pipeline.yaml (prepare -> train: the DDP example, 2 processes under torchrun ->
  evaluate) submitted with ``tcloud submit``: one pipeline, ends succeeded, evaluate read train's model
  and prepare's test set (inputs copied into its working directory).
- When step 1 fails (exit 3), steps 2 and 3 end cancelled at once, their reasons naming step 1's task.
- A single task that depends on another waits with reason Dependency, then runs after it.
- A dependency on another user's task or array (or on none) is 404 and nothing is stored.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from .conftest import ROOT, Api, tcloud
from .groups_util import RECORDER, TERMINAL, cancel_and_wait, upload_code, wait_ended

pytestmark = pytest.mark.timeout(600)


def pipeline_of(api: Api, pid: int) -> dict[str, Any]:
    status, body = api.call("GET", f"/api/pipelines/{pid}")
    assert status == 200, (status, body)
    return body


def wait_pipeline(api: Api, pid: int, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = pipeline_of(api, pid)
        if all(s["status"] in TERMINAL for s in last["steps"]):
            return last
        time.sleep(0.3)
    raise AssertionError(f"pipeline {pid} did not end in {timeout} s: {last}")


def step_ids(p: dict[str, Any]) -> list[int]:
    return [s["task_id"] for s in p["steps"] if s.get("task_id")]


def logs(api: Api, tid: int) -> str:
    status, body = api.call("GET", f"/api/tasks/{tid}/logs")
    assert status == 200, (status, body)
    return body["data"]


def test_the_pipeline_example_prepare_train_ddp_evaluate_succeeds(service):
    res = tcloud(service, "alice", "submit", str(ROOT / "examples" / "pipeline" / "pipeline.yaml"), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    out = json.loads(res.stdout)
    pid = out["id"]
    api = Api(service.url, service.token("alice"))
    try:
        assert [s["name"] for s in out["steps"]] == ["prepare", "train", "evaluate"], out
        assert [s["needs"] for s in out["steps"]] == [[], ["prepare"], ["train"]], out
        p = wait_pipeline(api, pid, timeout=500)
    finally:
        cancel_and_wait(api, step_ids(pipeline_of(api, pid)))
    assert p["status"] == "succeeded", p
    assert [s["status"] for s in p["steps"]] == ["succeeded"] * 3, p
    prep, train, ev = step_ids(p)
    _, t_prep = api.call("GET", f"/api/tasks/{prep}")
    _, t_train = api.call("GET", f"/api/tasks/{train}")
    _, t_ev = api.call("GET", f"/api/tasks/{ev}")
    assert all(t["pipeline_id"] == pid for t in (t_prep, t_train, t_ev)), (t_prep, t_train, t_ev)
    # each waited for the one before it
    assert t_train["started_at"] >= t_prep["finished_at"] and t_ev["started_at"] >= t_train["finished_at"]
    train_log = logs(api, train)
    for rank in (0, 1):
        assert f"rank {rank}/2 done: weights in sync across ranks: True" in train_log, train_log[-2000:]
    ev_log = logs(api, ev)
    assert "evaluate: model/model.pt from train" in ev_log and "on 256 samples from prepare" in ev_log, ev_log
    # tcloud shows it as one pipeline
    res = tcloud(service, "alice", "ps")
    assert res.returncode == 0, res.stderr
    assert "prepare-train-evaluate" in res.stdout, res.stdout


def queue_of(api: Api, tid: int, timeout: float = 5) -> dict[str, Any]:
    """A waiting task's queue explanation (recomputed at most twice a second: wait for the first)."""
    deadline = time.monotonic() + timeout
    while True:
        _, t = api.call("GET", f"/api/tasks/{tid}")
        assert t["status"] == "pending", t
        if t.get("queue") or time.monotonic() > deadline:
            assert t.get("queue"), t
            return t["queue"]
        time.sleep(0.1)


def _shell_spec(code: dict[str, str], name: str, line: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "code": code, "entrypoint": {"shell": [line]}, "resources": {"gpus_per_node": 0}, **extra}


def test_when_step_one_fails_steps_two_and_three_end_cancelled_naming_it(service):
    api = Api(service.url, service.token("alice"))
    code = upload_code(api)
    status, p = api.call("POST", "/api/pipelines", {"name": "doomed", "steps": [
        {"name": "prepare", "needs": [], "spec": _shell_spec(code, "prepare", "sleep 1; exit 3")},
        {"name": "train", "needs": ["prepare"], "spec": _shell_spec(code, "train", "echo train-ran")},
        {"name": "evaluate", "needs": ["train"], "spec": _shell_spec(code, "evaluate", "echo evaluate-ran")},
    ]})
    assert status == 201, (status, p)
    pid = p["id"]
    try:
        ids = step_ids(p)
        assert len(ids) == 3, p
        # while step 1 runs, step 2 waits on it: reason Dependency, naming it
        q = queue_of(api, ids[1])
        assert q["reason"] == "Dependency" and f"task {ids[0]}" in q["detail"], q
        ended = wait_ended(api, ids, timeout=60)
    finally:
        cancel_and_wait(api, step_ids(pipeline_of(api, pid)))
    first, second, third = (ended[i] for i in ids)
    assert first["status"] == "failed" and first["exit_code"] == 3, first
    for t in (second, third):
        assert t["status"] == "cancelled", t
        assert t["started_at"] is None, t  # never ran
        assert f"task {ids[0]}" in (t["reason"] or ""), t["reason"]
        assert t["finished_at"] - first["finished_at"] < 10, "not cancelled at once"
    assert "dependency can never be met" in second["reason"], second["reason"]
    final = pipeline_of(api, pid)
    assert final["status"] == "failed", final
    assert [s["status"] for s in final["steps"]] == ["failed", "cancelled", "cancelled"], final
    assert f"task {ids[0]}" in (final["steps"][1]["reason"] or ""), final
    for tid in ids[1:]:
        assert "-ran" not in logs(api, tid)


def test_a_task_depending_on_another_waits_then_runs_after_it(service):
    api = Api(service.url, service.token("alice"))
    code = upload_code(api)
    status, a = api.call("POST", "/api/tasks", _shell_spec(code, "first", "sleep 3"))
    assert status == 201, a
    status, b = api.call("POST", "/api/tasks", _shell_spec(code, "second", "echo second-ran",
                                                            depends_on=[{"task": a["id"]}]))
    assert status == 201, (status, b)
    # depends_on a task that can already never be met: refused, naming the field
    status, c = api.call("POST", "/api/tasks", _shell_spec(code, "third", "echo x",
                                                            depends_on=[{"task": a["id"], "when": "failed"}]))
    try:
        assert status == 201, (status, c)  # a is not ended: "failed" can still happen
        q = queue_of(api, b["id"])
        assert q["reason"] == "Dependency", q
        assert f"task {a['id']}" in q["detail"] and "first" in q["detail"], q
        ended = wait_ended(api, [a["id"], b["id"], c["id"]], timeout=60)
        assert ended[a["id"]]["status"] == "succeeded"
        assert ended[b["id"]]["status"] == "succeeded", ended[b["id"]]
        assert ended[b["id"]]["started_at"] >= ended[a["id"]]["finished_at"]
        assert "second-ran" in logs(api, b["id"])
        assert ended[c["id"]]["status"] == "cancelled" and f"task {a['id']}" in ended[c["id"]]["reason"], ended[c["id"]]
        status, body = api.call("POST", "/api/tasks", _shell_spec(code, "never", "echo x",
                                                                   depends_on=[{"task": a["id"], "when": "failed"}]))
        assert status == 422 and "depends_on[0]" in json.dumps(body), (status, body)
    finally:
        cancel_and_wait(api, [a["id"], b["id"], c["id"]])


def test_a_dependency_on_another_users_task_or_array_is_404_and_nothing_is_stored(service):
    alice = Api(service.url, service.token("alice"))
    bob = Api(service.url, service.token("bob"))
    bcode = upload_code(bob)
    status, bt = bob.call("POST", "/api/tasks", _shell_spec(bcode, "bobs", "sleep 20"))
    assert status == 201, bt
    status, barr = bob.call("POST", "/api/tasks", {"name": "bobs-array", "code": bcode,
                                                    "entrypoint": {"argv": ["python3", "rec.py", "--sleep=20"]},
                                                    "resources": {"gpus_per_node": 0}, "array": "0-1"})
    assert status == 201, barr
    bob_array = barr["array"]["id"]
    code = upload_code(alice, {"rec.py": RECORDER})
    try:
        _, before = alice.call("GET", "/api/tasks?limit=1")
        _, arrays_before = alice.call("GET", "/api/arrays")
        _, pipes_before = alice.call("GET", "/api/pipelines")
        missing = bt["id"] + 10_000_000
        answers = {}
        for label, dep in (("bob's task", {"task": bt["id"]}), ("bob's array", {"array": bob_array}),
                           ("no task", {"task": missing})):
            st, body = alice.call("POST", "/api/tasks", _shell_spec(code, "mine", "echo x", depends_on=[dep]))
            assert st == 404, (label, st, body)
            answers[label] = body
            st, body = alice.call("POST", "/api/tasks", {**_shell_spec(code, "mine-arr", "echo x"),
                                                         "array": "0-3", "depends_on": [dep]})
            assert st == 404, (label, "array", st, body)
            st, body = alice.call("POST", "/api/pipelines", {"name": "steal", "steps": [
                {"name": "a", "needs": [], "spec": _shell_spec(code, "a", "echo a")},
                {"name": "b", "needs": ["a"], "spec": _shell_spec(code, "b", "echo b", depends_on=[dep])}]})
            assert st == 404, (label, "pipeline", st, body)
        # an input from bob's task is 404 as well
        st, body = alice.call("POST", "/api/tasks", _shell_spec(code, "mine", "echo x",
                                                                inputs=[{"task": bt["id"], "path": "outputs"}]))
        assert st == 404, ("input", st, body)
        # bob's task and a task that does not exist answer alike (no oracle of other users' ids)
        norm = {k: json.dumps(v).replace(str(missing), "ID").replace(str(bt["id"]), "ID").replace(str(bob_array), "ID")
                for k, v in answers.items()}
        assert norm["bob's task"] == norm["no task"], norm
        _, after = alice.call("GET", "/api/tasks?limit=1")
        _, arrays_after = alice.call("GET", "/api/arrays")
        _, pipes_after = alice.call("GET", "/api/pipelines")
        assert after["total"] == before["total"], (before, after)
        assert len(arrays_after["arrays"]) == len(arrays_before["arrays"])
        assert len(pipes_after["pipelines"]) == len(pipes_before["pipelines"])
        _, bt_now = bob.call("GET", f"/api/tasks/{bt['id']}")
        assert bt_now["status"] in ("pending", "starting", "running"), bt_now
        assert alice.call("GET", f"/api/arrays/{bob_array}")[0] == 404
    finally:
        cancel_and_wait(bob, [bt["id"]], [bob_array])
