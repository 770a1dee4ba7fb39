"""Is Slurm reachable? What the Slurm executor remembers about failing contacts with slurmctld.

Only the commands that need slurmctld count (``squeue``, ``sbatch``, the probe ``scontrol ping``);
``sacct`` failing means slurmdbd is down, which slows the final states but keeps launches working.

Invariants: one success forgets every failure; the first failure of a streak is kept (``since``),
so the reason shown to people says how long Slurm has not answered. ``unavailable`` gives a reason
while the next try is not due (it backs off exponentially, up to ``max_backoff``), and always once
the streak is older than ``threshold`` seconds: then only probes reach for Slurm, no launches.

Also here, the executor's two ways back from an outage: ``ping`` (its ``probe``) and
``cancel_strays`` (before the next launch of a task whose sbatch timed out), and its ``cancel``
(``cancel_job``), which both use.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from .base import LaunchUnavailable
from .slurm_states import ACTIVE

if TYPE_CHECKING:
    from .slurm import SlurmExecutor

log = logging.getLogger("tacc_hub.executors.slurm")

# What sbatch/squeue/scontrol print when slurmctld cannot be reached (as opposed to a refusal).
_UNREACHABLE = re.compile(
    r"unable to contact slurm controller|connect(ion)? (failure|refused)|socket timed out|timed out"
    r"|zero bytes were transmitted|slurm_persist_conn|communication connection failure|is down"
    r"|unable to establish|no route to host|network is unreachable",
    re.IGNORECASE,
)


def is_unreachable(error: str) -> bool:
    """Whether a Slurm command's error text says slurmctld could not be reached (so: try again later)."""
    return bool(_UNREACHABLE.search(error))


def may_have_gone_through(error: str) -> bool:
    """Whether a request that failed this way may still have been carried out (it timed out: slurmctld may
    have taken it and not answered in time), as opposed to never having reached slurmctld."""
    return "timed out" in error.lower()


class Health:
    def __init__(self, threshold: float = 60.0, max_backoff: float = 30.0) -> None:
        self.threshold = threshold
        self.max_backoff = max_backoff
        self.since: float | None = None  # wall clock of the first failure of the current streak
        self.failures = 0
        self.last_error = ""
        self._retry_at = 0.0  # monotonic: no probe before this

    def failed(self, error: str) -> None:
        if self.since is None:
            self.since = time.time()
        self.failures += 1
        self.last_error = error[-300:]
        delay = min(self.max_backoff, 0.5 * 2 ** (self.failures - 1))
        self._retry_at = time.monotonic() + delay

    def ok(self) -> None:
        self.since = None
        self.failures = 0
        self.last_error = ""
        self._retry_at = 0.0

    def probe_due(self) -> bool:
        return self.failures > 0 and time.monotonic() >= self._retry_at

    def unavailable(self) -> str | None:
        """Why no launch should be tried now, e.g. "Slurm unreachable since 12:04:05 UTC (7 failed tries): ..."."""
        if self.since is None:
            return None
        wait = self._retry_at - time.monotonic()
        if time.time() - self.since < self.threshold and wait <= 0:
            return None  # a short outage: the next launch is the next try
        stamp = time.strftime("%H:%M:%S", time.gmtime(self.since))
        tries = f"{self.failures} failed {'try' if self.failures == 1 else 'tries'}"
        nxt = f"; next try in {wait:.0f} s" if wait > 0 else ""
        return f"Slurm unreachable since {stamp} UTC ({tries}{nxt}): {self.last_error}"


class SlurmError(RuntimeError):
    """A Slurm command failed, timed out, or answered something we cannot read."""


async def ping(ex: SlurmExecutor) -> None:
    """``SlurmExecutor.probe``: ``scontrol ping`` (exits 1 when slurmctld is down), when the next try is due."""
    if not ex.health.probe_due():
        return
    try:
        await ex._run(ex._argv("scontrol", "ping"))
    except SlurmError as exc:
        ex.health.failed(str(exc))
        log.info("slurm: still unreachable: %s", exc)
    else:
        log.info("slurm: reachable again after %d failed tries", ex.health.failures)
        ex.health.ok()
        ex._succeeded("squeue")


async def cancel_strays(ex: SlurmExecutor, task_id: int) -> None:
    """Cancel the jobs an earlier, timed-out sbatch of this task may have submitted after all: those named
    ``tacc-<id>`` whose working directory is the task's. Slurm not answering: ``LaunchUnavailable``."""
    try:
        text = await ex._run(ex._argv("squeue", "-h", "-n", f"tacc-{int(task_id)}", "-o", "%i %u %Z"))
    except SlurmError as exc:
        ex.health.failed(str(exc))
        raise LaunchUnavailable(f"could not check Slurm for an earlier submission of the task: {exc}") from exc
    for line in text.splitlines():
        job_id, _, rest = line.strip().partition(" ")
        user, _, workdir = rest.partition(" ")
        if job_id.isdigit() and workdir == str(ex.task_dir(task_id)):
            log.warning("slurm: cancelling job %s, submitted for task %s by an sbatch that timed out", job_id, task_id)
            await ex.cancel(task_id, {"job_id": job_id, "user": user})  # scancel as the job's owner
    ex._unsure.discard(task_id)


async def active_state(ex: SlurmExecutor, job_id: str) -> str | None:
    """The job's state while it holds or waits for nodes, "" once it has ended, None when Slurm cannot tell."""
    try:
        text = await ex._run(ex._argv("squeue", "-h", "-j", job_id, "-o", "%T"))
    except SlurmError as exc:
        return "" if "Invalid job id" in str(exc) else None
    return next((line.strip() for line in text.splitlines() if line.strip() in ACTIVE), "")


async def wait_ended(ex: SlurmExecutor, job_id: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if await active_state(ex, job_id) == "":
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.2)


async def cancel_job(ex: SlurmExecutor, task_id: int, state: dict[str, Any]) -> None:
    """``SlurmExecutor.cancel`` (see the Slurm executor's docstring), each scancel as the job's owner."""
    job_id = str(state.get("job_id", ""))
    now = await active_state(ex, job_id) if job_id.isdigit() else ""
    if now == "":
        return
    try:
        ex._mark(task_id, cancelled=True)  # poll then reports "cancelled"
    except OSError:
        pass
    user = state.get("user") if isinstance(state.get("user"), str) else None
    # TERM to the job steps only (the tasks on every node): the batch script and its srun keep
    # running, pass the tasks' last output to the log and write their exit code. A job that
    # has not started has nothing to signal: it is simply cancelled.
    steps: list[tuple[tuple[str, ...], float]] = [(("--signal=TERM",), ex.grace_period),
                                                  (("--signal=KILL", "--full"), 0.0), ((), 30.0)]
    if now == "PENDING":
        steps = steps[2:]
    for args, wait in steps:
        try:
            await ex._run(ex._argv("scancel", *args, job_id, user=user or ex.submit_as))
        except SlurmError as exc:  # already ended, or Slurm unreachable: check below
            log.info("slurm: scancel %s %s: %s", " ".join(args), job_id, exc)
        if await wait_ended(ex, job_id, wait):
            return
    log.warning("slurm: job %s of task %s is still active after scancel", job_id, task_id)
