"""Token endpoints: admins make, list and revoke API tokens; every user lists and revokes their own."""

from __future__ import annotations

from typing import Any

TOKEN_ROUTES: list[tuple[str, Any]] = []
