"""``tacc-hub simulate``: replay a Philly-format trace through a scheduling policy.

Prints the policy x metric table (and per-tenant median slowdowns), or the
metrics as JSON with ``--json``. The policy is the same code the service runs
(``tacc_hub.scheduler.policies``); the simulator hides true durations from
every policy but an oracle. Without ``--trace`` it replays the Philly trace shipped in the package,
with its placement data (``tacc_hub/scheduler/sim/data``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command()
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False),
              help="Philly-format CSV, plain or gzipped (timestamp, duration, num_gpus, gpu_time, cluster); "
                   "default: the Philly trace shipped in the package.")
@click.option("--nodes", type=click.IntRange(min=1), required=True, help="Nodes in the simulated cluster.")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--nodes-per-switch", type=click.IntRange(min=0), default=0, show_default=True,
              help="Nodes under one leaf switch (0: one switch for all).")
@click.option("--policy", "policy_names", default="fifo", show_default=True,
              help="Policy name, or several separated by commas.")
@click.option("--tenant", help="Replay only this tenant's (virtual cluster's) jobs.")
@click.option("--limit", type=click.IntRange(min=1), help="Replay only the first N jobs (by submit time).")
@click.option("--placements", type=click.Path(exists=True, file_okay=False),
              help="Directory of placement step-time CSVs (plain or gzipped) for spread slowdowns "
                   "(default: the placement data shipped in the package).")
@click.option("--restart-overhead", type=float, default=30.0, show_default=True,
              help="Seconds a preempted job loses when it starts again.")
@click.option("--cross-switch", type=float, default=1.0, show_default=True,
              help="Extra slowdown factor for a placement over several switches (no measurement: 1.0).")
@click.option("--json", "as_json", is_flag=True, help="Metrics as JSON, one object per policy.")
def simulate(trace_path: str | None, nodes: int, gpus_per_node: int, nodes_per_switch: int, policy_names: str,
             tenant: str | None, limit: int | None, placements: str | None, restart_overhead: float,
             cross_switch: float, as_json: bool) -> None:
    """Replay a trace on a simulated cluster and print the metrics."""
    from tacc_hub.scheduler.policies import POLICIES, make
    from tacc_hub.scheduler.sim import ClusterSpec, SlowdownTable, derive, load_philly, simulate
    from tacc_hub.scheduler.sim.bundled import PHILLY_TRACE, PLACEMENTS
    from tacc_hub.scheduler.sim.report import table, tenant_table

    names = [n.strip() for n in policy_names.split(",") if n.strip()]
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)}; known: {', '.join(POLICIES)}", param_hint="--policy")
    pdir = Path(placements) if placements else PLACEMENTS
    if pdir.is_dir():
        slowdown = derive(pdir, cross_switch)
    else:
        click.echo(f"note: no placement data at {pdir}: spread placements run at full speed", err=True)
        slowdown = SlowdownTable({}, cross_switch)
    trace = load_philly(trace_path or PHILLY_TRACE, tenant=tenant, limit=limit)
    if not trace.jobs:
        click.echo("error: no jobs in the trace" + (f" for tenant {tenant}" if tenant else ""), err=True)
        sys.exit(1)
    cluster = ClusterSpec(nodes, gpus_per_node, nodes_per_switch)
    results = [simulate(trace.jobs, cluster, make(n), slowdown, restart_overhead=restart_overhead) for n in names]
    if as_json:
        out = [{"policy": r.policy, "jobs": len(r.records), "unschedulable": r.unschedulable,
                "wall_s": round(r.wall_s, 3), "jobs_per_s": round(r.jobs_per_s, 1), "spread_starts": r.spread_starts,
                **r.metrics.as_dict()} for r in results]
        click.echo(json.dumps(out if len(out) > 1 else out[0], indent=2))
        return
    click.echo(f"{len(trace.jobs):,} jobs ({trace.skipped} malformed rows skipped) on {nodes} x {gpus_per_node} GPUs"
               f"{f', {nodes_per_switch} nodes per switch' if nodes_per_switch else ''}; "
               f"{results[0].unschedulable} job(s) larger than the cluster left out")
    click.echo(table(results))
    for r in results:
        click.echo(f"{r.policy}: per-tenant median slowdown (JCT / run time)")
        click.echo(tenant_table(r))
