"""A service restart in the middle of a run: tasks are re-adopted, or marked lost with a reason; never dropped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from .conftest import BIN, Api, ServiceProcess, task_pid, tcloud, write_task


def supervisor_pid(svc: ServiceProcess, task_id: int) -> int:
    return int(json.loads((svc.state_dir / "run" / str(task_id) / "supervisor.json").read_text())["pid"])


def test_restart_readopts_running_tasks_and_marks_vanished_ones_lost(tmp_path):
    svc = ServiceProcess(tmp_path / "state", "--TaccHub.grace_period=2").start()
    try:
        survivor = write_task(tmp_path / "survivor", "name: survivor\ncode: .\nentrypoint:\n"
                              "  - echo before\n  - sleep 4\n  - echo after\n")
        victim = write_task(tmp_path / "victim", "name: victim\ncode: .\nentrypoint:\n"
                            "  - echo $$ > pid\n  - sleep 600\n")
        queued = write_task(tmp_path / "queued", "name: queued\ncode: .\nentrypoint: echo queued-ran\n")
        ids = {}
        for name, d in (("survivor", survivor), ("victim", victim)):
            res = tcloud(svc, "alice", "submit", str(d), "--json")
            assert res.returncode == 0, res.stderr
            ids[name] = json.loads(res.stdout)["id"]
        api = Api(svc.url, svc.token("alice"))
        for tid in ids.values():
            api.wait_status(tid, {"running"})
        victim_pid = task_pid(svc.data_dir, ids["victim"])

        svc.stop(signal.SIGKILL)  # the hard case: no chance to clean up
        # the victim's supervisor dies while nobody watches (root's doing: the task itself cannot); its
        # processes go with it
        os.killpg(os.getpgid(victim_pid), signal.SIGKILL)
        os.kill(supervisor_pid(svc, ids["victim"]), signal.SIGKILL)

        svc2 = ServiceProcess(svc.state_dir, "--TaccHub.grace_period=2", port=svc.port)
        svc2.tokens = svc.tokens
        svc2.start()
        try:
            lost = api.wait_status(ids["victim"], {"lost"}, timeout=20)
            assert "no exit status" in lost["reason"]
            done = api.wait_status(ids["survivor"], {"succeeded"}, timeout=30)
            _, logs = api.call("GET", f"/api/tasks/{ids['survivor']}/logs")
            assert logs["data"].split() == ["before", "after"]
            assert done["exit_code"] == 0
            # the restarted service still schedules new work, and the lost task freed its slot
            res = tcloud(svc2, "alice", "submit", str(queued), "-f")
            assert res.returncode == 0 and "queued-ran" in res.stdout, res.stderr
        finally:
            svc2.stop()
    finally:
        svc.stop()


def test_graceful_stop_leaves_tasks_running_and_finished_while_down_is_recorded(tmp_path):
    svc = ServiceProcess(tmp_path / "state").start()
    try:
        d = write_task(tmp_path / "t", "name: short\ncode: .\nentrypoint:\n  - sleep 2\n  - exit 3\n")
        res = tcloud(svc, "alice", "submit", str(d), "--json")
        tid = json.loads(res.stdout)["id"]
        api = Api(svc.url, svc.token("alice"))
        api.wait_status(tid, {"running"})
        svc.stop()  # SIGTERM: the task keeps running and ends while the service is down
        time.sleep(3)
        svc2 = ServiceProcess(svc.state_dir, port=svc.port)
        svc2.tokens = svc.tokens
        svc2.start()
        try:
            t = api.wait_status(tid, {"failed"}, timeout=20)
            assert t["exit_code"] == 3
        finally:
            svc2.stop()
    finally:
        svc.stop()


def test_log_follow_survives_a_service_restart(tmp_path):
    svc = ServiceProcess(tmp_path / "state").start()
    try:
        d = write_task(tmp_path / "t", "name: slow-printer\ncode: .\nentrypoint:\n"
                       "  - echo first\n  - sleep 4\n  - echo second\n")
        res = tcloud(svc, "alice", "submit", str(d), "--json")
        tid = json.loads(res.stdout)["id"]
        env = {**os.environ, "TACC_URL": svc.url, "TACC_TOKEN": svc.token("alice"), "TACC_CONFIG": "/nonexistent"}
        follower = subprocess.Popen([str(BIN / "tcloud"), "logs", "-f", str(tid)], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        Api(svc.url, svc.token("alice")).wait_status(tid, {"running"})
        time.sleep(1)
        svc.stop()  # the follower's stream breaks here
        time.sleep(1)
        svc2 = ServiceProcess(svc.state_dir, port=svc.port)
        svc2.tokens = svc.tokens
        svc2.start()
        try:
            out, err = follower.communicate(timeout=60)
            assert follower.returncode == 0, err
            assert out.split() == ["first", "second"]
        finally:
            svc2.stop()
    finally:
        svc.stop()
