"""The Slurm executor on the real dev cluster (scripts/slurm-dev.sh): no mocks, real sbatch/squeue/sacct.

Tasks are compiled from real specs for a site whose code store and interpreter are this
machine's (the dev cluster's nodes share this machine's file system), launched on exact
placements, polled and cancelled through the executor's own interface.
"""

from __future__ import annotations

import asyncio
import json
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.executors import Launch, Observation
from tacc_hub.executors.slurm import SlurmExecutor
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import spec_from_data
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tests.slurm.conftest import SlurmCluster

pytestmark = pytest.mark.timeout(900)

WAIT_S = 120
POLL_SQUEUE = "squeue --noheader --states=all --format=%i|%T"  # as the counting bin logs it
# Shell metacharacters, command substitution, both quotes, a newline, a backslash, a glob.
HOSTILE = "a b; $(touch /tmp/tacc-pwned) `id` 'q' \"dq\" \\ * \n2nd line & | > <"


class Tasks:
    """Compiles and launches tasks on one executor; cancels whatever is still active at the end."""

    def __init__(self, executor: SlurmExecutor, root: Path) -> None:
        self.ex = executor
        self.root = root
        self.code = CodeStore(root / "code")
        self.states: dict[int, dict[str, Any]] = {}
        self.site = SiteProfile(
            name="slurm-dev", pythons={"3.11": sys.executable}, default_python="3.11", env_root=str(root / "envs"),
            code_root=str(root / "code"), max_nodes=4, max_gpus_per_node=2, partitions=["gpu"],
        )

    def plan(self, files: dict[str, str], **fields: Any) -> ExecutionPlan:
        src = self.root / f"src{len(self.states)}-{time.monotonic_ns()}"
        src.mkdir(parents=True)
        for name, text in files.items():
            (src / name).write_text(text)
        data = pack(src)
        digest = digest_of(data)
        self.code.put(digest, data)
        spec = {"name": "t", "code": {"kind": "snapshot", "digest": digest, "size": len(data)}, **fields}
        return compile_task(spec_from_data(spec), self.site)

    async def launch(self, task_id: int, plan: ExecutionPlan, *nodes: tuple[str, list[int]]) -> dict[str, Any]:
        placement = Placement(nodes=[NodeSlots(node=n, gpus=g) for n, g in (nodes or [("n1", [])])])
        state = await self.ex.launch(Launch(task_id=task_id, owner="alice", plan=plan, placement=placement))
        self.states[task_id] = state
        return state

    async def wait(self, task_id: int, *wanted: str, timeout: float = WAIT_S) -> Observation:
        deadline = time.monotonic() + timeout
        obs = None
        while time.monotonic() < deadline:
            obs = (await self.ex.poll({task_id: self.states[task_id]}))[task_id]
            if obs.status in wanted:
                return obs
            await asyncio.sleep(0.3)
        raise AssertionError(f"task {task_id} did not reach {wanted}: {obs}; log: {self.log(task_id)!r}")

    def log(self, task_id: int) -> str:
        path = self.ex.log_path(task_id)
        return path.read_text() if path.exists() else ""


def squeue_job(job_id: str) -> dict[str, Any] | None:
    out = subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True, timeout=60).stdout
    return next((j for j in json.loads(out)["jobs"] if str(j["job_id"]) == job_id), None)


@pytest.fixture
async def tasks(slurm_cluster: SlurmCluster, tmp_path: Path) -> AsyncIterator[Tasks]:
    ex = SlurmExecutor(tmp_path / "state", grace_period=2, missing_grace=5)
    t = Tasks(ex, tmp_path)
    yield t
    for task_id, state in t.states.items():
        await ex.cancel(task_id, state)


async def test_nodes_come_from_sinfo_and_the_topology(tasks: Tasks) -> None:
    nodes = tasks.ex.refresh_nodes()
    assert [(n.name, n.gpus, n.partition, n.switch) for n in nodes] == [
        ("n1", 2, "gpu", "s1"), ("n2", 2, "gpu", "s1"), ("n3", 2, "gpu", "s2"), ("n4", 2, "gpu", "s2"),
    ]


async def test_a_single_node_task_exits_zero_with_its_output(tasks: Tasks) -> None:
    plan = tasks.plan({"main.sh": "echo hello from $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES task=$TACC_TASK_ID\n"
                                  "echo nodes=$TACC_NODELIST of=$TACC_NNODES master=$TACC_MASTER_ADDR\n"},
                      entrypoint={"argv": ["bash", "main.sh"]}, resources={"gpus_per_node": 1})
    state = await tasks.launch(1, plan, ("n2", [1]))
    assert state["job_id"].isdigit() and state["dir"] == str(tasks.ex.task_dir(1))
    obs = await tasks.wait(1, "exited")
    assert obs == Observation("exited", exit_code=0), tasks.log(1)
    text = tasks.log(1)
    line = next(line for line in text.splitlines() if line.startswith("hello"))
    assert line.startswith("hello from n2 gpus=") and line.endswith(" task=1"), text
    assert len(line.split("gpus=")[1].split()[0].split(",")) == 1, text  # one GPU, index chosen by Slurm
    assert "nodes=n2 of=1 master=127.0.0.1" in text.splitlines(), text  # n2's NodeAddr


async def test_a_two_node_task_gets_ranks_from_each_node(tasks: Tasks) -> None:
    plan = tasks.plan(
        {"main.sh": 'echo "rank=$TACC_NODE_RANK of=$TACC_NNODES node=$SLURMD_NODENAME '
                    'master=$TACC_MASTER_ADDR:$TACC_MASTER_PORT list=$TACC_NODELIST"\n'},
        entrypoint={"argv": ["bash", "main.sh"]}, resources={"nodes": 2, "gpus_per_node": 1},
    )
    state = await tasks.launch(2, plan, ("n1", [0]), ("n3", [0]))
    assert (await tasks.wait(2, "exited")).exit_code == 0, tasks.log(2)
    lines = sorted(line for line in tasks.log(2).splitlines() if line.startswith("rank="))
    port = lines[0].split()[3].rsplit(":", 1)[1] if lines else "?"
    assert lines == [f"rank=0 of=2 node=n1 master=127.0.0.1:{port} list=n1,n3",
                     f"rank=1 of=2 node=n3 master=127.0.0.1:{port} list=n1,n3"], tasks.log(2)
    assert port.isdigit()
    job = squeue_job(state["job_id"])
    assert job is not None and job["nodes"] == "n[1,3]" and job["tres_per_node"] == "gres:gpu:1", job


async def test_a_failing_task_reports_its_exit_code(tasks: Tasks) -> None:
    plan = tasks.plan({"main.sh": "echo failing; exit 3\n"}, entrypoint={"argv": ["bash", "main.sh"]})
    await tasks.launch(3, plan, ("n4", []))
    obs = await tasks.wait(3, "exited")
    assert obs.exit_code == 3 and obs.reason is None, (obs, tasks.log(3))
    assert "failing" in tasks.log(3)


async def test_cancel_ends_the_job_and_poll_reports_it_cancelled(tasks: Tasks) -> None:
    plan = tasks.plan({"main.sh": "echo started; trap 'echo got TERM; exit 143' TERM; sleep 300 & wait\n"},
                      entrypoint={"argv": ["bash", "main.sh"]}, resources={"gpus_per_node": 2})
    state = await tasks.launch(4, plan, ("n1", [0, 1]))
    deadline = time.monotonic() + WAIT_S
    while "started" not in tasks.log(4):
        assert time.monotonic() < deadline, tasks.log(4)
        await asyncio.sleep(0.2)
    assert (await tasks.ex.poll({4: state}))[4].status == "running"
    started = time.monotonic()
    await tasks.ex.cancel(4, state)
    took = time.monotonic() - started
    job = squeue_job(state["job_id"])
    assert job is None or job["job_state"] not in ("RUNNING", "PENDING", "COMPLETING"), job
    obs = (await tasks.ex.poll({4: state}))[4]
    assert obs.status == "exited" and obs.reason == "cancelled" and obs.exit_code != 0, obs
    assert "got TERM" in tasks.log(4), tasks.log(4)  # SIGTERM first: the task had its grace period
    assert took < 30, took
    await tasks.ex.cancel(4, state)  # idempotent


async def test_poll_says_unknown_not_gone_when_slurm_cannot_answer(tasks: Tasks, tmp_path: Path) -> None:
    plan = tasks.plan({"main.sh": "sleep 300\n"}, entrypoint={"argv": ["bash", "main.sh"]})
    state = await tasks.launch(5, plan, ("n2", []))
    assert (await tasks.wait(5, "running")).status == "running"
    # Slurm commands retry a missing config for 60 s: the command timeout turns that into "unknown".
    broken_conf = SlurmExecutor(tmp_path / "state", slurm_conf=str(tmp_path / "missing.conf"), command_timeout=3)
    no_squeue = SlurmExecutor(tmp_path / "state", bin_dir=str(tmp_path / "no-bin"))
    for ex in (broken_conf, no_squeue):
        first = (await ex.poll({5: state}))[5]
        assert first.status == "unknown" and "cannot reach Slurm" in (first.reason or ""), first
        again = (await ex.poll({5: state}))[5]  # backing off: not even tried
        assert again.status == "unknown" and "next try" in (again.reason or ""), again
    assert (await tasks.ex.poll({5: state}))[5].status == "running"


async def test_hostile_strings_reach_the_task_verbatim(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    canary = Path("/tmp/tacc-pwned")
    canary.unlink(missing_ok=True)
    # The state dir itself holds a space, a quote and a command substitution.
    ex = SlurmExecutor(tmp_path / "st ate 'q' $(touch -- pwned)", grace_period=1,
                       extra_env={"SITE_NOTE": HOSTILE})
    t = Tasks(ex, tmp_path)
    names = "('NOTE', 'SITE_NOTE', 'TACC_TASK_NAME')"
    show = f"import os, json; print('ECHO' + json.dumps([os.environ[k] for k in {names}]))"
    plan = t.plan({}, entrypoint={"argv": ["python", "-c", show, HOSTILE]},
                  environment={"variables": {"NOTE": HOSTILE}})
    plan = plan.model_copy(update={"name": HOSTILE})  # beyond what the schema lets through
    try:
        await t.launch(6, plan, ("n3", []))
        obs = await t.wait(6, "exited")
    finally:
        for task_id, state in t.states.items():
            await ex.cancel(task_id, state)
    assert obs.exit_code == 0, t.log(6)
    line = next(line for line in t.log(6).splitlines() if line.startswith("ECHO"))
    assert json.loads(line[4:]) == [HOSTILE, HOSTILE, HOSTILE]
    assert not canary.exists() and not (ex.task_dir(6) / "pwned").exists() and not Path("pwned").exists()


def counting_bin(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bin dir whose Slurm commands log their argv and run the real ones; squeue pretends to have
    forgotten every job while the returned flag file exists (as after MinJobAge), and sacct fails
    while ``<flag>.acct-down`` exists (slurmdbd down)."""
    bin_dir, calls, forget = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "forget"
    bin_dir.mkdir()
    for cmd in ("sbatch", "squeue", "sacct", "scancel", "sinfo", "scontrol"):
        real = subprocess.run(["which", cmd], capture_output=True, text=True, check=True).stdout.strip()
        fake = {
            "squeue": f'[ -e "{forget}" ] && [ "$2" = --states=all ] && exit 0\n',
            "sacct": f'[ -e "{forget}.acct-down" ] && {{ echo "sacct: error: slurmdbd down" >&2; exit 1; }}\n',
        }.get(cmd, "")
        (bin_dir / cmd).write_text(f'#!/bin/sh\necho "{cmd} $*" >> "{calls}"\n{fake}exec {real} "$@"\n')
        (bin_dir / cmd).chmod(0o755)
    return bin_dir, calls, forget


async def test_poll_is_one_squeue_call_and_one_sacct_call_for_many_tasks(slurm_cluster: SlurmCluster,
                                                                         tmp_path: Path) -> None:
    bin_dir, calls, forget = counting_bin(tmp_path)
    ex = SlurmExecutor(tmp_path / "state", bin_dir=str(bin_dir), missing_grace=0)
    t = Tasks(ex, tmp_path)
    try:
        for task_id, node in ((11, "n1"), (12, "n2"), (13, "n4")):
            plan = t.plan({"main.sh": f"echo task {task_id}; exit {task_id - 11}\n"},
                          entrypoint={"argv": ["bash", "main.sh"]})
            await t.launch(task_id, plan, (node, [0]))
        for task_id in t.states:
            await t.wait(task_id, "exited")
        calls.write_text("")
        seen = await ex.poll(t.states)
        assert {tid: (o.status, o.exit_code) for tid, o in seen.items()} == {
            11: ("exited", 0), 12: ("exited", 1), 13: ("exited", 2)}
        assert calls.read_text().splitlines() == [POLL_SQUEUE]
        # Listed as ended but no exitcode file (the task never wrote one): squeue --json has the exit code.
        (ex.task_dir(13) / "exitcode").unlink()
        calls.write_text("")
        seen = await ex.poll({13: t.states[13]})
        assert (seen[13].status, seen[13].exit_code) == ("exited", 2), seen[13]
        assert calls.read_text().splitlines() == [POLL_SQUEUE, "squeue --json"]
        (ex.task_dir(13) / "exitcode").write_text("2\n")

        # squeue no longer lists them: one sacct call for all; our exitcode files give the codes.
        forget.touch()
        calls.write_text("")
        ghost = {"job_id": "999999", "dir": str(tmp_path)}
        seen = await ex.poll({**t.states, 99: ghost})
        ids = ",".join(t.states[tid]["job_id"] for tid in (11, 12, 13))
        assert calls.read_text().splitlines() == [POLL_SQUEUE, f"sacct -j {ids},999999 --json"]
        assert [seen[tid].exit_code for tid in (11, 12, 13)] == [0, 1, 2], seen
        assert seen[99].status == "gone" and "no record" in (seen[99].reason or ""), seen[99]
        # sacct alone (no exitcode file) knows how a job ended.
        (ex.task_dir(12) / "exitcode").unlink()
        seen = await ex.poll({12: t.states[12]})
        assert seen[12].status == "exited" and seen[12].exit_code == 1, seen[12]
        # Accounting down: what the exitcode files tell still counts; the rest is unknown, not gone.
        Path(f"{forget}.acct-down").touch()
        seen = await ex.poll({**t.states, 99: ghost})
        assert (seen[11].status, seen[11].exit_code) == ("exited", 0), seen[11]
        assert seen[12].status == "unknown" and seen[99].status == "unknown", seen
    finally:
        for task_id, state in t.states.items():
            await ex.cancel(task_id, state)


async def test_a_job_slurm_does_not_list_is_unknown_before_it_is_gone(tasks: Tasks) -> None:
    ghost = {"job_id": "999998", "dir": "/nonexistent"}
    first = (await tasks.ex.poll({98: ghost}))[98]
    assert first.status == "unknown", first  # accounting may lag behind a submission
    tasks.ex.missing_grace = 0
    assert (await tasks.ex.poll({98: ghost}))[98].status == "gone"


async def test_drained_nodes_are_left_out(tasks: Tasks) -> None:
    drain = ["scontrol", "update", "nodename=n4", "state=drain", "reason=tacc-test"]
    subprocess.run(drain, check=True, capture_output=True, timeout=60)
    try:
        assert [n.name for n in tasks.ex.refresh_nodes()] == ["n1", "n2", "n3"]
    finally:
        subprocess.run(["scontrol", "update", "nodename=n4", "state=resume"], check=True, capture_output=True,
                       timeout=60)
    deadline = time.monotonic() + WAIT_S  # slurmctld takes a moment to return it to service
    while [n.name for n in tasks.ex.refresh_nodes()] != ["n1", "n2", "n3", "n4"]:
        assert time.monotonic() < deadline, tasks.ex.nodes()
        await asyncio.sleep(0.3)


async def test_a_job_pending_in_slurm_is_running_for_us_and_cancels_at_once(tasks: Tasks) -> None:
    # Another Slurm user's job holds both GPUs of n1, where our scheduler (unaware of it) places the task.
    blocker = subprocess.run(["sbatch", "--parsable", "--nodelist=n1", "--gres=gpu:2", "--output=/dev/null",
                              "--wrap", "sleep 300"], capture_output=True, text=True, check=True, timeout=60)
    blocker_id = blocker.stdout.strip().split(";")[0]
    try:
        plan = tasks.plan({"main.sh": "echo should not run\n"}, entrypoint={"argv": ["bash", "main.sh"]},
                          resources={"gpus_per_node": 1})
        state = await tasks.launch(7, plan, ("n1", [0]))
        deadline = time.monotonic() + WAIT_S
        while (job := squeue_job(state["job_id"])) is None or job["state_reason"] != "Resources":
            assert time.monotonic() < deadline, job
            await asyncio.sleep(0.3)
        assert job["job_state"] == "PENDING"
        assert (await tasks.ex.poll({7: state}))[7] == Observation("running")
        tasks.ex.grace_period = 60  # a pending job has no processes to give a grace period to
        started = time.monotonic()
        await tasks.ex.cancel(7, state)
        assert time.monotonic() - started < 15
        obs = (await tasks.ex.poll({7: state}))[7]
        assert obs.status == "exited" and obs.reason == "cancelled" and obs.exit_code != 0, obs
        assert "should not run" not in tasks.log(7)
    finally:
        subprocess.run(["scancel", blocker_id], capture_output=True, timeout=60, check=False)


async def test_submit_as_runs_the_job_as_that_user(slurm_cluster: SlurmCluster) -> None:
    root = Path(tempfile.mkdtemp(prefix="tacc-submit-as-"))  # not pytest's tmp dir: private to root
    root.chmod(0o755)
    try:
        ex = SlurmExecutor(root / "state", submit_as="nobody", grace_period=1)
        t = Tasks(ex, root)
        plan = t.plan({"main.sh": 'echo "I am $(id -un)"; touch "$TACC_CHECKPOINT_DIR/saved"\n'},
                      entrypoint={"argv": ["bash", "main.sh"]})
        state = await t.launch(8, plan, ("n4", []))
        try:
            obs = await t.wait(8, "exited")
        finally:
            await ex.cancel(8, state)
        assert obs.exit_code == 0, t.log(8)
        assert "I am nobody" in t.log(8).splitlines(), t.log(8)
        assert (ex.task_dir(8) / "checkpoint" / "saved").stat().st_uid == pwd.getpwnam("nobody").pw_uid
        job = squeue_job(state["job_id"])
        assert job is not None and job["user_name"] == "nobody", job
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_a_rerun_after_preemption_keeps_its_log_and_checkpoints(tasks: Tasks) -> None:
    script = ('echo "attempt $TACC_ATTEMPT grace $TACC_PREEMPT_GRACE"; ls "$TACC_CHECKPOINT_DIR"\n'
              'trap \'echo saving; touch "$TACC_CHECKPOINT_DIR/step-$TACC_ATTEMPT"; exit 143\' TERM\n'
              '[ "$TACC_ATTEMPT" = 0 ] && { sleep 300 & wait; }\necho finished\n')
    plan = tasks.plan({"main.sh": script}, entrypoint={"argv": ["bash", "main.sh"]})
    placement = Placement(nodes=[NodeSlots(node="n3", gpus=[])])
    first = await tasks.ex.launch(Launch(task_id=9, owner="alice", plan=plan, placement=placement))
    tasks.states[9] = first
    deadline = time.monotonic() + WAIT_S
    while "attempt 0" not in tasks.log(9):
        assert time.monotonic() < deadline, tasks.log(9)
        await asyncio.sleep(0.2)
    await tasks.ex.cancel(9, first)  # what the service does to preempt
    second = await tasks.ex.launch(Launch(task_id=9, owner="alice", plan=plan, placement=placement, attempt=1))
    tasks.states[9] = second
    assert second["job_id"] != first["job_id"]
    obs = await tasks.wait(9, "exited")
    assert obs == Observation("exited", exit_code=0), (obs, tasks.log(9))
    lines = [line for line in tasks.log(9).splitlines() if not line.startswith(("slurmstepd", "srun"))]
    mark = lines.pop(2) if len(lines) > 2 else ""  # launch.sh marks the second run (compiler.render)
    assert mark.startswith("=== tacc: attempt 2 (TACC_ATTEMPT=1) started at ") and mark.endswith(" UTC ==="), lines
    assert lines == ["attempt 0 grace 2", "saving", "attempt 1 grace 2", "step-0", "finished"], tasks.log(9)
