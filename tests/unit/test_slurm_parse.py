"""The Slurm executor's pure parts: the job state table, exit codes, hostlists, the time option.

The executor's behaviour against real Slurm is tested in tests/slurm; these pin the table and
the parsers on inputs the dev cluster cannot produce on demand (NODE_FAIL, OUT_OF_MEMORY...).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tacc_hub.executors import LaunchError, Observation
from tacc_hub.executors.sbatch import gpus_per_node, time_option
from tacc_hub.executors.slurm import ACTIVE, REQUEUE_MARK, STATES, SlurmExecutor, _slurm_exit
from tacc_hub.executors.slurm_nodes import expand_hostlist
from tacc_hub.scheduler.cluster import NodeSlots, Placement


def test_every_state_maps_to_running_or_exited() -> None:
    assert {status for status, _ in STATES.values()} == {"running", "exited"}
    assert {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"} <= ACTIVE
    assert STATES["TIMEOUT"] == ("exited", "time limit")
    for state in ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL"):
        assert REQUEUE_MARK in (STATES[state][1] or ""), state
    assert REQUEUE_MARK not in (STATES["FAILED"][1] or "") and REQUEUE_MARK not in (STATES["CANCELLED"][1] or "")


@pytest.mark.parametrize(("state", "raw", "status", "code", "reason"), [
    ("RUNNING", 0, "running", None, None),
    ("PENDING", 0, "running", None, None),
    ("COMPLETED", 0, "exited", 0, None),
    ("FAILED", 3 << 8, "exited", 3, None),
    ("TIMEOUT", 15, "exited", 143, "time limit"),
    ("NODE_FAIL", 0, "exited", 1, f"node failure {REQUEUE_MARK}"),  # never a success
    ("OUT_OF_MEMORY", 0, "exited", 1, "out of memory"),
    ("CANCELLED", {"return_code": 0, "signal": {"signal_id": 9}}, "exited", 137, "cancelled in Slurm"),
    ("BOGUS", 0, "unknown", None, "unexpected Slurm job state BOGUS"),
])
def test_observations_from_slurm_alone(tmp_path: Path, state: str, raw: object, status: str, code: int | None,
                                       reason: str | None) -> None:
    ex = SlurmExecutor(tmp_path)  # no exitcode file in the task dir: Slurm's word only
    obs = ex._observe(1, "42", {"job_id": 42, "job_state": state, "exit_code": raw}, 0.0)
    assert (obs.status, obs.exit_code, obs.reason) == (status, code, reason)


def test_our_exit_code_file_wins_over_slurm(tmp_path: Path) -> None:
    ex = SlurmExecutor(tmp_path)
    ex.task_dir(1).mkdir(parents=True)
    (ex.task_dir(1) / "exitcode").write_text("7\n")
    (ex.task_dir(1) / "job").write_text("42\n")  # the batch script's first word: the dir is this job's
    obs = ex._observe(1, "42", {"job_state": {"current": "COMPLETING"}, "exit_code": 0}, 0.0)
    assert (obs.status, obs.exit_code) == ("exited", 7)


def test_an_exit_code_file_of_another_job_is_ignored(tmp_path: Path) -> None:
    # A job whose node failed lives on and writes its exit code while the task's next job runs.
    ex = SlurmExecutor(tmp_path)
    ex.task_dir(1).mkdir(parents=True)
    (ex.task_dir(1) / "exitcode").write_text("0\n")
    running = {"job_state": "RUNNING", "exit_code": 0}
    assert ex._observe(1, "43", running, 0.0).status == "running"  # no "job" file yet: not ours
    (ex.task_dir(1) / "job").write_text("42\n")
    assert ex._observe(1, "43", running, 0.0).status == "running"
    assert ex._observe(1, "43", None, 0.0).status == "unknown"  # and not taken as the end of job 43
    (ex.task_dir(1) / "job").write_text("43\n")
    assert ex._observe(1, "43", running, 0.0) == Observation("exited", exit_code=0)


def test_exit_codes() -> None:
    assert _slurm_exit(0) == 0 and _slurm_exit(2 << 8) == 2 and _slurm_exit(9) == 137
    assert _slurm_exit({"status": "FAILED", "return_code": 4}) == 4
    assert _slurm_exit(None) is None


def test_hostlists() -> None:
    assert expand_hostlist("n[1-3,7],gpu01") == ["n1", "n2", "n3", "n7", "gpu01"]
    assert expand_hostlist("node[08-10]") == ["node08", "node09", "node10"]
    assert expand_hostlist("n1,n2") == ["n1", "n2"]


def test_time_and_gpu_options() -> None:
    assert [time_option(s) for s in (1, 60, 61, 5430)] == ["1", "1", "2", "91"]
    with pytest.raises(LaunchError, match="same GPU count"):
        gpus_per_node(Placement(nodes=[NodeSlots(node="n1", gpus=[0, 1]), NodeSlots(node="n2", gpus=[0])]))


def test_a_node_failure_wins_over_an_exit_code_file(tmp_path: Path) -> None:
    # srun ends (here with 0) when Slurm fails the job's node; the batch script still writes that code.
    ex = SlurmExecutor(tmp_path)
    ex.task_dir(1).mkdir(parents=True)
    (ex.task_dir(1) / "exitcode").write_text("0\n")
    (ex.task_dir(1) / "job").write_text("42\n")
    obs = ex._observe(1, "42", {"job_state": "NODE_FAIL", "exit_code": 0}, 0.0)
    assert obs == Observation("exited", exit_code=1, reason=f"node failure {REQUEUE_MARK}")
