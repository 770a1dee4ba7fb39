"""A task's state as one line of text, for the ``%tacc`` monitor and the magic's printouts alike.

The estimated start is always the service's ``queue.estimated_start`` (an absolute time, the same
through every route of the service), written relative to ``now`` by one rule, which the Lab panel
follows too (``startText`` in labextension/src/queue.ts): under a second is ``starts now``, else the
largest whole unit of d, h, m, s (``starts in 4m``); ``start time unknown`` where the service has none.
A task that can never start under the current quota (reason ``OverQuota``) says so, with no estimate.
"""

from __future__ import annotations

import time
from typing import Any

OVER_QUOTA = "OverQuota"
NEVER = "can never start under the current quota"


def eta(estimated_start: float | None, now: float | None = None) -> str:
    """``starts in 4m``, ``starts now`` or ``start time unknown``."""
    if estimated_start is None:
        return "start time unknown"
    d = float(estimated_start) - (time.time() if now is None else now)
    if d < 1:
        return "starts now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if d >= size:
            return f"starts in {int(d // size)}{unit}"
    return "starts now"


def queue_line(queue: dict[str, Any] | None, now: float | None = None) -> str:
    """``position 2, starts in 3m (Resources: needs 2 GPUs; 1 free)`` for a waiting task; "" without a queue."""
    if not queue:
        return ""
    if queue.get("reason") == OVER_QUOTA:
        why = str(queue.get("detail") or "").strip()
        if why.lower().startswith(NEVER):
            why = why[len(NEVER):].lstrip(" :;,.-")
        return f"{NEVER}{': ' + why.rstrip('.') if why else ''}"
    parts = []
    if queue.get("position") is not None:
        parts.append(f"position {queue['position']}")
    parts.append(eta(queue.get("estimated_start"), now))
    text = ", ".join(parts)
    why = str(queue.get("reason") or "")
    if queue.get("detail"):
        why = f"{why}: {queue['detail']}" if why else str(queue["detail"])
    return f"{text} ({why})" if why else text


def detail(task: dict[str, Any], now: float | None = None) -> str:
    """What a task's status does not say already: its queue while pending, else its reason (if it adds anything)."""
    status = str(task.get("status", ""))
    if status == "pending" and task.get("queue"):
        return queue_line(task["queue"], now)
    reason = str(task.get("reason") or "").strip()
    return "" if reason.lower() in ("", status.lower()) else reason


def status_line(task: dict[str, Any], now: float | None = None) -> str:
    """``pending: position 1, starts in 4m (Quota)``, ``failed: exit code 1``, ``cancelled before it started``."""
    status = str(task.get("status", ""))
    more = detail(task, now)
    if more.lower().startswith(status.lower()):  # "cancelled before it started": says the status already
        return more
    return f"{status}: {more}" if more else status
