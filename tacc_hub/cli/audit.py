"""tacc-hub audit: the audit trail, read from the store (as ``tacc-hub token list``), newest first.

A table for people (``before -> after`` shown as the fields that changed) or, with ``--json``, the same
object as ``GET /api/admin/audit``: ``{"events": [...], "next": ID or null}``. What the rows hold was
written from users' requests (names, notes, argv): every cell is printed with its control and format
characters escaped (``\\x1b``, ``\\u202e``), so that no row can drive the reader's terminal.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import sys
import time
import unicodedata
from typing import Any, NoReturn

import click

WIDE = 80  # longest CHANGE cell of the table; --json has it all


def cli_actor() -> str:
    """The actor of an admin command run from the shell: ``cli:<unix user>`` (of the effective uid)."""
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        name = str(os.geteuid())
    return f"cli:{name}"[:64]


def printable(text: str, width: int | None = None) -> str:
    """``text`` for a terminal: control and format characters (and line separators) as escapes; cut to ``width``."""
    shown = "".join(ascii(ch)[1:-1] if unicodedata.category(ch)[0] == "C" or ch in "\u2028\u2029" else ch
                    for ch in text)
    return shown if width is None or len(shown) <= width else shown[:width - 3] + "..."


def _value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(a, str) for a in v):
        return shlex.join(v)  # an argv as a shell would show it
    return json.dumps(v, ensure_ascii=False, sort_keys=True)


def change(before: Any, after: Any) -> str:
    """``before -> after`` compactly: for two dicts the keys that changed (``max_gpus 4->8``), else both whole."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
        if not keys:
            return "(unchanged)"
        return ", ".join(f"{k} {_value(before.get(k))}->{_value(after.get(k))}" for k in keys)
    if before is None and isinstance(after, dict):
        return "+ " + " ".join(f"{k}={_value(v)}" for k, v in sorted(after.items()))
    if after is None and isinstance(before, dict):
        return "- " + " ".join(f"{k}={_value(v)}" for k, v in sorted(before.items()))
    if before is None and after is None:
        return ""
    return f"{_value(before)} -> {_value(after)}"


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {printable(message)}", err=True)
    sys.exit(1)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


@click.command("audit")
@click.option("--actor", help="Only this actor's events (a user, or cli:<unix user>).")
@click.option("--action", help="Only this action (quota_set, quota_delete, group_set, group_clear, cancel, "
                               "token_create, token_revoke, extend, exec, shell, proxy).")
@click.option("--target", help="Only this target: task:12, array:40, user:alice, quota:group/nlp, token:7, ...")
@click.option("--task", "task_id", type=click.IntRange(1, 2**62), help="Only events of this task id.")
@click.option("--since", help="Only at or after: 2026-12-01, 2026-12-01T10:00 (UTC), epoch seconds, or a time "
                              "ago: 7d, 24h, 30m.")
@click.option("--until", help="Only before (as --since).")
@click.option("--limit", type=click.IntRange(1, 9999), default=50, show_default=True, help="Most events shown.")
@click.option("--before", "before_id", type=click.IntRange(1, 2**62), help="Only events older than this id "
                                                                           "(the next page).")
@click.option("--json", "as_json", is_flag=True, help="The events as JSON (as GET /api/admin/audit answers).")
@click.option("--config", help="Config file (default ./tacc_hub_config.py if present).")
@click.option("--state-dir", help="State directory (default $TACC_STATE_DIR or ./.tacc).")
@click.option("--db-url", help="Store URL (default $TACC_DB_URL or SQLite in the state directory).")
def audit(actor: str | None, action: str | None, target: str | None, task_id: int | None, since: str | None,
          until: str | None, limit: int, before_id: int | None, as_json: bool, config: str | None,
          state_dir: str | None, db_url: str | None) -> None:
    """The audit trail, newest first: who changed quotas and groups, cancelled others' work, made or revoked tokens,
    extended tasks, opened exec and shell sessions; with the object before and after."""
    from tacc_hub.service.audit import check_action, check_text, parse_when
    from tacc_hub.store.models import AUDIT_TARGET_LEN, NAME_LEN

    from .admin import _app

    now = time.time()
    try:  # every option before the store is opened
        actor = None if actor is None else check_text(actor, "--actor", NAME_LEN)
        action = None if action is None else check_action(action, "--action")
        target = None if target is None else check_text(target, "--target", AUDIT_TARGET_LEN)
        t0 = None if since is None else parse_when(since, "--since", now=now)
        t1 = None if until is None else parse_when(until, "--until", now=now)
    except ValueError as exc:
        _fail(str(exc))
    store = _app(config, state_dir, db_url).open_store()
    try:
        events = store.audit(task_id=task_id, actor=actor, action=action, target=target, since=t0, until=t1,
                             before_id=before_id, limit=limit + 1)
    finally:
        store.close()
    more = len(events) > limit
    events = events[:limit]
    nxt = events[-1].id if more else None
    if as_json:
        click.echo(json.dumps({"events": [e.to_json() for e in events], "next": nxt}, ensure_ascii=True))
        return
    rows = [("ID", "WHEN (UTC)", "ACTOR", "ACTION", "TARGET", "CHANGE", "REQUEST")]
    for e in events:
        what = change(e.before, e.after)
        if not what and e.detail:
            what = " ".join(f"{k}={_value(v)}" for k, v in sorted(e.detail.items()))
        rows.append((str(e.id), _when(e.at), printable(e.actor, 32), printable(e.action),
                     printable(e.target or "-", 40), printable(what, WIDE), printable(e.request_id or "-")))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    if nxt is not None:
        click.echo(f"(more: --before {nxt})")
