"""The simulator on hand-computed examples, and every policy finishing every job (hypothesis)."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import strategies as st

from tacc_hub.scheduler.policies import POLICIES, Tiresias, make
from tacc_hub.scheduler.sim import ClusterSpec, Job, Predictor, SlowdownTable, simulate


def test_fifo_three_jobs_on_one_node_by_hand():
    jobs = [Job(0, 0.0, 100.0, 4, "t"), Job(1, 10.0, 50.0, 2, "t"), Job(2, 20.0, 30.0, 2, "t")]
    r = simulate(jobs, ClusterSpec(1, 4), make("fifo"))
    finish = {rec.id: rec.finish for rec in r.records}
    assert finish == {0: 100.0, 1: 150.0, 2: 130.0}
    m = r.metrics
    assert m.avg_jct == pytest.approx((100 + 140 + 110) / 3)
    assert m.median_jct == 110 and m.p99_jct == 140
    assert m.avg_queue == pytest.approx((0 + 90 + 80) / 3) and m.p99_queue == 90
    assert m.makespan == 150
    assert m.utilization == pytest.approx((4 * 100 + 2 * 50 + 2 * 30) / (4 * 150))
    assert m.tenant_slowdown == {"t": pytest.approx(140 / 50)}  # slowdowns 1.0, 2.8, 3.67
    assert m.preemptions == 0


def test_srpt_oracle_preempts_for_a_shorter_job_and_the_victim_pays_the_restart():
    jobs = [Job(0, 0.0, 100.0, 1, "t"), Job(1, 10.0, 10.0, 1, "t")]
    r = simulate(jobs, ClusterSpec(1, 1), make("srpt-oracle"), restart_overhead=5.0)
    finish = {rec.id: rec.finish for rec in r.records}
    assert finish == {1: 20.0, 0: 20.0 + 5.0 + 90.0}
    assert r.metrics.preemptions == 1
    assert r.metrics.utilization == pytest.approx(1.0)


def test_tiresias_demotes_at_the_threshold_not_at_the_next_event():
    jobs = [Job(0, 0.0, 10000.0, 1, "t"), Job(1, 100.0, 50.0, 1, "t")]
    r = simulate(jobs, ClusterSpec(1, 1), Tiresias(thresholds=(3600.0,)), restart_overhead=0.0)
    finish = {rec.id: rec.finish for rec in r.records}
    assert finish == {1: 3650.0, 0: pytest.approx(10050.0)}
    assert r.metrics.preemptions == 1


def test_fifo_blocks_behind_the_head_and_slurm_backfills_around_it():
    # 2 GPUs: a 1-GPU job of tenant a runs 0-100; a 2-GPU head waits; a short 1-GPU job of b behind it
    jobs = [Job(0, 0.0, 100.0, 1, "a"), Job(1, 1.0, 10.0, 2, "b"), Job(2, 2.0, 10.0, 1, "b")]

    def predictor():
        p = Predictor(default=10.0, weight=0.0)  # b: 10 s (no history); a: its median, 100 s
        p.observe("a", 100.0)
        return p

    fifo = {x.id: x.finish for x in simulate(jobs, ClusterSpec(1, 2), make("fifo"), predictor=predictor()).records}
    slurm = {x.id: x.finish for x in simulate(jobs, ClusterSpec(1, 2), make("slurm"), predictor=predictor()).records}
    assert fifo[2] == 120.0  # after the head
    assert slurm[2] == 12.0  # backfilled: predicted to end (12) before the head's reserved start (100)
    assert slurm[1] == 110.0  # and the head is not delayed


def test_backfill_never_delays_the_head_by_prediction():
    # same, but the short job is predicted to end after the head's reservation: it must wait
    jobs = [Job(0, 0.0, 100.0, 1, "a"), Job(1, 1.0, 10.0, 2, "b"), Job(2, 2.0, 10.0, 1, "b")]
    p = Predictor(default=200.0, weight=0.0)
    p.observe("a", 100.0)
    slurm = {x.id: x.finish for x in simulate(jobs, ClusterSpec(1, 2), make("slurm"), predictor=p).records}
    assert slurm[1] == 110.0 and slurm[2] == 120.0


def test_spread_placement_is_slowed_by_the_table():
    table = SlowdownTable({(4, 1): 1.0, (4, 2): 2.0})
    # two nodes with 2 GPUs free each after two 6-GPU jobs: a 4-GPU job must spread
    jobs = [Job(0, 0.0, 1000.0, 6, "t"), Job(1, 0.0, 1000.0, 6, "t"), Job(2, 1.0, 100.0, 4, "t")]
    r = simulate(jobs, ClusterSpec(2, 8), make("fifo"), table)
    rec = {x.id: x for x in r.records}
    assert rec[2].finish == pytest.approx(1.0 + 200.0)
    assert r.spread_starts == 1


def test_jobs_larger_than_the_cluster_are_left_out_and_counted():
    r = simulate([Job(0, 0.0, 10.0, 16, "t"), Job(1, 0.0, 10.0, 1, "t")], ClusterSpec(1, 8), make("fifo"))
    assert r.unschedulable == 1 and [x.id for x in r.records] == [1]


def test_policies_never_see_the_truth_unless_oracle():
    seen = []

    class Spy:
        name, preemptive, oracle = "spy", False, False

        def schedule(self, view):
            seen.extend((t.duration, t.predicted) for t in view.waiting.values())
            return make("fifo").schedule(view)

    jobs = [Job(0, 0.0, 500.0, 1, "t"), Job(1, 600.0, 700.0, 1, "t"), Job(2, 601.0, 1.0, 1, "t")]
    simulate(jobs, ClusterSpec(1, 1), Spy(), predictor=Predictor(default=100.0, weight=1.0))
    assert all(d is None for d, _ in seen)
    predicted = [p for _, p in seen]
    assert predicted[0] == 100.0  # nothing completed yet: the default
    assert predicted[-1] == pytest.approx((500.0 + 100.0) / 2)  # job 0 done: its duration blended in


@st.composite
def traces(draw):
    n = draw(st.integers(1, 25))
    t = 0.0
    jobs = []
    for i in range(n):
        t += draw(st.floats(0, 500))
        jobs.append(Job(i, t, draw(st.floats(0, 5000)), draw(st.sampled_from([1, 1, 2, 3, 4, 8, 12, 16])),
                        draw(st.sampled_from(["a", "b", "c"]))))
    return jobs, ClusterSpec(draw(st.integers(1, 3)), draw(st.sampled_from([2, 4, 8])), draw(st.integers(0, 2)))


@pytest.mark.parametrize("name", sorted(POLICIES))
@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(case=traces())
def test_every_job_finishes_within_a_bounded_horizon(name, case):
    jobs, cluster = case
    overhead = 30.0
    r = simulate(jobs, cluster, make(name), restart_overhead=overhead)  # raises on a contract breach
    fits = [j for j in jobs if cluster.shape(j.gpus) is not None]
    assert sorted(x.id for x in r.records) == sorted(j.id for j in fits)
    if fits:
        # someone runs whenever someone waits, so all is done by the last arrival plus all the work
        horizon = max(j.submit for j in fits) + sum(j.duration for j in fits) + overhead * r.metrics.preemptions
        assert max(x.finish for x in r.records) <= horizon + 1e-6
        assert all(x.finish >= x.submit + x.duration - 1e-6 for x in r.records)


@pytest.mark.parametrize("name", ["tacc", "slurm", "tiresias", "srpt-oracle"])  # those that sync from ``changes``
@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(case=traces())
def test_told_the_changes_a_policy_decides_as_when_it_compares_every_task(name, case):
    from dataclasses import replace

    class Untold:  # the policy, with each view's ``changes`` taken away (it then compares every task)
        def __init__(self):
            self.p = make(name)
            self.name, self.preemptive, self.oracle = "untold", self.p.preemptive, self.p.oracle
            self.quota_aware = getattr(self.p, "quota_aware", False)

        def schedule(self, view):
            return self.p.schedule(replace(view, changes=None))

    jobs, cluster = case
    told = simulate(jobs, cluster, make(name))
    untold = simulate(jobs, cluster, Untold())
    key = lambda r: sorted((x.id, x.first_start, x.finish, x.preemptions) for x in r.records)  # noqa: E731
    assert key(told) == key(untold)
