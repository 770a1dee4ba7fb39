"""Inputs (issue 20): an earlier task's files copied into a task's work directory before its program starts.

The local executor's path runs the real tacc-launcher as root with alice's account (as the service does):
the copy is made by alice, not by root, links inside the copied tree stay links, a source that resolves
out of its task's work directory or that alice cannot read is refused, and a missing one ends the
preparation with the reason in the task's log. The Slurm path (the batch script's ``tacc_input`` lines,
run on the batch host as the task's user) is run under bash with the same cases.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import ExecutionPlan, SiteProfile, compile_task, with_array_inputs
from tacc_hub.executors.base import Launch, LaunchError
from tacc_hub.executors.identity import Identity
from tacc_hub.executors.local import LocalExecutor
from tacc_hub.executors.prepare import input_copies
from tacc_hub.executors.sbatch import input_lines
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import spec_from_data
from tacc_hub.snapshot import pack
from tests import accounts

LAUNCHER = [sys.executable, "-I", "-m", "tacc_hub.launcher"]


@pytest.fixture(scope="module", autouse=True)
def _accounts() -> None:
    accounts.ensure_accounts()


def plan_with(site: SiteProfile, inputs: list[dict[str, Any]], elements: dict[int, list[tuple[int, int]]] | None = None
              ) -> ExecutionPlan:
    spec = spec_from_data({"name": "consumer", "code": {"kind": "snapshot", "digest": "ab" * 32},
                           "entrypoint": {"argv": ["true"]}, "inputs": inputs})
    plan = compile_task(spec, site)
    return with_array_inputs(plan, elements or {})


def chown_tree(path: Path, name: str) -> None:
    pw = pwd.getpwnam(name)
    for p in [path, *path.rglob("*")]:
        os.lchown(p, pw.pw_uid, pw.pw_gid)


def producer(tasks: Path, tid: int, owner: str = "alice", marker: str = "") -> Path:
    """``outputs/data`` in task ``tid``'s work directory: a file, a subdirectory, a link to /etc/shadow (copied as
    a link)."""
    data = tasks / str(tid) / "work" / "outputs" / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text(f"a{marker}")
    (data / "sub" / "b.txt").write_text("b")
    (data / "shadow").symlink_to("/etc/shadow")
    (tasks / str(tid) / "work" / "outputs" / "model.pt").write_text(f"model{marker}")
    for d in (tasks / str(tid), tasks / str(tid) / "work"):
        d.chmod(0o700)
    chown_tree(tasks / str(tid), owner)
    return data


class Tasks:
    """A data dir with tasks/ (the service's, 0711) every account may pass through, as in a deployment."""

    def __init__(self) -> None:
        self.data = accounts.data_dir("tacc-inputs-")
        self.tasks = self.data / "tasks"
        self.tasks.mkdir()
        self.tasks.chmod(0o711)
        self.archive = self.data / "code.tar.gz"
        payload = pack(accounts.data_dir("tacc-empty-"))
        self.archive.write_bytes(payload)
        self.digest = hashlib.sha256(payload).hexdigest()


def start(t: Tasks, tmp: Path, tid: int, plan: ExecutionPlan, script: str) -> subprocess.CompletedProcess[str]:
    """tacc-launcher prepare for task ``tid`` as alice, with the plan's inputs as the local executor sends them."""
    alice = pwd.getpwnam("alice")
    spec = {"task_id": tid, "account": {"name": "alice", "uid": alice.pw_uid, "gid": alice.pw_gid},
            "task_dir": str(t.tasks / str(tid)), "keep": ["output.log", "checkpoint"],
            "code": {"kind": "snapshot", "archive": str(t.archive), "digest": t.digest},
            "files": {"launch.sh": script}, "env": {"PATH": "/usr/bin:/bin", "HOME": alice.pw_dir}, "grace": 1,
            "inputs": input_copies(plan, t.tasks)}
    run = tmp / "run"
    (run / str(tid)).mkdir(parents=True, exist_ok=True, mode=0o700)
    run.chmod(0o700)
    (run / str(tid) / "launch.json").write_text(json.dumps(spec))
    return subprocess.run([*LAUNCHER, str(run), "prepare", str(tid)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})


def test_local_inputs_are_copied_as_the_owner(site: SiteProfile, tmp_path: Path) -> None:
    t = Tasks()
    producer(t.tasks, 5)
    producer(t.tasks, 6, marker="6")
    producer(t.tasks, 7, marker="7")
    plan = plan_with(site, [{"task": 5, "path": "outputs/data"},
                            {"task": 5, "path": "outputs/model.pt", "to": "in/model.pt"},
                            {"array": 6, "path": "outputs/data", "to": "sweep"},
                            {"array": 6, "path": "outputs/model.pt", "to": "models"}], {6: [(0, 6), (1, 7)]})
    res = start(t, tmp_path, 20, plan, "true\n")
    assert res.returncode == 0, res.stderr
    work = t.tasks / "20" / "work"
    alice = pwd.getpwnam("alice").pw_uid
    assert (work / "outputs/data/a.txt").read_text() == "a" and (work / "outputs/data/sub/b.txt").read_text() == "b"
    assert (work / "outputs/data/shadow").is_symlink()  # a link inside the tree is copied as a link
    assert os.readlink(work / "outputs/data/shadow") == "/etc/shadow"
    assert (work / "in/model.pt").read_text() == "model"
    assert (work / "sweep/0/a.txt").read_text() == "a6" and (work / "sweep/1/a.txt").read_text() == "a7"
    assert (work / "models/0/model.pt").read_text() == "model6" and (work / "models/1/model.pt").read_text() == "model7"
    owners = {p.lstat().st_uid for p in work.rglob("*")}
    assert owners == {alice}, "the copies are the task user's own (made by it, not by root)"
    # a copy, not a link: the task rewriting its input leaves the producer's output as it was
    (work / "outputs/data/a.txt").write_text("changed")
    assert (t.tasks / "5" / "work" / "outputs" / "data" / "a.txt").read_text() == "a"


def test_a_missing_input_fails_the_task_with_its_reason_in_the_log(site: SiteProfile, tmp_path: Path) -> None:
    t = Tasks()
    producer(t.tasks, 5)
    plan = plan_with(site, [{"task": 12, "path": "outputs/data"}])
    res = start(t, tmp_path, 21, plan, "echo ran\n")
    assert res.returncode == 1
    assert "input outputs/data of task 12 is missing" in res.stderr
    log = (t.tasks / "21" / "output.log").read_text()
    assert "tacc: input outputs/data of task 12 is missing" in log and "ran" not in log
    plan = plan_with(site, [{"task": 5, "path": "outputs/nothing"}])
    res = start(t, tmp_path, 22, plan, "true\n")
    assert res.returncode == 1 and "input outputs/nothing of task 5 is missing" in res.stderr


def test_another_users_task_or_a_link_out_is_not_copied(site: SiteProfile, tmp_path: Path) -> None:
    t = Tasks()
    producer(t.tasks, 5, owner="bob")  # bob's task: alice cannot read it (the service also answers 404)
    res = start(t, tmp_path, 23, plan_with(site, [{"task": 5, "path": "outputs/data"}]), "true\n")
    assert res.returncode == 1 and "is missing" in res.stderr
    assert not (t.tasks / "23" / "work" / "outputs").exists()
    # alice's own task whose output is a link to bob's readable file, or to /etc
    secret = accounts.data_dir("tacc-bob-") / "notes.txt"
    secret.write_text("bob's")
    secret.chmod(0o644)
    work = t.tasks / "6" / "work"
    (work / "outputs").mkdir(parents=True)
    (work / "outputs" / "notes").symlink_to(secret)
    (work / "outputs" / "etc").symlink_to("/etc")
    chown_tree(t.tasks / "6", "alice")
    for path in ("outputs/notes", "outputs/etc"):
        res = start(t, tmp_path, 24, plan_with(site, [{"task": 6, "path": path}]), "true\n")
        assert res.returncode == 1 and "leads out of its task's work directory" in res.stderr, res.stderr
    assert not (t.tasks / "24" / "work" / "outputs").exists()


async def test_the_local_executor_copies_inputs_before_the_program(site_with: Any) -> None:
    """The whole local path: LocalExecutor.launch -> tacc-launcher start (root) -> copy as alice -> launch.sh."""
    t = Tasks()
    producer(t.tasks, 5)
    producer(t.tasks, 6, marker="6")
    producer(t.tasks, 7, marker="7")
    code_root = t.data / "code"
    code_root.mkdir()
    shutil.copy(t.archive, code_root / f"{t.digest}.tar.gz")
    site = site_with(code_root=str(code_root), pythons={"3.11": sys.executable}, default_python="3.11")
    spec = spec_from_data({
        "name": "consumer", "code": {"kind": "snapshot", "digest": t.digest},
        "entrypoint": {"shell": ["cat outputs/data/a.txt sweep/1/a.txt; ls -l outputs/data/shadow | cut -c1"]},
        "inputs": [{"task": 5, "path": "outputs/data"}, {"array": 6, "path": "outputs/data", "to": "sweep"}]})
    plan = with_array_inputs(compile_task(spec, site), {6: [(0, 6), (1, 7)]})
    ex = LocalExecutor(t.data, run_dir=t.data / "run", identity=Identity(mode="owner"), launcher=LAUNCHER)
    account = ex.identity.account("alice")
    launch = Launch(task_id=40, owner="alice", plan=plan, placement=Placement(nodes=[NodeSlots(node="localhost")]),
                    account=account)
    state = await ex.launch(launch)
    for _ in range(300):
        obs = (await ex.poll({40: state}))[40]
        if obs.status == "exited":
            break
        await asyncio.sleep(0.1)
    log = (t.tasks / "40" / "output.log").read_text()
    assert obs.status == "exited" and obs.exit_code == 0, (obs, log)
    assert log == "aa7l\n", log
    # a missing input: the launch fails, naming it, and the program never ran
    bad = with_array_inputs(compile_task(spec.model_copy(update={"inputs": spec.inputs[:1]}), site), {})
    bad = bad.model_copy(update={"inputs": [bad.inputs[0].model_copy(update={"task": 12})]})
    with pytest.raises(LaunchError, match="input outputs/data of task 12 is missing"):
        await ex.launch(Launch(task_id=41, owner="alice", plan=bad, account=account,
                               placement=Placement(nodes=[NodeSlots(node="localhost")])))
    assert "tacc: input outputs/data of task 12 is missing" in (t.tasks / "41" / "output.log").read_text()


def test_an_array_input_without_its_elements_is_a_launch_error(site: SiteProfile) -> None:
    plan = plan_with(site, [{"array": 6, "path": "outputs/data"}])
    with pytest.raises(LaunchError, match="input outputs/data of array 6: its elements are not known"):
        input_copies(plan, Path("/srv/tacc/tasks"))
    assert input_lines(plan_with(site, []), Path("/srv/tacc/tasks")) == []


# --- the Slurm batch script's copies -------------------------------------------------------------------


def run_batch_lines(plan: ExecutionPlan, tasks: Path, work: Path, as_user: str = "alice"
                    ) -> subprocess.CompletedProcess[str]:
    script = "\n".join(["set -u", *input_lines(plan, tasks), "echo copied"]) + "\n"
    path = work.parent / "copy.sh"
    path.write_text(script)
    path.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "TACC_WORKDIR": str(work), "SLURM_JOB_ID": "99"}
    return subprocess.run(["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--init-groups", "bash",
                           str(path)], capture_output=True, text=True, timeout=60, env=env, cwd=work.parent)


def test_slurm_batch_lines_copy_as_the_task_user(site: SiteProfile) -> None:
    t = Tasks()
    producer(t.tasks, 5)
    producer(t.tasks, 6, marker="6")
    producer(t.tasks, 7, marker="7")
    work = t.tasks / "30" / "work"
    work.mkdir(parents=True)
    chown_tree(t.tasks / "30", "alice")
    plan = plan_with(site, [{"task": 5, "path": "outputs/data"},
                            {"task": 5, "path": "outputs/model.pt", "to": "in/model.pt"},
                            {"array": 6, "path": "outputs/data", "to": "sweep"},
                            {"array": 6, "path": "outputs/model.pt", "to": "models"}], {6: [(0, 6), (1, 7)]})
    res = run_batch_lines(plan, t.tasks, work)
    assert res.returncode == 0 and res.stdout == "copied\n", res.stderr
    assert (work / "outputs/data/a.txt").read_text() == "a" and (work / "outputs/data/sub/b.txt").read_text() == "b"
    assert os.readlink(work / "outputs/data/shadow") == "/etc/shadow"
    assert (work / "in/model.pt").read_text() == "model"
    assert (work / "sweep/1/a.txt").read_text() == "a7" and (work / "models/0/model.pt").read_text() == "model6"
    assert {p.lstat().st_uid for p in work.rglob("*")} == {pwd.getpwnam("alice").pw_uid}
    # missing, another's, a link out: the job stops before any step, naming the input
    producer(t.tasks, 8, owner="bob")
    (t.tasks / "5" / "work" / "outputs" / "etc").symlink_to("/etc")
    for inputs, message in [([{"task": 12, "path": "outputs/data"}], "input outputs/data of task 12 is missing"),
                            ([{"task": 8, "path": "outputs/data"}], "input outputs/data of task 8 is missing"),
                            ([{"task": 5, "path": "outputs/etc"}], "leads out of its task's work directory")]:
        res = run_batch_lines(plan_with(site, inputs), t.tasks, work)
        assert res.returncode == 1 and "copied" not in res.stdout, res.stdout
        assert message in res.stderr, res.stderr
