"""A task waiting at its user's GPU cap is not told "starts now": its estimate is when the GPUs holding the cap
(the user's Jupyter server, say) are expected back (issue 16, bug 7: the monitor said 3 s, the panel 4 min)."""

from __future__ import annotations

import pytest

from tacc_hub.scheduler import ClusterState, Node
from tacc_hub.scheduler.capwait import CapClock
from tacc_hub.scheduler.policies import FifoGang, Tacc
from tacc_hub.scheduler.policy import Limits, Quotas, TaskView

HOURS = 3600.0


def tv(i: int, gpus: int, owner: str, predicted: float, submit: float = 0.0) -> TaskView:
    return TaskView(id=i, owner=owner, group="g", submit=submit, nodes=1, gpus_per_node=gpus,
                    predicted=predicted, time_limit=8 * HOURS)


def test_cap_clock_answers_the_end_that_frees_enough():
    c = CapClock()
    c.add("user:bob", 100.0, 1)
    c.add("user:bob", 50.0, 1)
    assert c.earliest("user:bob", 1, 2, 0.0) == 50.0  # one GPU back is enough
    assert c.earliest("user:bob", 2, 2, 0.0) == 100.0  # both must be back
    assert c.earliest("user:bob", 1, 3, 7.0) == 7.0  # under the cap already
    assert c.earliest("user:bob", 1, None, 7.0) == 7.0  # no cap
    assert c.earliest("user:bob", 2, 2, 200.0) == 200.0  # never before the time asked about
    assert c.earliest("user:ann", 1, 1, 0.0) == 0.0


@pytest.mark.parametrize("policy", [Tacc, FifoGang], ids=["tacc", "fifo"])
def test_a_task_behind_its_users_server_waits_for_the_server(policy):
    from tacc_hub.scheduler.queue import LiveQueue

    lq = LiveQueue(ClusterState([Node("n0", 8)]), policy())
    lq.add(tv(1, 2, "bob", predicted=2 * HOURS))  # bob's server: 2 GPUs for about 2 h
    caps = Quotas(users={"bob": Limits(max_gpus=2)})
    assert [s.task_id for s in lq.plan(0.0, caps).starts] == [1]
    lq.add(tv(2, 1, "bob", predicted=60.0, submit=10.0))
    lq.add(tv(3, 1, "ann", predicted=60.0, submit=20.0))  # behind bob's task, with GPUs free
    ex = lq.explain(30.0, caps)
    assert ex[2].reason == "Quota", ex[2]
    assert ex[2].estimated_start is not None and ex[2].estimated_start >= 2 * HOURS - 60, ex[2]  # not "now"
    assert ex[3].estimated_start is not None and ex[3].estimated_start <= 31.0, ex[3]  # others are not held up
