"""The pure quota checks: refusals with their numbers, exhausted budgets, accounting periods."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tacc_hub.scheduler.policy import Limits, Quotas
from tacc_hub.scheduler.quota import exhausted, period_end, period_start, refusal, usage_by_group


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


Q = Quotas(
    users={"alice": Limits(max_gpus=8), "carol": Limits(gpu_hours=10.0)},
    groups={"lab-a": Limits(max_gpus=16, gpu_hours=20.0), "lab-b": Limits(gpu_hours=0.0)},
    default_user=Limits(max_gpus=4),
    default_group=Limits(),
)


def test_refusal_names_the_user_cap_and_the_excess():
    assert refusal(Q, "alice", "lab-a", 16, 60) == "needs 16 GPUs; user alice may hold at most 8 (8 over)"
    assert refusal(Q, "alice", "lab-a", 8, 60) is None


def test_refusal_applies_the_default_user():
    assert refusal(Q, "bob", "other", 5, 60) == "needs 5 GPUs; user bob may hold at most 4 (1 over)"
    assert refusal(Q, "bob", "other", 4, 10**6) is None  # default group: no limit at all


def test_refusal_names_the_group_cap():
    q = Quotas(groups={"lab-a": Limits(max_gpus=2)})
    assert refusal(q, "alice", "lab-a", 3, 60) == "needs 3 GPUs; group lab-a may hold at most 2 (1 over)"
    q1 = Quotas(default_group=Limits(max_gpus=0))
    assert refusal(q1, "x", "y", 1, 60) == "needs 1 GPU; group y may hold at most 0 (1 over)"


def test_refusal_names_the_budget_with_the_arithmetic():
    q = Quotas(groups={"lab-a": Limits(gpu_hours=20.0)})
    assert refusal(q, "alice", "lab-a", 16, 7200) == (
        "needs 32.0 GPU-hours (16 GPUs x 2 h); group lab-a's budget is 20.0 GPU-hours per month (12.0 over)")
    assert refusal(q, "alice", "lab-a", 10, 7200) is None  # exactly the budget fits
    assert refusal(Q, "carol", "x", 1, 11 * 3600, period="week") == (
        "needs 11.0 GPU-hours (1 GPU x 11 h); user carol's budget is 10.0 GPU-hours per week (1.0 over)")
    assert refusal(Q, "carol", "x", 4, 30 * 60) is None
    # minutes, and a small excess still shows
    q2 = Quotas(default_user=Limits(gpu_hours=0.5))
    assert refusal(q2, "u", "g", 1, 1830) == (
        "needs 0.5 GPU-hours (1 GPU x 30.5 min); user u's budget is 0.5 GPU-hours per month (0.0083 over)")


def test_refusal_zero_budget_and_zero_gpus():
    assert refusal(Q, "dan", "lab-b", 1, 1) is not None
    assert "group lab-b's budget is 0.0" in (refusal(Q, "dan", "lab-b", 1, 60) or "")
    assert refusal(Q, "dan", "lab-b", 0, 10**9) is None  # CPU-only tasks use no GPU quota
    assert refusal(Q, "dan", "lab-b", 1, float("inf")) is None  # no bound: cannot rule it out


def test_refusal_user_before_group():
    q = Quotas(users={"a": Limits(max_gpus=1)}, groups={"g": Limits(max_gpus=1)})
    assert (refusal(q, "a", "g", 2, 1) or "").startswith("needs 2 GPUs; user a")


@given(gpus=st.integers(0, 64), cap=st.integers(0, 64), hours=st.floats(0, 1e4), limit=st.floats(0, 1e6))
def test_refusal_iff_some_limit_is_broken(gpus: int, cap: int, hours: float, limit: float):
    q = Quotas(default_user=Limits(max_gpus=cap), default_group=Limits(gpu_hours=hours))
    why = refusal(q, "u", "g", gpus, limit)
    broken = gpus > 0 and (gpus > cap or gpus * limit / 3600.0 > hours)
    assert (why is not None) == broken
    if why is not None:
        assert "over)" in why


def test_exhausted_users_and_groups():
    usage = {"carol": 10 * 3600.0, "alice": 15 * 3600.0, "bob": 5 * 3600.0, "eve": 1.0}
    group_of = {"alice": "lab-a", "bob": "lab-a", "dan": "lab-b"}
    out = exhausted(Q, usage, group_of)
    # carol used her 10 h exactly; lab-a's members used 20 h together; lab-b has a zero budget.
    assert out == frozenset({"user:carol", "group:lab-a", "group:lab-b"})
    assert exhausted(Q, {"alice": 19 * 3600.0}, group_of) == frozenset({"group:lab-b"})


def test_exhausted_default_group_and_default_budget():
    q = Quotas(default_user=Limits(gpu_hours=1.0), default_group=Limits(gpu_hours=3.0))
    usage = {"a": 3600.0, "b": 1800.0, "c": 1800.0, "d": 3000.0}
    # a is out; nobody has a membership, so all are in "default": 2.3 h < 3 h
    assert exhausted(q, usage, {}) == frozenset({"user:a"})
    assert exhausted(q, {**usage, "e": 3600.0}, {"e": "solo"}) == frozenset({"user:a", "user:e"})
    assert exhausted(q, {**usage, "f": 2400.0}, {}) == frozenset({"user:a", "group:default"})
    assert exhausted(Quotas(), usage, {}) == frozenset()


def test_usage_by_group():
    assert usage_by_group({"a": 1.0, "b": 2.0, "c": 4.0}, {"a": "x", "b": "x"}) == {"x": 3.0, "default": 4.0}


@pytest.mark.parametrize(("now", "period", "start", "end"), [
    (ts(2026, 11, 30, 6, 47), "day", ts(2026, 11, 30), ts(2026, 12, 1)),
    (ts(2026, 11, 30, 6, 47), "week", ts(2026, 11, 30), ts(2026, 12, 7)),  # a Monday
    (ts(2026, 12, 6, 23, 59, 59), "week", ts(2026, 11, 30), ts(2026, 12, 7)),  # the Sunday after
    (ts(2026, 11, 30, 6, 47), "month", ts(2026, 11, 1), ts(2026, 12, 1)),
    (ts(2026, 12, 31, 23, 59, 59), "month", ts(2026, 12, 1), ts(2027, 1, 1)),  # year rollover
    (ts(2026, 12, 31, 23, 59, 59), "day", ts(2026, 12, 31), ts(2027, 1, 1)),
    (ts(2026, 12, 31, 12), "week", ts(2026, 12, 28), ts(2027, 1, 4)),  # a week across the new year
    (ts(2028, 2, 29, 12), "month", ts(2028, 2, 1), ts(2028, 3, 1)),  # leap year
    (ts(2027, 1, 1), "month", ts(2027, 1, 1), ts(2027, 2, 1)),  # exactly on a boundary: a new period
    (math.nextafter(ts(2027, 1, 1), 0), "month", ts(2026, 12, 1), ts(2027, 1, 1)),  # just before it: the old one
])
def test_period_boundaries(now: float, period: str, start: float, end: float):
    assert period_start(now, period) == start
    assert period_end(now, period) == end


@given(now=st.floats(0, 4e9), period=st.sampled_from(["day", "week", "month"]))
def test_period_contains_now(now: float, period: str):
    start, end = period_start(now, period), period_end(now, period)
    assert start <= now < end
    assert period_start(end, period) == end  # periods tile time
    d = datetime.fromtimestamp(start, UTC)
    assert (d.hour, d.minute, d.second) == (0, 0, 0)
    if period == "week":
        assert d.weekday() == 0
    if period == "month":
        assert d.day == 1
    assert 86400 <= end - start <= 31 * 86400


def test_unknown_period():
    with pytest.raises(ValueError, match="period"):
        period_start(0.0, "year")
    with pytest.raises(ValueError, match="period"):
        period_end(0.0, "fortnight")
