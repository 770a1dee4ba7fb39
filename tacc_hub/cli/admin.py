"""tacc-hub: run the service and do admin chores.

Commands: ``serve`` (the service on the embedded default: local executor +
SQLite), ``token USER [--admin] [--expires 30d] [--note TEXT]`` (print a new API token;
``token list``, ``token revoke ID...|--user U``), ``migrate`` (upgrade the store's schema),
``check`` (the store's consistency), ``audit`` (the audit trail: :mod:`tacc_hub.cli.audit`; token
create and revoke are recorded there, by ``cli:<unix user>``), ``config-doc`` (the configuration reference, generated
from the settings' help), ``quota`` (quotas and groups, set on the running service over its
API: see :mod:`tacc_hub.cli.quota`), ``usage --since DAY [--csv]`` (GPU-hours per day and user:
:mod:`tacc_hub.cli.usage`). Every command reads the same configuration
(``--config``, ``TACC_STATE_DIR``, ``TACC_DB_URL``).
"""

from __future__ import annotations

import sys
import time
import unicodedata
from typing import TYPE_CHECKING, Any, NoReturn

import click

from tacc_hub import __version__
from tacc_hub.cli.audit import audit, cli_actor
from tacc_hub.cli.quota import quota
from tacc_hub.cli.simulate import simulate
from tacc_hub.cli.usage import usage
from tacc_hub.service.app import TaccHub

if TYPE_CHECKING:
    from tacc_hub.store import TokenInfo


def _app(config: str | None, state_dir: str | None, db_url: str | None) -> TaccHub:
    argv: list[str] = []
    if config:
        argv.append(f"--TaccHub.config_file={config}")
    if state_dir:
        argv.append(f"--TaccHub.state_dir={state_dir}")
    if db_url:
        argv.append(f"--TaccHub.db_url={db_url}")
    app = TaccHub()
    app.initialize(argv)
    return app


_common = [
    click.option("--config", help="Config file (default ./tacc_hub_config.py if present)."),
    click.option("--state-dir", help="State directory (default $TACC_STATE_DIR or ./.tacc)."),
    click.option("--db-url", help="Store URL (default $TACC_DB_URL or SQLite in the state directory)."),
]


def common(fn: click.decorators.FC) -> click.decorators.FC:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="tacc-hub")
def cli() -> None:
    """The tacc_hub service and its admin commands."""


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def serve(ctx: click.Context) -> None:
    """Start the service. Options are settings: --port 8765, --gpus 2, --TaccHub.max_running_per_user=4, ..."""
    app = TaccHub()
    app.initialize(list(ctx.args))
    app.start()


class DefaultGroup(click.Group):
    """A group whose first argument, when it is not one of its commands, is the start of ``default``'s
    arguments: ``tacc-hub token alice`` is ``tacc-hub token create alice``. The command name comes first;
    a user named like a command (``list``, ``revoke``) is ``tacc-hub token create list``."""

    def __init__(self, *args: Any, default: str, **kwargs: Any) -> None:
        settings = dict(kwargs.pop("context_settings", None) or {})
        settings.setdefault("ignore_unknown_options", True)  # `token --admin alice`: options go to `default`
        super().__init__(*args, context_settings=settings, **kwargs)
        self.default = default

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                               list[str]]:
        if args and args[0] in self.commands:
            return super().resolve_command(ctx, args)
        return self.default, self.commands[self.default], args


@cli.group(cls=DefaultGroup, default="create", no_args_is_help=True)
def token() -> None:
    """API tokens: `token USER` (or `token create USER`) prints a new one; `token list`, `token revoke`."""


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


@token.command("create")
@click.argument("user")
@click.option("--admin", is_flag=True, help="The token may see and cancel every user's tasks.")
@click.option("--expires", default="never", show_default=True,
              help="Lifetime: 30d, 12h, 90m, 45s, 2w, or never.")
@click.option("--note", help="What the token is for (at most 255 characters, no control characters).")
@common
def token_create(user: str, admin: bool, expires: str, note: str | None, config: str | None,
                 state_dir: str | None, db_url: str | None) -> None:
    """Print a new API token for USER (it is shown this once; only its hash is stored)."""
    from tacc_hub.service.auth import TokenFieldError, check_note, check_user, issue_token, parse_expires

    try:  # every field before the store is opened
        check_user(user)
        check_note(note)
        parse_expires(expires, field="--expires")
    except TokenFieldError as exc:
        _fail(str(exc))
    from tacc_hub.service.tokens import audited

    store = _app(config, state_dir, db_url).open_store()
    try:
        token, token_id = issue_token(store, user, admin=admin, note=note, expires=expires)
        info = store.get_token(token_id)
        if info is not None:
            store.add_audit(cli_actor(), "token_create", None, target=f"token:{token_id}", after=audited(info))
        click.echo(token)
    finally:
        store.close()


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _printable(text: str | None, width: int = 40) -> str:
    """A note for a terminal: control and format characters (older rows were not checked) as escapes."""
    if not text:
        return ""
    shown = "".join(ch if unicodedata.category(ch)[0] != "C" and ch not in "\u2028\u2029" else ascii(ch)[1:-1]
                    for ch in text)
    return shown if len(shown) <= width else shown[:width - 3] + "..."


@token.command("list")
@click.option("--user", help="Only this user's tokens.")
@click.option("--all", "include_all", is_flag=True, help="Also revoked and expired tokens.")
@common
def token_list(user: str | None, include_all: bool, config: str | None, state_dir: str | None,
               db_url: str | None) -> None:
    """A table of API tokens (never the tokens themselves): active ones; --all: also revoked and expired."""
    from tacc_hub.service.auth import TokenFieldError, check_user

    if user is not None:
        try:
            check_user(user, field="--user")
        except TokenFieldError as exc:
            _fail(str(exc))
    store = _app(config, state_dir, db_url).open_store()
    try:
        infos = store.list_tokens(user, include_inactive=include_all)
    finally:
        store.close()
    now = time.time()
    rows = [("ID", "USER", "ADMIN", "STATE", "CREATED", "EXPIRES", "LAST USED", "NOTE")]
    rows += [(str(i.id), i.user, "yes" if i.admin else "no", i.state(now), _when(i.created_at),
              "never" if i.expires_at is None else _when(i.expires_at), _when(i.last_used_at), _printable(i.note))
             for i in infos]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


MAX_ID = 2**63 - 1


@token.command("revoke")
@click.argument("ids", nargs=-1)
@click.option("--user", help="Revoke every token of this user instead.")
@common
def token_revoke(ids: tuple[str, ...], user: str | None, config: str | None, state_dir: str | None,
                 db_url: str | None) -> None:
    """Revoke tokens by ID (as `token list` shows them), or every token of --user. A running service refuses
    them within a second. Either every ID is known and all are revoked, or none is."""
    from tacc_hub.service.auth import TokenFieldError, check_user

    if bool(ids) == (user is not None):
        _fail("give token IDs or --user USER (one of the two)")
    wanted: list[int] = []
    for raw in ids:
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_ID:
            _fail(f"{raw[:40]!r} is not a token ID (a whole number, as `tacc-hub token list` shows)")
        wanted.append(int(raw))
    if user is not None:
        try:
            check_user(user, field="--user")
        except TokenFieldError as exc:
            _fail(str(exc))
    from tacc_hub.service.tokens import audited

    store = _app(config, state_dir, db_url).open_store()

    def revoked(info: TokenInfo) -> None:
        after = store.get_token(info.id)
        if after is not None:
            store.add_audit(cli_actor(), "token_revoke", None, target=f"token:{info.id}", before=audited(info),
                            after=audited(after))

    try:
        if user is not None:
            live = [i for i in store.list_tokens(user, include_inactive=True) if i.revoked_at is None]
            n = store.revoke_tokens(user)
            for one in live:
                revoked(one)
            click.echo(f"revoked {n} token{'' if n == 1 else 's'} of {user}")
            return
        infos = {i: store.get_token(i) for i in dict.fromkeys(wanted)}
        unknown = [str(i) for i, info in infos.items() if info is None]
        if unknown:
            _fail(f"no token {', '.join(unknown)}; nothing revoked")
        for i, info in infos.items():
            assert info is not None
            if info.revoked_at is not None:
                click.echo(f"token {i} ({info.user}) was already revoked")
                continue
            store.revoke_token(i)
            revoked(info)
            click.echo(f"revoked token {i} ({info.user})")
    finally:
        store.close()


@cli.command()
@common
def migrate(config: str | None, state_dir: str | None, db_url: str | None) -> None:
    """Create or upgrade the store's schema."""
    app = _app(config, state_dir, db_url)
    app.open_store().close()
    click.echo(f"store at {app.db_url.split('@')[-1]} is up to date")


@cli.command()
@common
def check(config: str | None, state_dir: str | None, db_url: str | None) -> None:
    """Check the store's consistency (read-only): one line per problem, exit 1 if there is any."""
    app = _app(config, state_dir, db_url)
    store = app.open_store()
    try:
        problems = store.integrity_problems()
    finally:
        store.close()
    for line in problems:
        click.echo(line)
    if problems:
        sys.exit(1)
    click.echo(f"store at {app.db_url.split('@')[-1]} is consistent")


@cli.command("config-doc")
def config_doc() -> None:
    """Print the configuration reference (Markdown), generated from the settings' help."""
    click.echo(render_config_doc())


def render_config_doc() -> str:
    lines = ["# tacc_hub configuration reference", "",
             "Generated by `tacc-hub config-doc` from the settings' declarations in "
             "`tacc_hub/service/app.py`. Set them in `tacc_hub_config.py` (`c.TaccHub.port = 8765`) or on the "
             "command line (`tacc-hub serve --TaccHub.port=8765`).", ""]
    for name, trait in sorted(TaccHub.class_traits(config=True).items()):
        if trait.this_class is not TaccHub:
            continue
        default = trait.default_value_repr()
        lines.append(f"## `c.TaccHub.{name}`")
        lines.append("")
        lines.append(f"*{type(trait).__name__}*, default `{default}`")
        lines.append("")
        lines.append(trait.help.strip())
        lines.append("")
    return "\n".join(lines)


cli.add_command(simulate)
cli.add_command(quota)
cli.add_command(usage)
cli.add_command(audit)


def main() -> None:
    cli(prog_name="tacc-hub")


if __name__ == "__main__":
    main()
