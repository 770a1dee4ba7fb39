"""Usage over time for admins: GPU-hours per day by user and by group.

Invariants: admins only (403 before anything is read); days are UTC calendar days, the last
one being today up to now; a run is charged to the days it overlapped (running tasks up to now),
by the same accounting the quotas use (:meth:`Store.gpu_seconds_by_owner`); groups are today's
memberships.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from tacc_hub.store import DEFAULT_GROUP

from .base import ApiHandler

DAY = 86400.0


def day_starts(now: float, days: int) -> list[float]:
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return [(today - timedelta(days=days - 1 - i)).timestamp() for i in range(days)]


class UsageHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: GPU-hours per UTC day by user and by group, over the last `days` "
                                  "days (today up to now). `days` lists the days, each series has one value per day.",
                       "params": {"days": "how many days, 1..366 (30)"},
                       "errors": {"403": "not an admin"}}}

    def get(self) -> None:
        self.require_admin()
        days = self.int_arg("days", 30, 1, 366)
        now = time.time()
        starts = day_starts(now, days)
        members = self.ctx.store.memberships()
        users: dict[str, list[float]] = {}
        groups: dict[str, list[float]] = {}
        for i, lo in enumerate(starts):
            hi = min(lo + DAY, now)
            for owner, seconds in self.ctx.store.gpu_seconds_by_owner(lo, hi).items():
                hours = seconds / 3600.0
                users.setdefault(owner, [0.0] * days)[i] += hours
                groups.setdefault(members.get(owner, DEFAULT_GROUP), [0.0] * days)[i] += hours
        self.write_json({
            "unit": "GPU-hours",
            "days": [datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d") for t in starts],
            "users": {k: [round(v, 4) for v in vs] for k, vs in sorted(users.items())},
            "groups": {k: [round(v, 4) for v in vs] for k, vs in sorted(groups.items())},
        })
