"""tacc-hub quota: admins set quotas and group memberships on the running service.

Commands: ``list``, ``show``, ``set``, ``delete``, ``group``. They talk to the service
over its REST API with an admin token (``--url``/``--token``, ``TACC_URL``/``TACC_TOKEN``
or tcloud's config file; see :mod:`tacc_hub.cli.settings`), so the service stays the only
writer and its scheduler sees a change at once. Exit status 0 on success, 1 on any error,
printed as one line (plus one line per field at fault), never as a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from tacc_hub.client import TaccClient

T = TypeVar("T")

_LIMITS = ("max_gpus", "guaranteed_gpus", "gpu_hours")


def _die(message: str, errors: list[dict[str, str]] | None = None) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    for e in errors or []:
        click.echo(f"  {e.get('field') or '(body)'}: {e.get('message')}", err=True)
    sys.exit(1)


def _call(fn: Callable[..., T], *args: Any) -> T:
    from tacc_hub.client import ApiClientError

    try:
        return fn(*args)
    except ApiClientError as exc:
        if exc.status == 0:
            _die(exc.message)
        if exc.status == 401:
            _die("the service refused the token (HTTP 401); pass an admin token with --token or TACC_TOKEN")
        if exc.status == 403:
            _die(f"{exc.message} (HTTP 403): this needs an admin token (tacc-hub token NAME --admin)")
        _die(f"{exc.message} (HTTP {exc.status})", exc.errors)


class _OrNone(click.ParamType):
    """A number, or ``none`` to clear the limit."""

    def __init__(self, kind: type[int] | type[float]) -> None:
        self.kind = kind
        self.name = "N|none" if kind is int else "X|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or value is _UNSET or isinstance(value, int | float):
            return value
        text = str(value).strip().lower()
        if text in ("none", "null", "unlimited"):
            return None
        try:
            return self.kind(text)
        except ValueError:
            what = "a whole number" if self.kind is int else "a number"
            self.fail(f"{value!r} is not {what} or 'none'", param, ctx)


_UNSET: Any = object()


class Obj:
    def __init__(self, url: str | None, token: str | None) -> None:
        self._url, self._token = url, token
        self._client: TaccClient | None = None

    @property
    def client(self) -> TaccClient:
        if self._client is None:
            from tacc_hub.client import ApiClientError, TaccClient

            from .settings import resolve

            url, token = resolve(self._url, self._token)
            if not token:
                _die("no token: pass an admin token with --token or TACC_TOKEN")
            try:
                self._client = TaccClient(url, token)
            except ApiClientError as exc:
                _die(exc.message)
        return self._client


def _target(user: str | None, group: str | None) -> tuple[str, str]:
    if (user is None) == (group is None):
        _die("give exactly one of --user NAME or --group NAME")
    return ("user", user) if user is not None else ("group", group)  # type: ignore[return-value]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _quota_line(row: dict[str, Any]) -> str:
    return "  ".join(f"{k}={_fmt(row.get(k))}" for k in _LIMITS)


@click.group()
@click.option("--url", help="Service URL (default $TACC_URL, the tcloud config file, or http://127.0.0.1:8765).")
@click.option("--token", help="An admin API token (default $TACC_TOKEN or the tcloud config file).")
@click.pass_context
def quota(ctx: click.Context, url: str | None, token: str | None) -> None:
    """Quotas and groups on the running service (needs an admin token).

    A quota caps the GPUs a user or group holds at once (max-gpus), guarantees it GPUs it can
    always get back (guaranteed-gpus), and budgets its GPU-hours per accounting period
    (gpu-hours). Name "*" is the default for every user (or group) without a quota of its own.
    A user with no group is in group "default".
    """
    ctx.obj = Obj(url, token)


@quota.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON.")
@click.pass_obj
def list_(obj: Obj, as_json: bool) -> None:
    """Every quota, and every user's group."""
    rows = _call(obj.client.quotas)["quotas"]
    members = _call(obj.client.groups)["memberships"]
    if as_json:
        click.echo(json.dumps({"quotas": rows, "memberships": members}, indent=2))
        return
    if rows:
        _table([["KIND", "NAME", "MAX_GPUS", "GUARANTEED", "GPU_HOURS"]]
               + [[r["kind"], r["name"], _fmt(r["max_gpus"]), _fmt(r["guaranteed_gpus"]), _fmt(r["gpu_hours"])]
                  for r in rows])
    else:
        click.echo("no quotas: nobody is limited")
    click.echo("")
    if members:
        _table([["USER", "GROUP"]] + [[u, g] for u, g in sorted(members.items())])
    else:
        click.echo('no memberships: every user is in group "default"')


@quota.command()
@click.option("--user", help="A user name.")
@click.option("--group", help="A group name.")
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON.")
@click.pass_obj
def show(obj: Obj, user: str | None, group: str | None, as_json: bool) -> None:
    """The quota of one user or group; for a user, also its group and usage this period."""
    from tacc_hub.client import ApiClientError

    kind, name = _target(user, group)
    client = obj.client
    try:
        row: dict[str, Any] | None = client.quota(kind, name)
    except ApiClientError as exc:
        if exc.status != 404:
            _call(client.quota, kind, name)  # reports the error
        row = None
    mine = _call(client.my_quota, name) if kind == "user" and name != "*" else None
    if as_json:
        click.echo(json.dumps({"quota": row, "usage": mine}, indent=2))
        return
    if row is not None:
        click.echo(f"{kind} {name}: {_quota_line(row)}")
    else:
        click.echo(f"{kind} {name}: no quota of its own (the default \"*\" applies)")
    if mine is not None:
        lim = mine["limits"]
        click.echo(f"in force for user {name}: {_quota_line(lim['user'])}")
        click.echo(f"group {mine['group']}: {_quota_line(lim['group'])}")
        used, left = mine["used_gpu_hours"], mine["remaining_gpu_hours"]
        click.echo(f"GPU-hours this {mine['period']}: user {used['user']:.2f} used, {_fmt(left['user'])} left; "
                   f"group {used['group']:.2f} used, {_fmt(left['group'])} left")


@quota.command("set")
@click.option("--user", help="A user name (\"*\": the default for every user without a quota).")
@click.option("--group", help="A group name (\"*\": the default for every group without a quota).")
@click.option("--max-gpus", type=_OrNone(int), default=_UNSET, help="GPUs held at once; none: no cap.")
@click.option("--guaranteed-gpus", type=int, default=None, help="GPUs it can always get back (0: none).")
@click.option("--gpu-hours", type=_OrNone(float), default=_UNSET, help="GPU-hours per period; none: no budget.")
@click.pass_obj
def set_(obj: Obj, user: str | None, group: str | None, max_gpus: Any, guaranteed_gpus: int | None,
         gpu_hours: Any) -> None:
    """Set limits of a user or group; limits not given keep their current value."""
    from tacc_hub.client import ApiClientError

    kind, name = _target(user, group)
    given = {k: v for k, v in (("max_gpus", max_gpus), ("guaranteed_gpus", guaranteed_gpus),
                               ("gpu_hours", gpu_hours)) if v is not _UNSET and not (k == "guaranteed_gpus"
                                                                                     and v is None)}
    if not given:
        _die("nothing to set: give --max-gpus, --guaranteed-gpus or --gpu-hours")
    client = obj.client
    try:
        current = client.quota(kind, name)
    except ApiClientError as exc:
        if exc.status != 404:
            _call(client.quota, kind, name)
        current = {}
    body = {k: current.get(k) for k in _LIMITS if k in current}
    body.update(given)
    row = _call(client.set_quota, kind, name, body)
    click.echo(f"{kind} {name}: {_quota_line(row)}")


@quota.command()
@click.option("--user", help="A user name.")
@click.option("--group", help="A group name.")
@click.pass_obj
def delete(obj: Obj, user: str | None, group: str | None) -> None:
    """Remove the quota of a user or group (the default "*" then applies)."""
    kind, name = _target(user, group)
    _call(obj.client.delete_quota, kind, name)
    click.echo(f"{kind} {name}: quota removed")


@quota.command("group")
@click.argument("user")
@click.argument("group", required=False)
@click.option("--clear", is_flag=True, help="Put the user back in group \"default\".")
@click.pass_obj
def group_(obj: Obj, user: str, group: str | None, clear: bool) -> None:
    """Put USER in GROUP (or back in group "default" with --clear)."""
    if clear == (group is not None):
        _die("give either GROUP or --clear")
    out = _call(obj.client.set_group, user, None if clear else group)
    click.echo(f"user {out['user']} is in group {out['group']}")
