"""Quota checks the scheduler calls: requests that can never fit, budgets used up, accounting periods.

Everything here is pure: plain data in, plain data out; no I/O and no clock (the caller
passes ``now``). The store does the accounting (GPU-seconds per user over a window); these
functions turn it into decisions.

Invariants:

* :func:`refusal` answers ``None`` exactly when the request fits every limit that can be
  known at submit time: its GPUs within the user's and the group's ``max_gpus``, and its
  worst-case GPU-hours (``gpus x time_limit``) within each ``gpu_hours`` budget. Otherwise
  it names the first limit broken, whose limit it is, and by how much.
* :func:`exhausted` names a user (``"user:NAME"``) or group (``"group:NAME"``) exactly when
  it has a GPU-hour budget and has used all of it in the period. A group's usage is the sum
  of its members' (a user not in ``group_of`` is in group ``"default"``). Users and groups
  with a budget of zero are exhausted without any usage; those under a zero *default* budget
  are named only if they appear in the usage or the memberships (the rest cannot be listed;
  :func:`refusal` refuses their GPU tasks anyway).
* Periods are UTC calendar periods: a day starts at 00:00 UTC, a week on Monday 00:00 UTC,
  a month on its 1st at 00:00 UTC. ``period_start(t) <= t < period_end(t)`` always.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from .policy import Limits, Quotas

PERIODS: tuple[str, ...] = ("day", "week", "month")
"""Accounting periods a GPU-hour budget may be given for."""

DEFAULT_GROUP = "default"
"""The group of a user with no membership."""


def _num(x: float) -> str:
    """Hours for people: one decimal, more only where one decimal would show 0.0 for a non-zero value."""
    text = f"{x:.1f}"
    return f"{x:.2g}" if text in ("0.0", "-0.0") and x != 0 else text


def _duration(seconds: float) -> str:
    hours = seconds / 3600.0
    if hours >= 1:
        return f"{hours:g} h" if hours == round(hours, 2) else f"{hours:.2f} h"
    minutes = seconds / 60.0
    return f"{minutes:g} min" if minutes == round(minutes, 2) else f"{minutes:.2f} min"


def _plural(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def refusal(quotas: Quotas, user: str, group: str, gpus: int, time_limit_s: float, *,
            period: str = "month") -> str | None:
    """Why a request of ``gpus`` GPUs for at most ``time_limit_s`` seconds can never fit a quota; ``None`` if it can.

    ``period`` only words the message (a budget is "per month"). Examples::

        needs 16 GPUs; user alice may hold at most 8 (8 over)
        needs 32.0 GPU-hours (16 GPUs x 2 h); group lab-a's budget is 20.0 GPU-hours per month (12.0 over)
    """
    if gpus <= 0:
        return None
    scopes: tuple[tuple[str, str, Limits], ...] = (
        ("user", user, quotas.user(user)), ("group", group, quotas.group(group)))
    for kind, name, limits in scopes:
        if limits.max_gpus is not None and gpus > limits.max_gpus:
            return (f"needs {_plural(gpus)}; {kind} {name} may hold at most {limits.max_gpus} "
                    f"({gpus - limits.max_gpus} over)")
    if not math.isfinite(time_limit_s) or time_limit_s < 0:
        return None  # no upper bound on the run: a budget cannot rule it out in advance
    need = gpus * time_limit_s / 3600.0
    for kind, name, limits in scopes:
        if limits.gpu_hours is not None and need > limits.gpu_hours:
            return (f"needs {_num(need)} GPU-hours ({_plural(gpus)} x {_duration(time_limit_s)}); "
                    f"{kind} {name}'s budget is {_num(limits.gpu_hours)} GPU-hours per {period} "
                    f"({_num(need - limits.gpu_hours)} over)")
    return None


def usage_by_group(usage_gpu_s_by_user: Mapping[str, float], group_of: Mapping[str, str]) -> dict[str, float]:
    """GPU-seconds per group: the sum of its members' usage (no membership: group ``"default"``)."""
    out: dict[str, float] = {}
    for user, used in usage_gpu_s_by_user.items():
        g = group_of.get(user, DEFAULT_GROUP)
        out[g] = out.get(g, 0.0) + used
    return out


def exhausted(quotas: Quotas, usage_gpu_s_by_user: Mapping[str, float],
              group_of: Mapping[str, str]) -> frozenset[str]:
    """``"user:NAME"`` / ``"group:NAME"`` for every user and group with no GPU-hours left this period."""
    by_group = usage_by_group(usage_gpu_s_by_user, group_of)
    users = set(usage_gpu_s_by_user) | set(group_of) | set(quotas.users)
    groups = set(by_group) | set(group_of.values()) | set(quotas.groups)
    out: set[str] = set()
    for kind, names, used_s, limits_of in (("user", users, usage_gpu_s_by_user, quotas.user),
                                           ("group", groups, by_group, quotas.group)):
        for name in names:
            budget = limits_of(name).gpu_hours
            if budget is not None and used_s.get(name, 0.0) / 3600.0 >= budget:
                out.add(f"{kind}:{name}")
    return frozenset(out)


def _check_period(period: str) -> None:
    if period not in PERIODS:
        raise ValueError(f"period: must be one of {', '.join(PERIODS)}, not {period!r}")


def _start(now: float, period: str) -> datetime:
    _check_period(period)
    # Whole seconds: boundaries are whole seconds, and rounding to microseconds could carry
    # a time just before a boundary over it.
    t = datetime.fromtimestamp(math.floor(now), UTC)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def period_start(now: float, period: str) -> float:
    """When the accounting period holding ``now`` began (UTC calendar boundary), in epoch seconds."""
    return _start(now, period).timestamp()


def period_end(now: float, period: str) -> float:
    """When the accounting period holding ``now`` ends (the next period's start), in epoch seconds."""
    start = _start(now, period)
    if period == "day":
        return (start + timedelta(days=1)).timestamp()
    if period == "week":
        return (start + timedelta(days=7)).timestamp()
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1).timestamp()
    return start.replace(month=start.month + 1).timestamp()
