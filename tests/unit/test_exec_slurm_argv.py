"""``slurm_exec_argv``: the srun command of an exec, built from a real batch script and a hostile argv."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from tacc_hub.executors.base import ExecUnsupported
from tacc_hub.executors.execute import NODE_PROGRAM, script_env, script_workdir, slurm_exec_argv
from tacc_hub.executors.slurm import SlurmExecutor
from tacc_hub.scheduler.cluster import NodeSlots, Placement

HOSTILE = ["$(id)", ";rm -rf ~", "a,b=c", "--export=ALL", "FOO=bar", "x\ny"]


def _script(env: dict[str, str]) -> str:
    lines = ["#!/bin/bash", "# comment", "# [\"--x\"]", f"export TACC_TASK_NAME={shlex.quote('n a,me')}"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines += ["export INJECTED=$(id)", "if true; then", "export LATER=1", "fi"]
    return "\n".join(lines) + "\n"


def test_script_env_reads_the_exports_at_the_top_only() -> None:
    env = script_env(_script({"TACC_MASTER_PORT": "1234", "SITE": "a,b c'd\"$(x)"}))
    assert env == {"TACC_TASK_NAME": "n a,me", "TACC_MASTER_PORT": "1234", "SITE": "a,b c'd\"$(x)",
                   "INJECTED": "$(id)"}  # what bash would export: the text, unexpanded here and never run
    assert "LATER" not in env
    assert script_env("#!/bin/bash\nexport 1BAD=x\nexport A-B=y\nexport OK=1\n") == {"OK": "1"}


def test_script_workdir() -> None:
    assert script_workdir('set -e\ncd -- "${TACC_WORKDIR}"\nexec x\n') == "."
    assert script_workdir('cd -- "${TACC_WORKDIR}"/' + shlex.quote("my dir/sub") + "\n") == "my dir/sub"
    assert script_workdir('cd -- "${TACC_WORKDIR}"/../../etc\n') == "."
    assert script_workdir("") == "."


@pytest.fixture
def ex(tmp_path: Path) -> SlurmExecutor:
    return SlurmExecutor(tmp_path / "data", control_dir=tmp_path / "ctl", node_python="/usr/bin/python3")


def test_the_argv_is_srun_with_the_payload_as_one_item(ex: SlurmExecutor) -> None:
    tdir = ex.task_dir(9)
    tdir.mkdir(parents=True)
    (tdir / "job.sbatch").write_text(_script({"TACC_MASTER_PORT": "4242"}))
    (tdir / "launch.sh").write_text('cd -- "${TACC_WORKDIR}"/src\nexec python x.py\n')
    placement = Placement(nodes=[NodeSlots(node="n10", gpus=[0]), NodeSlots(node="n2", gpus=[0, 1])])
    state = {"job_id": "77", "uid": os.getuid()}
    argv = slurm_exec_argv(ex, 9, state, placement, HOSTILE, tty=True)
    assert argv[0].endswith("srun")
    assert "--jobid=77" in argv and "--overlap" in argv and "--pty" in argv
    assert "--nodelist=n2" in argv and "--gres=gpu:2" in argv  # Slurm's first node (n2 < n10), its GPUs
    assert f"--chdir={tdir / 'work' / 'src'}" in argv
    i = argv.index(NODE_PROGRAM)
    assert argv[i - 4:i] == ["/usr/bin/python3", "-I", "-S", "-c"]
    payload = json.loads(argv[i + 1])
    assert len(argv) == i + 2 and payload["argv"] == HOSTILE
    assert payload["env"]["TACC_MASTER_PORT"] == "4242" and payload["env"]["TACC_NODE_RANK"] == "0"
    assert payload["env"]["TACC_NODELIST"] == "n2,n10" and payload["env"]["TACC_TASK_ID"] == "9"
    assert not any(a in ("sh", "bash", "-c") for a in argv[:i - 4])  # no shell on the way


def test_a_batch_script_of_another_uid_or_a_link_is_not_read(ex: SlurmExecutor, tmp_path: Path) -> None:
    tdir = ex.task_dir(3)
    tdir.mkdir(parents=True)
    (tmp_path / "elsewhere").write_text(_script({"EVIL": "1"}))
    (tdir / "job.sbatch").symlink_to(tmp_path / "elsewhere")
    placement = Placement(nodes=[NodeSlots(node="n1", gpus=[])])
    argv = slurm_exec_argv(ex, 3, {"job_id": "5", "uid": os.getuid()}, placement, ["id"], tty=False)
    payload = json.loads(argv[-1])
    assert "EVIL" not in payload["env"] and not any(a.startswith("--gres") for a in argv)
    argv = slurm_exec_argv(ex, 3, {"job_id": "5", "uid": os.getuid() + 1}, placement, ["id"], tty=False)
    assert "EVIL" not in json.loads(argv[-1])["env"]


def test_no_job_no_exec(ex: SlurmExecutor) -> None:
    placement = Placement(nodes=[NodeSlots(node="n1", gpus=[])])
    with pytest.raises(ExecUnsupported):
        slurm_exec_argv(ex, 1, {}, placement, ["id"], tty=False)
    with pytest.raises(ExecUnsupported):
        slurm_exec_argv(ex, 1, {"job_id": "1;x"}, placement, ["id"], tty=False)


def test_the_node_program_runs_the_argv_as_given_with_the_variables() -> None:
    import subprocess
    import sys

    def run(payload: dict) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-I", "-S", "-c", NODE_PROGRAM, json.dumps(payload)],
                              capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "KEEP": "k"})

    res = run({"env": {"A": "x,y=z"}, "argv": ["sh", "-c", 'printf "%s|" "$A" "$KEEP" "$@"; exit 5', "sh", *HOSTILE]})
    assert res.returncode == 5 and res.stdout == "|".join(["x,y=z", "k", *HOSTILE]) + "|"
    res = run({"env": {}, "argv": ["FOO=bar", "id"]})
    assert res.returncode == 127 and "command not found" in res.stderr
