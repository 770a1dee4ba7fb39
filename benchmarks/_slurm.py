"""Helpers of the Slurm benchmarks: the dev cluster (``scripts/slurm-dev.sh``), Slurm commands, sdiag counts.

``dev_cluster()`` uses the cluster of ``$TACC_SLURM_DIR`` (default ``<repo>/.slurm-dev``; port
block ``$TACC_SLURM_PORT_BASE``, as the script reads them) when it is up and leaves it running;
otherwise it brings it up and down again at the end. Jobs the benchmarks submit are cancelled
by their exact ids, never by user or name patterns.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm-dev.sh"


def _script(cmd: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), cmd], capture_output=True, text=True, timeout=timeout, check=False)


@contextlib.contextmanager
def dev_cluster() -> Iterator[str]:
    """The dev cluster's slurm.conf (also set as ``SLURM_CONF`` in this process) while it is up."""
    status = _script("status", 120)
    started = status.returncode != 0
    if started:
        up = _script("up", 900)
        if up.returncode != 0:
            raise RuntimeError(f"scripts/slurm-dev.sh up failed:\n{up.stderr[-3000:]}")
        line = up.stdout.strip().splitlines()[-1]
    else:
        line = status.stdout.strip().splitlines()[-1]
    if not line.startswith("export SLURM_CONF="):
        raise RuntimeError(f"unexpected output of scripts/slurm-dev.sh: {line!r}")
    conf = line.removeprefix("export SLURM_CONF=")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    print(f"dev cluster: {conf} ({'brought up for this run' if started else 'already up, left running'})",
          flush=True)
    try:
        yield conf
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        if started:
            _script("down", 300)


def slurm(*argv: str, timeout: float = 60) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=True).stdout


def cancel_jobs(job_ids: Sequence[str]) -> None:
    """scancel these jobs (in chunks; already-ended ones are fine)."""
    ids = [j for j in job_ids if j.isdigit()]
    for i in range(0, len(ids), 200):
        subprocess.run(["scancel", *ids[i:i + 200]], capture_output=True, timeout=120, check=False)


def active_jobs() -> dict[str, str]:
    """job id -> name of every job slurmctld still lists."""
    out = slurm("squeue", "-h", "-o", "%i %j")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def rpc_counts() -> dict[str, int]:
    """slurmctld's RPC counts by message type (``sdiag``): an independent count of what clients asked."""
    out = slurm("sdiag")
    section = out.split("by message type", 1)[1].split("by user", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)}


def ctld_log(conf: str) -> Path:
    for line in Path(conf).read_text().splitlines():
        if line.startswith("SlurmctldLogFile="):
            return Path(line.split("=", 1)[1].strip())
    raise RuntimeError(f"no SlurmctldLogFile in {conf}")


# A job's submission, and its start by the main scheduler or by backfill.
_EVENT = re.compile(r"^\[(\S+)\] (?:_slurm_rpc_submit_batch_job: JobId=(\d+) |sched: Allocate JobId=(\d+) "
                    r"|sched/backfill: _start_job: Started JobId=(\d+) )")


def ctld_times(conf: str, job_ids: set[str]) -> dict[str, dict[str, float]]:
    """From slurmctld's log (ms resolution): when each job's submission arrived and when it got its nodes."""
    import datetime

    out: dict[str, dict[str, float]] = {}
    with ctld_log(conf).open(errors="replace") as fh:
        for line in fh:
            m = _EVENT.match(line)
            if not m:
                continue
            job = m.group(2) or m.group(3) or m.group(4)
            if job in job_ids:
                when = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
                out.setdefault(job, {})["submit" if m.group(2) else "alloc"] = when  # the latest entry
    return out
