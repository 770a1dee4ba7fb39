"""Slurm reachability bookkeeping (``executors/slurm_health``): which errors mean "unreachable", and when to wait."""

from __future__ import annotations

import time

from tacc_hub.executors.slurm_health import Health, is_unreachable, may_have_gone_through


def test_which_errors_mean_slurm_is_unreachable() -> None:
    assert is_unreachable("sbatch exited 1: sbatch: error: Batch job submission failed: Unable to contact slurm "
                          "controller (connect failure)")
    assert is_unreachable("squeue exited 1: slurm_load_jobs error: Unable to contact slurm controller")
    assert is_unreachable("sbatch timed out after 30 s")
    assert is_unreachable("scontrol exited 1: Slurmctld(primary) at localhost is DOWN")
    assert not is_unreachable("sbatch exited 1: sbatch: error: Batch job submission failed: Requested node "
                              "configuration is not available")
    assert not is_unreachable("sbatch exited 1: sbatch: error: Invalid partition name specified")


def test_a_short_outage_backs_off_and_a_long_one_stops_launches() -> None:
    h = Health(threshold=60.0, max_backoff=30.0)
    assert h.unavailable() is None and not h.probe_due()
    h.failed("connect failure")
    why = h.unavailable()  # the next try is not due yet
    assert why is not None and "(1 failed try; next try in" in why and why.endswith("connect failure"), why
    h._retry_at = time.monotonic() - 1  # the backoff passed: a launch may try again
    assert h.unavailable() is None and h.probe_due()
    h.failed("connect failure")
    assert h.failures == 2 and h._retry_at - time.monotonic() > 0.5  # 1 s after the second failure
    h.since = time.time() - 61  # unreachable for longer than the threshold: no launches, only probes
    h._retry_at = time.monotonic() - 1
    why = h.unavailable()
    stamp = time.strftime("%H:%M:%S", time.gmtime(h.since))
    assert why == f"Slurm unreachable since {stamp} UTC (2 failed tries): connect failure", why
    h.ok()
    assert h.unavailable() is None and h.failures == 0 and not h.probe_due()


def test_only_a_timeout_may_have_submitted_the_job() -> None:
    assert may_have_gone_through("sbatch timed out after 30 s")
    assert may_have_gone_through("sbatch exited 1: Batch job submission failed: Socket timed out on send/recv")
    assert not may_have_gone_through("sbatch exited 1: Unable to contact slurm controller (connect failure)")
