"""Log endpoints: a chunk from an offset, and a live server-sent-events stream.

The stream sends ``event: log`` with ``id: <byte offset after the chunk>`` and
``data: {"offset": .., "data": ".."}``; a client that reconnects with
``Last-Event-ID`` (or ``?offset=``) resumes where it left off. When the task
has ended and its log is drained it sends ``event: end`` with the final status.

The log is ``<task dir>/output.log``, a file the task's account owns and can replace. It is read
through ``tacc_hub.executors.taskfiles`` (no link followed, regular files owned by the task's
account only). A log that does not exist yet reads as empty. A log the task replaced (a symbolic
or hard link to another file, a FIFO, a device, a file of another account) is never read: the
chunk endpoint answers 409 with the reason, and the stream sends ``event: error``
(``{"message"}``) and then ``event: end`` with ``error`` set, and closes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import tornado.iostream

from tacc_hub.executors import taskfiles
from tacc_hub.executors.identity import IdentityError
from tacc_hub.store import TaskRecord, TaskStatus

from .base import ApiError, ApiHandler
from .models import LogChunkOut

MAX_CHUNK = 1024 * 1024
MAX_OFFSET = 2**62  # byte offsets beyond any log; past the end of a log reads as nothing yet
LOG_NAME = "output.log"


class LogRefused(Exception):
    """The task's log is not read (see the module docstring); ``str()`` is the message for its reader."""


def task_uid(handler: ApiHandler, rec: TaskRecord) -> int:
    """The uid that must own ``rec``'s files (its owner's account; the service's own in service identity)."""
    try:
        return taskfiles.executor_uid(handler.ctx.controller.executor, rec.owner)
    except (IdentityError, taskfiles.TaskFileError) as exc:
        raise LogRefused(f"task {rec.id}'s files are not read: {exc}") from None


def read_log(task_dir: Path, task_id: int, uid: int, offset: int, limit: int) -> bytes:
    """Bytes of the task's ``output.log``; b"" while it does not exist; ``LogRefused`` if the task replaced it."""
    try:
        return taskfiles.read_chunk(task_dir, LOG_NAME, uid, offset, limit)
    except taskfiles.TaskFileError as exc:
        raise LogRefused(f"task {task_id}'s log is not read: {exc}") from None


def _cut_utf8(data: bytes) -> bytes:
    """Drop a trailing partial UTF-8 sequence (it is sent with the next chunk)."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:
            continue
        if b & 0x80 == 0:
            return data
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4
        return data if back >= need else data[:-back]
    return data


class LogsHandler(ApiHandler):
    openapi = {"get": {"summary": "Read the task's output from a byte offset.",
                       "params": {"offset": "byte offset (default 0)", "limit": "bytes, up to 1 MiB"},
                       "response": LogChunkOut}}

    def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        offset = self.int_arg("offset", 0, 0, MAX_OFFSET)
        limit = self.int_arg("limit", 65536, 1, MAX_CHUNK)
        status = self.ctx.controller.status_of(rec.id) or rec.status
        try:
            data = _cut_utf8(read_log(self.ctx.controller.executor.task_dir(rec.id), rec.id,
                                      task_uid(self, rec), offset, limit))
        except LogRefused as exc:
            raise ApiError(409, str(exc)) from None
        eof = TaskStatus(status).is_terminal() and len(data) < limit
        self.write_json(LogChunkOut(offset=offset, next_offset=offset + len(data),
                                    data=data.decode("utf-8", errors="replace"), eof=eof, status=str(status)))


class LogStreamHandler(ApiHandler):
    accepts_url_token = True  # EventSource cannot send an Authorization header
    openapi = {"get": {"summary": "Follow the task's output live (text/event-stream; resumable with Last-Event-ID).",
                       "params": {"offset": "byte offset to start from"}, "response": "text/event-stream"}}

    async def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        last = self.request.headers.get("Last-Event-ID")
        if last:
            last = last.strip()
            if not (last.isascii() and last.isdigit() and len(last) <= 19 and int(last) <= MAX_OFFSET):
                raise ApiError(400, f"Last-Event-ID must be a byte offset from 0 to {MAX_OFFSET}",
                               [{"field": "Last-Event-ID", "message": "not a byte offset"}])
            offset = int(last)
        else:
            offset = self.int_arg("offset", 0, 0, MAX_OFFSET)
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("X-Accel-Buffering", "no")
        ctl = self.ctx.controller
        tdir = ctl.executor.task_dir(rec.id)
        interval = self.ctx.log_poll_interval
        uid: int | None = None
        metrics = self.ctx.metrics
        if metrics is not None:
            metrics.stream_opened()  # tacc_log_streams_open, until the finally below
        try:
            self.write(": stream open\n\n")
            await self.flush()
            idle = 0.0
            while True:
                status = ctl.status_of(rec.id)
                if status is None:  # not live: ended (or never started and is terminal)
                    fresh = self.ctx.store.get(rec.id)
                    status = fresh.status if fresh else TaskStatus.LOST
                try:
                    uid = task_uid(self, rec) if uid is None else uid  # looked up once (NSS can be slow)
                    data = _cut_utf8(read_log(tdir, rec.id, uid, offset, MAX_CHUNK))
                except LogRefused as exc:
                    self.write(f"event: error\ndata: {json.dumps({'message': str(exc)})}\n\n")
                    end = {"status": str(status), "offset": offset, "error": str(exc)}
                    self.write(f"event: end\ndata: {json.dumps(end)}\n\n")
                    await self.flush()
                    break
                if data:
                    offset += len(data)
                    payload = json.dumps({"offset": offset - len(data), "data": data.decode("utf-8", "replace")})
                    self.write(f"id: {offset}\nevent: log\ndata: {payload}\n\n")
                    await self.flush()
                    idle = 0.0
                    continue
                if TaskStatus(status).is_terminal():
                    self.write(f"event: end\ndata: {json.dumps({'status': str(status), 'offset': offset})}\n\n")
                    await self.flush()
                    break
                idle += interval
                if idle >= 15.0:  # keep proxies from closing an idle stream
                    self.write(": keep-alive\n\n")
                    await self.flush()
                    idle = 0.0
                await asyncio.sleep(interval)
        except tornado.iostream.StreamClosedError:
            return
        finally:
            if metrics is not None:
                metrics.stream_closed()
        self.finish()
