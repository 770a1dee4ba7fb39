"""Reaching a task's web ports: ``/tasks/ID/proxy/PORT/...`` (HTTP and WebSocket) and ``/api/tasks/ID/ports``.

Placeholder: being built (issue 19).
"""

from __future__ import annotations

from typing import Any

ROUTES: list[tuple[str, Any]] = []
