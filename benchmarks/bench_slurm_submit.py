"""Submit -> running on Slurm through tacc_hub vs raw ``sbatch`` (target: at most 100 ms added at p50).

Both kinds of job run on the dev cluster (``scripts/slurm-dev.sh``; brought up here when it is
not up) and are interleaved one by one in the same run, so that the cluster's own scheduling
delay (SchedulerParameters, node cleanup after a job) hits both alike. Each job writes
``date +%s.%N`` to a marker file as the first thing its step runs on the node; a sample is
marker time - submit time (one clock: the nodes are this machine).

- tacc: ``POST /api/tasks`` to a service with ``--TaccHub.executor=slurm`` (1 GPU, a task that
  writes the marker); its path is HTTP, the store, a scheduling pass, the task directory, the
  batch script, ``sbatch``, Slurm, ``srun`` of ``launch.sh``. The service's own view (its task
  is "running" once sbatch returned: ``started_at - submitted_at``) is printed beside it.
- raw (baseline): ``sbatch --gres=gpu:1`` of a two-line batch script whose ``srun`` step writes
  the marker: what a user of Slurm alone would do.

Slurm does not start a batch job the moment it is submitted: its scheduler picks it up on its
next pass (here about every 2 s: ``batch_sched_delay``/``sched_interval``), so each total carries
a wait of 0-2 s that has nothing to do with who submitted. Before each sample every earlier job
has left squeue and a random 0-2 s pause follows, so that both kinds land at random points of
that cycle (a fixed pause locks each kind to one phase of it and biases the comparison by up to
a second). Each total is then split with slurmctld's own log (ms timestamps of
``_slurm_rpc_submit_batch_job`` and ``sched: Allocate`` or backfill's ``Started``) into: before Slurm (client -> the
submission reaching slurmctld), Slurm's wait (submission -> nodes allocated), and in the job
(allocation -> marker). The target is checked on the total minus Slurm's wait, which is what
tacc adds; the plain totals are printed too.

Usage: python benchmarks/bench_slurm_submit.py [--samples 20] [--warmup 2]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Api, Service, header, ms, pct, ratio, verdict
from _slurm import active_jobs, cancel_jobs, ctld_times, dev_cluster

TARGET_ADDED_P50 = 0.100
MARKER = 'date +%s.%N > "$TACC_TASKDIR/started"'
RAW_SCRIPT = "#!/bin/bash\nsrun --ntasks=1 bash -c 'date +%s.%N > \"$1\"' bash \"$1\"\n"


def wait_marker(path: Path, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text:
            return float(text)
        time.sleep(0.003)
    raise RuntimeError(f"{path} was not written in {timeout} s")


def ours(names: set[str]) -> list[str]:
    """Ids of the active jobs with one of these names (the benchmark's own)."""
    return sorted(j for j, name in active_jobs().items() if name in names)


def wait_idle(names: set[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while ours(names):
        if time.monotonic() > deadline:
            raise RuntimeError(f"jobs still listed after {timeout} s: {ours(names)}")
        time.sleep(0.05)
    time.sleep(random.uniform(0.1, 2.1))  # a random phase of the scheduler's cycle (see the docstring)


def job_of(svc: Service, task_id: int) -> str:
    """The Slurm job id the service recorded for a task (its store; the API does not show it)."""
    from tacc_hub.store import Store

    with Store(svc.db_url) as store:
        rec = store.get(task_id)
    return str(((rec.executor_state if rec else None) or {}).get("job_id", ""))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()

    header("submit -> running on Slurm: tacc_hub vs raw sbatch (dev cluster)")
    # kind -> samples of (client submit time, marker time, job id)
    got: dict[str, list[tuple[float, float, str]]] = {"tacc": [], "raw": []}
    service_view: list[float] = []
    names = {"bench-raw"}
    began = time.monotonic()
    with dev_cluster() as conf, tempfile.TemporaryDirectory(prefix="tacc-bench-raw-") as tmp:
        raw_script = Path(tmp) / "raw.sbatch"
        raw_script.write_text(RAW_SCRIPT)
        with Service("--TaccHub.executor=slurm", f"--TaccHub.slurm_conf={conf}", "--TaccHub.grace_period=1",
                     "--TaccHub.max_running_per_user=1000", name="slurm-submit") as svc:
            svc.token("alice")
            svc.start()
            api = Api(svc.url, svc.token("alice"))
            spec = {"name": "marker", "code": api.upload_code(), "entrypoint": {"shell": [MARKER]},
                    "resources": {"gpus_per_node": 1}}
            try:
                for i in range(args.warmup + args.samples):
                    keep = i >= args.warmup
                    # raw sbatch
                    mark = Path(tmp) / f"raw-{i}"
                    t0 = time.time()
                    out = subprocess.run(["sbatch", "--parsable", "--job-name=bench-raw", "--nodes=1",
                                          "--ntasks-per-node=1", "--cpus-per-task=1", "--gres=gpu:1",
                                          "--output=/dev/null", str(raw_script), str(mark)],
                                         capture_output=True, text=True, check=True, timeout=60).stdout
                    job = out.strip().split(";")[0]
                    if not job.isdigit():
                        raise RuntimeError(f"sbatch printed {out!r}")
                    if keep:
                        got["raw"].append((t0, wait_marker(mark), job))
                    wait_idle(names)
                    # tacc_hub
                    t0 = time.time()
                    status, task = api.call("POST", "/api/tasks", spec)
                    if status != 201:
                        raise RuntimeError(f"submit failed: {status} {task}")
                    names.add(f"tacc-{task['id']}")
                    t1 = wait_marker(svc.state_dir / "tasks" / str(task["id"]) / "started")
                    done = api.wait_status(task["id"], {"succeeded", "failed", "lost", "cancelled"}, timeout=60)
                    if done["status"] != "succeeded":
                        raise RuntimeError(f"task {task['id']} {done['status']}: {done.get('reason')}")
                    if keep:
                        got["tacc"].append((t0, t1, job_of(svc, task["id"])))
                        service_view.append(done["started_at"] - done["submitted_at"])
                    wait_idle(names)
            finally:
                cancel_jobs(ours(names))
        times = ctld_times(conf, {job for samples in got.values() for _, _, job in samples})

    print(f"samples: {len(got['tacc'])} each, interleaved (after {args.warmup} warm-up pairs), "
          f"{time.monotonic() - began:.0f} s")
    parts: dict[str, dict[str, list[float]]] = {}
    for kind, samples in got.items():
        p = parts[kind] = {"total": [], "before": [], "wait": [], "job": [], "own": []}
        for t0, t1, job in samples:
            ev = times.get(job, {})
            if "submit" not in ev or "alloc" not in ev:
                raise RuntimeError(f"job {job} is not in slurmctld's log ({ev})")
            p["total"].append(t1 - t0)
            p["before"].append(ev["submit"] - t0)
            p["wait"].append(ev["alloc"] - ev["submit"])
            p["job"].append(t1 - ev["alloc"])
            p["own"].append(t1 - t0 - (ev["alloc"] - ev["submit"]))
    labels = {"tacc": "tacc_hub POST", "raw": "raw sbatch (baseline)"}
    for kind, p in parts.items():
        print(f"{labels[kind]} -> job running on the node: p50 {ms(pct(p['total'], 50))}  "
              f"p90 {ms(pct(p['total'], 90))}  max {ms(max(p['total']))}")
        print(f"  before Slurm p50 {ms(pct(p['before'], 50))}, Slurm's wait p50 {ms(pct(p['wait'], 50))} "
              f"(p90 {ms(pct(p['wait'], 90))}), in the job p50 {ms(pct(p['job'], 50))}; "
              f"total minus Slurm's wait: p50 {ms(pct(p['own'], 50))}  p90 {ms(pct(p['own'], 90))}")
    print(f"tacc_hub POST -> 'running' in the service (sbatch returned): p50 {ms(pct(service_view, 50))}  "
          f"p90 {ms(pct(service_view, 90))}")
    t, r = parts["tacc"], parts["raw"]
    print(f"totals: ratio p50 tacc / raw {ratio(pct(t['total'], 50), pct(r['total'], 50))}, added at p50 "
          f"{ms(pct(t['total'], 50) - pct(r['total'], 50))} (each total carries Slurm's 0-2 s wait)")
    added = pct(t["own"], 50) - pct(r["own"], 50)
    print(f"without Slurm's wait: ratio p50 {ratio(pct(t['own'], 50), pct(r['own'], 50))}, added at p50 "
          f"{ms(added)}, at p90 {ms(pct(t['own'], 90) - pct(r['own'], 90))}")
    verdict(added <= TARGET_ADDED_P50, f"added p50 (without Slurm's wait) {ms(added)} <= {ms(TARGET_ADDED_P50)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
