"""Start estimates in replays (``sim.estimates``): the Slurm-style estimator by hand, the recording, its score."""

from __future__ import annotations

import math

import hypothesis
import pytest
from hypothesis import strategies as st

from tacc_hub.scheduler.policies import make
from tacc_hub.scheduler.sim import ClusterSpec, Job, JobRecord, simulate
from tacc_hub.scheduler.sim.estimates import LATER, SUBMIT, Asked, StartEstimates, score, slurm_starts, written_limit


def test_slurm_style_on_a_free_cluster_everyone_starts_now():
    assert slurm_starts(50.0, 8, 8, [], [(1, 4, 100.0), (2, 4, 100.0)]) == {1: 50.0, 2: 50.0}


def test_slurm_style_one_running_job_holds_every_gpu_to_its_limit_end():
    # started at 0 with a 1000 s limit: the queue starts when the limit is up, however soon it might end
    assert slurm_starts(10.0, 8, 0, [(1000.0, 8)], [(1, 2, 50.0), (2, 8, 50.0)]) == {1: 1000.0, 2: 1050.0}


def test_slurm_style_keeps_queue_order_without_backfill():
    # 4 of 8 GPUs free: the 8-GPU head waits for the running job's end; the 1-GPU job behind it, which
    # would fit now, is not started before it (no backfill)
    got = slurm_starts(0.0, 8, 4, [(300.0, 4)], [(1, 8, 100.0), (2, 1, 10.0)])
    assert got == {1: 300.0, 2: 400.0}
    # the same two in the other order: the small one now, the head when the running job ends
    assert slurm_starts(0.0, 8, 4, [(300.0, 4)], [(2, 1, 10.0), (1, 8, 100.0)]) == {2: 0.0, 1: 300.0}


def test_slurm_style_limit_ends_in_the_past_count_as_now_and_too_large_jobs_get_none():
    assert slurm_starts(500.0, 8, 0, [(100.0, 8)], [(1, 16, 10.0), (2, 8, 10.0)]) == {2: 500.0}


def test_written_limit_is_two_to_ten_times_the_duration_and_fixed_per_job():
    limits = [written_limit(Job(i, 0.0, 3600.0, 1, "t")) / 3600.0 for i in range(500)]
    assert all(2.0 <= x <= 10.0 for x in limits)
    assert min(limits) < 2.5 and max(limits) > 9.0  # spread over the range
    assert written_limit(Job(7, 0.0, 3600.0, 1, "t")) == written_limit(Job(7, 5.0, 3600.0, 4, "u"))


@st.composite
def traces(draw):
    n = draw(st.integers(1, 30))
    t = 0.0
    jobs = []
    for i in range(n):
        t += draw(st.floats(0, 2000))
        jobs.append(Job(i, t, draw(st.floats(1, 8000)), draw(st.sampled_from([1, 1, 2, 3, 4, 8, 12, 16])),
                        draw(st.sampled_from(["a", "b", "c"]))))
    return jobs, ClusterSpec(draw(st.integers(1, 3)), draw(st.sampled_from([2, 4, 8])), draw(st.integers(0, 2)))


def _key(r):
    return sorted((x.id, x.first_start, x.finish, x.run_time, x.preemptions) for x in r.records)


@pytest.mark.parametrize("name", ["tacc", "fifo", "slurm"])
@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(case=traces())
def test_recording_changes_no_decision_and_asks_at_arrival_and_later(name, case):
    jobs, cluster = case
    plain = simulate(jobs, cluster, make(name))
    est = StartEstimates(after=1800.0)
    rec = simulate(jobs, cluster, make(name), estimates=est)
    assert _key(rec) == _key(plain)  # the same decisions, to the second
    start = {x.id: x.first_start for x in rec.records}
    submit = {j.id: j.submit for j in jobs}
    at_submit = {a.job: a for a in est.asked if a.kind == SUBMIT}
    later = {a.job: a for a in est.asked if a.kind == LATER}
    assert len(at_submit) + len(later) == len(est.asked)  # each job asked at most once of each kind
    # every job that was waiting at a pass got an estimate then; under tacc (preemptive) every arrival is a pass
    for jid, a in at_submit.items():
        assert submit[jid] <= a.at <= start[jid]
    if name == "tacc":
        assert {jid: a.at for jid, a in at_submit.items()} == {jid: submit[jid] for jid in start}
    # later: only jobs still waiting `after` seconds on, asked at the first pass from then (their start is one)
    assert set(later) == {jid for jid in start if start[jid] >= submit[jid] + est.after}
    for jid, a in later.items():
        assert submit[jid] + est.after <= a.at <= start[jid]
    for a in est.asked:  # estimates are never in the past
        assert a.slurm is not None and a.slurm >= a.at
        assert a.ours is None or a.ours >= a.at


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(case=traces())
def test_under_fifo_a_slurm_style_estimate_with_exact_limits_is_the_actual_start(case):
    # fifo runs the queue in submit order with no backfill, as the Slurm-style estimate assumes: with each
    # job's limit its true duration, the estimate at submission is exactly when it starts
    jobs, cluster = case
    est = StartEstimates(limit=lambda j: j.duration)
    r = simulate(jobs, cluster, make("fifo"), estimates=est)
    start = {x.id: x.first_start for x in r.records}
    asked = [a for a in est.asked if a.kind == SUBMIT]
    assert {a.job for a in asked} == set(start)  # each asked at the first pass it waited at
    assert all(a.slurm == pytest.approx(start[a.job]) for a in asked)


def test_sample_asks_only_for_every_kth_job():
    jobs = [Job(i, 10.0 * i, 500.0, 4, "t") for i in range(12)]
    est = StartEstimates(sample=3)
    simulate(jobs, ClusterSpec(1, 4), make("tacc"), estimates=est)
    assert {a.job for a in est.asked} == {0, 3, 6, 9}


def _rec(jid: int, submit: float, start: float) -> JobRecord:
    return JobRecord(jid, "t", 1, submit, 10.0, start, start + 10.0, 10.0, 0)


def test_score_counts_jobs_that_waited_ten_minutes_and_the_2x_band():
    records = [_rec(1, 0.0, 1000.0), _rec(2, 0.0, 1000.0), _rec(3, 0.0, 1000.0), _rec(4, 0.0, 100.0),
               _rec(5, 0.0, 4000.0)]
    asked = [
        Asked(1, SUBMIT, 0.0, 500.0, 3000.0),  # ours 0.5x (in), slurm 3x (out)
        Asked(2, SUBMIT, 0.0, 2000.0, 2001.0),  # ours 2x (in), slurm just over 2x (out)
        Asked(3, SUBMIT, 0.0, None, 1000.0),  # no estimate: a miss; slurm exact
        Asked(4, SUBMIT, 0.0, 0.0, 0.0),  # waited 100 s: not measured
        Asked(5, LATER, 3600.0, 4600.0, 3600.0),  # +1 h: 400 s left, not measured
    ]
    s = score(asked, records, SUBMIT)
    assert s.measured == 3
    assert s.ours_2x == pytest.approx(2 / 3) and s.slurm_2x == pytest.approx(1 / 3)
    assert s.ours_err == pytest.approx(1.0)  # |ratio - 1| of 0.5, 2, inf
    assert s.slurm_err == pytest.approx(1.001)
    assert s.ours_ratio == 2.0 and s.slurm_ratio == pytest.approx(2.001)
    empty = score(asked, records, LATER)
    assert empty.measured == 0 and math.isnan(empty.ours_2x)
