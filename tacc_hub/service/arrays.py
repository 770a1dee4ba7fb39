"""Array and pipeline endpoints (issue 20): list, show, cancel a whole array or pipeline; submit a pipeline.

Routes (under the service's base URL):

- ``GET /api/arrays[?limit=&before=&all=1&owner=]`` -> ``{"arrays": [ArrayOut], "next_before"}``, newest first;
- ``GET /api/arrays/ID[?state=&index=&tasks=0]`` -> ArrayOut with ``tasks`` (its elements in index order, no spec);
- ``POST /api/arrays/ID/cancel`` -> ArrayOut with ``cancelled`` (elements not yet ended, all moved to cancel);
- ``POST /api/pipelines`` (a PipelineSpec, JSON or YAML, every step's spec inline) -> 201 PipelineOut;
- ``GET /api/pipelines``, ``GET /api/pipelines/ID``, ``POST /api/pipelines/ID/cancel``.

Invariants: an array or pipeline that is not the caller's (an admin sees all) is answered 404, as one that
does not exist, before anything else is looked at; ids are ASCII digits up to 2**62 (else 404, never a
query); query parameters are checked as ``GET /api/tasks``'s (400 naming them); a refused pipeline
stores nothing (SpecError 422, a dependency or snapshot not the caller's 404, all before the one insert).
"""

from __future__ import annotations

from typing import Any

from tacc_hub.schema import SpecError
from tacc_hub.schema.pipeline import PipelineSpec
from tacc_hub.store import TaskRecord

from . import groups
from .audit import record
from .base import MAX_ID, ApiError, ApiHandler
from .controller import Controller
from .heavyjobs import YAML_TYPES, Refused, parse_pipeline, parse_pipeline_job
from .models import (
    ArrayCancelOut,
    ArrayDetailOut,
    ArrayListOut,
    PipelineCancelOut,
    PipelineListOut,
    PipelineOut,
)
from .tasks import (
    INLINE_JSON_BYTES,
    check_account,
    check_code,
    check_identity,
    check_not_element,
    list_owner,
    not_found,
    parse_states,
    task_out,
    visible_array,
)


def array_out(ctl: Controller, arr: Any) -> dict[str, Any]:
    """An array as the API shows it: its record and where its elements stand (``Controller.array_summary``)."""
    return {"id": arr.id, "owner": arr.owner, "name": arr.name, "size": arr.size, "max_running": arr.max_running,
            "pipeline_id": arr.pipeline_id, "step": arr.step, "created_at": arr.created_at,
            **ctl.array_summary(arr)}


def pipeline_out(ctl: Controller, p: Any) -> dict[str, Any]:
    """A pipeline as the API shows it: its record and each step's state (``Controller.pipeline_summary``)."""
    summary = ctl.pipeline_summary(p)
    return {"id": p.id, "owner": p.owner, "name": p.name, "created_at": p.created_at,
            "status": summary.get("status"), "steps": summary.get("steps", [])}


def visible_pipeline(handler: ApiHandler, pipeline_id: str) -> Any:
    """The pipeline if the caller may see it (owner or admin); 404 otherwise, as if there were none."""
    pid = int(pipeline_id) if pipeline_id.isascii() and pipeline_id.isdigit() and len(pipeline_id) <= 18 else 0
    if not 0 < pid <= MAX_ID:
        raise ApiError(404, f"no pipeline {pipeline_id[:32]!r}")
    p = handler.ctx.store.get_pipeline(pid)
    if p is None or (p.owner != handler.user and not handler.admin):
        raise ApiError(404, f"no pipeline {pid}")
    return p


def _page(handler: ApiHandler) -> tuple[str | None, int, int | None]:
    return (list_owner(handler), handler.int_arg("limit", 50, 1, 500),
            handler.int_arg("before", 0, 0, MAX_ID) or None)


_LIST_PARAMS = {"limit": "page size, 1..500 (default 50)", "before": "only those with a smaller id (pagination)",
                "all": "admin: every user's", "owner": "admin: one user's"}


class ArraysHandler(ApiHandler):
    openapi = {"get": {"summary": "List your arrays, newest first (everyone's for an admin with all=1).",
                       "params": _LIST_PARAMS, "response": ArrayListOut}}

    def get(self) -> None:
        owner, limit, before = _page(self)
        ctl = self.ctx.controller
        arrays = self.ctx.store.list_arrays(owner, limit=limit, before=before)
        self.write_json({"arrays": [array_out(ctl, a) for a in arrays],
                         "next_before": arrays[-1].id if len(arrays) == limit else None})


class ArrayHandler(ApiHandler):
    openapi = {"get": {
        "summary": "Show one array: where its elements stand, and the elements (index order, without spec).",
        "params": {"state": "only elements in this state (repeatable)", "index": "only the element of this index",
                   "tasks": "0: leave the elements out (the summary only)"},
        "response": ArrayDetailOut,
    }}

    async def get(self, array_id: str) -> None:
        states = parse_states(self)  # the query first: a bad one is 400 whether the array exists or not
        index = self.int_arg("index", -1, 0, 10**9) if self.get_query_argument("index", None) is not None else None
        want = self.get_query_argument("tasks", "1")
        if want not in ("0", "1", "true", "false"):
            raise ApiError(400, "query parameter tasks must be 0 or 1", [{"field": "tasks", "message": "0 or 1"}])
        arr = visible_array(self, array_id)
        ctl = self.ctx.controller
        out = array_out(ctl, arr)
        if want in ("1", "true"):
            if index is not None:
                recs = [r for r in element_at(self, arr, index) if not states or r.status in states]
            else:
                recs = await elements(self, arr, states)
            out["tasks"] = [task_out(ctl, r) for r in recs]
        self.write_json(out)


BIG_ARRAY = 1000
"""Arrays with more elements than this are read from the store in a worker thread (when the store allows it)."""


async def elements(handler: ApiHandler, arr: Any, states: list[Any]) -> list[TaskRecord]:
    """An array's elements (index order, ``states`` only if given); a big array's off the event loop."""
    store = handler.ctx.store
    if arr.size > BIG_ARRAY:
        recs: list[TaskRecord] = await handler.ctx.controller._off(store.array_tasks, arr.id, states or None)
        return recs
    return store.array_tasks(arr.id, states or None)


def element_at(handler: ApiHandler, arr: Any, index: int) -> list[TaskRecord]:
    """The element of index ``index`` ([] when none), looked up by id first: elements are inserted in index
    order, usually with consecutive ids, so id = array id + (index - the first's index) or + index is tried
    (and checked) before every element is read."""
    store = handler.ctx.store
    first = store.get(arr.id)
    guesses = [arr.id + index] + ([arr.id + index - first.array_index]
                                  if first is not None and first.array_index is not None else [])
    for tid in dict.fromkeys(guesses):
        if arr.id <= tid < arr.id + arr.size:
            rec = first if tid == arr.id else store.get(tid)
            if rec is not None and rec.array_id == arr.id and rec.array_index == index:
                return [rec]
    return [r for r in store.array_tasks(arr.id) if r.array_index == index]


class ArrayCancelHandler(ApiHandler):
    openapi = {"post": {"summary": "Cancel every element of an array that has not ended (as scancel of an array "
                                   "job id); ended elements stay as they are.",
                        "response": ArrayCancelOut}}

    async def post(self, array_id: str) -> None:
        arr = visible_array(self, array_id)
        ctl = self.ctx.controller
        before = ctl.array_summary(arr)["status"] if arr.owner != self.user else None
        n = await ctl.cancel_array(arr.id)
        out = {**array_out(ctl, arr), "cancelled": n}
        if arr.owner != self.user:  # an admin's cancel of someone else's array
            record(self, "cancel", f"array:{arr.id}", before={"status": before, "owner": arr.owner},
                   after={"status": out["status"], "owner": arr.owner, "cancelled": n})
        self.write_json(out)


class PipelinesHandler(ApiHandler):
    openapi = {
        "get": {"summary": "List your pipelines, newest first (everyone's for an admin with all=1).",
                "params": _LIST_PARAMS, "response": PipelineListOut},
        "post": {"summary": "Submit a pipeline: named steps, each a TaskSpec inline, each waiting for the steps it "
                            "`needs` to succeed; at most 64 steps; stored in one transaction.",
                 "request": PipelineSpec,
                 "response": PipelineOut,
                 "status": 201,
                 "errors": {"404": "a code snapshot you did not upload, or a task or array named that is not "
                                   "yours"}},
    }

    def get(self) -> None:
        owner, limit, before = _page(self)
        ctl = self.ctx.controller
        pipelines = self.ctx.store.list_pipelines(owner, limit=limit, before=before)
        self.write_json({"pipelines": [pipeline_out(ctl, p) for p in pipelines],
                         "next_before": pipelines[-1].id if len(pipelines) == limit else None})

    async def _pipeline(self) -> Any:
        ctype = self.request.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if ctype not in (*YAML_TYPES, "application/json", ""):
            raise ApiError(415, f"unsupported Content-Type {ctype[:64]!r}; send application/json or application/yaml",
                           [{"field": "Content-Type", "message": "application/json or application/yaml"}])
        body = self.body
        if len(body) <= INLINE_JSON_BYTES and ctype not in YAML_TYPES:
            try:
                return parse_pipeline(body, ctype)
            except SpecError as exc:
                raise self.spec_error(exc) from None
        out = await self.offload(parse_pipeline_job, body, ctype)
        if isinstance(out, Refused):
            raise self.spec_error(SpecError(list(out.errors))) from None
        return out

    async def post(self) -> None:
        pipeline = await self._pipeline()
        check_identity(self)
        for i, step in enumerate(pipeline.steps):
            check_not_element(step.spec, f"steps[{i}].spec.")
            check_account(self, step.spec, f"steps[{i}].spec.")
            check_code(self, step.spec, f"steps[{i}].spec.")
        ctl = self.ctx.controller
        try:
            rec, _tasks = await ctl.submit_pipeline(self.user, pipeline)
        except SpecError as exc:
            raise self.spec_error(exc) from None
        except groups.NotFound as exc:
            raise not_found(exc) from None
        self.set_header("Location", f"/api/pipelines/{rec.id}")
        self.write_json(pipeline_out(ctl, rec), status=201)


class PipelineHandler(ApiHandler):
    openapi = {"get": {"summary": "Show one pipeline: each step's task (or array) and state.",
                       "response": PipelineOut}}

    def get(self, pipeline_id: str) -> None:
        self.write_json(pipeline_out(self.ctx.controller, visible_pipeline(self, pipeline_id)))


class PipelineCancelHandler(ApiHandler):
    openapi = {"post": {"summary": "Cancel every task of a pipeline that has not ended.",
                        "response": PipelineCancelOut}}

    async def post(self, pipeline_id: str) -> None:
        p = visible_pipeline(self, pipeline_id)
        ctl = self.ctx.controller
        before = ctl.pipeline_summary(p).get("status") if p.owner != self.user else None
        n = await ctl.cancel_pipeline(p.id)
        out = {**pipeline_out(ctl, p), "cancelled": n}
        if p.owner != self.user:  # an admin's cancel of someone else's pipeline
            record(self, "cancel", f"pipeline:{p.id}", before={"status": before, "owner": p.owner},
                   after={"status": out["status"], "owner": p.owner, "cancelled": n})
        self.write_json(out)


ROUTES: list[tuple[str, Any]] = [
    (r"/api/arrays", ArraysHandler),
    (r"/api/arrays/(\d+)", ArrayHandler),
    (r"/api/arrays/(\d+)/cancel", ArrayCancelHandler),
    (r"/api/pipelines", PipelinesHandler),
    (r"/api/pipelines/(\d+)", PipelineHandler),
    (r"/api/pipelines/(\d+)/cancel", PipelineCancelHandler),
]
