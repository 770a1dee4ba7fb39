"""tcloud commands for a running task's shell: exec, shell.

``tcloud exec ID [-t] -- CMD ARGS...`` runs CMD inside the running task (as its owner, in its working
directory, with its environment and GPUs), streams its stdout and stderr to ours, forwards our stdin
(a pipe, a file) and exits with its exit code. ``tcloud shell ID`` opens the account's login shell in
the task on a terminal: our terminal goes into raw mode (restored on exit), keystrokes are
forwarded, window size changes follow, and tcloud exits with the shell's status. Both speak the
``api/tasks/ID/exec`` WebSocket (``tacc_hub.client_ws``); exit 255 when the session itself failed.
Heavy modules are imported inside the commands.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from .tcloud import Ctx


def _run(obj: Ctx, task_id: int, argv: list[str], tty: bool, stdin: bool) -> None:
    import asyncio

    from tacc_hub.client_ws import SESSION_FAILED, ExecFailed, run_session

    client = obj.client
    try:
        code = asyncio.run(run_session(client.url, client.headers, task_id, argv, tty=tty,
                                       stdin=0 if stdin else None))
    except ExecFailed as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(SESSION_FAILED)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # our stdout was closed (| head): stop quietly, as a command killed by SIGPIPE
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    sys.exit(code)


def register(cli: click.Group) -> None:
    """Add this module's commands to tcloud."""

    @cli.command("exec", context_settings={"ignore_unknown_options": True})
    @click.argument("task_id", type=int)
    @click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
    @click.option("-t", "--tty", is_flag=True, help="Run the command on a terminal (stdout and stderr merge).")
    @click.option("-n", "--no-stdin", is_flag=True, help="Do not forward stdin (the command reads end of file).")
    @click.pass_obj
    def exec_cmd(obj: Ctx, task_id: int, argv: tuple[str, ...], tty: bool, no_stdin: bool) -> None:
        """Run a command inside a running task: tcloud exec ID -- CMD ARGS...

        It runs as the task's user, in its working directory, with its environment (TACC_* variables,
        CUDA_VISIBLE_DEVICES); exits with the command's exit code. No shell is involved: use
        `sh -c '...'` for one."""
        _run(obj, task_id, list(argv), tty, not no_stdin)

    @cli.command("shell")
    @click.argument("task_id", type=int)
    @click.pass_obj
    def shell_cmd(obj: Ctx, task_id: int) -> None:
        """Open an interactive shell inside a running task (the account's login shell).

        Exits with the shell's exit status; the session ends when the task ends."""
        _run(obj, task_id, [], True, True)
