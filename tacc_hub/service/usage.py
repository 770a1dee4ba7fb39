"""Admin views of usage: GPU-hours per day by user and group (JSON or CSV), cluster statistics, the queue.

Invariants: admins only (403 before anything is read); days are UTC calendar days, the last one
being today up to now; a run is charged to the days it overlapped (running tasks up to now), by the
same accounting the quotas use (:meth:`Store.gpu_seconds_by_owner`); groups are today's memberships.
Each request reads the store with one statement per table (:mod:`tacc_hub.store.stats`) and does
the bucketing in :mod:`.stats`.
"""

from __future__ import annotations

import csv
import io
import time
from typing import Any

from tacc_hub.store import DEFAULT_GROUP, TaskStatus

from .base import ApiError, ApiHandler
from .stats import DAY, day_label, day_starts, per_day, top_users, usage_rows, utilization, wait_percentiles
from .tasks import task_out

CSV_FIELDS = {"user": ["day", "user", "group", "gpu_hours", "tasks"], "group": ["day", "group", "gpu_hours", "tasks"]}


def rows_csv(rows: list[dict[str, Any]], by: str) -> str:
    """The CSV text of :func:`.stats.usage_rows` (header first; ``\\r\\n`` line ends, as RFC 4180)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS[by])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def capacity_of(handler: ApiHandler) -> int:
    """GPUs of the cluster's nodes that take tasks now."""
    return sum(n.gpus for n in handler.ctx.controller.cluster.nodes.values() if n.schedulable)


class UsageHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: GPU-hours per UTC day by user and by group, over the last `days` "
                                  "days (today up to now). `days` lists the days, each series has one value per day; "
                                  "`tasks_users` / `tasks_groups` count the tasks that ran on each day. "
                                  "`format=csv`: one row per day and user (or group, with `by=group`).",
                       "params": {"days": "how many days, 1..366 (30)", "format": "json (default) or csv",
                                  "by": "csv rows per user (default) or group"},
                       "errors": {"400": "days out of range, or an unknown format / by", "403": "not an admin"}}}

    def get(self) -> None:
        self.require_admin()
        days = self.int_arg("days", 30, 1, 366)
        fmt = self.get_query_argument("format", "json")
        by = self.get_query_argument("by", "user")
        if fmt not in ("json", "csv"):
            raise ApiError(400, "format must be json or csv", [{"field": "format", "message": "json or csv"}])
        if by not in CSV_FIELDS:
            raise ApiError(400, "by must be user or group", [{"field": "by", "message": "user or group"}])
        now = time.time()
        starts = day_starts(now, days)
        store = self.ctx.store
        members = store.memberships()
        runs = store.runs_between(starts[0], now)
        if fmt == "csv":
            self.set_header("Content-Type", "text/csv; charset=UTF-8")
            self.set_header("Content-Disposition", f'attachment; filename="tacc-usage-{day_label(starts[0])}.csv"')
            self.finish(rows_csv(usage_rows(runs, starts, now, members, by), by))
            return
        users = per_day(runs, starts, now)
        groups = per_day(runs, starts, now, lambda r: members.get(r.owner, DEFAULT_GROUP))
        self.write_json({
            "unit": "GPU-hours",
            "days": [day_label(t) for t in starts],
            "users": {k: [round(v, 4) for v in vs] for k, vs in sorted(users.hours.items())},
            "groups": {k: [round(v, 4) for v in vs] for k, vs in sorted(groups.hours.items())},
            "tasks_users": dict(sorted(users.tasks.items())),
            "tasks_groups": dict(sorted(groups.tasks.items())),
        })


class StatsHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: cluster statistics over the last `days` days. `utilization`: mean GPUs "
                                  "allocated per time bucket (`step` seconds; hourly up to 14 days) and that over "
                                  "the schedulable GPUs now (`capacity`); `allocated_now`: GPUs allocated right now; "
                                  "`wait`: p50/p90/p99 of the queueing delay (seconds, submit to start) of tasks "
                                  "that started in the period, per QoS class; `top_users`: GPU-hours, tasks and "
                                  "share of the period's total.",
                       "params": {"days": "how many days back from now, 1..90 (7)",
                                  "top": "how many users, 1..100 (10)"},
                       "errors": {"400": "days or top out of range", "403": "not an admin"}}}

    def get(self) -> None:
        self.require_admin()
        days = self.int_arg("days", 7, 1, 90)
        top = self.int_arg("top", 10, 1, 100)
        now = time.time()
        since = now - days * DAY
        step = 3600.0 * max(1, -(-days // 14))  # at most 14 x 24 buckets
        since = since - since % step  # buckets on whole hours
        store = self.ctx.store
        runs = store.runs_between(since, now)
        capacity = capacity_of(self)
        starts, allocated, fraction = utilization(runs, since, now, step, capacity)
        self.write_json({
            "days": days, "since": since, "now": now, "capacity": capacity,
            "allocated_now": sum(len(n.holders) for n in self.ctx.controller.cluster.nodes.values() if n.schedulable),
            "utilization": {"step": step, "times": starts, "allocated": [round(a, 3) for a in allocated],
                            "fraction": [None if f is None else round(f, 4) for f in fraction]},
            "wait": {"unit": "seconds", "qos": wait_percentiles(store.waits_between(since, now))},
            "top_users": top_users(runs, since, now, store.memberships(), top),
        })


class AdminQueueHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: the waiting tasks of every user in queue order, as `/api/tasks` shows "
                                  "them, with `nodes_requested`, `gpus_requested` and the owner's `group`.",
                       "params": {"limit": "how many, 1..2000 (500)"},
                       "errors": {"403": "not an admin"}}}

    def get(self) -> None:
        self.require_admin()
        limit = self.int_arg("limit", 500, 1, 2000)
        ctl, store = self.ctx.controller, self.ctx.store
        recs, total = store.list_tasks(None, [TaskStatus.PENDING], limit, None)
        members = store.memberships()
        out: list[dict[str, Any]] = []
        for rec in recs:
            row = task_out(ctl, rec)
            res = (rec.spec or {}).get("resources") or {}
            row["nodes_requested"] = int(res.get("nodes", 1))
            row["group"] = members.get(rec.owner, DEFAULT_GROUP)
            out.append(row)
        out.sort(key=lambda t: ((t["queue"] or {}).get("position") or 1e18, t["id"]))
        self.write_json({"tasks": out, "total": total})
