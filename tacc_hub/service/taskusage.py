"""``GET /api/tasks/ID/usage``: a task's sampled GPU utilization (written by :mod:`.gpusampler`).

The owner and admins see it; anyone else gets 404, as for a task that does not exist. The samples are the
store's (at most ``MAX_SAMPLES_PER_TASK`` per task), oldest first, downsampled to at most
:data:`MAX_POINTS` points (each the mean of a run of consecutive samples); ``mean_util`` and ``peak_util``
are over every sample in the window (``?since=``), not over the points. ``util`` is the mean over the
GPUs that answered, percent; ``memory_mib`` their memory summed (null when unknown).
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, Field

from tacc_hub.store.running import GpuSample

from .base import ApiError, ApiHandler
from .gpusampler import off_loop

MAX_POINTS = 500
_SINCE = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")


class UsagePointOut(BaseModel):
    at: float = Field(description="epoch seconds (of the first sample the point averages)")
    util: float = Field(description="mean GPU utilization over the task's GPUs that answered, percent (0..100)")
    memory_mib: float | None = Field(description="GPU memory used, summed over them, MiB (null: not reported)")
    gpus: int = Field(description="how many of the task's GPUs answered")


class UsageOut(BaseModel):
    task_id: int
    interval: float = Field(description="seconds between samples (TaccHub.gpu_sample_interval; 0: sampling off)")
    gpus: int = Field(description="the GPUs the task holds (or asks for, before it runs)")
    samples: list[UsagePointOut] = Field(description="oldest first, at most 500 points")
    mean_util: float | None = Field(description="mean util over every sample in the window; null without samples")
    peak_util: float | None = Field(description="highest util of a sample in the window; null without samples")


def downsample(samples: list[GpuSample], max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """At most ``max_points`` points, each the mean of ``ceil(n / max_points)`` consecutive samples (``at``: the
    first one's; ``gpus``: the most that answered; ``memory_mib``: the mean of those that reported it)."""
    step = max(1, math.ceil(len(samples) / max(1, max_points)))
    out = []
    for i in range(0, len(samples), step):
        chunk = samples[i:i + step]
        mems = [s.memory_mib for s in chunk if s.memory_mib is not None]
        out.append({"at": chunk[0].at, "util": round(sum(s.util for s in chunk) / len(chunk), 3),
                    "memory_mib": round(sum(mems) / len(mems), 3) if mems else None,
                    "gpus": max(s.gpus for s in chunk)})
    return out


def task_gpus(placement: dict[str, Any] | None, spec: dict[str, Any] | None) -> int:
    """GPUs the task holds (its placement), else those it asks for (nodes x gpus_per_node)."""
    nodes = (placement or {}).get("nodes") or []
    if nodes:
        return sum(len(n.get("gpus") or []) for n in nodes if isinstance(n, dict))
    r = (spec or {}).get("resources") or {}
    return int(r.get("nodes", 1)) * int(r.get("gpus_per_node", 0))


class TaskUsageHandler(ApiHandler):
    openapi = {"get": {
        "summary": "The task's sampled GPU utilization: a time series (at most 500 points), its mean and peak.",
        "params": {"since": "only samples at or after this time (epoch seconds, a plain decimal number)"},
        "response": UsageOut,
        "errors": {"400": "since is not a plain number"},
    }}

    async def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        raw = self.get_query_argument("since", None)
        since: float | None = None
        if raw is not None:
            if not _SINCE.fullmatch(raw):
                raise ApiError(400, "query parameter since must be a time in epoch seconds (e.g. 1764600000.5)",
                               [{"field": "since", "message": "not a plain decimal number"}])
            since = float(raw)
        samples = await off_loop(self.ctx.store, self.ctx.store.gpu_samples, rec.id, since=since)
        utils = [s.util for s in samples]
        self.write_json({
            "task_id": rec.id, "interval": self.ctx.running.gpu_sample_interval,
            "gpus": task_gpus(rec.placement, rec.spec), "samples": downsample(samples),
            "mean_util": round(sum(utils) / len(utils), 3) if utils else None,
            "peak_util": max(utils) if utils else None,
        })


ROUTES: list[tuple[str, Any]] = [(r"/api/tasks/(\d+)/usage", TaskUsageHandler)]
