"""A running task's time (``/api/tasks/ID/extend``) and its runs (``/api/tasks/ID/attempts``).

Placeholder: being built (issue 19).
"""

from __future__ import annotations

from typing import Any

ROUTES: list[tuple[str, Any]] = []
