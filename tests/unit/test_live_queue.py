"""The live queue (policy answers checked before they touch the cluster), queue explanations, run-time history."""

from __future__ import annotations

from typing import ClassVar

from tacc_hub.scheduler import ClusterState, Node, NodeSlots, Placement
from tacc_hub.scheduler.durations import RunTimePredictor
from tacc_hub.scheduler.explain import explain, project
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.scheduler.policy import Action, Limits, Preempt, Quotas, Start, TaskView, View, Wake
from tacc_hub.scheduler.queue import LiveQueue


def tv(i: int, gpus: int = 1, nodes: int = 1, owner: str = "u", group: str = "g", predicted: float = 100.0,
       **kw) -> TaskView:
    return TaskView(id=i, owner=owner, group=group, submit=float(i), nodes=nodes, gpus_per_node=gpus,
                    predicted=predicted, **kw)


def cluster(n: int = 2, gpus: int = 4, per_switch: int = 0) -> ClusterState:
    return ClusterState([Node(f"n{i}", gpus, switch=str(i // per_switch) if per_switch else "0") for i in range(n)])


def at(node: str, *gpus: int) -> Placement:
    return Placement(nodes=[NodeSlots(node=node, gpus=list(gpus))])


class Scripted:
    """A policy that answers what it is told to (to test that the queue checks answers)."""

    name: ClassVar[str] = "scripted"
    preemptive: ClassVar[bool] = True
    oracle: ClassVar[bool] = False

    def __init__(self, actions: list[Action]) -> None:
        self.actions = actions
        self.seen: list[View] = []

    def schedule(self, view: View) -> list[Action]:
        self.seen.append(view)
        return self.actions


def test_fifo_starts_what_fits_and_allocates():
    q = LiveQueue(cluster(), FifoGang())
    for i in (1, 2, 3):
        q.add(tv(i, gpus=4))
    plan = q.plan(0.0)
    assert [s.task_id for s in plan.starts] == [1, 2]
    assert set(q.running) == {1, 2} and list(q.waiting) == [3]
    assert sorted(q.cluster.held) == [1, 2]


def test_a_slot_given_twice_is_refused():
    q = LiveQueue(cluster(), Scripted([Start(1, at("n0", 0, 1)), Start(2, at("n0", 1))]))
    q.add(tv(1, gpus=2))
    q.add(tv(2, gpus=1))
    plan = q.plan(0.0)
    assert [s.task_id for s in plan.starts] == [1]
    assert 2 in q.waiting and q.cluster.nodes["n0"].holders == {0: 1, 1: 1}


def test_wrong_shape_and_unknown_task_are_refused():
    q = LiveQueue(cluster(), Scripted([Start(1, at("n0", 0)), Start(9, at("n1", 0))]))
    q.add(tv(1, gpus=2))
    assert q.plan(0.0).starts == [] and not q.cluster.held


def test_quota_cap_is_enforced_even_against_the_policy():
    quotas = Quotas(users={"u": Limits(max_gpus=2)})
    q = LiveQueue(cluster(), Scripted([Start(1, at("n0", 0, 1)), Start(2, at("n1", 0))]))
    q.add(tv(1, gpus=2))
    q.add(tv(2, gpus=1))
    plan = q.plan(0.0, quotas)
    assert [s.task_id for s in plan.starts] == [1]
    ex = q.explain(1.0, quotas)
    assert ex[2].reason == "Quota" and "at most 2" in ex[2].detail


def test_exhausted_budget_blocks_with_quota_reason_and_no_estimate():
    quotas = Quotas(exhausted=frozenset({"group:g"}))
    q = LiveQueue(cluster(), Scripted([Start(1, at("n0", 0))]))
    q.add(tv(1))
    assert q.plan(0.0, quotas).starts == []
    ex = q.explain(0.0, quotas)[1]
    assert ex.reason == "Quota" and ex.estimated_start is None and "GPU-hours" in ex.detail


def test_preemption_only_of_preemptible_tasks_and_requeue_keeps_place():
    c = cluster(n=1)
    q = LiveQueue(c, Scripted([]))
    q.adopt(tv(1, gpus=2, preemptible=False), at("n0", 0, 1), start=0.0)
    q.adopt(tv(2, gpus=2, preemptible=True), at("n0", 2, 3), start=0.0)
    q.add(tv(3, gpus=4))
    q.policy = Scripted([Preempt(1), Preempt(2), Start(3, at("n0", 0, 1, 2, 3))])
    plan = q.plan(10.0)
    assert [p.task_id for p in plan.preempts] == [2]  # never the non-preemptible one
    assert plan.starts == []  # task 2 still holds its slots during its grace period
    assert q.preempting == {2}
    q.policy = Scripted([])
    q.plan(11.0)
    assert 2 not in q.policy.seen[-1].running  # a task being preempted is not offered again
    back = q.requeue(2, 20.0)
    assert back is not None and back.submit == 2.0 and back.attained == 2 * 20.0 and back.start is None
    assert list(q.waiting) == [2, 3]  # its place by submission, ahead of the later task
    assert c.nodes["n0"].holders == {0: 1, 1: 1}


def test_max_running_keeps_tasks_out_of_the_view_and_explains():
    q = LiveQueue(cluster(), FifoGang(), max_running=1)
    q.add(tv(1, owner="a"))
    q.add(tv(2, owner="a"))
    q.add(tv(3, owner="b"))
    assert [s.task_id for s in q.plan(0.0).starts] == [1, 3]
    ex = q.explain(0.0)
    assert ex[2].reason == "Quota" and "1 tasks running" in ex[2].detail


def test_cpu_task_gets_a_node_without_gpus():
    q = LiveQueue(cluster(), FifoGang())
    q.add(tv(1, gpus=0))
    plan = q.plan(0.0)
    assert plan.starts[0].placement.nodes == [NodeSlots(node="n0", gpus=[])]


def test_wake_is_passed_on():
    q = LiveQueue(cluster(), Scripted([Wake(50.0), Wake(40.0)]))
    q.add(tv(1))
    assert q.plan(0.0).wake_at == 40.0


def test_explain_reasons_positions_and_estimates():
    c = cluster(n=2, gpus=4, per_switch=1)  # two switches of one node each
    c.allocate(100, at("n0", 0, 1, 2))
    running = {100: tv(100, gpus=3, predicted=50.0, start=0.0, placement=at("n0", 0, 1, 2))}
    waiting = {
        1: tv(1, gpus=8),  # more than free: Resources
        2: tv(2, gpus=2, nodes=2, spread_ok=False),  # 5 free but not 2 x 2 on one switch: Topology
        3: tv(3, gpus=1),  # fits: waits behind others
    }
    view = View(10.0, waiting, running, c.view())
    ex = explain(view, list(waiting.values()))
    assert [ex[i].position for i in (1, 2, 3)] == [1, 2, 3]
    assert ex[1].reason == "Resources" and ex[2].reason == "Topology" and ex[3].reason == "Priority"
    # task 1 needs all 8: it starts when task 100 ends (predicted end 50)
    assert ex[1].estimated_start == 50.0
    # and the others after task 1 (predicted 100 s)
    assert ex[2].estimated_start == 150.0 and ex[3].estimated_start == 150.0
    assert all(e.estimated_start is not None and e.estimated_start >= view.now for e in ex.values())


def test_project_skips_tasks_larger_than_the_cluster():
    c = cluster(n=1, gpus=2)
    view = View(0.0, {1: tv(1, gpus=4), 2: tv(2, gpus=1)}, {}, c.view())
    assert project(view, list(view.waiting.values())) == {2: 0.0}


def test_history_prefers_the_closest_evidence_and_caps_at_the_limit():
    h = RunTimePredictor()
    assert h.predict("a", "train", "d1", 600) == 600 and h.source("a", "train", "d1") == "time limit"
    for x in (100, 120, 110):
        h.observe("a", "train", "d1", x)
    h.observe("a", "train", "d2", 400)
    h.observe("a", "eval", "d3", 5)
    assert h.predict("a", "train", "d1", 600) == 110
    assert h.predict("a", "train", "d9", 600) == 115  # same name: median of 100, 110, 120, 400
    assert h.predict("a", "other", "d9", 600) == 110  # the user's runs: median of all five
    assert h.predict("a", "train", "d2", 300) == 300  # never above the limit
    assert h.predict("b", "train", "d1", 900) == 900  # other users' runs are not evidence
    assert h.source("a", "train", "d1") == "same task (3 runs)"


def test_history_memory_is_bounded():
    h = RunTimePredictor(keep=3, max_keys=10)
    for i in range(100):
        h.observe(f"u{i}", "n", "d", float(i))
        h.observe("a", "n", "d", float(i))
    assert len(h._runs) <= 11
    assert h.predict("a", "n", "d", 1e9) == 98.0  # the last three runs: 97, 98, 99


def test_partition_and_gpu_type_passes_use_only_eligible_nodes():
    c = ClusterState([Node("a", 2, partition="p1", gpu_type="v100"), Node("b", 2, partition="p2", gpu_type="a100")])
    q = LiveQueue(c, FifoGang())
    q.add(tv(1, gpus=2), partition="p2")
    q.add(tv(2, gpus=1), gpu_type="v100")
    q.add(tv(3, gpus=1), partition="p1", gpu_type="a100")  # no such node: never starts
    q.add(tv(4, gpus=1))
    plan = q.plan(0.0)
    where = {s.task_id: [n.node for n in s.placement.nodes] for s in plan.starts}
    assert where == {1: ["b"], 2: ["a"], 4: ["a"]}
    assert list(q.waiting) == [3]
    ex = q.explain(0.0)
    assert ex[3].reason == "Resources" and ex[3].estimated_start is None


class Misplacing(Scripted):
    def schedule(self, view: View) -> list[Action]:
        return [Start(t.id, at("a", 0)) for t in view.waiting.values()]


def test_a_start_outside_the_tasks_partition_is_refused():
    c = ClusterState([Node("a", 2, partition="p1"), Node("b", 2, partition="p2")])
    q = LiveQueue(c, Misplacing([]))
    q.add(tv(1), partition="p2")
    assert q.plan(0.0).starts == [] and not c.held


# --- properties: whatever a policy answers, the queue keeps the invariants ---------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


class Chaos(Scripted):
    """Answers random actions (valid or not) drawn from the view: a fuzzer of the queue's checks."""

    def __init__(self, data) -> None:
        super().__init__([])
        self.data = data

    def schedule(self, view: View) -> list[Action]:
        out: list[Action] = []
        names = [n.name for n in view.nodes]
        for _ in range(self.data.draw(st.integers(0, 6))):
            kind = self.data.draw(st.sampled_from(["start", "start", "preempt", "wake"]))
            if kind == "start" and view.waiting:
                tid = self.data.draw(st.sampled_from(sorted(view.waiting)))
                slots = [NodeSlots(node=self.data.draw(st.sampled_from(names)),
                                   gpus=self.data.draw(st.lists(st.integers(0, 3), max_size=4)))
                         for _ in range(self.data.draw(st.integers(1, 2)))]
                out.append(Start(tid, Placement(nodes=slots)))
            elif kind == "preempt":
                pool = sorted(set(view.running) | {999})
                out.append(Preempt(self.data.draw(st.sampled_from(pool))))
            else:
                out.append(Wake(view.now + 1))
        return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_queue_invariants_hold_against_any_answer(data):
    c = cluster(n=3, gpus=4)
    quotas = Quotas(users={"a": Limits(max_gpus=3)}, groups={"g2": Limits(max_gpus=4)},
                    exhausted=frozenset({"user:c"}) if data.draw(st.booleans()) else frozenset())
    q = LiveQueue(c, Chaos(data), max_running=data.draw(st.sampled_from([None, 2])))
    next_id = 1
    for step in range(data.draw(st.integers(1, 8))):
        for _ in range(data.draw(st.integers(0, 3))):
            q.add(tv(next_id, gpus=data.draw(st.integers(0, 4)), owner=data.draw(st.sampled_from("abc")),
                     group=data.draw(st.sampled_from(["g1", "g2"])), preemptible=data.draw(st.booleans())))
            next_id += 1
        before = dict(q.running)
        plan = q.plan(float(step), quotas)
        # only preemptible tasks that were running are preempted
        for p in plan.preempts:
            assert p.task_id in before and before[p.task_id].preemptible
        # no slot held twice; the cluster matches the running set
        seen = set()
        for tid, pl in c.held.items():
            assert tid in q.running
            for s in pl.nodes:
                for g in s.gpus:
                    assert (s.node, g) not in seen and 0 <= g < 4
                    seen.add((s.node, g))
        # starts are whole (gang) and on distinct nodes
        for s in plan.starts:
            t = q.running[s.task_id]
            nodes = [n.node for n in s.placement.nodes]
            assert s.placement.gpu_count == t.gpus and len(set(nodes)) == len(nodes)
            assert "c" != t.owner or not quotas.exhausted
        # quotas: caps never exceeded by what started (tasks running before were within them too)
        users, groups = {}, {}
        for t in q.running.values():
            users[t.owner] = users.get(t.owner, 0) + t.gpus
            groups[t.group] = groups.get(t.group, 0) + t.gpus
        assert users.get("a", 0) <= 3 and groups.get("g2", 0) <= 4
        if q.max_running is not None:
            per = {}
            for t in q.running.values():
                per[t.owner] = per.get(t.owner, 0) + 1
            assert all(v <= q.max_running for v in per.values())
        # preempted tasks stop and come back
        for tid in list(q.preempting):
            if data.draw(st.booleans()):
                back = q.requeue(tid, float(step) + 0.5)
                assert back is not None and back.start is None and tid in q.waiting
        assert set(q.explain(float(step), quotas)) == set(q.waiting)


def test_cpu_tasks_start_under_every_policy_even_on_a_cluster_without_gpus():
    from tacc_hub.scheduler.policies import POLICIES

    for name, cls in POLICIES.items():
        if cls.oracle:
            continue
        q = LiveQueue(cluster(n=1, gpus=0), cls())
        q.add(tv(1, gpus=0))
        q.add(tv(2, gpus=0))
        assert [s.task_id for s in q.plan(0.0).starts] == [1, 2], name


def test_a_node_that_leaves_gets_no_new_tasks_and_its_running_tasks_keep_their_slots():
    from tacc_hub.scheduler.policies import make

    for policy in ("fifo", "tacc"):
        c = cluster(n=2, gpus=2)
        q = LiveQueue(c, make(policy))
        q.add(tv(1, gpus=2))
        assert [(s.task_id, s.placement.nodes[0].node) for s in q.plan(0.0).starts] == [(1, "n0")]
        # n0 is drained (left out of the executor's list), n1 is down (listed with that state)
        assert c.update_nodes([], {"n1": "down+NOT_RESPONDING"}) == ["n0", "n1"]
        assert c.update_nodes([], {"n1": "down+NOT_RESPONDING"}) == []  # nothing new
        assert (c.nodes["n0"].schedulable, c.nodes["n0"].state) == (False, "gone")
        assert (c.nodes["n1"].schedulable, c.nodes["n1"].state) == (False, "down+NOT_RESPONDING")
        assert c.nodes["n0"].holders == {0: 1, 1: 1} and c.held[1] == at("n0", 0, 1)  # the running task stays
        q.add(tv(2, gpus=1))
        assert q.plan(1.0).starts == [] and list(q.waiting) == [2], policy
        assert {n["name"]: n["schedulable"] for n in c.summary()} == {"n0": False, "n1": False}
        # n1 comes back: the waiting task goes there, never to n0
        assert c.update_nodes([Node("n1", 2)]) == ["n1"]
        starts = q.plan(2.0).starts
        assert [(s.task_id, s.placement.nodes[0].node) for s in starts] == [(2, "n1")], policy
        # the task on n0 ends while n0 is out: its slots are freed; n0 back with a new switch
        q.drop(1)
        assert c.nodes["n0"].holders == {}
        assert c.update_nodes([Node("n0", 2, switch="s9"), Node("n1", 2)]) == ["n0"]
        assert c.nodes["n0"].switch == "s9" and c.schedulable() is None
        q.add(tv(3, gpus=2))
        assert [(s.task_id, s.placement.nodes[0].node) for s in q.plan(3.0).starts] == [(3, "n0")], policy
