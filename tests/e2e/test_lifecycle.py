"""Cancel, GPU slots, queueing and the per-user cap, through the real service and CLI."""

from __future__ import annotations

import json
import os
import time

from .conftest import Api, task_pid, tcloud, write_task


def _submit(service, user, dir, *extra):
    res = tcloud(service, user, "submit", str(dir), "--json", *extra)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["id"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_cancel_a_long_task_kills_its_processes(service, tmp_path):
    d = write_task(tmp_path / "long", "name: long\ncode: .\nentrypoint:\n  - echo $$ > pid\n  - sleep 600\n")
    api = Api(service.url, service.token("alice"))
    tid = _submit(service, "alice", d)
    api.wait_status(tid, {"running"})
    pid = task_pid(service.data_dir, tid)
    assert _alive(pid)
    res = tcloud(service, "alice", "cancel", str(tid))
    assert res.returncode == 0, res.stderr
    t = api.wait_status(tid, {"cancelled"}, timeout=20)
    assert t["finished_at"] is not None
    assert not _alive(pid)
    # cancelling again is a conflict, not a crash
    status, body = api.call("POST", f"/api/tasks/{tid}/cancel")
    assert status == 409 and "already ended" in body["message"]


def test_cancel_escalates_to_sigkill_when_sigterm_is_ignored(service, tmp_path):
    d = write_task(tmp_path / "stubborn", "name: stubborn\ncode: .\nentrypoint:\n"
                   "  - trap '' TERM\n  - echo $$ > pid\n  - while true; do sleep 0.1; done\n")
    api = Api(service.url, service.token("alice"))
    tid = _submit(service, "alice", d)
    api.wait_status(tid, {"running"})
    pid = task_pid(service.data_dir, tid)
    api.call("POST", f"/api/tasks/{tid}/cancel")
    api.wait_status(tid, {"cancelled"}, timeout=20)  # grace period is 2 s in this service
    assert not _alive(pid)


def test_cancel_pending_task(service, tmp_path):
    api = Api(service.url, service.token("carol"))
    blocker = write_task(tmp_path / "b", "name: blocker\ncode: .\nentrypoint: sleep 30\n"
                         "resources: {gpus_per_node: 2}\n")
    b = _submit(service, "carol", blocker)
    b_started = api.wait_status(b, {"running"})["started_at"]
    waiter = _submit(service, "carol", write_task(tmp_path / "w", "name: waiter\ncode: .\nentrypoint: echo hi\n"
                                                  "resources: {gpus_per_node: 1}\n"))
    t = api.wait_status(waiter, {"pending"})
    time.sleep(0.7)
    _, t = api.call("GET", f"/api/tasks/{waiter}")
    assert t["status"] == "pending" and t["reason"].startswith("Resources: needs 1 GPUs; 0 free")
    q = t["queue"]
    assert q["reason"] == "Resources" and q["position"] == 1
    # a prediction: not before now, and never after the blocker's time limit (1 h) runs out
    assert time.time() - 5 <= q["estimated_start"] <= b_started + 3600 + 5
    res = tcloud(service, "carol", "ps", "--plain")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].split()[-3:] == ["POS", "START", "REASON"]
    row = next(line for line in res.stdout.splitlines() if line.startswith(f"{waiter} "))
    assert "pending" in row and " 1 " in row and "Resources" in row
    assert any(f" {w} " in row for w in ("now", "in")), row  # the START column
    status, t = api.call("POST", f"/api/tasks/{waiter}/cancel")
    assert status == 200 and t["status"] == "cancelled"
    api.call("POST", f"/api/tasks/{b}/cancel")
    api.wait_status(b, {"cancelled"})


def test_gpu_slots_are_exclusive_and_queue_fifo(service, tmp_path):
    api = Api(service.url, service.token("dave"))
    spec = ("name: gpu{n}\ncode: .\nentrypoint:\n  - echo \"slots=$CUDA_VISIBLE_DEVICES\"\n  - sleep {s}\n"
            "resources: {{gpus_per_node: 1}}\n")
    ids = [_submit(service, "dave", write_task(tmp_path / f"g{n}", spec.format(n=n, s=s)))
           for n, s in ((1, 3), (2, 3), (3, 0))]
    first = [api.wait_status(i, {"running"}) for i in ids[:2]]
    slots = sorted(s for t in first for n in t["placement"]["nodes"] for s in n["gpus"])
    assert slots == [0, 1]
    _, third = api.call("GET", f"/api/tasks/{ids[2]}")
    assert third["status"] == "pending"
    done = api.wait_status(ids[2], {"succeeded"}, timeout=30)
    assert done["started_at"] >= min(t["started_at"] for t in first) + 2.0
    _, logs = api.call("GET", f"/api/tasks/{ids[2]}/logs")
    assert logs["data"].strip() in ("slots=0", "slots=1") and logs["eof"] is True
    for i in ids[:2]:
        api.wait_status(i, {"succeeded"}, timeout=30)


def test_failed_task_reports_exit_code_and_time_limit(service, tmp_path):
    api = Api(service.url, service.token("erin"))
    tid = _submit(service, "erin", write_task(tmp_path / "f", "name: fails\ncode: .\nentrypoint: exit 7\n"))
    t = api.wait_status(tid, {"failed"})
    assert t["exit_code"] == 7 and "7" in t["reason"]
    tid = _submit(service, "erin", write_task(tmp_path / "t", "name: slow\ncode: .\nentrypoint: sleep 60\n"
                                              "resources: {time_limit: 2s}\n"))
    t = api.wait_status(tid, {"failed"}, timeout=30)
    assert "time limit" in t["reason"]


def test_per_user_running_cap(service, tmp_path):
    api = Api(service.url, service.token("frank"))
    d = write_task(tmp_path / "s", "name: nap\ncode: .\nentrypoint: sleep 30\n")
    ids = [_submit(service, "frank", d) for _ in range(4)]
    for i in ids[:3]:
        api.wait_status(i, {"running"})
    time.sleep(1.2)
    _, fourth = api.call("GET", f"/api/tasks/{ids[3]}")
    assert fourth["status"] == "pending" and "3 tasks running, the most allowed" in fourth["reason"]
    assert fourth["queue"]["reason"] == "Quota"
    # another user is not held back by frank's cap
    other = _submit(service, "grace", write_task(tmp_path / "o", "name: quick\ncode: .\nentrypoint: \"true\"\n"))
    Api(service.url, service.token("grace")).wait_status(other, {"succeeded"})
    for i in ids:
        api.call("POST", f"/api/tasks/{i}/cancel")
    for i in ids:
        api.wait_status(i, {"cancelled"}, timeout=30)


def test_the_service_says_at_start_which_scheduler_runs_and_runs_it_compiled(service):
    # bootstrap builds the compiled scheduler (tests/unit/test_native.py); the service's log says it uses it
    log = (service.state_dir / "service.log").read_text()
    assert "scheduler: policy tacc, compiled with mypyc" in log, log[-2000:]
