"""launch.sh's TensorBoard and attempt mark, run for real with bash (a stand-in TensorBoard that records its argv).

The site's command and the spec's workdir and logdir are hostile text: each must reach TensorBoard as one word,
unexpanded; TensorBoard starts on node rank 0 only, in the background, before the program; a later run
(TACC_ATTEMPT > 0) is marked once in the log, by node rank 0. The executors give the port
(TACC_TENSORBOARD_PORT) and return it as ``tensorboard_port``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.executors.base import Launch
from tacc_hub.executors.local import LocalExecutor
from tacc_hub.executors.sbatch import render_batch
from tacc_hub.executors.slurm import TENSORBOARD_PORTS, tensorboard_port
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import SpecError, TaskSpec

EVIL = "a b; $(touch PWNED) `touch PWNED` 'q' \"dq\" *"
TB_NAME = f"tb {EVIL}"  # the command's first word, looked up on the PATH
FAKE_TB = """#!/bin/sh
# stands in for TensorBoard: records its arguments (NUL-separated) and who started it, then lingers
printf '%s\\0' "$@" > "$TACC_TASKDIR/tb.args.tmp" && mv "$TACC_TASKDIR/tb.args.tmp" "$TACC_TASKDIR/tb.args"
echo "fake tensorboard output"
"""


def _plan(spec: Callable[..., TaskSpec], site_with: Callable[..., SiteProfile], **fields: object) -> ExecutionPlan:
    site = site_with(tensorboard_command=[TB_NAME, "--flag", EVIL])
    return compile_task(spec(entrypoint={"argv": ["sh", "-c", "echo main ran; echo \"rank=$TACC_NODE_RANK\""]},
                             workdir=f"exp/{EVIL}", tensorboard={"logdir": f"tb {EVIL}"}, **fields), site)


def _run(tmp_path: Path, plan: ExecutionPlan, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """launch.sh as a node runs it: its directories, the launch variables, a PATH with the stand-in on it."""
    taskdir, work, fakebin = tmp_path / "task", tmp_path / "work", tmp_path / "bin"
    for d in (taskdir, work / "exp" / EVIL, fakebin):
        d.mkdir(parents=True, exist_ok=True)
    tb = fakebin / TB_NAME
    tb.write_text(FAKE_TB)
    tb.chmod(0o755)
    (taskdir / "launch.sh").write_text(plan.script)
    base = {"PATH": f"{fakebin}:/usr/bin:/bin", "TACC_TASKDIR": str(taskdir), "TACC_WORKDIR": str(work),
            "TACC_MASTER_ADDR": "127.0.0.1", "TACC_NODE_RANK": "0", "TACC_ATTEMPT": "0",
            "TACC_TENSORBOARD_PORT": "16006", "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(taskdir / "launch.sh")], env={**base, **env}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30, check=False)
    return proc, taskdir


def _wait_file(path: Path, needle: str = "", timeout: float = 10) -> str:
    """``path``'s text once it exists (and holds ``needle``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in (text := path.read_text()):
            return text
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written" + (f" with {needle!r}" if needle else ""))


def test_tensorboard_gets_each_hostile_word_as_one_argument(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    assert plan.tensorboard is not None
    assert plan.tensorboard.logdir == f"exp/{EVIL}/tb {EVIL}"  # relative to TACC_WORKDIR, under the workdir
    proc, taskdir = _run(tmp_path, plan)
    assert proc.returncode == 0, proc.stderr
    args = _wait_file(taskdir / "tb.args").split("\0")[:-1]
    assert args == ["--flag", EVIL, "--logdir", f"{tmp_path}/work/exp/{EVIL}/tb {EVIL}", "--host", "127.0.0.1",
                    "--port", "16006"]
    assert "main ran" in proc.stdout
    assert f"tacc: TensorBoard on port 16006, reading exp/{EVIL}/tb {EVIL} (its output: tensorboard.log)" \
        in proc.stdout
    # its output goes to its own file in the task dir, not into the task's log
    _wait_file(taskdir / "tensorboard.log", "fake tensorboard output")
    assert "fake tensorboard output" not in proc.stdout + proc.stderr
    assert "=== tacc: attempt" not in proc.stdout  # the first run is not marked
    assert not list(tmp_path.rglob("PWNED"))


def test_only_node_rank_0_starts_tensorboard_or_marks_the_attempt(tmp_path, spec, site_with):
    proc, taskdir = _run(tmp_path, _plan(spec, site_with), TACC_NODE_RANK="1", TACC_ATTEMPT="2")
    assert proc.returncode == 0, proc.stderr
    assert "rank=1" in proc.stdout
    assert "TensorBoard" not in proc.stdout + proc.stderr and "=== tacc" not in proc.stdout
    time.sleep(0.3)  # give a wrongly started stand-in the time to write what it would have written
    assert not (taskdir / "tb.args").exists() and not (taskdir / "tensorboard.log").exists()


def test_a_later_run_is_marked_once_before_the_program(tmp_path, spec, site):
    plan = compile_task(spec(entrypoint={"argv": ["echo", "program output"]}), site)
    proc, _ = _run(tmp_path, plan, TACC_ATTEMPT="2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == "program output", lines
    assert lines[0].startswith("=== tacc: attempt 3 (TACC_ATTEMPT=2) started at 20")
    assert lines[0].endswith(" UTC ===")
    for odd in ("0", "", "x1", "1;id", "$(id)"):  # the first run, or nothing a number: no mark, no expansion
        proc, _ = _run(tmp_path, plan, TACC_ATTEMPT=odd)
        assert proc.returncode == 0 and proc.stdout == "program output\n", (odd, proc.stdout, proc.stderr)


def test_no_port_or_no_command_leaves_the_task_running_and_says_why(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    proc, _ = _run(tmp_path / "a", plan, TACC_TENSORBOARD_PORT="")
    assert proc.returncode == 0 and "main ran" in proc.stdout
    assert "tacc: TensorBoard was not started: this executor gave it no port" in proc.stderr
    proc, _ = _run(tmp_path / "b", plan, PATH="/usr/bin:/bin")
    assert proc.returncode == 0 and "main ran" in proc.stdout
    assert f"tacc: TensorBoard was not started: {TB_NAME} is not on the PATH of the task" in proc.stderr


def test_a_site_without_tensorboard_refuses_the_spec_naming_the_field(spec, site):
    assert site.tensorboard_command == []
    with pytest.raises(SpecError) as err:
        compile_task(spec(tensorboard={"logdir": "runs"}), site)
    [(field, message)] = err.value.errors
    assert field == "tensorboard" and "no TensorBoard" in message


def test_no_tensorboard_no_plan_field_no_lines(spec, site_with):
    plan = compile_task(spec(), site_with(tensorboard_command=["tensorboard"]))
    assert plan.tensorboard is None and "tensorboard" not in plan.model_dump_json()
    assert "TensorBoard" not in plan.script


def test_local_executor_gives_a_port_in_the_env(tmp_path, spec, site_with):
    plan = _plan(spec, site_with)
    ex = LocalExecutor(tmp_path / "data", launcher=["true"])
    launch = Launch(task_id=5, owner="alice", plan=plan, placement=Placement(nodes=[NodeSlots(node="localhost")]))
    env = ex.launch_spec(launch, tensorboard_port=41234)["env"]
    assert env["TACC_TENSORBOARD_PORT"] == "41234" and env["TACC_MASTER_PORT"] != "41234"
    assert env["TACC_MASTER_ADDR"] == "127.0.0.1"  # where TensorBoard binds on this executor
    assert "TACC_TENSORBOARD_PORT" not in ex.launch_spec(launch)["env"]


def test_slurm_port_is_fixed_by_the_task_id_in_its_block_and_exported(spec, site_with):
    first, count = TENSORBOARD_PORTS
    assert first + count <= 32768  # below Linux's ephemeral range
    assert {tensorboard_port(i) for i in range(1, count + 1)} == set(range(first, first + count))
    assert tensorboard_port(7) == tensorboard_port(7)
    plan = _plan(spec, site_with)
    job = render_batch(task_id=7, plan=plan, placement=Placement(nodes=[NodeSlots(node="n1")]),
                       task_dir=Path("/srv/tacc/tasks/7"), env={"TACC_TENSORBOARD_PORT": str(tensorboard_port(7))})
    assert f"export TACC_TENSORBOARD_PORT={tensorboard_port(7)}\n" in job.script

