"""The Slurm executor's pure parts: the job state table, exit codes, hostlists, the time option, the
group -> account/QOS maps, foreign GPUs, and how the files a job writes are read.

The executor's behaviour against real Slurm is tested in tests/slurm; these pin the table and
the parsers on inputs the dev cluster cannot produce on demand (NODE_FAIL, OUT_OF_MEMORY...).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tacc_hub.executors import LaunchError, Observation
from tacc_hub.executors.sbatch import gpus_per_node, mapped_name, time_option
from tacc_hub.executors.slurm import ACTIVE, REQUEUE_MARK, STATES, SlurmExecutor, _slurm_exit
from tacc_hub.executors.slurm_files import read_job_file
from tacc_hub.executors.slurm_nodes import expand_hostlist, foreign_gpus, gres_gpus
from tacc_hub.scheduler.cluster import ClusterState, Node, NodeSlots, Placement


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


def test_group_maps_give_the_account_and_qos() -> None:
    m = {"physics": "phys-{group}", "*": "{group}", "empty": ""}
    assert mapped_name("account", m, "physics") == "phys-physics"
    assert mapped_name("account", m, "bio.lab_2") == "bio.lab_2"
    assert mapped_name("account", m, "empty") is None  # an empty entry: no option, not the fallback
    assert mapped_name("account", {"physics": "p"}, "bio") is None  # no entry, no fallback: no option
    for bad in ("a b", "x;--wrap=id", "-leading", "", "é", "a" * 65, "a/b", "a\nb"):
        with pytest.raises(LaunchError, match="not a valid Slurm name"):
            mapped_name("QOS", {"*": "{group}"}, bad)


def test_gres_strings() -> None:
    assert gres_gpus("gpu:2") == (2, None) and gres_gpus("gpu:a100:4(S:0-1)") == (4, "a100")
    assert gres_gpus("gpu:1(IDX:0),shard:0") == (1, None) and gres_gpus("gpu:a:1(IDX:0),gpu:b:2(IDX:1-2)")[0] == 3
    assert gres_gpus("(null)") == (0, None) and gres_gpus("") == (0, None)


def test_foreign_gpus_are_allocated_ones_less_ours_by_id_and_name() -> None:
    sinfo = {"nodes": [{"name": "n1", "gres_used": "gpu:2(IDX:0-1)"}, {"name": "n2", "gres_used": "gpu:2"},
                       {"name": "n3", "gres_used": "gpu:1"}, {"name": "n4", "gres_used": "gpu:0"}]}
    squeue = "\n".join([
        "10|tacc-4|RUNNING|n[1-2]|gres:gpu:1",  # ours: 1 GPU on n1 and on n2
        "11|tacc-5|RUNNING|n3|gres:gpu:1",  # a user's job named like ours: its id is not one we submitted
        "12|tacc-6|PENDING|n4|gres:gpu:2",  # ours, waiting in Slurm: holds nothing
        "13|train|RUNNING|n2|gres:gpu:1",  # a foreign job of that name
        "junk",
    ])
    assert foreign_gpus(sinfo, squeue, {"10", "12"}) == {"n1": 1, "n2": 1, "n3": 1}
    assert foreign_gpus(sinfo, squeue, set()) == {"n1": 2, "n2": 2, "n3": 1}  # before the service knows its jobs


def test_foreign_gpus_are_not_free_in_the_cluster_state() -> None:
    cluster = ClusterState([Node("n1", 4), Node("n2", 2)])
    cluster.allocate(1, Placement(nodes=[NodeSlots(node="n1", gpus=[0])]))
    assert cluster.update_nodes([Node("n1", 4, foreign=2), Node("n2", 2)]) == ["n1"]
    assert cluster.nodes["n1"].free == [1] and cluster.nodes["n1"].holders == {0: 1}
    with pytest.raises(ValueError, match="GPU 2 on n1 is not free"):
        cluster.allocate(2, Placement(nodes=[NodeSlots(node="n1", gpus=[2])]))
    assert cluster.place(1, 2) is not None and cluster.place(1, 3) is None
    assert cluster.foreign_note() == "2 GPUs on n1 are held by jobs outside tacc"
    cluster.update_nodes([Node("n1", 4, foreign=2), Node("n2", 2, foreign=1)])
    assert cluster.foreign_note() == "2 GPUs on n1 and 1 GPU on n2 are held by jobs outside tacc"
    cluster.update_nodes([Node("n1", 4, foreign=9), Node("n2", 2)])  # more than there is: nothing free, no error
    assert cluster.nodes["n1"].free == [] and cluster.foreign_note() == "9 GPUs on n1 are held by jobs outside tacc"
    assert cluster.summary()[0]["gpus_free"] == 0 and cluster.summary()[0]["gpus_foreign"] == 9
    assert cluster.update_nodes([Node("n1", 4), Node("n2", 2)]) == ["n1"]
    assert cluster.nodes["n1"].free == [1, 2, 3] and cluster.foreign_note() is None


def test_job_files_are_read_only_as_small_regular_files_of_the_jobs_uid(tmp_path: Path) -> None:
    me = os.geteuid()
    (tmp_path / "code").write_text("7\n")
    assert read_job_file(str(tmp_path / "code"), me) == "7\n"
    assert read_job_file(str(tmp_path / "code"), me + 1) is None  # not the job's: e.g. a hard link to another's
    assert read_job_file(str(tmp_path / "missing"), me) is None
    (tmp_path / "link").symlink_to(tmp_path / "code")
    assert read_job_file(str(tmp_path / "link"), me) is None
    os.mkfifo(tmp_path / "fifo")
    started = time.monotonic()
    assert read_job_file(str(tmp_path / "fifo"), me) is None and time.monotonic() - started < 1
    (tmp_path / "dir").mkdir()
    assert read_job_file(str(tmp_path / "dir"), me) is None
    (tmp_path / "big").write_text("1" * 10_000)
    assert read_job_file(str(tmp_path / "big"), me) == "1" * 64


def test_an_exit_code_file_that_is_a_link_or_not_the_jobs_is_ignored(tmp_path: Path) -> None:
    ex = SlurmExecutor(tmp_path / "state")
    tdir = ex.task_dir(1)
    tdir.mkdir(parents=True)
    (tmp_path / "code").write_text("42\n")
    (tdir / "job").write_text("42\n")
    (tdir / "exitcode").symlink_to(tmp_path / "code")
    done = {"job_state": "COMPLETED", "exit_code": 0}
    assert ex._observe(1, "42", done, 0.0) == Observation("exited", exit_code=0)  # Slurm's word, not the link's
    (tdir / "exitcode").unlink()
    (tdir / "exitcode").write_text("42\n")
    assert ex._observe(1, "42", done, 0.0) == Observation("exited", exit_code=42)
    assert ex._observe(1, "42", done, 0.0, uid=os.geteuid() + 1) == Observation("exited", exit_code=0)
    (tdir / "exitcode").write_text("99999999999999\n")
    assert ex._observe(1, "42", done, 0.0).exit_code == 255  # nonsense: a failure, not a huge number


def test_a_task_waiting_for_gpus_says_which_jobs_outside_tacc_hold_some() -> None:
    from tacc_hub.scheduler.policy import Explanation
    from tacc_hub.service.nodes import with_foreign_note

    explained = {1: Explanation("Resources", 1, None, "needs 8 GPUs; 6 free"),
                 2: Explanation("Topology", 2, None, "6 GPUs are free, but not 4 node(s) x 2 GPUs"),
                 3: Explanation("Quota", 3, None, "user bob holds 2 of at most 2 GPUs")}
    cluster = ClusterState([Node("n1", 2), Node("n2", 2)])
    assert with_foreign_note(cluster, explained) is explained
    cluster.update_nodes([Node("n1", 2, foreign=2), Node("n2", 2)])
    out = with_foreign_note(cluster, explained)
    assert out[1].detail == "needs 8 GPUs; 6 free; 2 GPUs on n1 are held by jobs outside tacc"
    assert out[2].detail.endswith("; 2 GPUs on n1 are held by jobs outside tacc") and out[3] == explained[3]


def test_sbatch_and_scancel_run_as_the_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = SlurmExecutor(tmp_path)
    assert ex._argv("squeue", "-h") == ["squeue", "-h"]  # queries: as the service
    root = ex._argv("sbatch", "x.sbatch", user="alice")
    assert root[1:] == ["-u", "alice", "--", "sbatch", "x.sbatch"] and root[0].endswith("runuser"), root
    monkeypatch.setattr(os, "geteuid", lambda: 4242)  # an unprivileged service: sudo, never asking for a password
    argv = ex._argv("scancel", "7", user="alice")
    assert argv[0].endswith("sudo") and argv[1:] == ["-n", "-u", "alice", "--", "scancel", "7"], argv
    with pytest.raises(RuntimeError, match="not an account name"):
        ex._argv("scancel", "7", user="-r root")
