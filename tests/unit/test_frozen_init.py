"""The scheduler's hot dataclasses write their ``__init__`` out (native when compiled, see ``TaskView``): each
must take exactly the dataclass's init fields, in order, with the same defaults, and set every field."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.scheduler.history import DurationHistory
from tacc_hub.scheduler.policy import Changes, Preempt, Quotas, Start, TaskView, View, Wake
from tacc_hub.scheduler.sim.metrics import JobRecord
from tacc_hub.scheduler.sim.simulator import _Job
from tacc_hub.scheduler.sim.trace import Job
from tacc_hub.scheduler.topology import Fit, NodeView

CLASSES = [TaskView, Changes, View, Start, Preempt, Wake, NodeView, Fit, JobRecord, _Job]


def _init_fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _distinct(cls: type) -> dict[str, object]:
    """A value per init field, in order: distinct from the others and from the field's default."""
    placement = Placement(nodes=[NodeSlots(node="n0", gpus=[1])])
    view = TaskView(1, "u", "g", 0.0, 1, 1, 1.0)
    node = NodeView("n", 8, "s", (1,))
    values: dict[type, dict[str, object]] = {
        TaskView: dict(id=1, owner="u", group="g", submit=2.5, nodes=3, gpus_per_node=4, predicted=5.5, duration=6.5,
                       qos="low", preemptible=False, flexible=True, attained=7.5, done=8.5, queued=9.5, start=10.5,
                       placement=placement, rate=0.5, time_limit=11.5, priority=12, spread_ok=False),
        Changes: dict(serial=1, since=2, waiting=frozenset({3}), running=frozenset({4})),
        View: dict(now=1.5, waiting={1: view}, running={}, nodes=[node], quotas=Quotas(),
                   history=DurationHistory(), changes=Changes(1, 0, frozenset(), frozenset())),
        Start: dict(task_id=1, placement=placement, note="why"),
        Preempt: dict(task_id=1),
        Wake: dict(at=1.5),
        NodeView: dict(name="n", gpus=8, switch="s", free=(1, 2)),
        Fit: dict(placement=placement, spread=True),
        JobRecord: dict(id=1, tenant="t", gpus=2, submit=3.5, duration=4.5, first_start=5.5, finish=6.5, run_time=7.5,
                        preemptions=8),
        _Job: dict(job=Job(id=7, tenant="t", submit=1.0, duration=2.0, gpus=1), view=view, epoch=1, first_start=2.5,
                   run_time=3.5, overhead=4.5, preemptions=5),
    }
    out = values[cls]
    assert list(out) == [f.name for f in _init_fields(cls)], f"{cls.__name__}: test values out of date"
    return out


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_set_positionally_and_by_keyword(cls: type) -> None:
    values = _distinct(cls)
    for obj in (cls(*values.values()), cls(**values)):
        for name, v in values.items():
            assert getattr(obj, name) is v or getattr(obj, name) == v, (cls.__name__, name)
    if cls is TaskView:
        t = cls(**values)
        assert t.gpus == values["nodes"] * values["gpus_per_node"]  # the derived field


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_same_defaults_as_the_fields(cls: type) -> None:
    fields = _init_fields(cls)
    required = {f.name: v for f, v in zip(fields, _distinct(cls).values(), strict=True)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    obj = cls(**required)
    for f in fields:
        if f.name not in required:
            assert getattr(obj, f.name) == f.default, (cls.__name__, f.name)
    assert len(required) + sum(1 for f in fields if f.name not in required) == len(fields)


@pytest.mark.parametrize("cls", [c for c in CLASSES if c is not _Job], ids=lambda c: c.__name__)
def test_frozen_copyable_and_picklable(cls: type) -> None:
    obj = cls(**_distinct(cls))
    name = _init_fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, 1)
    assert copy.copy(obj) == obj
    if cls is not View:  # (a view holds mappings of live objects: equal after a round trip all the same)
        assert pickle.loads(pickle.dumps(obj)) == obj
    first = _init_fields(cls)[-1]
    other = _distinct(cls)[first.name]
    assert dataclasses.replace(obj, **{first.name: other}) == obj
