"""``tcloud notify``: your notifications of task events, by e-mail and webhooks (docs/notifications.md).

- ``tcloud notify``: your settings and what the site allows;
- ``tcloud notify email ADDRESS`` / ``email --off``;
- ``tcloud notify on EVENT...`` / ``off EVENT...`` (started, ended, failed, preempted, near_limit, cancelled; ``all``);
- ``tcloud notify webhook add URL [--format json|slack|teams]`` / ``webhook remove URL``;
- ``tcloud notify test``: one test notification to each channel; ``tcloud notify history``: recent deliveries.

Each change reads the settings, changes one thing and saves them whole (``PUT /api/notifications``);
the service's refusal names the field. Text from the service is written through :func:`termsafe.sanitize`.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from .termsafe import sanitize


def _settings(obj: Any) -> dict[str, Any]:
    from .tcloud import _call

    out: dict[str, Any] = _call(obj.client.notifications, what="notification settings")
    return out


def _save(obj: Any, settings: dict[str, Any]) -> dict[str, Any]:
    from .tcloud import _call

    out: dict[str, Any] = _call(obj.client.set_notifications, settings, what="notification settings")
    return out


def _show(out: dict[str, Any]) -> None:
    s, site = out["settings"], out["site"]
    email = s.get("email") or "(none)"
    click.echo(f"e-mail:   {sanitize(email)}" + ("" if site["email"] else "   (this site sends no e-mail)"))
    click.echo(f"events:   {', '.join(s['events']) or '(none)'}")
    hooks = s.get("webhooks") or []
    click.echo("webhooks: " + ("(none)" if not hooks else ""))
    for h in hooks:
        click.echo(f"  {sanitize(h['url'])}  [{h['format']}]")
    click.echo(f"site allows: events {', '.join(site['events']) or 'none'}; "
               f"{'up to ' + str(site['max_webhooks']) + ' webhooks' if site['webhooks'] else 'no webhooks'}")


def _events(names: tuple[str, ...], allowed: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        out += allowed if n == "all" else [p for p in n.split(",") if p]
    return out


def register(cli: click.Group) -> None:
    """Add ``tcloud notify`` to tcloud."""

    @cli.group("notify", invoke_without_command=True)
    @click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
    @click.pass_context
    def notify(ctx: click.Context, as_json: bool) -> None:
        """Your notifications of task events (e-mail, webhooks); without a command: show them."""
        if ctx.invoked_subcommand is None:
            out = _settings(ctx.obj)
            if as_json:
                click.echo(json.dumps(out, indent=2))
            else:
                _show(out)

    @notify.command("email")
    @click.argument("address", required=False)
    @click.option("--off", is_flag=True, help="No more e-mail.")
    @click.pass_obj
    def email(obj: Any, address: str | None, off: bool) -> None:
        """E-mail notifications to ADDRESS (or --off)."""
        if bool(address) == off:
            raise click.UsageError("give an ADDRESS or --off")
        settings = _settings(obj)["settings"]
        settings["email"] = None if off else address
        _show(_save(obj, settings))

    @notify.command("on")
    @click.argument("events", nargs=-1, required=True)
    @click.pass_obj
    def on(obj: Any, events: tuple[str, ...]) -> None:
        """Be told of EVENTS: started ended failed preempted near_limit cancelled (or all)."""
        out = _settings(obj)
        settings = out["settings"]
        settings["events"] = sorted(set(settings["events"]) | set(_events(events, out["site"]["events"])))
        _show(_save(obj, settings))

    @notify.command("off")
    @click.argument("events", nargs=-1, required=True)
    @click.pass_obj
    def off(obj: Any, events: tuple[str, ...]) -> None:
        """No longer be told of EVENTS (or all)."""
        out = _settings(obj)
        settings = out["settings"]
        gone = set(_events(events, out["site"]["events"]))
        settings["events"] = [e for e in settings["events"] if e not in gone]
        _show(_save(obj, settings))

    @notify.group("webhook")
    def webhook() -> None:
        """Add or remove a webhook (a JSON POST on each event)."""

    @webhook.command("add")
    @click.argument("url")
    @click.option("--format", "fmt", type=click.Choice(["json", "slack", "teams"]), default="json",
                  show_default=True, help="Body shape: the generic JSON, a Slack or a Teams message.")
    @click.pass_obj
    def add(obj: Any, url: str, fmt: str) -> None:
        """POST each notification to URL."""
        settings = _settings(obj)["settings"]
        settings["webhooks"] = [h for h in settings["webhooks"] if h["url"] != url] + [{"url": url, "format": fmt}]
        _show(_save(obj, settings))

    @webhook.command("remove")
    @click.argument("url")
    @click.pass_obj
    def remove(obj: Any, url: str) -> None:
        """Stop POSTing to URL."""
        from .tcloud import _die

        settings = _settings(obj)["settings"]
        kept = [h for h in settings["webhooks"] if h["url"] != url]
        if len(kept) == len(settings["webhooks"]):
            _die(f"no webhook {sanitize(url[:200])}")
        settings["webhooks"] = kept
        _show(_save(obj, settings))

    @notify.command("test")
    @click.pass_obj
    def test(obj: Any) -> None:
        """Send a test notification to each of your channels."""
        from .tcloud import _call

        out = _call(obj.client.test_notification, what="notification test")
        click.echo(f"queued {out['queued']} test notification(s); see `tcloud notify history`")

    @notify.command("history")
    @click.option("-n", "--limit", default=20, show_default=True, help="How many deliveries to show.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.pass_obj
    def history(obj: Any, limit: int, as_json: bool) -> None:
        """Your recent deliveries: when, event, task, channel, status, tries and the last error."""
        from .tcloud import _call

        out = _call(obj.client.notification_history, limit, what="notification history")
        if as_json:
            click.echo(json.dumps(out, indent=2))
            return
        rows = out["deliveries"]
        if not rows:
            click.echo("no notifications yet")
            return
        click.echo(f"{'WHEN':19s} {'EVENT':10s} {'TASK':>6s} {'STATUS':7s} {'TRIES':>5s}  DESTINATION")
        for d in rows:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["created_at"]))
            click.echo(f"{when:19s} {sanitize(d['event']):10s} {d['task_id'] or '-':>6} {d['status']:7s} "
                       f"{d['attempts']:>5d}  {sanitize(d['channel'])} {sanitize(d['destination'][:120])}")
            if d.get("last_error"):
                click.echo(f"{'':20s}last error: {sanitize(d['last_error'][:300])}")
