"""What running tasks as their owners costs, and what it stops (issue 17's figures).

1. Submit -> RUNNING on the local executor, owner identity (``tacc-launcher`` drops to the task's
   account; target: at most +20 ms at p50) against ``task_identity = 'service'`` (the same
   launcher, no switch): the baseline, measured in the same run, same method as
   bench_submit_to_running.py (POST, then GET every ~2 ms until "running"; ``sleep 1`` shell
   tasks in the warm base env). The two services alternate in rounds so that drift hits both.
2. The attack suite (tests/attack/attacker.py, run inside alice's task against bob's running task,
   exactly as tests/e2e/test_isolation.py does): attempts made / attempts that succeeded (must be 0),
   each attempt listed. ``--slurm`` adds the same suite on the Slurm dev cluster (benchmarks/_slurm.py:
   $TACC_SLURM_DIR's cluster when it is up, else one brought up and down for the run).

Must run as root (it creates the accounts alice and bob if missing).
Usage: python benchmarks/bench_isolation.py [--tasks 30] [--rounds 3] [--slurm]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import Api, Service, header, ms, pct, ratio, verdict

REPO = Path(__file__).resolve().parents[1]
TARGET_EXTRA = 0.020
POLL = 0.002


def submit_to_running(svc: Service, n: int) -> list[float]:
    api = Api(svc.url, svc.token("alice"))
    code = api.upload_code()
    spec = {"name": "sleeper", "code": code, "entrypoint": {"shell": ["sleep 1"]}}
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        status, task = api.call("POST", "/api/tasks", spec)
        if status != 201:
            raise RuntimeError(f"submit failed: {status} {task}")
        seen = task
        stop_at = time.monotonic() + 30
        while seen.get("status") != "running":
            if seen.get("status") in ("failed", "lost", "cancelled", "succeeded") or time.monotonic() > stop_at:
                raise RuntimeError(f"task {task['id']} not seen running: {seen}")
            time.sleep(POLL)
            _, seen = api.call("GET", f"/api/tasks/{task['id']}")
        out.append(time.perf_counter() - t0)
    return out


def attack_suite(*extra: str, supervisors: list[str] | None = None) -> dict:
    sys.path.insert(0, str(REPO))
    from tests.e2e.conftest import ServiceProcess
    from tests.e2e.test_isolation import run_attack_suite

    tmp = Path(tempfile.mkdtemp(prefix="tacc-attack-"))
    svc = ServiceProcess(tmp / "state", "--TaccHub.grace_period=2", *extra).start()
    try:
        summary, log = run_attack_suite(svc, tmp, supervisors=supervisors, timeout=240)
    finally:
        svc.stop()
    for line in log.splitlines():
        if line.startswith("ATTACK "):
            print("  " + line[len("ATTACK "):][:150])
    return summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=30, help="samples per identity and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slurm", action="store_true", help="also run the attack suite on the Slurm dev cluster")
    args = ap.parse_args()

    header("submit -> running: owner identity vs service identity (local executor)")
    owner: list[float] = []
    service: list[float] = []
    common = ("--gpus=0", "--TaccHub.max_running_per_user=1000")
    with Service(*common, name="own") as so, Service(*common, "--TaccHub.task_identity=service", name="svc") as ss:
        so.start()
        ss.start()
        submit_to_running(so, 3)  # warm-up, not counted
        submit_to_running(ss, 3)
        for _ in range(args.rounds):
            owner += submit_to_running(so, args.tasks)
            service += submit_to_running(ss, args.tasks)
        time.sleep(1.1)
    o50, s50 = pct(owner, 50), pct(service, 50)
    print(f"samples: {len(owner)} per identity ({args.rounds} alternating rounds)")
    print(f"owner identity:   p50 {ms(o50)}  p90 {ms(pct(owner, 90))}  max {ms(max(owner))}")
    print(f"service identity: p50 {ms(s50)}  p90 {ms(pct(service, 90))}  max {ms(max(service))}  (baseline)")
    print(f"ratio p50 owner / service: {ratio(o50, s50)}; difference {ms(o50 - s50)}")
    verdict(o50 - s50 <= TARGET_EXTRA, f"owner identity adds {ms(o50 - s50)} <= {ms(TARGET_EXTRA)} at p50")

    header("attack suite: from inside alice's task against bob's (local executor)")
    summary = attack_suite("--gpus=2")
    print(f"local executor: {summary['attempts']} attempts, {len(summary['succeeded'])} succeeded "
          f"{summary['succeeded'] or ''}")
    verdict(not summary["succeeded"], "no attack succeeded")
    if args.slurm:
        from _slurm import dev_cluster

        header("attack suite: from inside alice's Slurm job against bob's (Slurm dev cluster)")
        with dev_cluster():
            slurm = attack_suite("--TaccHub.executor=slurm", supervisors=["slurmstepd"])
        print(f"Slurm executor: {slurm['attempts']} attempts, {len(slurm['succeeded'])} succeeded "
              f"{slurm['succeeded'] or ''}")
        verdict(not slurm["succeeded"], "no attack succeeded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
