"""Task endpoints: submit, list, show, cancel, outputs.

A submitted spec that carries ``array`` becomes an array of tasks (``Controller.submit_array``): the
answer is its first element's task plus ``array`` (the array, as ``GET /api/arrays/ID`` shows it) and
``task_ids``, with ``Location: /api/arrays/ID``. A ``depends_on`` naming a task or array that is not
the caller's is answered 404, as one that does not exist (``groups.NotFound``).
"""

from __future__ import annotations

import asyncio
import io
import logging
import posixpath
import tarfile
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from tacc_hub.executors import taskfiles
from tacc_hub.executors.identity import IdentityError
from tacc_hub.schema import SpecError
from tacc_hub.store import TaskRecord, TaskStatus

from . import groups
from .audit import record
from .auth import USER_RE
from .base import ApiError, ApiHandler
from .controller import Conflict, Controller
from .heavyjobs import YAML_TYPES, Refused, parse_spec, parse_spec_job
from .models import DryRunOut, SubmittedOut, TaskListOut, TaskOut

log = logging.getLogger("tacc_hub.api")

INLINE_JSON_BYTES = 64 * 1024  # JSON specs up to this size are parsed on the event loop (tens of microseconds)


def task_out(ctl: Controller, rec: TaskRecord, *, full: bool = False, explain: bool = True) -> dict[str, Any]:
    """A task as the API shows it; ``explain=False`` skips the queue explanation (the submit hot path)."""
    info = ctl.queue_info(rec) if explain else None
    return {
        "id": rec.id, "owner": rec.owner, "name": rec.name, "status": str(rec.status), "digest": rec.digest,
        "reason": ctl.reason_for(rec) if explain else rec.reason, "exit_code": rec.exit_code,
        "submitted_at": rec.submitted_at, "gpus_requested": _gpus_requested(rec.spec),
        "started_at": rec.started_at, "finished_at": rec.finished_at, "placement": rec.placement,
        "cancel_requested": rec.cancel_requested,
        "array_id": rec.array_id, "array_index": rec.array_index, "pipeline_id": rec.pipeline_id,
        "queue": None if info is None else {"reason": info.reason, "position": info.position,
                                            "estimated_start": info.estimated_start, "detail": info.detail},
        **ctl.time_info(rec),
        **({"spec": rec.spec, "plan": rec.plan} if full else {}),
    }


def _gpus_requested(spec: dict[str, Any] | None) -> int:
    """GPUs the task asked for (nodes x gpus_per_node): what `tcloud ps` shows before it has a placement."""
    r = (spec or {}).get("resources") or {}
    return int(r.get("nodes", 1)) * int(r.get("gpus_per_node", 0))


class TasksHandler(ApiHandler):
    openapi = {
        "get": {
            "summary": "List tasks, newest first (yours; everyone's for an admin with all=1).",
            "params": {"state": "filter by status (repeatable)", "limit": "page size, 1..500 (default 50)",
                       "before": "only tasks with a smaller id (pagination)", "all": "admin: every user's tasks",
                       "owner": "admin: one user's tasks",
                       "array": "only the elements of this array (yours; another's: 404)"},
            "response": TaskListOut,
        },
        "post": {
            "summary": "Submit a task (JSON or YAML TaskSpec; format=tuxiv for a tuxiv.conf body). A spec with "
                       "`array` is an array of tasks, stored in one transaction: the answer is its first element "
                       "with `array` and `task_ids` (Location: /api/arrays/ID).",
            "params": {"dry_run": "1: compile only, store nothing (an array: its first element)",
                       "format": "tacc (default) or tuxiv"},
            "request": "TaskSpec",
            "response": SubmittedOut,
            "status": 201,
            "errors": {"404": "a code snapshot you did not upload, or a depends_on task or array that is not yours"},
        },
    }

    async def get(self) -> None:
        states = parse_states(self)
        limit = self.int_arg("limit", 50, 1, 500)
        before = self.int_arg("before", 0, 0, 2**62) or None
        owner = list_owner(self)
        ctl = self.ctx.controller
        if self.get_query_argument("array", None) is not None:
            from .arrays import elements as array_elements

            arr = visible_array(self, self.int_arg("array", 0, 0, 2**62))
            elements = sorted(await array_elements(self, arr, states), key=lambda r: r.id, reverse=True)
            total = len(elements)
            if before is not None:
                elements = [r for r in elements if r.id < before]
            recs = elements[:limit]
        else:
            recs, total = self.ctx.store.list_tasks(owner, states or None, limit, before)
        tasks = [task_out(ctl, r) for r in recs]
        next_before = recs[-1].id if len(recs) == limit and recs else None
        self.write_json({"tasks": tasks, "total": total, "next_before": next_before})

    async def _spec(self) -> Any:
        """The body as a TaskSpec; large or YAML bodies are parsed off the event loop (see :mod:`.offload`)."""
        ctype = self.request.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        fmt = self.get_query_argument("format", "tacc")
        if fmt not in ("tacc", "tuxiv"):
            raise ApiError(400, "format must be tacc or tuxiv", [{"field": "format", "message": "tacc or tuxiv"}])
        if fmt == "tacc" and ctype not in (*YAML_TYPES, "application/json", ""):
            raise ApiError(415, f"unsupported Content-Type {ctype[:64]!r}; send application/json or application/yaml",
                           [{"field": "Content-Type", "message": "application/json or application/yaml"}])
        body = self.body
        try:
            if len(body) <= INLINE_JSON_BYTES and fmt == "tacc" and ctype not in YAML_TYPES:
                return parse_spec(body, fmt, ctype)
        except SpecError as exc:
            raise self.spec_error(exc) from None
        out = await self.offload(parse_spec_job, body, fmt, ctype)
        if isinstance(out, Refused):
            raise self.spec_error(SpecError(list(out.errors))) from None
        return out

    async def post(self) -> None:
        spec = await self._spec()
        check_not_element(spec)
        check_account(self, spec)
        check_identity(self)
        dry_run = self.get_query_argument("dry_run", "0") in ("1", "true")
        if not dry_run:  # a dry run compiles without the archive (it stores and runs nothing)
            check_code(self, spec)
        ctl = self.ctx.controller
        try:
            if dry_run:
                if spec.array is not None:  # an array compiles as its elements do: show the first one's plan
                    from tacc_hub.schema.arrays import expand

                    spec = expand(spec)[0]
                plan = ctl.compile(spec, dry_run=True, owner=self.user)
                self.write_json(DryRunOut(digest=plan.task_digest, spec=spec.model_dump(mode="json", by_alias=True),
                                          plan=plan.model_dump(mode="json")))
                return
            if spec.array is not None:
                arr, recs = await ctl.submit_array(self.user, spec)
            else:
                rec = await ctl.submit(self.user, spec)
        except SpecError as exc:
            raise self.spec_error(exc) from None
        except groups.NotFound as exc:
            raise not_found(exc) from None
        if spec.array is not None:
            from .arrays import array_out

            self.set_header("Location", f"/api/arrays/{arr.id}")
            self.write_json({**task_out(ctl, recs[0], explain=False), "array": array_out(ctl, arr),
                             "task_ids": [r.id for r in recs]}, status=201)
            return
        self.set_header("Location", f"/api/tasks/{rec.id}")
        self.write_json(task_out(ctl, rec, explain=False), status=201)


def parse_states(handler: ApiHandler) -> list[TaskStatus]:
    """The ``state`` query parameters (repeatable, comma-separated) as statuses; 400 naming ``state``."""
    states: list[TaskStatus] = []
    for raw in handler.get_query_arguments("state"):
        for part in raw.split(","):
            try:
                states.append(TaskStatus(part.strip().lower()))
            except ValueError:
                allowed = ", ".join(s.value for s in TaskStatus)
                raise ApiError(400, f"unknown state {part[:32]!r} (one of {allowed})",
                               [{"field": "state", "message": "unknown state"}]) from None
    return states


def list_owner(handler: ApiHandler) -> str | None:
    """Whose items a list shows: the caller's; an admin's ``owner=NAME`` or ``all=1`` (None: everyone's)."""
    owner: str | None = handler.user
    if handler.admin:
        wanted = handler.get_query_argument("owner", None)
        if wanted is not None and not USER_RE.fullmatch(wanted):
            raise ApiError(400, "query parameter owner must be a user name", [
                {"field": "owner", "message": "letters, digits, '.', '_', '@', '-' (at most 64)"}])
        owner = wanted or (None if handler.get_query_argument("all", "0") in ("1", "true") else handler.user)
    return owner


def check_code(handler: ApiHandler, spec: Any, prefix: str = "") -> None:
    """A snapshot must be one the caller uploaded (someone else's, or none: 404, as for another's task)."""
    code = spec.code
    if code.kind == "snapshot" and not handler.ctx.store.owns_code(code.digest, handler.user):
        message = (f"no code snapshot {code.digest} uploaded by you: upload it first "
                   f"(PUT /api/code/{code.digest}; tcloud submit does this)")
        raise ApiError(404, message, [{"field": f"{prefix}code.digest", "message": message}])


def check_account(handler: ApiHandler, spec: Any, prefix: str = "") -> None:
    """``account`` (sbatch --account) must name the caller's own group, which the pure loader cannot know."""
    if spec.account is None:
        return
    group = handler.ctx.store.group_of(handler.user)
    if spec.account != group:
        message = (f"account {spec.account!r} is not your group: tasks are accounted to your group "
                   f"{group!r}; leave account out, or write account={group}")
        raise ApiError(403, message, [{"field": f"{prefix}account", "message": message}])


def check_not_element(spec: Any, prefix: str = "") -> None:
    """``array_element`` is the service's own mark on an array's elements: a request may not write it."""
    if spec.array_element is not None:
        message = "array_element is set by the service on an array's elements; give array instead"
        raise ApiError(422, message, [{"field": f"{prefix}array_element", "message": message}])


def check_identity(handler: ApiHandler) -> None:
    """The caller must have a Unix account here to run tasks as (``TaccHub.task_identity = 'owner'``)."""
    try:
        handler.ctx.controller.executor.identity.account(handler.user)
    except IdentityError as exc:
        raise ApiError(403, str(exc), [{"field": "owner", "message": str(exc)}]) from None


def not_found(exc: Exception) -> ApiError:
    """A ``groups.NotFound`` (a dependency or input naming a task or array that is not the caller's) as 404."""
    message = str(exc)[:2000] or "no such task or array"
    field = getattr(exc, "field", None)
    return ApiError(404, message, [{"field": str(field), "message": message}] if field else [])


def visible_array(handler: ApiHandler, array_id: int | str) -> Any:
    """The array ``array_id`` if the caller may see it (owner or admin); 404 otherwise, as if there were none."""
    raw = str(array_id)
    aid = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else 0
    if not 0 < aid <= 2**62:
        raise ApiError(404, f"no array {raw[:32]!r}")
    arr = handler.ctx.store.get_array(aid)
    if arr is None or (arr.owner != handler.user and not handler.admin):
        raise ApiError(404, f"no array {aid}")
    return arr


class TaskHandler(ApiHandler):
    openapi = {"get": {"summary": "Show one task with its spec and plan.", "response": TaskOut}}

    def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        self.write_json(task_out(self.ctx.controller, rec, full=True))


class CancelHandler(ApiHandler):
    openapi = {"post": {"summary": "Cancel a task (SIGTERM, then SIGKILL after the grace period).",
                        "response": TaskOut}}

    async def post(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        before = rec.status.value
        try:
            done = await self.ctx.controller.cancel(rec)
        except Conflict as exc:
            raise ApiError(409, str(exc)) from None
        if rec.owner != self.user:  # an admin's cancel of someone else's task
            record(self, "cancel", f"task:{rec.id}", task_id=rec.id, before={"status": before, "owner": rec.owner},
                   after={"status": done.status.value, "owner": rec.owner})
        rec = done
        self.write_json(task_out(self.ctx.controller, rec))


class OutputsHandler(ApiHandler):
    openapi = {"get": {"summary": "Download the task's outputs and its log as a tar.gz archive.",
                       "response": "application/gzip"}}

    async def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        ex = self.ctx.controller.executor
        try:
            uid = taskfiles.executor_uid(ex, rec.owner)
        except (IdentityError, taskfiles.TaskFileError) as exc:
            raise ApiError(409, f"task {rec.id}'s files are not read: {exc}") from None
        outputs: list[str] = list((rec.spec or {}).get("outputs", []))
        # Outputs can be large: build the archive in a temporary file (in a thread), stream it out.
        with tempfile.TemporaryFile() as fh:
            skipped = await asyncio.to_thread(_archive, fh, ex.task_dir(rec.id), uid, outputs)
            if skipped:
                log.warning("task %d outputs: %d entries left out of the archive (first: %s)",
                            rec.id, len(skipped), skipped[0])
            fh.seek(0)
            self.set_header("Content-Type", "application/gzip")
            self.set_header("Content-Disposition", f'attachment; filename="task-{rec.id}-outputs.tar.gz"')
            while chunk := fh.read(1024 * 1024):
                self.write(chunk)
                await self.flush()
        self.finish()


SKIPPED_NAME = "outputs-skipped.txt"


def _archive(fh: IO[bytes], task_dir: Path, uid: int, outputs: list[str]) -> list[str]:
    """output.log and each output (under ``work/``) of ``task_dir`` as a tar.gz in ``fh``; returns what was left out.

    Read through ``taskfiles`` only: regular files and directories owned by ``uid``, no link
    followed (a link, FIFO, device, or file of another account is left out and listed, with why,
    in ``outputs-skipped.txt`` at the top of the archive; that file is there only when something was).
    """
    skipped: list[str] = []
    with tarfile.open(fileobj=fh, mode="w:gz") as tar:
        skipped += taskfiles.add_task_tree(tar, task_dir, "output.log", "output.log", uid)
        for rel in outputs:
            norm = posixpath.normpath(rel)
            skipped += taskfiles.add_task_tree(tar, task_dir, posixpath.join("work", norm),
                                               posixpath.normpath(posixpath.join("outputs", norm)), uid)
        if skipped:
            text = ("Left out of this archive (the service reads only regular files and directories owned by "
                    "the task's account, and follows no link):\n" + "".join(f"{line}\n" for line in skipped))
            data = text.encode("utf-8", "replace")
            info = tarfile.TarInfo(SKIPPED_NAME)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return skipped
