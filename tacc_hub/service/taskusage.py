"""``/api/tasks/ID/usage``: a task's sampled GPU utilization.

Placeholder: being built (issue 19).
"""

from __future__ import annotations

from typing import Any

ROUTES: list[tuple[str, Any]] = []
