"""A task's time and its automatic restarts through the real service, the local executor and `tcloud`.

Its own service (not the shared one): a short restart backoff (1 s, so that a task restarted
twice ends in seconds) and a site maximum of one hour, which the tests extend against.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Api, ServiceProcess, tcloud, write_task

MAX = 3600


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    s = ServiceProcess(tmp_path_factory.mktemp("svc-time"), "--gpus=2", "--TaccHub.grace_period=2",
                       "--TaccHub.restart_backoff=1", f"--TaccHub.max_time_limit={MAX}").start()
    yield s
    s.stop()


def _submit(svc: ServiceProcess, user: str, d: Path) -> int:
    res = tcloud(svc, user, "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout)["id"])


def _log(svc: ServiceProcess, tid: int) -> str:
    return (svc.data_dir / "tasks" / str(tid) / "output.log").read_text(errors="replace")


def _wait(pred, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: not reached in {timeout} s")


def test_sigusr1_before_the_limit_and_deadline_in_env(svc, tmp_path) -> None:
    """time_limit 90 s, warn_before 60 s: the task gets SIGUSR1 about 30 s in, and checkpoints."""
    d = write_task(tmp_path / "warned", "name: warned\ncode: .\nentrypoint:\n"
                   "  - echo \"deadline=$TACC_DEADLINE\"\n"
                   "  - trap 'date +%s > \"$TACC_CHECKPOINT_DIR/ckpt\"; echo got-usr1; exit 0' USR1\n"
                   "  - while true; do sleep 0.2; done\n"
                   "resources: {time_limit: 90}\nqos: {warn_before: 60}\n")
    api = Api(svc.url, svc.token("alice"))
    tid = _submit(svc, "alice", d)
    running = api.wait_status(tid, {"running"})
    assert running["time_limit"] == 90 and 0 < running["time_left"] <= 90
    deadline = running["deadline"]
    _wait(lambda: "deadline=" in _log(svc, tid), "the task printed its deadline")
    seen = int(re.search(r"deadline=(\d+)", _log(svc, tid)).group(1))
    assert abs(seen - deadline) <= 5, (seen, deadline)  # TACC_DEADLINE: launch time + limit
    done = api.wait_status(tid, {"succeeded", "failed"}, timeout=120)
    assert done["status"] == "succeeded", done  # it exited from its trap, before the limit
    ckpt = int((svc.data_dir / "tasks" / str(tid) / "checkpoint" / "ckpt").read_text())
    assert deadline - 60 - 3 <= ckpt < deadline, (ckpt, deadline)
    assert "got-usr1" in _log(svc, tid)


def test_extend_lets_a_task_run_past_its_limit_and_refusals_name_the_limit(svc, tmp_path) -> None:
    d = write_task(tmp_path / "longer", "name: longer\ncode: .\nentrypoint:\n"
                   "  - sleep 35\n  - echo survived-the-old-limit\n"
                   "resources: {time_limit: 20}\n")
    api = Api(svc.url, svc.token("alice"))
    tid = _submit(svc, "alice", d)
    api.wait_status(tid, {"running"})
    # Over the site's maximum: refused, naming it; nothing changes.
    res = tcloud(svc, "alice", "extend", str(tid), "2h")
    assert res.returncode == 1 and f"max_time_limit of {MAX} s" in res.stderr, res.stderr
    assert "seconds" in res.stderr
    # Another user's task: as if it did not exist.
    status, body = Api(svc.url, svc.token("bob")).call("POST", f"/api/tasks/{tid}/extend", {"seconds": 60})
    assert status == 404, body
    status, body = api.call("POST", f"/api/tasks/{tid}/extend", {"seconds": "60"})
    assert status == 422 and body["errors"][0]["field"] == "seconds", body
    assert api.call("GET", f"/api/tasks/{tid}")[1]["time_limit"] == 20
    res = tcloud(svc, "alice", "extend", str(tid), "60")
    assert res.returncode == 0, res.stderr
    assert f"task {tid}: time limit now 0:01:20" in res.stdout and " left (ends " in res.stdout, res.stdout
    ps = tcloud(svc, "alice", "ps")
    row = next(line for line in ps.stdout.splitlines() if line.split()[:1] == [str(tid)])
    assert re.search(r"\b(ends in \d+s|1m)\b", row), row  # TIME LEFT
    done = api.wait_status(tid, {"succeeded", "failed"}, timeout=120)
    assert done["status"] == "succeeded", done
    assert "survived-the-old-limit" in _log(svc, tid)
    status, body = api.call("POST", f"/api/tasks/{tid}/extend", {"by": "1m"})
    assert status == 409 and "succeeded, not running" in body["message"], body


def test_extend_over_the_gpu_hour_budget_is_refused(svc, tmp_path) -> None:
    admin = Api(svc.url, svc.token("admin", admin=True))
    status, body = admin.call("PUT", "/api/admin/quotas/user/rosa", {"gpu_hours": 0.05})
    assert status == 200, body
    try:
        d = write_task(tmp_path / "budget", "name: budget\ncode: .\nentrypoint: sleep 120\n"
                       "resources: {gpus_per_node: 1, time_limit: 60}\n")
        api = Api(svc.url, svc.token("rosa"))
        tid = _submit(svc, "rosa", d)
        api.wait_status(tid, {"running"})
        status, body = api.call("POST", f"/api/tasks/{tid}/extend", {"by": "30m"})
        assert status == 422 and body["errors"][0]["field"] == "seconds", body
        assert "user rosa's budget of 0.05 GPU-hours per month has" in body["message"], body
        assert "GPU-hours left" in body["message"]
        assert api.call("GET", f"/api/tasks/{tid}")[1]["time_limit"] == 60
        tcloud(svc, "rosa", "cancel", str(tid))
        api.wait_status(tid, {"cancelled"})
    finally:
        admin.call("DELETE", "/api/admin/quotas/user/rosa")


def test_fails_twice_then_succeeds_with_one_continuous_log(svc, tmp_path) -> None:
    d = write_task(tmp_path / "flaky", "name: flaky\ncode: .\nentrypoint:\n"
                   "  - n=$(cat \"$TACC_CHECKPOINT_DIR/runs\" 2>/dev/null || echo 0)\n"
                   "  - n=$((n + 1)); echo $n > \"$TACC_CHECKPOINT_DIR/runs\"\n"
                   "  - echo \"flaky run $n attempt $TACC_ATTEMPT\"\n"
                   "  - if [ $n -lt 3 ]; then exit 3; fi\n"
                   "  - echo flaky-done\n"
                   "qos: {max_restarts: 2}\n")
    api = Api(svc.url, svc.token("alice"))
    tid = _submit(svc, "alice", d)
    _wait(lambda: "restarting (restart 1 of 2)" in (api.call("GET", f"/api/tasks/{tid}")[1].get("reason") or "")
          or api.call("GET", f"/api/tasks/{tid}")[1]["attempt"] >= 1, "the first restart")
    done = api.wait_status(tid, {"succeeded", "failed", "cancelled"}, timeout=120)
    assert done["status"] == "succeeded" and done["attempt"] == 2 and done["max_restarts"] == 2, done
    status, runs = api.call("GET", f"/api/tasks/{tid}/attempts")
    assert status == 200
    assert [(a["attempt"], a["outcome"], a["exit_code"]) for a in runs["attempts"]] == [
        (0, "failed", 3), (1, "failed", 3), (2, "succeeded", 0)], runs
    assert runs["attempts"][1]["started_at"] >= runs["attempts"][0]["finished_at"] + 1  # the backoff
    show = tcloud(svc, "alice", "show", str(tid))
    assert show.returncode == 0, show.stderr
    assert "runs (3)" in show.stdout, show.stdout
    table = [line.split() for line in show.stdout.splitlines() if re.match(r"\s+[123]\s+\d{4}-", line)]
    assert [(r[0], r[4], r[5]) for r in table] == [("1", "failed", "3"), ("2", "failed", "3"),
                                                  ("3", "succeeded", "0")], show.stdout  # runs from 1
    log = _log(svc, tid)
    lines = [ln for ln in log.splitlines() if ln.startswith("flaky run ") or ln == "flaky-done"
             or ln.startswith("=== tacc: attempt")]
    own = [ln for ln in lines if not ln.startswith("===")]
    assert own == ["flaky run 1 attempt 0", "flaky run 2 attempt 1", "flaky run 3 attempt 2", "flaky-done"], log
    marks = [i for i, ln in enumerate(lines) if ln.startswith("=== tacc: attempt")]
    if marks:  # the launch script marks each later run (compiler.render): before that run's own lines
        assert len(marks) == 2 and lines[marks[0] + 1] == "flaky run 2 attempt 1", lines
        assert lines[marks[1] + 1] == "flaky run 3 attempt 2", lines


def test_the_warning_spares_a_task_that_does_not_trap_it(svc, tmp_path) -> None:
    """A process without a SIGUSR1 handler would die of the warning: it is not sent to it (nor to its children
    without one), so a task that never asked for it runs to its end."""
    d = write_task(tmp_path / "untrapped", "name: untrapped\ncode: .\nentrypoint:\n"
                   "  - sleep 40\n"
                   "  - echo survived-the-warning\n"
                   "resources: {time_limit: 70}\nqos: {warn_before: 60}\n")
    api = Api(svc.url, svc.token("alice"))
    tid = _submit(svc, "alice", d)
    api.wait_status(tid, {"running"})
    supervisor_log = svc.state_dir / "run" / str(tid) / "supervisor.log"
    _wait(lambda: supervisor_log.exists() and "time-limit warning" in supervisor_log.read_text(),
          "the warning was handled by the supervisor", timeout=60)
    assert "SIGUSR1 sent to 0 process(es)" in supervisor_log.read_text()
    done = api.wait_status(tid, {"succeeded", "failed"}, timeout=90)
    assert done["status"] == "succeeded", done
    assert "survived-the-warning" in _log(svc, tid)
