"""Array and pipeline endpoints (issue 20): list, show, cancel a whole array or pipeline."""

from __future__ import annotations

from typing import Any

ROUTES: list[tuple[str, Any]] = []
