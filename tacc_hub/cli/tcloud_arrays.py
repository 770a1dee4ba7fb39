"""tcloud commands for many tasks at once (issue 20)."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Add this module's commands to ``cli``."""
