"""Isolation on the local executor, tried as a hostile student: from inside alice's task, against bob's.

Every task runs as its owner's Unix account (``task_identity = 'owner'``, the default as root).
The attack suite (``tests/attack/attacker.py``) runs inside alice's task while bob's runs; every
attempt must fail, and bob's task, log, exit status, the code store and the store must be unchanged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from pathlib import Path

from tests.accounts import NO_ACCOUNT, uid

from .conftest import BIN, Api, ServiceProcess, tcloud, write_task

ATTACKER = Path(__file__).resolve().parents[1] / "attack" / "attacker.py"

VICTIM = """name: victim
code: .
environment:
  variables: {SECRET: bob-env-secret}
entrypoint:
  - echo bob-secret-LOG
  - echo bob-file-secret > secret.txt
  - echo bob-ckpt-secret > "$TACC_CHECKPOINT_DIR/secret.txt"
  - echo bob-user-secret > "$TACC_USERDIR/secret.txt"
  - for i in $(seq 1200); do [ -e stop ] && break; sleep 0.1; done
  - echo bob-done
  - exit 3
"""


def submit(service: ServiceProcess, user: str, d: Path) -> int:
    res = tcloud(service, user, "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout)["id"])


def wait_log(api: Api, tid: int, text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    data = ""
    while time.monotonic() < deadline:
        _, chunk = api.call("GET", f"/api/tasks/{tid}/logs")
        data = chunk.get("data", "")
        if text in data:
            return data
        time.sleep(0.1)
    raise AssertionError(f"task {tid} never printed {text!r}: {data!r}")


def attack_results(log: str) -> dict:
    line = next(ln for ln in log.splitlines() if ln.startswith("ATTACK-SUMMARY "))
    return json.loads(line.removeprefix("ATTACK-SUMMARY "))


def run_attack_suite(service: ServiceProcess, tmp_path: Path, *, supervisors: list[str] | None = None,
                     timeout: float = 120) -> tuple[dict, str]:
    """Bob's task runs; alice's task attacks it. Returns (summary, alice's log) after checking bob's task.

    ``supervisors``: what the supervisors' command lines hold (default: tacc-launcher; Slurm: slurmstepd)."""
    bob, alice = Api(service.url, service.token("bob")), Api(service.url, service.token("alice"))
    victim = submit(service, "bob", write_task(tmp_path / "victim", VICTIM))
    bob.wait_status(victim, {"running"}, timeout=timeout)
    wait_log(bob, victim, "bob-secret-LOG", timeout=timeout)
    _, vt = bob.call("GET", f"/api/tasks/{victim}")
    archive = service.state_dir / "code" / f"{vt['spec']['code']['digest']}.tar.gz"
    task_dir = service.data_dir / "tasks" / str(victim)
    deadline = time.monotonic() + 20
    while not (task_dir / "checkpoint" / "secret.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    targets = {
        "state_dir": str(service.state_dir), "data_dir": str(service.data_dir),
        "db": str(service.state_dir / "tacc.sqlite"), "cli": str(BIN / "tacc-hub"), "code_archive": str(archive),
        "service_pid": service.proc.pid if service.proc else 0,
        **({"supervisor_marks": supervisors} if supervisors else {}),
        "victim": {"task_dir": str(task_dir), "user_dir": str(service.data_dir / "users" / "bob"),
                   "control_dir": str(service.state_dir / "run" / str(victim)), "uid": uid("bob")},
    }
    d = write_task(tmp_path / "attacker", "name: attacker\ncode: .\nentrypoint: python attacker.py targets.json\n",
                   {"targets.json": json.dumps(targets)})
    shutil.copy(ATTACKER, d / "attacker.py")
    attacker = submit(service, "alice", d)
    done = alice.wait_status(attacker, {"succeeded", "failed"}, timeout=timeout)
    _, chunk = alice.call("GET", f"/api/tasks/{attacker}/logs")
    log = chunk["data"]
    assert done["status"] == "succeeded", (done, log)

    # bob's task ran on untouched, and ends as it decides to
    assert bob.call("GET", f"/api/tasks/{victim}")[1]["status"] == "running"
    (task_dir / "work" / "stop").touch()
    end = bob.wait_status(victim, {"succeeded", "failed", "lost"}, timeout=timeout)
    assert (end["status"], end["exit_code"]) == ("failed", 3), end
    bob_log = bob.call("GET", f"/api/tasks/{victim}/logs")[1]["data"]
    # exactly what bob's task printed (on Slurm, srun adds its own "srun: error: ... exit code 3" lines)
    assert [ln for ln in bob_log.splitlines() if not ln.startswith("srun: ")] == ["bob-secret-LOG", "bob-done"]
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == vt["spec"]["code"]["digest"]
    with sqlite3.connect(service.state_dir / "tacc.sqlite") as db:
        assert db.execute("SELECT count(*) FROM api_tokens WHERE admin AND user != 'root'").fetchone() == (0,)
    assert alice.call("GET", "/api/whoami")[1].get("admin") is False
    return attack_results(log), log


def test_attacks_from_inside_a_task_all_fail(service: ServiceProcess, tmp_path: Path) -> None:
    summary, log = run_attack_suite(service, tmp_path)
    assert summary["attempts"] >= 20, log
    assert summary["succeeded"] == [], log
    for secret in ("bob-env-secret", "bob-file-secret", "bob-ckpt-secret", "bob-user-secret", "SQLite format"):
        assert secret not in log


def test_a_user_without_an_account_is_refused_at_submit(service: ServiceProcess, tmp_path: Path) -> None:
    d = write_task(tmp_path / "t", "name: t\ncode: .\nentrypoint: echo hi\n")
    res = tcloud(service, NO_ACCOUNT, "submit", str(d))
    assert res.returncode != 0
    assert f"no Unix account for '{NO_ACCOUNT}' on this cluster" in res.stderr
    _, listing = Api(service.url, service.token(NO_ACCOUNT)).call("GET", "/api/tasks")
    assert listing["tasks"] == []  # nothing stored


def test_tasks_run_as_their_owner_with_their_home_and_no_service_path(service: ServiceProcess, tmp_path: Path) -> None:
    d = write_task(tmp_path / "t", "name: whoami\ncode: .\nentrypoint:\n  - id -un\n  - echo \"$HOME\"\n"
                   "  - stat -c '%U %a' \"$TACC_TASKDIR\" output.log 2>/dev/null || stat -c '%U %a' \"$TACC_TASKDIR\"\n"
                   "  - command -v tacc-hub || echo no-cli\n  - env | grep -c TACC_STATE || true\n")
    res = tcloud(service, "carol", "submit", str(d), "-f")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert "carol" in lines and "/home/carol" in lines, res.stdout
    assert "carol 700" in res.stdout and "no-cli" in lines, res.stdout


def test_leftover_processes_are_killed_before_the_gpus_move_on(service: ServiceProcess, tmp_path: Path) -> None:
    """A task leaves setsid and double-forked children that ignore SIGTERM; the next task on its GPUs finds
    every one of them dead when it starts."""
    first = write_task(tmp_path / "first", """name: leaver
code: .
resources: {gpus_per_node: 2}
entrypoint:
  - setsid bash -c 'trap "" TERM; echo $$ >> pids; exec sleep 1000' &
  - (bash -c 'trap "" TERM; echo $$ >> pids; sleep 1000' &) &
  - sleep 1
""")
    alice = Api(service.url, service.token("alice"))
    a = submit(service, "alice", first)
    pids_file = service.data_dir / "tasks" / str(a) / "work" / "pids"
    second = write_task(tmp_path / "second", f"""name: next
code: .
resources: {{gpus_per_node: 2}}
entrypoint: for p in $(cat {pids_file}); do kill -0 $p 2>/dev/null && echo alive $p || echo dead $p; done
""")
    b = submit(service, "alice", second)
    done = alice.wait_status(a, {"succeeded", "failed"})
    assert done["status"] == "succeeded" and "2 leftover process(es)" in (done["reason"] or ""), done
    alice.wait_status(b, {"succeeded"})
    out = alice.call("GET", f"/api/tasks/{b}/logs")[1]["data"].split("\n")
    assert len([ln for ln in out if ln.startswith("dead ")]) == 2 and not any(ln.startswith("alive") for ln in out)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]


def test_cancel_kills_setsid_children_and_survives_a_service_kill(tmp_path: Path) -> None:
    """A task ignoring SIGTERM, with a setsid child ignoring it too, is cancelled; the service is killed within
    the grace period and restarted: the task is marked cancelled only once none of its processes lives."""
    svc = ServiceProcess(tmp_path / "state", "--TaccHub.grace_period=3").start()
    try:
        d = write_task(tmp_path / "t", """name: stubborn
code: .
entrypoint:
  - trap '' TERM
  - setsid bash -c 'trap "" TERM; echo $$ >> pids; while true; do sleep 0.2; done' &
  - echo $$ >> pids
  - while true; do sleep 0.2; done
""")
        tid = submit(svc, "alice", d)
        api = Api(svc.url, svc.token("alice"))
        api.wait_status(tid, {"running"})
        pids_file = svc.data_dir / "tasks" / str(tid) / "work" / "pids"
        deadline = time.monotonic() + 10
        while (not pids_file.exists() or len(pids_file.read_text().split()) < 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p) for p in pids_file.read_text().split()]
        assert api.call("POST", f"/api/tasks/{tid}/cancel")[0] == 200
        svc.stop(9)  # within the grace period
        assert all(_alive(p) for p in pids)  # still in their grace period: nothing was marked done
        svc2 = ServiceProcess(svc.state_dir, "--TaccHub.grace_period=3", port=svc.port)
        svc2.tokens = svc.tokens
        svc2.start()
        try:
            t = api.wait_status(tid, {"cancelled", "failed", "lost"}, timeout=30)
            assert t["status"] == "cancelled", t
            assert not any(_alive(p) for p in pids), pids
        finally:
            svc2.stop()
    finally:
        svc.stop()


def test_service_identity_warns_at_start(tmp_path: Path) -> None:
    svc = ServiceProcess(tmp_path / "state", "--TaccHub.task_identity=service").start()
    try:
        time.sleep(0.5)
        log = (tmp_path / "state" / "service.log").read_text()
        assert "task_identity is 'service'" in log and "for one person only" in log, log
    finally:
        svc.stop()
