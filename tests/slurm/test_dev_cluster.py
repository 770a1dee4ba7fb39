"""The Slurm dev cluster of scripts/slurm-dev.sh, checked with real Slurm commands (no mocks).

Four virtual nodes n1..n4 with two fake GPUs each, switches s1 (n1, n2) and s2 (n3, n4),
partition "gpu", accounting through slurmdbd. Every job here is short or cancelled at the end,
so the tests leave the cluster idle for the next one.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.slurm.conftest import SlurmCluster

# The first test's setup may install the Debian packages before the cluster comes up.
pytestmark = pytest.mark.timeout(900)

NODES = ["n1", "n2", "n3", "n4"]
WAIT_S = 120  # the machine is shared and slow; the scheduler runs every 2 s


def slurm(*argv: str, timeout: float = 60) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr}"
    return proc.stdout


def slurm_json(*argv: str) -> dict[str, Any]:
    data = json.loads(slurm(*argv, "--json"))
    assert not data.get("errors"), data["errors"]
    return data


def wait_until(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def job_fields(job_id: str) -> dict[str, str]:
    """JobState, Reason, NodeList... of a job slurmctld still knows (MinJobAge after its end)."""
    out = slurm("scontrol", "show", "job", "-o", job_id)
    return dict(re.findall(r"(\w+)=(\S*)", out))


def wait_job_state(job_id: str, *states: str, timeout: float = WAIT_S) -> dict[str, str]:
    def check() -> dict[str, str] | None:
        fields = job_fields(job_id)
        return fields if fields["JobState"] in states else None

    return wait_until(f"job {job_id} in {states}", check, timeout)


def sbatch(*args: str) -> str:
    return slurm("sbatch", "--parsable", *args).strip().split(";")[0]


def sacct_state(job: dict[str, Any]) -> str:
    state = job["state"]
    return state["current"] if isinstance(state, dict) else state


@pytest.fixture
def jobs(slurm_cluster: SlurmCluster) -> Iterator[list[str]]:
    """Job ids a test submits; whatever is still queued or running is cancelled afterwards."""
    ids: list[str] = []
    yield ids
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=60, check=False)
        for job_id in ids:
            wait_job_state(job_id, "CANCELLED", "COMPLETED", "FAILED", "TIMEOUT")


@pytest.fixture
def out(tmp_path: Path) -> Callable[[str], Path]:
    """Path of a job output file in the test's tmp dir (jobs run as root, the dir's owner)."""
    return lambda name: tmp_path / name


def test_status_exits_zero_and_prints_the_env_line(slurm_cluster: SlurmCluster) -> None:
    proc = slurm_cluster.script("status")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"export SLURM_CONF={slurm_cluster.conf}" in proc.stdout
    for node in NODES:
        assert re.search(rf"^{node} gpu\* (idle|alloc|mix)", proc.stdout, re.M), proc.stdout


def test_sinfo_json_shows_four_idle_nodes_with_two_gpus(slurm_cluster: SlurmCluster) -> None:
    def nodes() -> list[dict[str, Any]] | None:
        found = slurm_json("sinfo")["nodes"]
        return found if all(n["state"] == "idle" for n in found) else None

    found = wait_until("all nodes idle", nodes)
    assert sorted(n["name"] for n in found) == NODES
    for node in found:
        assert node["gres"] == "gpu:2", node
        assert node["partitions"] == ["gpu"], node
        assert node["state_flags"] == [], node


def test_topology_has_two_leaf_switches_under_one_root(slurm_cluster: SlurmCluster) -> None:
    out = slurm("scontrol", "show", "topology")
    switches = {m[0]: m for m in re.findall(r"SwitchName=(\S+) Level=(\d+).*?Nodes=(\S+)", out)}
    assert switches["s1"][1:] == ("0", "n1,n2"), out
    assert switches["s2"][1:] == ("0", "n3,n4"), out
    assert switches["root"][1] == "1" and "Switches=s1,s2" in out, out


def test_a_gpu_job_sees_one_gpu(jobs: list[str], out: Callable[[str], Path]) -> None:
    log = out("gpu.out")
    jobs.append(sbatch("--gres=gpu:1", f"--output={log}", "--wrap", "echo $CUDA_VISIBLE_DEVICES"))
    fields = wait_job_state(jobs[0], "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")
    assert fields["JobState"] == "COMPLETED", fields
    assert re.fullmatch(r"[01]", log.read_text().strip()), log.read_text()


def test_two_full_gpu_jobs_cannot_share_a_node(jobs: list[str]) -> None:
    args = ["--gres=gpu:2", "--nodelist=n1", "--output=/dev/null", "--wrap", "sleep 300"]
    jobs.append(sbatch(*args))
    wait_job_state(jobs[0], "RUNNING")
    jobs.append(sbatch(*args))
    # The reason is "None" until the scheduler has looked at the job (every 2 s).
    second = wait_until(
        "the second job to wait for Resources",
        lambda: (f := job_fields(jobs[1]))["Reason"] == "Resources" and f,
    )
    assert second["JobState"] == "PENDING", second
    assert job_fields(jobs[0])["JobState"] == "RUNNING"


def test_a_two_node_job_runs_one_task_on_each_node(jobs: list[str], out: Callable[[str], Path]) -> None:
    log = out("two.out")
    jobs.append(
        sbatch(
            "--nodes=2",
            "--ntasks-per-node=1",
            f"--output={log}",
            "--wrap",
            "srun printenv SLURMD_NODENAME",
        )
    )
    fields = wait_job_state(jobs[0], "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")
    assert fields["JobState"] == "COMPLETED", (fields, log.read_text())
    names = log.read_text().split()
    assert len(names) == 2 and len(set(names)) == 2 and set(names) <= set(NODES), names


def test_sacct_json_returns_the_finished_job(jobs: list[str], out: Callable[[str], Path]) -> None:
    jobs.append(sbatch("--gres=gpu:1", f"--output={out('acct.out')}", "--wrap", "true"))
    wait_job_state(jobs[0], "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")

    def accounted() -> dict[str, Any] | None:  # slurmctld sends the end record to slurmdbd shortly after
        found = [j for j in slurm_json("sacct", "-j", jobs[0])["jobs"] if str(j["job_id"]) == jobs[0]]
        return found[0] if found and sacct_state(found[0]) == "COMPLETED" else None

    job = wait_until("sacct to show the job COMPLETED", accounted)
    gpus = [t for t in job["tres"]["allocated"] if t["type"] == "gres" and t["name"] == "gpu"]
    assert gpus and gpus[0]["count"] == 1, job["tres"]


def test_squeue_json_lists_a_running_job(jobs: list[str]) -> None:
    jobs.append(sbatch("--output=/dev/null", "--wrap", "sleep 300"))
    wait_job_state(jobs[0], "RUNNING")
    listed = {str(j["job_id"]): j for j in slurm_json("squeue")["jobs"]}
    assert jobs[0] in listed
    assert listed[jobs[0]]["job_state"] == "RUNNING"
    assert listed[jobs[0]]["partition"] == "gpu"


def test_up_again_is_a_no_op_that_keeps_running_jobs(slurm_cluster: SlurmCluster, jobs: list[str]) -> None:
    ctld_pid = (slurm_cluster.state_dir / "run" / "slurmctld.pid").read_text()
    jobs.append(sbatch("--gres=gpu:1", "--output=/dev/null", "--wrap", "sleep 300"))
    before = wait_job_state(jobs[0], "RUNNING")

    started = time.monotonic()
    proc = slurm_cluster.script("up")
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"export SLURM_CONF={slurm_cluster.conf}"
    assert "starting" not in proc.stderr, proc.stderr
    assert elapsed < 30, f"a second up took {elapsed:.1f}s"

    after = job_fields(jobs[0])
    assert after["JobState"] == "RUNNING" and after["NodeList"] == before["NodeList"], after
    assert (slurm_cluster.state_dir / "run" / "slurmctld.pid").read_text() == ctld_pid
