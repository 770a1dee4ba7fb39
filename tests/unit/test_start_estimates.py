"""Start estimates in replays (``sim.estimates``): the Slurm-style estimator by hand, the recording, its score."""

from __future__ import annotations

import math

import hypothesis
import pytest
from hypothesis import strategies as st

from tacc_hub.scheduler.calibration import Calibration
from tacc_hub.scheduler.policies import make
from tacc_hub.scheduler.policy import Explanation, TaskView, View
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


# -- calibration (``calibration.Calibration``) and tacc's projection --------------------------------------


def _ex(est: float | None) -> Explanation:
    return Explanation("Resources", 1, est, "")


def test_calibration_learns_the_median_ratio_of_tasks_that_waited_ten_minutes_shrunk_and_bounded():
    c = Calibration(window=50, prior=0)
    assert c.factor() == 1.0 and c.adjust(0.0, {1: _ex(100.0)}) == {1: _ex(100.0)}
    c.asked(0.0, {i: _ex(1000.0) for i in range(20)})  # every task told: in 1000 s
    c.asked(5.0, {0: _ex(9.0)})  # only the first estimate counts
    for i in range(10):
        c.started(i, 2000.0)  # waited 2x the estimate
    for i in range(10, 15):
        c.started(i, 300.0)  # waited 5 min: not learned from
    assert list(c.ratios) == [2.0] * 10 and c.factor() == pytest.approx(2.0)
    out = c.adjust(100.0, {7: _ex(600.0), 8: _ex(None), 9: _ex(100.0)})
    assert out[7].estimated_start == pytest.approx(100.0 + 500.0 * 2.0)
    assert out[8].estimated_start is None
    assert out[9].estimated_start == pytest.approx(100.0 + 60.0 * 2.0)  # a wait under a minute counts as one
    c.forget(15)
    c.started(15, 5000.0)  # forgotten (cancelled): nothing learned
    assert len(c.ratios) == 10


def test_calibration_factor_is_shrunk_toward_one_and_kept_within_its_bounds():
    few = Calibration(prior=20)
    few.asked(0.0, {1: _ex(1000.0)})
    few.started(1, 4000.0)  # one ratio of 4: barely moves it
    assert few.factor() == pytest.approx(4.0 ** (1 / 21))
    high, low = Calibration(prior=0), Calibration(prior=0)
    high.asked(0.0, {i: _ex(100.0) for i in range(5)})
    low.asked(0.0, {i: _ex(1e5) for i in range(5)})
    for i in range(5):
        high.started(i, 1e4)  # 100x late: capped at hi
        low.started(i, 1e3)  # 100x early: not below lo (1: the projection does not know of later arrivals)
    assert high.factor() == 3.0 and low.factor() == 1.0


def test_live_queue_calibrates_its_estimates_from_the_starts_it_makes():
    from tacc_hub.scheduler import ClusterState, Node
    from tacc_hub.scheduler.policies import FifoGang
    from tacc_hub.scheduler.queue import LiveQueue

    q = LiveQueue(ClusterState([Node("n0", 4)]), FifoGang())
    q.calibration = Calibration(prior=0)
    q.add(TaskView(1, "u", "g", submit=0.0, nodes=1, gpus_per_node=4, predicted=1000.0))
    q.plan(0.0)  # 1 runs
    for i in range(2, 6):
        q.add(TaskView(i, "u", "g", submit=float(i), nodes=1, gpus_per_node=4, predicted=1000.0))
    first = q.explain(10.0)
    assert first[2].estimated_start == pytest.approx(1000.0)  # uncalibrated: 1's predicted end
    q.drop(1)
    q.plan(2000.0)  # 2 starts at 2000: waited 1990 s, told 990 s
    assert list(q.calibration.ratios) == [pytest.approx(1990.0 / 990.0)]
    later = q.explain(2010.0)
    assert later[3].estimated_start == pytest.approx(2010.0 + (3000.0 - 2010.0) * 1990.0 / 990.0)


def _tacc_scene(start: float, now: float = 50_000.0) -> View:
    from tacc_hub.scheduler.cluster import NodeSlots, Placement
    from tacc_hub.scheduler.policy import NodeView

    run = {10: TaskView(10, "v", "g", submit=0.0, nodes=1, gpus_per_node=8, predicted=1e6, start=start,
                        placement=Placement(nodes=[NodeSlots(node="n0", gpus=list(range(8)))]))}
    waiting = {1: TaskView(1, "u", "g", submit=now - 1.0, nodes=1, gpus_per_node=8, predicted=100.0)}
    return View(now, waiting, run, [NodeView("n0", 8, "s0", ())])


def test_tacc_projection_counts_the_preemption_tacc_makes():
    # a new task ranked above a long preemptible run: tacc preempts it now, and the estimate says now,
    # not the run's expected end 1e6 s on
    view = _tacc_scene(start=0.0)
    acts = make("tacc").schedule(view)
    assert [type(a).__name__ for a in acts] == ["Preempt", "Start"]
    assert make("tacc").explain(view)[1].estimated_start == view.now
    # the same run started 100 s ago: not preempted in its first min_run (600 s); the estimate is then
    young = _tacc_scene(start=50_000.0 - 100.0)
    assert not any(type(a).__name__ == "Start" for a in make("tacc").schedule(young))
    assert make("tacc").explain(young)[1].estimated_start == pytest.approx(50_000.0 - 100.0 + 600.0)


def test_calibration_forgets_what_it_learned_more_than_its_horizon_ago():
    c = Calibration(prior=0, horizon=86400.0)
    c.asked(0.0, {i: _ex(1000.0) for i in range(5)})
    for i in range(5):
        c.started(i, 3000.0)  # 3x late, a burst
    assert c.factor(3000.0) == pytest.approx(3.0)
    assert c.factor(3000.0 + 86400.0) == pytest.approx(3.0)  # a day later: still within the horizon
    assert c.factor(3001.0 + 86400.0) == 1.0 and not c.ratios  # past it: forgotten, the projection as it is
    out = c.adjust(1e6, {9: _ex(1e6 + 600.0)})
    assert out[9].estimated_start == pytest.approx(1e6 + 600.0)
