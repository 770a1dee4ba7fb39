"""Task lifecycle events: what the controller tells listeners (metrics, notifications) as tasks move.

Invariants: :meth:`Events.emit` runs every listener synchronously on the event loop, so a listener
must only record or enqueue (never block, never do I/O inline); a listener that raises is logged
and the others still run; the controller's work never depends on a listener. Events are emitted
after the store accepted the move they describe (a guarded transition that did not happen emits
nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("tacc_hub.events")

EventKind = Literal["submitted", "started", "succeeded", "failed", "cancelled", "lost", "timeout",
                    "preempted", "requeued", "near_limit"]
EVENT_KINDS: tuple[str, ...] = ("submitted", "started", "succeeded", "failed", "cancelled", "lost", "timeout",
                                "preempted", "requeued", "near_limit")
"""``timeout``: failed at its time limit; ``requeued``: back in the queue after its node failed or to restart;
``near_limit``: its time limit is near (the SIGUSR1 warning time, ``qos.warn_before``)."""


@dataclass(frozen=True, slots=True)
class TaskEvent:
    kind: EventKind
    task_id: int
    owner: str
    at: float
    reason: str | None = None
    exit_code: int | None = None
    gpus: int = 0  # GPUs the run held (0 when it did not run)


Listener = Callable[[TaskEvent], None]


class Events:
    """Listeners of task events; ``emit`` calls each in turn (see the module's invariants)."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def emit(self, event: TaskEvent) -> None:
        for fn in self._listeners:
            try:
                fn(event)
            except Exception:
                log.exception("a listener of task events failed on %s of task %s", event.kind, event.task_id)
