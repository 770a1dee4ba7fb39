"""A running task's time (``POST /api/tasks/ID/extend``) and its runs (``GET /api/tasks/ID/attempts``).

Extending: the owner or an admin (anyone else: 404, as for a task that does not exist) gives the
task's *current run* more time: ``{"seconds": N}`` or ``{"by": "1h"}`` (whole seconds, at least
``MIN_EXTENSION``). Refused with 409 unless the task is RUNNING; with 422 naming ``seconds`` when
the run's new limit would be over the site's ``max_time_limit``, or its GPUs times the added time
over what is left of the owner's or its group's GPU-hour budget this period; with 502 when the
executor could not set the new limit (Slurm: ``scontrol update``); nothing is recorded then.
An extension is recorded (``time_extensions``), audited (``extend``, with the limits before and
after) and told to the executor; a run started again later starts from the plan's limit.
"""

from __future__ import annotations

from typing import Any

from tacc_hub.schema.fields import parse_duration_s

from .base import ApiError, ApiHandler
from .controller import Conflict, ExecutorFailed, LimitRefused
from .models import AttemptsOut, ExtendIn, TaskOut
from .tasks import task_out

MIN_EXTENSION = 60
"""Shortest extension (seconds)."""


def _bad(message: str, field: str = "seconds", status: int = 422) -> ApiError:
    return ApiError(status, message, [{"field": field, "message": message}])


def extension_seconds(body: Any, most: int) -> int:
    """The seconds an extend body asks for: exactly one of ``seconds`` (a whole number) and ``by`` (a
    duration: "1h", "30m", "1:30:00"; a bare number is minutes, as sbatch's --time); 422 naming the field."""
    if not isinstance(body, dict):
        raise _bad('the body must be a JSON object: {"seconds": 3600} or {"by": "1h"}', "body")
    extra = sorted(set(body) - {"seconds", "by"})
    if extra:
        raise _bad(f"unknown field {str(extra[0])[:40]!r}: give seconds or by", str(extra[0])[:40])
    if ("seconds" in body) == ("by" in body):
        raise _bad('give exactly one of seconds (a whole number) and by (a duration such as "1h")')
    if "seconds" in body:
        value = body["seconds"]
        if type(value) is not int:
            raise _bad("seconds must be a whole number of seconds")
    else:
        raw = body["by"]
        if not isinstance(raw, str):
            raise _bad('by must be a duration such as "1h", "30m" or "1:30:00"', "by")
        try:
            value = parse_duration_s(raw)
        except ValueError as exc:
            raise _bad(f"by: {exc}", "by") from None
        if type(value) is not int:
            raise _bad('by must be a duration such as "1h", "30m" or "1:30:00"', "by")
    if value < MIN_EXTENSION:
        raise _bad(f"an extension is at least {MIN_EXTENSION} s, not {value}")
    if value > most:
        raise _bad(f"an extension of {value} s is over the site's max_time_limit of {most} s")
    return value


class ExtendHandler(ApiHandler):
    openapi = {"post": {
        "summary": "Give a running task's current run more time (owner or admin), within the site's "
                   "max_time_limit and the owner's GPU-hour budget; on Slurm the job's TimeLimit is updated.",
        "request": ExtendIn,
        "response": TaskOut,
        "errors": {"409": "the task is not running", "502": "the executor could not set the new limit"},
    }}

    async def post(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        most = self.ctx.running.max_time_limit
        seconds = extension_seconds(self.body_json(), most)
        ctl = self.ctx.controller
        try:
            rec = await ctl.extend(rec, seconds, self.user, max_time_limit=most)
        except Conflict as exc:
            raise ApiError(409, str(exc)) from None
        except LimitRefused as exc:
            raise _bad(exc.message, exc.field) from None
        except ExecutorFailed as exc:
            raise ApiError(502, str(exc)) from None
        self.write_json(task_out(ctl, rec))


class AttemptsHandler(ApiHandler):
    openapi = {"get": {
        "summary": "A task's runs, first first: each ended run's outcome, exit code and reason; the current run "
                   "last, as \"running\".",
        "response": AttemptsOut,
    }}

    def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        self.write_json({"task_id": rec.id, "attempts": self.ctx.controller.runs(rec)})


ROUTES: list[tuple[str, Any]] = [
    (r"/api/tasks/(\d+)/extend", ExtendHandler),
    (r"/api/tasks/(\d+)/attempts", AttemptsHandler),
]
