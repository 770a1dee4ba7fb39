"""``GET /api/usage``: the caller's own GPU-hours this period against the budget, per day, and recent tasks.

Invariants: the caller's own usage only; no parameter names another user (an admin looks at other
users through the admin API). GPU-hours are the quota accounting (:meth:`Store.gpu_seconds_by_owner`),
so ``used_gpu_hours`` equals what ``/api/quota`` reports; a task's efficiency is the mean of its GPU
utilization samples (``gpu_samples``), null when it has none.
"""

from __future__ import annotations

import time

from tacc_hub.scheduler.quota import period_end, period_start
from tacc_hub.store import DEFAULT_GROUP

from .base import ApiHandler
from .stats import day_label, day_starts, overlap, per_day


class MyUsageHandler(ApiHandler):
    openapi = {"get": {"summary": "Your GPU-hours this accounting period against your budget (`budget_gpu_hours` "
                                  "null: none), your GPU-hours and tasks per UTC day over the last `days` days, and "
                                  "your `recent` tasks with their GPU-hours and mean GPU utilization (`util_mean`, "
                                  "percent; null where no samples were taken).",
                       "params": {"days": "how many days of the per-day series, 1..366 (30)",
                                  "recent": "how many recent tasks, 1..200 (20)"},
                       "errors": {"400": "days or recent out of range"}}}

    def get(self) -> None:
        user = self.user  # never another user's: there is no parameter for it
        days = self.int_arg("days", 30, 1, 366)
        limit = self.int_arg("recent", 20, 1, 200)
        store, period, now = self.ctx.store, self.ctx.quota_period, time.time()
        start, end = period_start(now, period), period_end(now, period)
        group = store.memberships().get(user, DEFAULT_GROUP)
        budget = store.load_quotas().user(user).gpu_hours
        used = store.gpu_seconds_by_owner(start, now).get(user, 0.0) / 3600.0
        starts = day_starts(now, days)
        recent, _ = store.list_tasks(user, None, limit, None)
        first = min([starts[0], start, *[r.started_at for r in recent if r.started_at]])
        runs = store.runs_between(first, now, owner=user)
        series = per_day([r for r in runs if r.end > starts[0]], starts, now)
        by_task: dict[int, float] = {}
        for run in runs:
            by_task[run.task_id] = by_task.get(run.task_id, 0.0) + run.gpus * overlap(run, run.start, now) / 3600.0
        means = store.sample_means(r.id for r in recent)
        self.write_json({
            "user": user, "group": group, "unit": "GPU-hours", "period": period,
            "period_start": start, "period_end": end,
            "used_gpu_hours": round(used, 4), "budget_gpu_hours": budget,
            "days": [day_label(t) for t in starts],
            "gpu_hours": [round(v, 4) for v in series.hours.get(user, [0.0] * days)],
            "tasks": series.tasks.get(user, [0] * days),
            "recent": [{
                "id": r.id, "name": r.name, "status": str(r.status), "submitted_at": r.submitted_at,
                "started_at": r.started_at, "finished_at": r.finished_at,
                "gpus": int(((r.spec or {}).get("resources") or {}).get("nodes", 1))
                * int(((r.spec or {}).get("resources") or {}).get("gpus_per_node", 0)),
                "gpu_hours": round(by_task.get(r.id, 0.0), 4),
                "util_mean": None if r.id not in means else round(means[r.id].util, 1),
                "samples": means[r.id].samples if r.id in means else 0,
            } for r in recent],
        })
