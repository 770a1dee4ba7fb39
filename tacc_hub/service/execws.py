"""``/api/tasks/ID/exec``: a command or an interactive shell inside a running task, over a WebSocket.

Placeholder: being built (issue 19).
"""

from __future__ import annotations

from typing import Any

ROUTES: list[tuple[str, Any]] = []
