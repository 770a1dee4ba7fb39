"""tacc-hub usage: GPU-hours and tasks per UTC day and user (or group) for a period, as a table or CSV.

Reads the store directly (as ``tacc-hub token list`` does), with the accounting the quotas and the
admin page use (:mod:`tacc_hub.service.stats`): a run counts on each day it overlapped, a running
task up to now, groups are today's memberships. ``--csv`` writes RFC 4180 CSV (header
``day,user,group,gpu_hours,tasks``, or ``day,group,gpu_hours,tasks`` with ``--by group``) to stdout,
for a spreadsheet or an accounting system; without it, an aligned table with a total line.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, date, datetime, timedelta

import click

MAX_DAYS = 3660


def _day(value: str, option: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value[:40]!r} is not a date like 2026-11-01", param_hint=option) from None


@click.command("usage")
@click.option("--since", required=True, help="First UTC day, YYYY-MM-DD.")
@click.option("--until", help="Last UTC day, YYYY-MM-DD, included (default: today; today counts up to now).")
@click.option("--by", type=click.Choice(["user", "group"]), default="user", show_default=True,
              help="One row per day and user (with the user's group) or per day and group.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout instead of a table.")
@click.option("--config", help="Config file (default ./tacc_hub_config.py if present).")
@click.option("--state-dir", help="State directory (default $TACC_STATE_DIR or ./.tacc).")
@click.option("--db-url", help="Store URL (default $TACC_DB_URL or SQLite in the state directory).")
def usage(since: str, until: str | None, by: str, as_csv: bool, config: str | None, state_dir: str | None,
          db_url: str | None) -> None:
    """GPU-hours and tasks per UTC day and user (or group), from --since to --until."""
    from tacc_hub.cli.admin import _app
    from tacc_hub.service.stats import usage_rows
    from tacc_hub.service.usage import rows_csv

    first = _day(since, "--since")
    last = _day(until, "--until") if until else datetime.now(UTC).date()
    if last < first:
        raise click.BadParameter("is before --since", param_hint="--until")
    if (last - first).days >= MAX_DAYS:
        raise click.BadParameter(f"at most {MAX_DAYS} days at once", param_hint="--since")
    starts = [datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()
              for d in (first + timedelta(days=i) for i in range((last - first).days + 1))]
    now = min(time.time(), starts[-1] + 86400.0)
    store = _app(config, state_dir, db_url).open_store()
    try:
        rows = usage_rows(store.runs_between(starts[0], now), [s for s in starts if s < now] or starts[:1], now,
                          store.memberships(), by)
    finally:
        store.close()
    if as_csv:
        sys.stdout.write(rows_csv(rows, by))
        return
    if not rows:
        click.echo(f"no GPU usage from {first} to {last} (UTC days)")
        return
    head = ["DAY", "USER", "GROUP", "GPU-HOURS", "TASKS"] if by == "user" else ["DAY", "GROUP", "GPU-HOURS", "TASKS"]
    keys = ["day", "user", "group"] if by == "user" else ["day", "group"]
    table = [head] + [[str(r[k]) for k in keys] + [f"{float(r['gpu_hours']):.2f}", str(r["tasks"])] for r in rows]
    total = sum(float(r["gpu_hours"]) for r in rows)
    table.append(["TOTAL"] + [""] * (len(keys) - 1) + [f"{total:.2f}", ""])
    widths = [max(len(row[c]) for row in table) for c in range(len(head))]
    right = {len(head) - 2, len(head) - 1}
    for row in table:
        cells = [cell.rjust(w) if c in right else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths, strict=True))]
        click.echo("  ".join(cells).rstrip())
