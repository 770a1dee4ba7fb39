"""One policy on one of the Philly replays, with a fingerprint of its decisions: for checking that a
speed-up changed nothing, and for timing two checkouts side by side.

Prints the policy's table row, wall and CPU seconds of ``simulate`` and jobs/s on each, and a hash of
every job's (id, first start, finish, preemptions): equal hashes, equal decisions.

Usage: PYTHONPATH=<checkout> python benchmarks/replay_fingerprint.py a|b [--limit N] [--policy tacc]
(a: the whole trace on 64 x 8 GPUs, 4 nodes per switch; b: virtual cluster 6214e9 alone on 6 x 8.)
"""

from __future__ import annotations

import argparse
import hashlib
import time

from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import make
from tacc_hub.scheduler.sim import ClusterSpec, derive, load_philly, simulate
from tacc_hub.scheduler.sim.bundled import PHILLY_TRACE, PLACEMENTS
from tacc_hub.scheduler.sim.report import table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("replay", choices=["a", "b"])
    ap.add_argument("--limit", type=int, help="only the first N jobs")
    ap.add_argument("--policy", default="tacc")
    ap.add_argument("--trace", default=str(PHILLY_TRACE))
    args = ap.parse_args()
    tenant, cluster = (None, ClusterSpec(64, 8, 4)) if args.replay == "a" else ("6214e9", ClusterSpec(6, 8, 0))
    jobs = load_philly(args.trace, tenant=tenant, limit=args.limit).jobs
    slowdown = derive(PLACEMENTS)
    cpu = time.process_time()
    r = simulate(jobs, cluster, make(args.policy), slowdown)
    cpu = time.process_time() - cpu
    h = hashlib.sha1()
    for x in sorted(r.records, key=lambda x: x.id):
        h.update(repr((x.id, x.first_start, x.finish, x.preemptions)).encode())
    print(table([r]))
    print(f"{args.replay} {len(r.records):,} jobs: wall {r.wall_s:.2f} s = {r.jobs_per_s:,.0f} jobs/s, "
          f"CPU {cpu:.2f} s = {len(r.records) / cpu:,.0f} jobs/s; {r.calls:,} calls; decisions {h.hexdigest()[:12]}; "
          f"scheduler {native.status()}")


if __name__ == "__main__":
    main()
