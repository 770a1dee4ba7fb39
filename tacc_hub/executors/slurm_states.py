"""Slurm's job states as the service sees them, and the exit codes Slurm reports (squeue, sacct)."""

from __future__ import annotations

from typing import Any

from .base import REQUEUE_MARK

# Slurm job state -> (our status, reason). Exit codes come from the task's exitcode file when
# it wrote one, else from Slurm; an ended job that did not complete never reports exit code 0.
STATES: dict[str, tuple[str, str | None]] = {
    "PENDING": ("running", None),  # waiting for the nodes our scheduler gave it (see slurm.py's docstring)
    "CONFIGURING": ("running", None),  # nodes allocated, being readied (booting, prolog)
    "RUNNING": ("running", None),  # the batch script runs
    "COMPLETING": ("running", None),  # processes ending, epilog running; final state not known yet
    "SUSPENDED": ("running", None),  # paused by an admin (scontrol suspend); still holds its nodes
    "REQUEUED": ("running", None),  # Slurm put it back (we submit --no-requeue; an admin may still)
    "REQUEUE_HOLD": ("running", None),  # as REQUEUED, held
    "RESIZING": ("running", None),  # the allocation changes size
    "SIGNALING": ("running", None),  # a signal is being delivered
    "STAGE_OUT": ("running", None),  # burst buffer stage-out after the script ended
    "COMPLETED": ("exited", None),  # every process ended with exit code 0
    "FAILED": ("exited", None),  # ended with a non-zero exit code
    "CANCELLED": ("exited", "cancelled in Slurm"),  # scancel by us, a user or an admin
    "TIMEOUT": ("exited", "time limit"),  # Slurm's --time reached (our own limit is enforced first)
    "NODE_FAIL": ("exited", f"node failure {REQUEUE_MARK}"),  # a node of the job died
    "BOOT_FAIL": ("exited", f"node boot failure {REQUEUE_MARK}"),  # a node failed to boot for it
    "PREEMPTED": ("exited", f"preempted by Slurm {REQUEUE_MARK}"),  # Slurm's own preemption
    "OUT_OF_MEMORY": ("exited", "out of memory"),  # the memory limit was hit
    "DEADLINE": ("exited", "deadline reached"),  # --deadline passed
    "REVOKED": ("exited", "revoked by a federated cluster"),  # ran elsewhere (federation)
    "SPECIAL_EXIT": ("exited", "special exit"),  # requeue-on-exit code; held by Slurm
}
ACTIVE = {state for state, (status, _) in STATES.items() if status == "running"}


def _state_name(raw: Any) -> str:
    """A job state from squeue (``"RUNNING"``) or sacct (``{"current": "RUNNING"}``)."""
    if isinstance(raw, dict):
        raw = raw.get("current")
    return str(raw or "").split()[0].upper() if raw else ""


def _slurm_exit(raw: Any) -> int | None:
    """Exit code from squeue (a wait status) or sacct (``{"return_code": n, "signal": {...}}``)."""
    if isinstance(raw, int):
        return 128 + (raw & 0x7F) if raw & 0x7F else raw >> 8
    if isinstance(raw, dict):
        sig = raw.get("signal", {}).get("signal_id") if isinstance(raw.get("signal"), dict) else None
        if isinstance(sig, int) and sig:
            return 128 + sig
        rc = raw.get("return_code")
        return rc if isinstance(rc, int) else None
    return None
