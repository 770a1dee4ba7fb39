"""tcloud commands for a running task's shell: exec, shell.

Placeholder: being built (issue 19). Heavy modules are imported inside the commands.
"""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Add this module's commands to tcloud."""
