"""1,000 tasks tracked on Slurm: Slurm queries per poll interval and the service's CPU (targets: one squeue
call per poll interval, service CPU under 5%).

A service with ``--TaccHub.executor=slurm`` on the dev cluster (``scripts/slurm-dev.sh``; brought
up here when it is not up) gets 1,000 ``sleep 3600`` tasks without GPUs (submitted through the API
in batches of 100). Our scheduler starts them all at once; Slurm runs as many as the nodes' CPUs
allow and keeps the rest PENDING, which the service tracks like running ones (one poll covers
both). Once all 1,000 are "running" and the service has settled, a window of ``--window`` seconds
measures:

- the squeue and sacct calls the service makes, counted by shims put first on its PATH (each
  appends a line to a file, then execs the real command), per poll interval (``poll_interval``, 1 s);
- independently, slurmctld's own RPC counts from ``sdiag`` (REQUEST_JOB_INFO is one squeue; the
  benchmark makes no Slurm call during the window but sdiag itself);
- the service process's CPU from ``/proc`` (its own, and that of the commands it ran and reaped).

Baseline, same run: what the polls cost at the least, i.e. the same squeue listing run by this
benchmark with the same jobs queued, plus reading it, at the service's poll rate; and, for
comparison, ``squeue --json`` + ``json.loads`` (what the service ran before, 4 MB a poll here).

Every job is cancelled at the end (by the ids the service recorded) and the service stopped.

Usage: python benchmarks/bench_slurm_tracking.py [--tasks 1000] [--window 60]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Api, Service, header, verdict
from _slurm import cancel_jobs, dev_cluster, rpc_counts

POLL_INTERVAL = 1.0
TARGET_CPU = 5.0  # % of one core
SHIMMED = ("squeue", "sacct", "sbatch", "sinfo", "scontrol", "scancel")


def make_shims(tmp: Path) -> Path:
    shims = tmp / "shims"
    shims.mkdir()
    for cmd in SHIMMED:
        real = shutil.which(cmd)
        if real is None:
            raise RuntimeError(f"{cmd} is not on PATH")
        path = shims / cmd
        path.write_text(f"#!/bin/bash\nprintf '%s\\n' \"$EPOCHREALTIME\" >> {tmp / (cmd + '.calls')}\n"
                        f"exec {real} \"$@\"\n")
        path.chmod(0o755)
    return shims


def calls(tmp: Path, cmd: str, since: float, until: float) -> int:
    path = tmp / f"{cmd}.calls"
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().split() if since <= float(line) < until)


def cpu_with_children(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(f[11]) + int(f[12])) / tck, (int(f[13]) + int(f[14])) / tck


def baseline(as_json: bool, samples: int = 5) -> tuple[float, int]:
    """CPU seconds of one squeue listing of every job (the command's own, plus reading it here), and its size.

    ``as_json``: ``squeue --json`` + json.loads (what the service did before, and a naive tracker
    does); else the two text columns the service asks for now, split into lines and fields.
    """
    argv = ["squeue", "--json"] if as_json else ["squeue", "--noheader", "--states=all", "--format=%i|%T"]
    costs, size = [], 0
    for _ in range(samples):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.process_time()
        out = subprocess.run(argv, capture_output=True, check=True, timeout=120).stdout
        if as_json:
            json.loads(out)
        else:
            dict(line.partition("|")[::2] for line in out.decode().splitlines())
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        costs.append(time.process_time() - t0 + (after.ru_utime - before.ru_utime)
                     + (after.ru_stime - before.ru_stime))
        size = len(out)
    costs.sort()
    return costs[len(costs) // 2], size


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()

    header(f"{args.tasks} tasks tracked on Slurm (dev cluster): queries per poll and service CPU")
    began = time.monotonic()
    with dev_cluster() as conf, tempfile.TemporaryDirectory(prefix="tacc-bench-track-") as tmpdir:
        tmp = Path(tmpdir)
        shims = make_shims(tmp)
        svc = Service("--TaccHub.executor=slurm", f"--TaccHub.slurm_conf={conf}", "--TaccHub.grace_period=1",
                      f"--TaccHub.poll_interval={POLL_INTERVAL}", f"--TaccHub.max_running_per_user={args.tasks + 10}",
                      "--log-level=WARN", name="slurm-track")
        job_ids: list[str] = []
        path = os.environ["PATH"]
        try:
            svc.token("alice")
            os.environ["PATH"] = f"{shims}:{path}"  # the service's Slurm commands go through the shims
            try:
                svc.start(timeout=60)
            finally:
                os.environ["PATH"] = path
            assert svc.proc is not None
            api = Api(svc.url, svc.token("alice"))
            spec = {"name": "sleeper", "code": api.upload_code(), "entrypoint": {"shell": ["sleep 3600"]}}
            t0 = time.monotonic()
            submitted = 0
            while submitted < args.tasks:
                n = min(args.batch, args.tasks - submitted)
                for _ in range(n):
                    status, out = api.call("POST", "/api/tasks", spec)
                    if status != 201:
                        raise RuntimeError(f"submit failed: {status} {out}")
                submitted += n
                deadline = time.monotonic() + 300
                while True:  # the batch is launched (sbatch done) before the next one goes in
                    _, page = api.call("GET", "/api/tasks?state=running&limit=1")
                    if page["total"] >= submitted:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {page['total']} of {submitted} tasks running after 300 s")
                    time.sleep(0.2)
            print(f"{args.tasks} tasks submitted and launched as Slurm jobs in {time.monotonic() - t0:.1f} s",
                  flush=True)
            states: dict[str, int] = {}
            for line in subprocess.run(["squeue", "-h", "-o", "%T"], capture_output=True, text=True, check=True,
                                       timeout=120).stdout.split():
                states[line] = states.get(line, 0) + 1
            print(f"Slurm lists: {', '.join(f'{v} {k}' for k, v in sorted(states.items()))}", flush=True)
            base_text, size = baseline(False)
            base_json, size_json = baseline(True)
            time.sleep(5)  # settle: the last launches' wake-ups and explanations

            rpc0, w0 = rpc_counts(), time.time()
            cpu0 = cpu_with_children(svc.proc.pid)
            time.sleep(args.window)
            cpu1 = cpu_with_children(svc.proc.pid)
            w1, rpc1 = time.time(), rpc_counts()
            window = w1 - w0
            intervals = window / POLL_INTERVAL
            _, page = api.call("GET", "/api/tasks?state=running&limit=1")
            tracked = page["total"]
        finally:
            svc.stop()
            from tacc_hub.store import Store

            with Store(svc.db_url) as store:
                recs, _ = store.list_tasks(None, None, 100000, None)
                job_ids = [str((r.executor_state or {}).get("job_id", "")) for r in recs]
            cancel_jobs(job_ids)
            svc.kill_task_processes()
            shutil.rmtree(svc.tmp, ignore_errors=True)
        n_squeue = calls(tmp, "squeue", w0, w1)
        n_sacct = calls(tmp, "sacct", w0, w1)
        others = {c: calls(tmp, c, w0, w1) for c in SHIMMED if c not in ("squeue", "sacct")}

    rpc = {k: rpc1.get(k, 0) - rpc0.get(k, 0) for k in rpc1 if rpc1.get(k, 0) - rpc0.get(k, 0)}
    own = (cpu1[0] - cpu0[0]) / window * 100
    child = (cpu1[1] - cpu0[1]) / window * 100
    polls_per_s = n_squeue / window
    base_pct = base_text * polls_per_s * 100
    print(f"window {window:.1f} s = {intervals:.1f} poll intervals of {POLL_INTERVAL:g} s; tasks tracked "
          f"(running in the service): {tracked}; total run {time.monotonic() - began:.0f} s")
    print(f"service's Slurm calls in the window (shims): squeue {n_squeue} ({n_squeue / intervals:.2f} per poll "
          f"interval), sacct {n_sacct} ({n_sacct / intervals:.2f} per interval), others "
          + ", ".join(f"{k} {v}" for k, v in others.items()))
    print("slurmctld RPCs in the window (sdiag): " + ", ".join(f"{k} {v}" for k, v in sorted(rpc.items())))
    print(f"service CPU: {own:.1f}% of one core (its own), {child:.1f}% more in the commands it ran "
          f"(squeue listing {size / 1e3:.0f} kB a poll), {own + child:.1f}% together")
    print(f"baseline: the same squeue listing + reading it, run here: {base_text * 1000:.1f} ms CPU a poll, "
          f"{base_pct:.1f}% at the service's {polls_per_s:.2f} polls/s; ratio service (own + commands) / "
          f"baseline {(own + child) / base_pct:.2f}x" if base_pct > 0 else "baseline: n/a")
    print(f"for comparison, squeue --json + json.loads ({size_json / 1e6:.1f} MB): {base_json * 1000:.0f} ms CPU "
          f"a poll, {base_json * polls_per_s * 100:.1f}% at that rate")
    verdict(tracked >= args.tasks, f"{tracked} of {args.tasks} tasks tracked")
    verdict(n_squeue <= intervals + 1, f"{n_squeue / intervals:.2f} squeue calls per poll interval <= 1")
    verdict(own < TARGET_CPU, f"service CPU {own:.1f}% < {TARGET_CPU:g}% (its own process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
