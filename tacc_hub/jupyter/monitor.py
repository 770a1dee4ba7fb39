"""An ipywidgets monitor of one task: state, queue position and estimated start, log tail, cancel.

The state line is ``taskline.status_line`` (as the magic prints it); the log box shows the log's
last lines (``TAIL_LINES``, all it holds, so never the head of a long log); Cancel goes once the
task has ended.

Updated by an asyncio task on the kernel's own event loop: widget values are only ever set
on that loop's thread (ipykernel 7 drops comm messages sent from other threads); the blocking
HTTP calls run in the loop's thread pool and are awaited. Without a running loop (plain
IPython) ``start`` returns False and the caller prints instead.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import Any

from .taskline import status_line

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "lost"})
TAIL_CHARS = 64 * 1024  # kept in ``log``
TAIL_LINES = 12  # shown: as many as the box holds, so what it shows is the log's end


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.rstrip("\n").split("\n")[-lines:]) if text else ""


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
        self.note = w.Label()  # a failed cancel, a stopped monitor
        self.log_view = w.Textarea(rows=TAIL_LINES, layout=w.Layout(width="100%"), disabled=True)
        self.cancel_button = w.Button(description="Cancel", button_style="danger", icon="stop")
        self.cancel_button.on_click(self._on_cancel)
        self.widget = w.VBox([w.HBox([self.title, self.cancel_button]), self.note, self.log_view])
        self.task: dict[str, Any] = {}
        self._show(task)

    def _show(self, task: dict[str, Any]) -> None:
        self.task = task
        self.status = str(task.get("status", self.status))
        self.title.value = (f"<b>task {self.task_id}</b> {html.escape(self.name)}: "
                            f"{html.escape(status_line({**task, 'status': self.status}))}")
        self.cancel_button.disabled = self.status in TERMINAL or self.status == "cancelling"
        if self.status in TERMINAL:
            self.cancel_button.layout.display = "none"  # nothing left to cancel

    def _on_cancel(self, _button: Any) -> None:
        self.cancel_button.disabled = True
        try:
            with self._client_factory() as client:
                self._show(client.cancel(self.task_id))
        except Exception as exc:  # a failed cancel is shown, not raised into the comm handler
            self.note.value = f"cancel failed: {exc}"
            self.cancel_button.disabled = False

    async def update_once(self) -> bool:
        """Fetch the task and new log output, update the widgets; False once the task has ended and is drained."""
        loop = asyncio.get_running_loop()
        task = await loop.run_in_executor(None, self._client.show, self.task_id)
        chunk = await loop.run_in_executor(None, lambda: self._client.logs(self.task_id, offset=self.offset))
        if chunk.get("data"):
            self.log = (self.log + chunk["data"])[-TAIL_CHARS:]
            self.log_view.value = tail(self.log)
        self.offset = int(chunk.get("next_offset", self.offset))
        self._show(task)
        self.done = self.status in TERMINAL and bool(chunk.get("eof", True))
        return not self.done

    async def run(self) -> None:
        try:
            while await self.update_once():
                await asyncio.sleep(self.interval)
        except Exception as exc:  # the monitor stops; the task goes on
            self.note.value = f"monitor stopped: {exc}"
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
