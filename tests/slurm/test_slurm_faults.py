"""Faults on the real dev cluster, through the real service: slurmctld restarted or gone, a slurmd killed.

Each test breaks the shared cluster (``scripts/slurm-dev.sh stop-ctld`` / ``kill-node``) and, in
a ``finally``, brings it back (``up`` starts whatever is not running and waits until every node
is up again), so the tests after these find it healthy. What Slurm itself recorded is checked with
``sacct``: the jobs of a test are the ones whose working directory is one of its task dirs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tacc_hub.executors.slurm import SlurmExecutor
from tests.e2e.conftest import Api, ServiceProcess, tcloud, write_task
from tests.slurm.conftest import SlurmCluster
from tests.slurm.test_slurm_executor import Tasks

pytestmark = pytest.mark.timeout(900)

ARGS = ("--TaccHub.executor=slurm", "--TaccHub.grace_period=2", "--TaccHub.node_refresh_interval=5")
ENDED = {"succeeded", "failed", "cancelled", "lost"}


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The shared cluster, made whole again after the test (daemons started, every node up)."""
    if "SlurmdTimeout=" not in slurm_cluster.conf.read_text():
        pytest.fail(f"the dev cluster in {slurm_cluster.state_dir} was brought up by an older scripts/slurm-dev.sh "
                    "(Slurm's default SlurmdTimeout of 300 s): bring it down (scripts/slurm-dev.sh down "
                    "--state-dir DIR) and rerun", pytrace=False)
    try:
        yield slurm_cluster
    finally:
        proc = slurm_cluster.script("up", timeout=600)
        assert proc.returncode == 0, f"the dev cluster did not come back after a fault test:\n{proc.stderr}"


def fault(cluster: SlurmCluster, *args: str) -> None:
    proc = cluster.script(*args, timeout=300)
    assert proc.returncode == 0, f"slurm-dev.sh {' '.join(args)} failed:\n{proc.stderr}"


def submit(svc: ServiceProcess, user: str, d: Path) -> int:
    res = tcloud(svc, user, "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr + res.stdout
    return int(json.loads(res.stdout)["id"])


def wait_for(what: str, fn, timeout: float = 120.0, every: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}: last {last!r}")


def slurm_jobs(data_dir: Path, n: int, timeout: float = 60.0) -> dict[int, list[tuple[str, str, str]]]:
    """Task id -> [(job id, final state, nodes)] as accounting has them, once ``n`` jobs have ended there."""
    tasks_dir = str((data_dir / "tasks").resolve())

    def read() -> dict[int, list[tuple[str, str, str]]] | None:
        argv = ["sacct", "-a", "-X", "-n", "-P", "-S", "now-3hours", "-o", "JobID,State,NodeList,WorkDir"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
        jobs: dict[int, list[tuple[str, str, str]]] = {}
        for line in out.splitlines():
            job_id, state, nodes, workdir = line.split("|", 3)
            if os.path.dirname(workdir) == tasks_dir:
                jobs.setdefault(int(os.path.basename(workdir)), []).append((job_id, state.split()[0], nodes))
        ended = [j for js in jobs.values() for j in js if j[1] not in ("PENDING", "RUNNING", "COMPLETING")]
        return jobs if len(ended) >= n and len(ended) == sum(map(len, jobs.values())) else None

    return wait_for(f"{n} ended jobs in sacct", read, timeout, every=1.0)


def gated(name: str, gpus: int, gate: Path) -> str:
    """A task file whose runs print begin, wait until ``gate`` exists, print end."""
    return (f"name: {name}\ncode: .\nresources: {{nodes: 1, gpus_per_node: {gpus}}}\nentrypoint:\n"
            f"  - echo begin $SLURM_JOB_ID\n  - while [ ! -e {gate} ]; do sleep 0.2; done\n"
            "  - echo end $SLURM_JOB_ID\n")


def job_lines(api: Api, task_id: int) -> list[str]:
    _, logs = api.call("GET", f"/api/tasks/{task_id}/logs")
    return [line for line in logs["data"].splitlines() if line.startswith(("begin ", "end ", "run-", "done "))]


def test_slurmctld_restart_during_runs_loses_and_duplicates_nothing(cluster: SlurmCluster, tmp_path: Path,
                                                                    open_dir: Path) -> None:
    svc = ServiceProcess(tmp_path / "svc", *ARGS).start()
    try:
        api = Api(svc.url, svc.token("alice"))
        gate = open_dir / "gate"  # the task runs as its owner: not under pytest's private tmp dir
        d = write_task(tmp_path / "t", gated("ctld-restart", 2, gate))
        ids = [submit(svc, "alice", d) for _ in range(5)]  # 4 nodes of 2 GPUs: four run, one waits

        def split() -> dict[str, list[int]] | None:
            by: dict[str, list[int]] = {}
            for i in ids:
                by.setdefault(api.call("GET", f"/api/tasks/{i}")[1]["status"], []).append(i)
            return by if len(by.get("running", [])) == 4 and len(by.get("pending", [])) == 1 else None

        waiting = wait_for("4 running and 1 waiting", split)["pending"][0]
        for i in ids:  # the runs have really started (their steps exist) before slurmctld goes
            if i != waiting:
                wait_for(f"task {i} to begin", lambda i=i: job_lines(api, i)[:1] != [], timeout=120)
        fault(cluster, "restart-ctld")  # stop (state saved), start again, wait for the nodes
        gate.touch()  # the four runs end; the fifth task starts

        finals = {i: api.wait_status(i, ENDED, timeout=180) for i in ids}
        assert all(f["status"] == "succeeded" and f["exit_code"] == 0 for f in finals.values()), finals
        jobs = slurm_jobs(svc.data_dir, 5)
        assert sorted(jobs) == sorted(ids), jobs  # every task ran in Slurm, each as exactly one job
        for i in ids:
            (job_id, state, _), = jobs[i]
            assert state == "COMPLETED", jobs
            assert job_lines(api, i) == [f"begin {job_id}", f"end {job_id}"], (i, job_lines(api, i))
        assert finals[waiting]["started_at"] > min(finals[i]["finished_at"] for i in ids if i != waiting) - 1
    finally:
        svc.stop()


def test_slurm_unreachable_keeps_runs_and_holds_new_tasks_with_a_reason(cluster: SlurmCluster, tmp_path: Path,
                                                                        open_dir: Path) -> None:
    svc = ServiceProcess(tmp_path / "svc", *ARGS, "--TaccHub.slurm_unreachable_after=3").start()
    try:
        api = Api(svc.url, svc.token("alice"))
        gate = open_dir / "gate"  # the task runs as its owner: not under pytest's private tmp dir
        d = write_task(tmp_path / "t", gated("outage", 1, gate))
        running = submit(svc, "alice", d)
        api.wait_status(running, {"running"}, timeout=120)
        wait_for("the run to begin", lambda: job_lines(api, running)[:1] != [], timeout=120)
        fault(cluster, "stop-ctld")
        down_at = time.time()
        new = submit(svc, "alice", d)  # accepted: only its launch needs Slurm

        def held() -> dict | None:
            task = api.call("GET", f"/api/tasks/{new}")[1]
            queue = task.get("queue") or {}
            return task if task["status"] == "pending" and queue.get("reason") == "Unavailable" else None

        task = wait_for("the new task to wait with the reason Unavailable", held, timeout=90)
        assert task["reason"].startswith("Unavailable: Slurm unreachable since "), task
        hh, mm, ss = map(int, task["reason"].split("since ")[1].split(" UTC")[0].split(":"))
        off = (hh * 3600 + mm * 60 + ss - int(down_at) % 86400) % 86400  # since when, as seconds after down_at
        assert min(off, 86400 - off) < 60 and " failed tr" in task["reason"], task
        assert api.call("GET", f"/api/tasks/{running}")[1]["status"] == "running"  # unknown, not lost
        time.sleep(2)
        again = api.call("GET", f"/api/tasks/{new}")[1]
        assert again["status"] == "pending" and again["queue"]["reason"] == "Unavailable", again

        fault(cluster, "start-ctld")
        gate.touch()
        for i in (running, new):
            done = api.wait_status(i, ENDED, timeout=180)
            assert done["status"] == "succeeded" and done["exit_code"] == 0, done
        jobs = slurm_jobs(svc.data_dir, 2)
        assert sorted(jobs) == [running, new] and all(len(js) == 1 for js in jobs.values()), jobs
        for i in (running, new):
            job_id = jobs[i][0][0]
            assert job_lines(api, i) == [f"begin {job_id}", f"end {job_id}"], (i, job_lines(api, i))
    finally:
        svc.stop()


def test_a_killed_slurmd_requeues_the_task_that_asks_and_fails_the_other(cluster: SlurmCluster,
                                                                         tmp_path: Path) -> None:
    svc = ServiceProcess(tmp_path / "svc", *ARGS).start()
    orphans: list[Path] = []
    try:
        api = Api(svc.url, svc.token("alice"))
        # The first run parks until killed (its node dies under it); a run after a requeue ends at once.
        body = ("resources: {nodes: 1, gpus_per_node: 1}\nentrypoint:\n"
                "  - echo run-$TACC_ATTEMPT on $SLURMD_NODENAME job $SLURM_JOB_ID\n"
                "  - if [ \"$TACC_ATTEMPT\" = 0 ]; then sleep 300 & echo $! > \"$TACC_CHECKPOINT_DIR/sleep.pid\";"
                " wait; exit 3; fi\n"
                "  - echo done $SLURM_JOB_ID\n")
        keep = submit(svc, "alice", write_task(tmp_path / "r", "name: requeue-me\ncode: .\nqos: {requeue: true}\n"
                                               + body))
        lose = submit(svc, "alice", write_task(tmp_path / "f", "name: fail-me\ncode: .\n" + body))
        for i in (keep, lose):
            orphans.append(svc.data_dir / "tasks" / str(i) / "checkpoint" / "sleep.pid")
            wait_for(f"task {i} to start its first run", lambda i=i: any(
                line.startswith("run-0") for line in job_lines(api, i)), timeout=120)
        placed = {i: api.call("GET", f"/api/tasks/{i}")[1]["placement"]["nodes"][0]["node"] for i in (keep, lose)}
        dead = sorted(set(placed.values()))
        for node in dead:
            fault(cluster, "kill-node", node)  # kill -9 its slurmd; the task's processes live on

        failed = api.wait_status(lose, ENDED, timeout=120)  # Slurm: node down after SlurmdTimeout, NODE_FAIL
        assert failed["status"] == "failed", failed
        assert f"node failure on {placed[lose]} at " in failed["reason"], failed
        assert "not requeued: the task does not ask for it (qos.requeue)" in failed["reason"], failed
        nodes = {n["name"]: n for n in api.call("GET", "/api/cluster")[1]["nodes"]}
        assert [name for name, n in sorted(nodes.items()) if not n["schedulable"]] == dead, nodes
        assert all("down" in (nodes[name]["state"] or "") for name in dead), nodes  # Slurm's state, e.g. down+...

        done = api.wait_status(keep, ENDED, timeout=120)
        assert done["status"] == "succeeded" and done["exit_code"] == 0, done
        second = done["placement"]["nodes"][0]["node"]
        assert second not in dead, (second, dead)  # the requeued run went to a node that is up
        jobs = slurm_jobs(svc.data_dir, 3)
        assert [s for _, s, _ in jobs[lose]] == ["NODE_FAIL"], jobs
        assert [s for _, s, _ in jobs[keep]] == ["NODE_FAIL", "COMPLETED"], jobs
        (first_job, _, first_node), (second_job, _, second_node) = jobs[keep]
        assert (first_node, second_node) == (placed[keep], second), jobs
        # Its log holds both runs, the second one complete; its reason tells what happened.
        assert job_lines(api, keep) == [f"run-0 on {placed[keep]} job {first_job}",
                                        f"run-1 on {second} job {second_job}", f"done {second_job}"]
        # The node comes back (its slurmd restarted; ReturnToService=2) and the service uses it again.
        for node in dead:
            fault(cluster, "start-node", node)
        wait_for("the service to see every node up again", lambda: not any(
            not n["schedulable"] for n in api.call("GET", "/api/cluster")[1]["nodes"]), timeout=60)
    finally:
        svc.stop()
        for pidfile in orphans:  # the first runs' processes outlived their slurmd: end them
            if pidfile.exists():
                try:
                    os.kill(int(pidfile.read_text()), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass


async def test_a_launch_after_a_timed_out_sbatch_cancels_what_that_sbatch_submitted(slurm_cluster: SlurmCluster,
                                                                                   tmp_path: Path) -> None:
    ex = SlurmExecutor(tmp_path / "state", grace_period=1)
    tasks = Tasks(ex, tmp_path)
    stray = kept = ""
    try:
        # What an sbatch that timed out may have left: a job of task 7 (its name, its directory).
        tdir = ex.task_dir(7)
        tdir.mkdir(parents=True)
        other = tmp_path / "elsewhere"
        other.mkdir()
        sub = ["sbatch", "--parsable", "--job-name=tacc-7", "-o", "/dev/null", "--wrap", "sleep 300"]
        stray = subprocess.run([*sub, f"--chdir={tdir}"], capture_output=True, text=True, timeout=60,
                               check=True).stdout.strip()
        kept = subprocess.run([*sub, f"--chdir={other}"], capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip()  # same name, not our task's directory: not ours
        ex._unsure.add(7)
        state = await tasks.launch(7, tasks.plan({"main.sh": "echo once\n"}, entrypoint={"argv": ["bash", "main.sh"]}))
        assert state["job_id"] not in (stray, kept) and 7 not in ex._unsure
        assert (await tasks.wait(7, "exited")).exit_code == 0, tasks.log(7)
        active = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=60,
                                check=True).stdout.split()
        assert stray not in active and kept in active, active
        assert tasks.log(7).splitlines().count("once") == 1
    finally:
        subprocess.run(["scancel", *(j for j in (stray, kept) if j)], capture_output=True, timeout=60, check=False)


def test_the_fault_commands_check_their_arguments(slurm_cluster: SlurmCluster) -> None:
    assert slurm_cluster.script("kill-node").returncode == 2  # a node name is needed
    assert slurm_cluster.script("restart-ctld", "n1").returncode == 2  # and only there
    bad = slurm_cluster.script("kill-node", "n9")
    assert bad.returncode == 1 and "no node 'n9'" in bad.stderr, bad.stderr
    assert slurm_cluster.script("status").returncode == 0  # nothing was touched
