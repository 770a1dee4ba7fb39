"""An ipywidgets monitor of one task: state, queue position and estimated start, log tail, cancel.

Updated by an asyncio task on the kernel's own event loop: widget values are only ever set
on that loop's thread (ipykernel 7 drops comm messages sent from other threads); the blocking
HTTP calls run in the loop's thread pool and are awaited. Without a running loop (plain
IPython) ``start`` returns False and the caller prints instead.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable
from typing import Any

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "lost"})
TAIL_CHARS = 4000


def describe_queue(queue: dict[str, Any] | None, now: float | None = None) -> str:
    """``position 2, starts in 3m (reason)`` for a waiting task; "" for others."""
    if not queue:
        return ""
    parts = []
    if queue.get("position") is not None:
        parts.append(f"position {queue['position']}")
    est = queue.get("estimated_start")
    if est is None:
        parts.append("start time unknown")
    else:
        d = est - (now if now is not None else time.time())
        if d < 1:
            parts.append("starts now")
        else:
            for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
                if d >= size:
                    parts.append(f"starts in {int(d // size)}{unit}")
                    break
    if queue.get("reason"):
        parts.append(f"({queue['reason']})")
    return ", ".join(parts)


class TaskMonitor:
    """The widget (``.widget``) and the coroutine that keeps it current (``update_once`` / ``run``)."""

    def __init__(self, client_factory: Callable[[], Any], task: dict[str, Any], *, interval: float = 1.0) -> None:
        import ipywidgets as w

        self._client_factory = client_factory
        self._client = client_factory()
        self.task_id = int(task["id"])
        self.name = str(task.get("name", ""))
        self.interval = interval
        self.offset = 0
        self.log = ""
        self.status = str(task.get("status", ""))
        self.done = False
        self._task: asyncio.Task[None] | None = None
        self.title = w.HTML()
        self.queue = w.Label()
        self.log_view = w.Textarea(layout=w.Layout(width="100%", height="12em"), disabled=True)
        self.cancel_button = w.Button(description="Cancel", button_style="danger", icon="stop")
        self.cancel_button.on_click(self._on_cancel)
        self.widget = w.VBox([w.HBox([self.title, self.cancel_button]), self.queue, self.log_view])
        self._show(task)

    def _show(self, task: dict[str, Any]) -> None:
        self.status = str(task.get("status", self.status))
        reason = task.get("reason") or ""
        self.title.value = (f"<b>task {self.task_id}</b> {html.escape(self.name)}: <code>{html.escape(self.status)}"
                            f"</code>{' ' + html.escape(str(reason)) if reason else ''}")
        self.queue.value = describe_queue(task.get("queue")) if self.status == "pending" else ""
        self.cancel_button.disabled = self.status in TERMINAL or self.status == "cancelling"

    def _on_cancel(self, _button: Any) -> None:
        self.cancel_button.disabled = True
        try:
            with self._client_factory() as client:
                self._show(client.cancel(self.task_id))
        except Exception as exc:  # a failed cancel is shown, not raised into the comm handler
            self.queue.value = f"cancel failed: {exc}"
            self.cancel_button.disabled = False

    async def update_once(self) -> bool:
        """Fetch the task and new log output, update the widgets; False once the task has ended and is drained."""
        loop = asyncio.get_running_loop()
        task = await loop.run_in_executor(None, self._client.show, self.task_id)
        chunk = await loop.run_in_executor(None, lambda: self._client.logs(self.task_id, offset=self.offset))
        if chunk.get("data"):
            self.log = (self.log + chunk["data"])[-TAIL_CHARS:]
            self.log_view.value = self.log
        self.offset = int(chunk.get("next_offset", self.offset))
        self._show(task)
        self.done = self.status in TERMINAL and bool(chunk.get("eof", True))
        return not self.done

    async def run(self) -> None:
        try:
            while await self.update_once():
                await asyncio.sleep(self.interval)
        except Exception as exc:  # the monitor stops; the task goes on
            self.queue.value = f"monitor stopped: {exc}"
        finally:
            self._client.close()

    def start(self) -> bool:
        """Schedule ``run`` on the running loop; False when there is none (plain IPython)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._task = loop.create_task(self.run())
        _RUNNING.add(self._task)
        self._task.add_done_callback(_RUNNING.discard)
        return True

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


_RUNNING: set[asyncio.Task[None]] = set()  # keeps monitor tasks alive until they end
