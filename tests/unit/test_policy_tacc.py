"""The ``tacc`` policy: properties on random clusters, queues and quotas (hypothesis), and specific decisions.

The contract's own properties (no GPU twice, gang, only preemptible victims, view not
mutated) are checked for every registered policy, tacc included, in
``test_policy_contract``; every job finishing in a replay in ``test_sim_replay``.
"""

from __future__ import annotations

from dataclasses import replace

import hypothesis
import pytest
from hypothesis import strategies as st
from test_policy_contract import check

from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.scheduler.explain import over_quota
from tacc_hub.scheduler.history import DurationHistory, bucket
from tacc_hub.scheduler.policies import Tacc
from tacc_hub.scheduler.policy import REASONS, Limits, Preempt, Quotas, Start, TaskView, View
from tacc_hub.scheduler.sim import ClusterSpec, Job, PolicyError, Simulator, simulate
from tacc_hub.scheduler.topology import FreeMap, NodeView

given, settings = hypothesis.given, hypothesis.settings


def nodes(n: int, size: int = 8, per_switch: int = 0, free: dict[str, tuple[int, ...]] | None = None):
    per = per_switch or n
    return [NodeView(f"n{i}", size, f"s{i // per}", (free or {}).get(f"n{i}", tuple(range(size))))
            for i in range(n)]


def held(node: str, gpus: list[int]) -> Placement:
    return Placement(nodes=[NodeSlots(node=node, gpus=gpus)])


def task(tid: int, gpus: int = 1, group: str = "g", owner: str | None = None, **kw) -> TaskView:
    kw.setdefault("predicted", 100.0)
    kw.setdefault("submit", float(tid))
    return TaskView(tid, owner or group, group, nodes=1, gpus_per_node=gpus, flexible=True, **kw)


def starts(actions) -> list[int]:
    return [a.task_id for a in actions if isinstance(a, Start)]


# -- random scenes with quotas ------------------------------------------------------------------


@st.composite
def quota_scenes(draw):
    n_nodes = draw(st.integers(1, 5))
    size = draw(st.sampled_from([2, 4, 8]))
    ns = nodes(n_nodes, size, draw(st.integers(1, n_nodes)))
    free = FreeMap(ns)
    now = 1e4
    running, waiting = {}, {}
    groups, users = ["a", "b", "c"], ["u0", "u1", "u2", "u3"]
    for tid in range(draw(st.integers(0, 16))):
        g = draw(st.integers(1, size * 2))
        t = TaskView(tid, draw(st.sampled_from(users)), draw(st.sampled_from(groups)), draw(st.floats(0, now)),
                     1, g, predicted=draw(st.floats(1, 1e5)), flexible=True, preemptible=draw(st.booleans()),
                     qos=draw(st.sampled_from(["interactive", "normal", "low"])), attained=draw(st.floats(0, 1e5)),
                     done=draw(st.floats(0, 1e4)), spread_ok=draw(st.booleans()))
        fit = free.fit(1, g, True) if draw(st.booleans()) else None
        if fit is not None:
            free.take(fit.placement)
            running[tid] = replace(t, start=draw(st.floats(0, now)), placement=fit.placement)
        else:
            waiting[tid] = t
    ns = [NodeView(n.name, n.gpus, n.switch, tuple(free.free[n.name])) for n in ns]
    lim = st.builds(Limits, max_gpus=st.one_of(st.none(), st.integers(0, 24)), guaranteed_gpus=st.integers(0, 16))
    quotas = Quotas(
        users={u: draw(lim) for u in users if draw(st.booleans())},
        groups={g: draw(lim) for g in groups if draw(st.booleans())},
        default_user=draw(lim), default_group=draw(lim),
        exhausted=frozenset(draw(st.lists(st.sampled_from([f"user:{u}" for u in users]
                                                          + [f"group:{g}" for g in groups]), max_size=2))),
    )
    history = DurationHistory()
    for d in draw(st.lists(st.floats(1, 1e6), max_size=30)):
        history.observe(draw(st.sampled_from(groups)), d)
    return View(now, waiting, running, ns, quotas, history)


def usage_after(view: View, actions) -> tuple[dict[str, int], dict[str, int], set[int]]:
    """GPUs held per user and per group after applying ``actions`` in order; asserts caps at every start."""
    q = view.quotas
    assert q is not None
    users: dict[str, int] = {}
    groups: dict[str, int] = {}
    for t in view.running.values():
        users[t.owner] = users.get(t.owner, 0) + t.gpus
        groups[t.group] = groups.get(t.group, 0) + t.gpus
    started = set()
    for a in actions:
        if isinstance(a, Preempt):
            t = view.running[a.task_id]
            users[t.owner] -= t.gpus
            groups[t.group] -= t.gpus
        elif isinstance(a, Start):
            t = view.waiting[a.task_id]
            assert f"user:{t.owner}" not in q.exhausted and f"group:{t.group}" not in q.exhausted, "exhausted started"
            users[t.owner] = users.get(t.owner, 0) + t.gpus
            groups[t.group] = groups.get(t.group, 0) + t.gpus
            cap = q.user(t.owner).max_gpus
            assert cap is None or users[t.owner] <= cap, "user cap exceeded"
            cap = q.group(t.group).max_gpus
            assert cap is None or groups[t.group] <= cap, "group cap exceeded"
            started.add(t.id)
    return users, groups, started


@settings(max_examples=150, deadline=None)
@given(view=quota_scenes())
def test_quotas_gang_and_guarantee_reclaim_hold_on_random_scenes(view):
    actions = Tacc().schedule(view)
    check(view, actions)  # no GPU twice, gang, only preemptible victims
    usage_after(view, actions)  # caps and exhausted budgets
    q = view.quotas
    starters = [view.waiting[a.task_id] for a in actions if isinstance(a, Start)]
    for a in actions:
        if isinstance(a, Preempt):
            v = view.running[a.task_id]
            assert v.preemptible
            assert starters, "a preemption with no start in the same pass"
    assert q is not None


@settings(max_examples=150, deadline=None)
@given(view=quota_scenes())
def test_explain_covers_every_waiting_task_in_a_consistent_order(view):
    ex = Tacc().explain(view)
    assert set(ex) == set(view.waiting)
    assert sorted(e.position for e in ex.values()) == list(range(1, len(ex) + 1))
    last = view.now
    for e in sorted(ex.values(), key=lambda e: e.position):
        assert e.reason in REASONS
        if e.estimated_start is not None:
            assert e.estimated_start >= view.now - 1e-9
            if e.reason == "Quota":  # at a cap: when its GPUs come back, which tasks behind it need not wait for
                continue
            assert e.estimated_start >= last - 1e-9, "estimates must not decrease with position"
            last = e.estimated_start
    for tid, e in ex.items():
        t = view.waiting[tid]
        q = view.quotas
        if over_quota(t, q) is not None:  # can never start under these quotas: said first, whatever else holds
            assert e.reason == "OverQuota" and e.estimated_start is None
        elif q is not None and (f"user:{t.owner}" in q.exhausted or f"group:{t.group}" in q.exhausted):
            assert e.reason == "Quota" and e.estimated_start is None


# -- simulated properties -------------------------------------------------------------------------


def _stream() -> list[Job]:
    # one 8-GPU node; 1-GPU tasks of 600 s arrive every 50 s (12 GPUs of demand): a backlog builds for
    # 20,000 s and clears about 30,000 s in. An 8-GPU task arrives at 50 s; per GPU it ranks below every
    # fresh short task (size_exponent 1): it becomes the head once the tasks ahead of it have started, and the
    # short ones after it start below it on the GPUs it waits for.
    jobs = [Job(0, 0.0, 600.0, 1, "short"), Job(1, 50.0, 1000.0, 8, "big")]
    return jobs + [Job(i, 50.0 * (i - 1), 600.0, 1, "short") for i in range(2, 400)]


def test_a_stream_of_short_tasks_cannot_starve_a_big_one():
    r = simulate(_stream(), ClusterSpec(1, 8), Tacc(size_exponent=1.0), restart_overhead=30.0)
    big = next(x for x in r.records if x.id == 1)
    assert big.first_start <= 3600.0  # it takes back the GPUs of the tasks started below it (no ``min_run``)
    assert len(r.records) == 400


def test_without_take_back_the_same_stream_does_starve_it():  # the test above can fail
    # each short task started below the head is in its first ``min_run`` for all of its 600 s: never a victim
    r = simulate(_stream(), ClusterSpec(1, 8), Tacc(size_exponent=1.0, take_back=False), restart_overhead=30.0)
    big = next(x for x in r.records if x.id == 1)
    assert big.first_start > 20000.0


def test_simulator_refuses_quotas_for_a_quota_unaware_policy_and_catches_a_cap_breach():
    from tacc_hub.scheduler.policies import make

    jobs = [Job(0, 0.0, 10.0, 4, "a"), Job(1, 0.0, 10.0, 4, "a")]
    quotas = Quotas(groups={"a": Limits(max_gpus=4)})
    with pytest.raises(ValueError, match="quotas"):
        Simulator(jobs, ClusterSpec(1, 8), make("fifo"), quotas=quotas)

    class Greedy:
        name, preemptive, oracle, quota_aware = "greedy", False, False, True

        def schedule(self, view):
            return make("fifo").schedule(view)

    with pytest.raises(PolicyError, match="more than 4"):
        simulate(jobs, ClusterSpec(1, 8), Greedy(), quotas=quotas)
    r = simulate(jobs, ClusterSpec(1, 8), Tacc(), quotas=quotas)  # tacc keeps the cap: one after the other
    assert sorted(x.finish for x in r.records) == [10.0, 20.0]


# -- specific decisions ---------------------------------------------------------------------------


def test_qos_orders_interactive_then_normal_then_low():
    view = View(100.0, {1: task(1, qos="low"), 2: task(2, qos="normal"), 3: task(3, qos="interactive")}, {},
                nodes(1, 8, free={"n0": (0,)}))
    assert starts(Tacc().schedule(view)) == [3]
    ex = Tacc().explain(view)
    assert [ex[i].position for i in (3, 2, 1)] == [1, 2, 3]


def test_owner_priority_orders_the_owners_own_tasks():
    view = View(100.0, {1: task(1, owner="u"), 2: task(2, owner="u", priority=5)}, {}, nodes(1, 8, free={"n0": (0,)}))
    assert starts(Tacc().schedule(view)) == [2]


def test_spread_or_wait_decision_and_its_note():
    # two nodes with 4 free each: an 8-GPU task can only spread (x2 slowdown here)
    run = {9: task(9, 4, start=0.0, placement=held("n0", [0, 1, 2, 3]), preemptible=False),
           8: task(8, 4, start=0.0, placement=held("n1", [0, 1, 2, 3]), preemptible=False)}
    ns = nodes(2, 8, free={"n0": (4, 5, 6, 7), "n1": (4, 5, 6, 7)})
    big = {1: task(1, 8, predicted=1e5, time_limit=1e5)}
    waits = Tacc(slowdown=lambda g, n, m, s: 2.0).schedule(View(10.0, big, run, ns))
    assert starts(waits) == []  # running tasks end in ~90 s (their predictions): cheaper than a 2x slowdown
    spreads = Tacc(slowdown=lambda g, n, m, s: 1.0001).schedule(View(10.0, big, run, ns))
    [s] = [a for a in spreads if isinstance(a, Start)]
    assert len(s.placement.nodes) == 2 and "spread over 2 nodes" in s.note and "cost more" in s.note
    ex = Tacc(slowdown=lambda g, n, m, s: 2.0).explain(View(10.0, big, run, ns))
    assert ex[1].reason == "Topology"


def test_a_task_that_needs_one_switch_never_spans_two():
    ns = nodes(2, 4, per_switch=1, free={"n0": (0, 1), "n1": (0, 1)})
    view = View(0.0, {1: task(1, 4, spread_ok=False)}, {}, ns)
    assert starts(Tacc(slowdown=lambda *a: 1.0).schedule(view)) == []
    view = View(0.0, {1: task(1, 4, spread_ok=True)}, {}, ns)
    [s] = [a for a in Tacc(slowdown=lambda *a: 1.0).schedule(view) if isinstance(a, Start)]
    assert "2 switches over TCP" in s.note


def test_a_group_below_its_guarantee_reclaims_borrowed_gpus():
    # group b borrowed the whole node (guarantee 0, runs past min_run); group a (guarantee 4) gets 4 back
    run = {i: task(i, 2, group="b", start=0.0, placement=held("n0", [2 * (i - 10), 2 * (i - 10) + 1]))
           for i in range(10, 14)}
    ns = nodes(1, 8, free={"n0": ()})
    quotas = Quotas(groups={"a": Limits(guaranteed_gpus=4), "b": Limits(guaranteed_gpus=0)})
    view = View(1000.0, {1: task(1, 4, group="a", submit=950.0, attained=1e9, done=1e6)}, run, ns, quotas)
    actions = Tacc().schedule(view)
    check(view, actions)
    assert len([a for a in actions if isinstance(a, Preempt)]) == 2 and starts(actions) == [1]
    assert "reclaimed guaranteed GPUs" in next(a for a in actions if isinstance(a, Start)).note
    # without the guarantee, the same long-served task may not preempt fresher tasks
    view2 = View(1000.0, view.waiting, run, ns, Quotas())
    assert Tacc().schedule(view2) == [] or starts(Tacc().schedule(view2)) == []


def test_a_non_preemptible_task_is_never_preempted():
    run = {10: task(10, 8, start=0.0, placement=held("n0", list(range(8))), preemptible=False,
                    attained=1e9, done=1e7)}
    view = View(500.0, {1: task(1, 1, qos="interactive")}, run, nodes(1, 8, free={"n0": ()}))
    assert Tacc().schedule(view) == [] or not any(isinstance(a, Preempt) for a in Tacc().schedule(view))


def test_backfill_never_delays_the_heads_reservation():
    # 8 GPUs: a non-preemptible 6-GPU task runs (predicted to end at 1,000); head needs 8 GPUs
    run = {10: task(10, 6, start=0.0, placement=held("n0", list(range(6))), preemptible=False, predicted=1000.0)}
    ns = nodes(1, 8, free={"n0": (6, 7)})
    head = task(1, 8, qos="interactive", preemptible=False)
    long_ = task(2, 1, predicted=5000.0, time_limit=5000.0, preemptible=False)  # would end after 1,000
    short = task(3, 1, predicted=10.0, time_limit=10.0, preemptible=False)  # ends before 1,000
    view = View(5.0, {1: head, 2: long_, 3: short}, run, ns)
    got = starts(Tacc().schedule(view))
    assert 2 not in got and 3 in got and 1 not in got


def test_explain_reasons_resources_and_quota():
    run = {10: task(10, 8, start=0.0, placement=held("n0", list(range(8))), preemptible=False)}
    quotas = Quotas(exhausted=frozenset({"group:broke"}), groups={"capped": Limits(max_gpus=0)})
    waiting = {1: task(1, 1), 2: task(2, 1, group="broke"), 3: task(3, 1, group="capped")}
    ex = Tacc().explain(View(10.0, waiting, run, nodes(1, 8, free={"n0": ()}), quotas))
    assert ex[1].reason == "Resources" and ex[1].estimated_start is not None and ex[1].estimated_start >= 10.0
    assert ex[2].reason == "Quota" and ex[2].estimated_start is None
    assert ex[3].reason == "OverQuota" and ex[3].estimated_start is None  # 1 GPU over a cap of 0: never
    assert "group capped may hold at most 0" in ex[3].detail


def test_fresh_view_objects_each_pass_give_the_same_decisions():
    # a service builds new TaskView objects every pass; the simulator reuses them: same decisions
    import copy

    ns = nodes(2, 8, free={"n0": (0, 1, 2), "n1": ()})
    run = {10: task(10, 5, start=0.0, placement=held("n0", [3, 4, 5, 6, 7])),
           11: task(11, 8, start=0.0, placement=held("n1", list(range(8))))}
    waiting = {i: task(i, 1 + i % 3) for i in range(1, 8)}
    same, fresh = Tacc(), Tacc()
    for now in (10.0, 20.0, 30.0):
        a = same.schedule(View(now, waiting, run, ns))
        b = fresh.schedule(View(now, {k: copy.copy(v) for k, v in waiting.items()},
                                {k: copy.copy(v) for k, v in run.items()}, ns))
        assert [(type(x).__name__, getattr(x, "task_id", None)) for x in a] == \
            [(type(x).__name__, getattr(x, "task_id", None)) for x in b]
        assert starts(b)  # there is something to start in every pass (nothing is applied here)


def test_fair_share_starts_from_the_usage_seeded_from_before_a_restart():
    # two groups, one free GPU; group a's task is older, so with no past usage it goes first
    waiting = {1: task(1, group="a"), 2: task(2, group="b")}
    fresh = View(100.0, waiting, {}, nodes(1, 8, free={"n0": (0,)}), history=DurationHistory())
    assert starts(Tacc().schedule(fresh)) == [1]
    # a used 1,000 GPU-hours yesterday (b nothing): after a restart it is still the heavy one
    hist = DurationHistory()
    hist.seed_usage([(100.0 - 86400, {("a", "a"): 3.6e6})])
    seeded = View(100.0, waiting, {}, nodes(1, 8, free={"n0": (0,)}), history=hist)
    assert starts(Tacc().schedule(seeded)) == [2]


def test_a_waiting_task_rises_one_level_per_age_step_and_passes_shorter_fresh_ones():
    p = Tacc(age_step=1000.0)
    old = task(1, submit=0.0, predicted=100.0)
    assert [p.queue.rank(old, now)[2] - p.queue.rank(old, 0.0)[2] for now in (999.0, 1000.0, 2500.0)] == [0, -1, -2]
    # 8 free GPUs; an 8-GPU task (a level worse per GPU) waiting since 0 and a fresh 1-GPU task: only one fits
    fresh, aged = task(2, submit=9000.0), task(1, gpus=8, submit=0.0)
    view = View(9000.0, {1: aged, 2: fresh}, {}, nodes(1, 8))
    assert starts(Tacc(age_step=0.0).schedule(view)) == [2]  # without aging: the short one
    assert starts(Tacc(age_step=1000.0).schedule(view)) == [1]


@settings(max_examples=100, deadline=None)
@given(view=quota_scenes(), data=st.data())
def test_the_one_sorted_list_walks_as_the_merge_of_the_users_lists(view, data):
    p = Tacc()
    for k in range(3):  # a few passes, the queue kept in between (tasks leave, come back, fair share moves)
        p.schedule(view)
        q = p.queue
        flat = list(q.ranked(view))
        q.prioritized += 1  # as if a task had a priority: the walk merges the per-user lists
        merged = list(q.ranked(view))
        q.prioritized -= 1
        assert [r for r, _ in flat] == [r for r, _ in merged]
        assert [t for _, t in flat] == [t for _, t in merged]
        gone = data.draw(st.sets(st.sampled_from(sorted(view.waiting)), max_size=3)) if view.waiting else set()
        waiting = {tid: t for tid, t in view.waiting.items() if tid not in gone}
        view = replace(view, now=view.now + 400.0 * (k + 1), waiting=waiting)


def test_a_batch_waiting_behind_a_sibling_that_ran_long_takes_its_run_time_class():
    p = Tacc()
    q = p.queue
    a, b, c = task(1, submit=0.0), task(2, submit=60.0), task(3, submit=60.0 + 2 * p.queue.batch_gap)
    d = task(4, submit=30.0)
    for t in (a, d, b, c):
        q._insert(t, 100.0)
    assert q.batch_of[1] == q.batch_of[2] == q.batch_of[4] != q.batch_of[3]  # c came after a gap: a batch of its own
    assert q.ctx[2] == q.ctx[3] == "g|1|n"  # none of their batches has ended yet
    q.completed(a, 5000.0, 5100.0)  # a ends after 5,000 s: b (not run yet) is in that class now, c is not
    assert q.ctx[2] != "g|1|n" and q.ctx[3] == "g|1|n" and 1 not in q.ctx
    assert q.ctx_hist.counts("g|1|n")[bucket(5000.0)] == 1  # learned under the context a had
    q.completed(d, 20.0, 5200.0)  # a shorter end in the batch: its longest run sets the class
    assert q.ctx[2] == f"g|1|{bucket(5000.0) // q.context_width}"
    q.prune({2: b})  # gone tasks are forgotten
    assert set(q.ctx) == {2} and set(q.batch_of) == {2}


@settings(max_examples=100, deadline=None)
@given(view=quota_scenes(), data=st.data())
def test_gpus_per_level_kept_by_running_match_a_walk_over_the_victims(view, data):
    """``Running.gpus_above`` (kept as runs come, go, change level and pass ``min_run``) answers what the walk
    over every victim gives, for every level and any set of tasks preempted in the pass."""
    from tacc_hub.scheduler.policies.tacc import _Pass

    p = Tacc(min_run=data.draw(st.sampled_from([0.0, 600.0, 5000.0])))
    for k in range(3):  # passes with time moving on: young runs come of age, tasks start and leave
        out = p.schedule(view) if view.waiting else []
        p._prepare(view)
        ps = _Pass(p, view)
        ranks = [r for _, r in p.running.rank.values()]
        levels = {r[:3] for r in ranks} | {(1, 0, -5), (1, 2, 50)}
        victims = sorted(tid for tid, (t, _) in p.running.rank.items() if t.preemptible)
        ps.preempted = set(data.draw(st.lists(st.sampled_from(victims), max_size=3))) if victims else set()
        ps.victims = p.running.victims(view, ps.preempted)
        for lv in levels:
            if lv[0] != 0:
                assert p.running.gpus_above(lv, ps.preempted) == ps._walk_extra(task(999), lv, False)
        started = {a.task_id: a.placement for a in out if isinstance(a, Start)}
        gone = {a.task_id for a in out if isinstance(a, Preempt)}
        running = {tid: t for tid, t in view.running.items() if tid not in gone}
        running.update({tid: replace(view.waiting[tid], start=view.now, placement=pl) for tid, pl in started.items()})
        waiting = {tid: t for tid, t in view.waiting.items() if tid not in started}
        free = FreeMap(view.nodes)
        for tid in gone:
            pl = view.running[tid].placement
            assert pl is not None
            free.give(pl)
            waiting[tid] = replace(view.running[tid], start=None, placement=None)
        for pl in started.values():
            free.take(pl)
        ns = [NodeView(n.name, n.gpus, n.switch, tuple(free.free[n.name])) for n in view.nodes]
        view = replace(view, now=view.now + 700.0 * (k + 1), waiting=waiting, running=running, nodes=ns)


def test_a_batch_none_of_which_has_ended_sends_only_its_first_probes_ahead():
    # one busy GPU; alice submits a batch of 5 alike tasks at 0-4 s, bob one task at 10 s
    running = {99: task(99, group="h", owner="carol", submit=0.0, start=0.0, placement=held("n0", [0]))}
    waiting = {i: task(i, group="g", owner="alice") for i in range(5)}
    waiting[10] = task(10, group="g", owner="bob")
    view = View(100.0, waiting, running, nodes(1, 1, free={"n0": ()}), None, None)

    def order(p: Tacc, v: View) -> list[int]:
        p._prepare(v)
        return [t.id for _, t in p.queue.ranked(v)]

    assert order(Tacc(probes=0), view) == [0, 1, 2, 3, 4, 10]  # FIFO: the whole batch first
    p = Tacc()  # 3 probes: the batch's other tasks wait one level lower until one of it ends
    assert order(p, view) == [0, 1, 2, 10, 3, 4]
    # alice's first task ran and ended: her batch's length is known, the rest of it waits no longer
    p.queue.completed(waiting[0], 50.0, 200.0)
    rest = {tid: t for tid, t in waiting.items() if tid != 0}
    assert order(p, replace(view, now=200.0, waiting=rest)) == [1, 2, 3, 4, 10]


@settings(max_examples=100, deadline=None)
@given(view=quota_scenes(), data=st.data())
def test_running_ends_on_demand_are_the_sorted_ends(view, data):
    """``_Pass.running_end(i)`` is the i-th of sorted((max(now, end), id, view)) over the running tasks not
    preempted when the pass first asked, however far and in whatever steps a pass reads it."""
    from tacc_hub.scheduler.policies.tacc import _Pass

    p = Tacc()
    p._prepare(view)
    # a pass later than the sync: some expected ends are past by then (overdue: they end "now", by id)
    later = replace(view, now=view.now + data.draw(st.sampled_from([0.0, 1e3, 1e5, 1e7, 1e9])))
    ps = _Pass(p, later)
    ids = sorted(view.running)
    ps.preempted = set(data.draw(st.lists(st.sampled_from(ids), unique=True))) if ids else set()
    expect = sorted((max(later.now, end), tid, t) for end, tid, t in p.running.ends() if tid not in ps.preempted)
    first = data.draw(st.integers(1, len(expect) + 1))
    head = [ps.running_end(i) for i in range(first)]  # a first reading, part of the way (or past the end)
    ps.preempted.update(ids)  # later preemptions do not change what the pass reads (as before: one snapshot)
    got = []
    while (e := ps.running_end(len(got))) is not None:
        got.append(e)
    assert [e[:2] for e in got] == [e[:2] for e in expect]
    assert all(a is b for (_, _, a), (_, _, b) in zip(got, expect, strict=True))
    assert head == (got + [None] * first)[:first]
