"""From a server task as ``GET /api/tasks/ID`` shows it to JupyterHub progress events and messages.

Pure functions: ``task_event`` maps one view of the task to ``{"progress", "message"}``;
the spawner emits it whenever the message changes (queue position, reason, estimate, state).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

ENDED = frozenset({"succeeded", "failed", "cancelled", "lost"})
PERCENT = {"submitted": 10, "pending": 20, "starting": 40, "running": 60, "cancelling": 90, "listening": 90}


def when(ts: float | None, now: float | None = None) -> str:
    """``14:05 UTC (in 3 min)``; ``unknown`` for None."""
    if ts is None:
        return "unknown"
    now = time.time() if now is None else now
    clock = datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S UTC")
    delta = ts - now
    if delta <= 30:
        return f"{clock} (now)"
    if delta < 3600:
        return f"{clock} (in {round(delta / 60) or 1} min)"
    return f"{clock} (in {delta / 3600:.1f} h)"


def queue_text(task: dict[str, Any], now: float | None = None) -> str:
    q = task.get("queue") or {}
    if not q:
        return "queued"
    reason = str(q.get("reason") or "waiting")
    detail = f": {q['detail']}" if q.get("detail") else ""
    if reason == "OverQuota":  # no estimate to give: the quota must change first
        return (f"queued at position {q.get('position', '?')}, but "
                f"{q.get('detail') or 'can never start under the current quota'} (reason OverQuota)")
    return (f"queued at position {q.get('position', '?')} (reason {reason}{detail}); "
            f"estimated start {when(q.get('estimated_start'), now)}")


def where(task: dict[str, Any]) -> str:
    nodes = [str(n.get("node")) for n in ((task.get("placement") or {}).get("nodes") or []) if isinstance(n, dict)]
    return f" on {', '.join(nodes)}" if nodes else ""


def task_event(task: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    status = str(task.get("status"))
    tid = task.get("id")
    if status == "pending":
        msg = f"Task {tid} {queue_text(task, now)}"
    elif status == "starting":
        msg = f"Task {tid} is starting{where(task)}"
    elif status == "running":
        msg = f"Task {tid} is running{where(task)}; waiting for the server to start"
    elif status == "cancelling":
        msg = f"Task {tid} is being cancelled"
    elif status in ENDED:
        reason = f": {task['reason']}" if task.get("reason") else ""
        msg = f"Task {tid} {status}{reason}"
    else:
        msg = f"Task {tid} is {status}"
    return {"progress": PERCENT.get(status, 95 if status in ENDED else 50), "message": msg}


def timeout_message(task: dict[str, Any] | None, timeout: float, log_tail: str = "", now: float | None = None) -> str:
    """Why a start timed out: still queued (reason, estimate) or starting, and that the task was cancelled."""
    if task is None:
        return f"The server did not start within {timeout:g} s (the tacc service did not answer); it was cancelled."
    tid, status = task.get("id"), task.get("status")
    if status == "pending":
        what = f"task {tid} is still {queue_text(task, now)}"
    elif status in ("starting", "running"):
        what = (f"task {tid} was {'starting' if status == 'starting' else 'running'}{where(task)} but the server "
                "had not started yet")
        if log_tail:
            what += f" (last output: {log_tail.strip()[-300:]!r})"
    else:
        what = f"task {tid} is {status}"
    return f"The server did not start within {timeout:g} s: {what}. The task was cancelled."
