"""tcloud: submit and follow tasks on a tacc_hub cluster.

Commands: init, submit, spec, ps, show, logs, cancel, extend, download, schema, cluster.
Arrays and pipelines (``tcloud_arrays``): ``ps`` shows each as one row (``--expand``: every task),
``ID:INDEX`` names an array's element (show, logs, cancel), the id of an array or pipeline shows
or cancels the whole, and ``submit`` takes a pipeline file and ``--array``/``--sweep``.
The service URL and token come from --url/--token, TACC_URL/TACC_TOKEN (or
JupyterHub's JUPYTERHUB_API_TOKEN), or ~/.config/tacc/config.yaml (see
``tacc_hub.cli.settings``). Exit status: 0 on success; 1 on an API or input
error (the message names the field, or the option, at fault); ``logs -f`` and
``submit -f`` exit 0 only if the task SUCCEEDED.

Output in a pipe is never cut to a terminal's width: launch scripts, specs and
JSON are written raw (not through rich), human lines do not wrap, and tables
become plain columns. Notes for the user (a task still waiting, ``-a`` without
admin rights) go to stderr, so stdout stays what was asked for.

Heavy modules are imported inside the commands so that ``tcloud ps`` starts fast.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from tacc_hub import __version__

if TYPE_CHECKING:
    from tacc_hub.client import TaccClient


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    # soft_wrap: a long line (a digest, a reason) stays one line; a terminal may fold it, a pipe gets it whole.
    return Console(highlight=False, soft_wrap=True, stderr=stderr)


def _die(message: str, errors: list[dict[str, str]] | None = None) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    for e in errors or []:
        click.echo(f"  {e.get('field') or '(document)'}: {e.get('message')}", err=True)
    sys.exit(1)


def _note(message: str) -> None:
    """Something the user should know that is not the output asked for: on stderr."""
    click.echo(message, err=True)


class Ctx:
    def __init__(self, url: str | None, token: str | None, url_given_as: str | None = None) -> None:
        self._url, self._token, self._given_as = url, token, url_given_as
        self._client: TaccClient | None = None

    @property
    def client(self) -> TaccClient:
        if self._client is None:
            from tacc_hub.client import ApiClientError, TaccClient

            from .settings import SettingsError, resolve

            try:
                url, token = resolve(self._url, self._token)
                self._client = TaccClient(url, token)
            except SettingsError as exc:
                _die(str(exc))
            except ApiClientError as exc:
                _api_error(exc)
        return self._client

    def url_origin(self) -> str:
        from .settings import url_origin

        return url_origin(self._given_as)


def _api_error(exc: Exception, options: dict[str, str] | None = None, what: str = "task") -> NoReturn:
    """Report an API error once: the service's message, or, when it only repeats its field errors, those."""
    from tacc_hub.client import URL_HINT, ApiClientError, WrongUrlError

    assert isinstance(exc, ApiClientError)
    errors = [dict(e) for e in exc.errors if isinstance(e, dict)]
    for e in errors:  # a field set by an option (--gpus) is named with it
        opt = next((o for d, o in (options or {}).items()
                    if e.get("field") == d or str(e.get("field", "")).startswith(d + ".")), None)
        if opt:
            e["field"] = f"{e.get('field')} ({opt})"
    message = exc.message
    if errors and all(str(e.get("message", "")) in message for e in exc.errors):
        message = f"the service refused the {what}" if exc.status == 422 else "the service refused the request"
    if exc.status == 0 or isinstance(exc, WrongUrlError):  # the message names the URL and what it answered
        message = message.replace(f"; {URL_HINT}", "")
        ctx = click.get_current_context(silent=True)
        if ctx is not None and isinstance(ctx.find_root().obj, Ctx):
            message += f"\n  the URL came from {ctx.find_root().obj.url_origin()}"
        message += f"\n  {URL_HINT}"
    elif exc.status:
        message += f" (HTTP {exc.status})"
    _die(message + (":" if errors else ""), errors)


def _call(fn: Any, *args: Any, options: dict[str, str] | None = None, what: str = "task", **kw: Any) -> Any:
    from tacc_hub.client import ApiClientError

    try:
        return fn(*args, **kw)
    except ApiClientError as exc:
        _api_error(exc, options, what)


def _load_spec(path: str, kw: dict[str, Any]) -> tuple[Any, Path]:
    from tacc_hub.schema import SpecError

    from . import taskfile

    overrides, options = _overrides(kw)
    try:
        return taskfile.load(path, overrides, options)
    except taskfile.OptionError as exc:
        for opt, message in exc.errors:
            click.echo(f"error: bad option {opt}: {message}", err=True)
        if exc.file_errors:
            click.echo(f"error: the task file {path} is invalid too:", err=True)
            for f, m in exc.file_errors:
                click.echo(f"  {f or '(document)'}: {m}", err=True)
        sys.exit(1)
    except SpecError as exc:
        _die(f"the task file {path} is invalid:", [{"field": f, "message": m} for f, m in exc.errors])
    except OSError as exc:
        _die(str(exc))


def _snapshot(spec: Any, base: Path) -> tuple[Any, bytes | None]:
    from tacc_hub.snapshot import SnapshotError

    from . import taskfile

    try:
        return taskfile.snapshot(spec, base)
    except SnapshotError as exc:
        _die(str(exc))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar="TACC_URL", help="Service URL (default: TACC_URL, config file, http://127.0.0.1:8765).")
@click.option("--token", envvar="TACC_TOKEN", help="API token (default: TACC_TOKEN, JUPYTERHUB_API_TOKEN, config).")
@click.version_option(version=__version__, prog_name="tcloud")
@click.pass_context
def cli(ctx: click.Context, url: str | None, token: str | None) -> None:
    """Submit, follow and manage tasks on a tacc_hub GPU cluster."""
    source = ctx.get_parameter_source("url")
    given_as = {click.core.ParameterSource.COMMANDLINE: "--url",
                click.core.ParameterSource.ENVIRONMENT: "TACC_URL"}.get(source) if source else None
    ctx.obj = Ctx(url, token, given_as)


@cli.command()
@click.option("--name", help="Task name (default: the directory's name).")
@click.option("--force", is_flag=True, help="Overwrite an existing tacc.yaml.")
def init(name: str | None, force: bool) -> None:
    """Write a tacc.yaml for the current directory from its environment."""
    from .init import write_tacc_yaml

    try:
        path = write_tacc_yaml(Path.cwd(), name=name, force=force)
    except FileExistsError as exc:
        _die(f"{exc} exists; use --force to overwrite")
    click.echo(f"wrote {path}")


_OVERRIDES = [
    click.option("--name", help="Override the task name."),
    click.option("--nodes", type=int, help="Override resources.nodes."),
    click.option("--gpus", type=int, help="Override resources.gpus_per_node."),
    click.option("--tasks-per-node", type=int, help="Override resources.tasks_per_node."),
    click.option("--cpus", type=int, help="Override resources.cpus_per_task."),
    click.option("--memory", help="Override resources.memory (e.g. 16G)."),
    click.option("--time", "time_limit", help="Override resources.time_limit (e.g. 2h, 1:30:00)."),
    click.option("--partition", help="Override resources.partition."),
    click.option("--runtime", help="Override runtime.kind (plain, torchrun, ...)."),
    click.option("--qos", type=click.Choice(["interactive", "normal", "low"]), help="Override qos.class."),
]


def overrides_option(fn: Any) -> Any:
    for opt in reversed(_OVERRIDES):
        fn = opt(fn)
    return fn


# keyword -> (field it overrides, option as typed)
_OVERRIDE_FIELDS = {
    "name": ("name", "--name"), "nodes": ("resources.nodes", "--nodes"),
    "gpus": ("resources.gpus_per_node", "--gpus"), "tasks_per_node": ("resources.tasks_per_node", "--tasks-per-node"),
    "cpus": ("resources.cpus_per_task", "--cpus"), "memory": ("resources.memory", "--memory"),
    "time_limit": ("resources.time_limit", "--time"), "partition": ("resources.partition", "--partition"),
    "runtime": ("runtime.kind", "--runtime"), "qos": ("qos.class", "--qos"),
}


def _overrides(kw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The overrides given (field -> value) and how each was typed (field -> "--time 5x").

    ``--array RANGE`` and ``--sweep NAME=V1,V2`` (the grid of every --sweep) replace the spec's ``array``."""
    given = {k: v for k, v in kw.items() if k in _OVERRIDE_FIELDS and v is not None}
    values = {_OVERRIDE_FIELDS[k][0]: v for k, v in given.items()}
    typed = {_OVERRIDE_FIELDS[k][0]: f"{_OVERRIDE_FIELDS[k][1]} {v}" for k, v in given.items()}
    array, sweep = kw.get("array_range"), tuple(kw.get("sweep") or ())
    if array is not None and sweep:
        _die("give --array or --sweep, not both (a sweep's elements are the product of its values)")
    if array is not None:
        values["array"], typed["array"] = array, f"--array {array}"
    elif sweep:
        from tacc_hub.schema.arrays import sweep_grid

        try:
            values["array"] = {"grid": sweep_grid(sweep)}
        except ValueError as exc:
            _die(f"bad option {exc}")
        typed["array"] = " ".join(f"--sweep {s}" for s in sweep)
    return values, typed


def array_options(fn: Any) -> Any:
    fn = click.option("--sweep", "sweep", multiple=True, metavar="NAME=V1,V2",
                      help="Run a grid of parameters instead of the spec's array (repeatable: the product), "
                           "e.g. --sweep lr=1e-3,3e-4 --sweep bs=32,64.")(fn)
    return click.option("--array", "array_range", metavar="RANGE",
                        help="Run as an array instead of the spec's array: 0-9, 0-30:10, 1,3,8-10; %N runs at "
                             "most N at once (0-99%4).")(fn)


@cli.command()
@click.argument("path", default=".", type=click.Path())
@overrides_option
@array_options
@click.option("--dry-run", is_flag=True, help="Compile on the service and print the plan; submit nothing.")
@click.option("-f", "--follow", is_flag=True, help="Stream the task's output until it ends.")
@click.option("--json", "as_json", is_flag=True, help="Print the service's answer as JSON.")
@click.pass_obj
def submit(obj: Ctx, path: str, dry_run: bool, follow: bool, as_json: bool, **kw: Any) -> None:
    """Submit PATH (a directory, tacc.yaml or tuxiv.conf) as a task, or a pipeline file (a top-level steps:).

    A spec with an array (or --array/--sweep) is submitted as one request and prints the array's id and its
    tasks' ids; a pipeline prints its id and each step's task."""
    from . import taskfile

    pfile = taskfile.pipeline_file(path)
    if pfile is not None:
        _submit_pipeline(obj, pfile, dry_run, follow, as_json, kw)
        return
    spec, base = _load_spec(path, kw)
    options = _overrides(kw)[1]
    if follow and spec.array is not None and not dry_run:
        _die("-f follows one task, and an array has many: submit without -f, then follow one element with "
             "tcloud logs -f ID:INDEX")
    spec, archive = _snapshot(spec, base)
    client = obj.client
    body = spec.model_dump(mode="json", by_alias=True)
    if dry_run:
        out = _call(client.submit, body, dry_run=True, options=options)
        if as_json:
            click.echo(json.dumps(out, indent=2))
            return
        _print_plan(out)
        return
    _upload(client, spec, archive)
    task = _call(client.submit, body, options=options)
    if as_json:
        click.echo(json.dumps(task, indent=2))
    elif task.get("array"):
        from .tcloud_arrays import submitted_array

        click.echo(submitted_array(task))
    else:
        click.echo(f"submitted task {task['id']} ({task['name']}, spec {task['digest'][:12]}): {task['status']}")
    if follow:
        sys.exit(_follow(client, int(task["id"])))


def _upload(client: TaccClient, spec: Any, archive: bytes | None) -> None:
    """Upload the spec's code snapshot unless the service has it from this user already."""
    if archive is None or _call(client.has_code, spec.code.digest):
        return
    if not sys.stderr.isatty():  # a spinner only for a person watching
        _call(client.upload_code, spec.code.digest, archive)
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True,
                  console=_console(stderr=True)) as prog:
        prog.add_task(f"uploading code ({len(archive) / 1024:.0f} KiB)", total=None)
        _call(client.upload_code, spec.code.digest, archive)


def _submit_pipeline(obj: Ctx, file: Path, dry_run: bool, follow: bool, as_json: bool, kw: dict[str, Any]) -> None:
    """``tcloud submit pipeline.yaml``: every step's code uploaded, then the whole pipeline as one request."""
    from tacc_hub.schema import SpecError

    from . import taskfile
    from .tcloud_arrays import submitted_pipeline

    given = sorted(o for o in _overrides(kw)[1].values())
    if given:
        _die(f"{given[0].split()[0]} applies to one task file; a pipeline's steps are set in their own specs ({file})")
    if dry_run or follow:
        _die(f"{'--dry-run' if dry_run else '-f'} is for one task; {file} is a pipeline (submit it, then "
             "tcloud show ID)")
    try:
        pipeline, base = taskfile.load_pipeline(file)
    except SpecError as exc:
        _die(f"the pipeline file {file} is invalid:", [{"field": f, "message": m} for f, m in exc.errors])
    except OSError as exc:
        _die(str(exc))
    client = obj.client
    body = pipeline.model_dump(mode="json", by_alias=True)
    for i, step in enumerate(pipeline.steps):
        spec, archive = _snapshot(step.spec, base)
        _upload(client, spec, archive)
        body["steps"][i]["spec"] = spec.model_dump(mode="json", by_alias=True)
    out = _call(client.submit_pipeline, body, what="pipeline")
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    for line in submitted_pipeline(out):
        click.echo(line)


def _raw(text: str) -> None:
    """Machine-readable text (a script, a file) exactly as it is: no wrapping, no cropping, no markup."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _print_plan(out: dict[str, Any]) -> None:
    from rich.markup import escape as e  # values are text, not markup: "[x]" in a name stays

    con = _console()
    plan = out["plan"]
    con.print(f"[bold]task[/] {e(plan['name'])}  [bold]digest[/] {out['digest']}")
    r = plan["resources"]
    con.print(f"[bold]resources[/] {r['nodes']} node(s) x {r['gpus_per_node']} GPU(s), "
              f"{r['tasks_per_node']} task(s)/node x {r['cpus_per_task']} CPU(s), time {r['time_limit']} s")
    env = plan["env"]
    con.print(f"[bold]runtime[/] {e(str(plan['runtime']))}  [bold]env[/] {env['kind']} {env['digest'][:16]} "
              f"({len(env.get('requirements') or [])} requirement(s))")
    con.print(f"[bold]features[/] {e(str(plan['features']))}")
    for name, content in plan.get("files", {}).items():
        con.print(f"[bold]{e(name)}[/]")
        _raw(content)
    con.print("[bold]launch.sh[/]")
    _raw(plan["script"])


@cli.command()
@click.argument("path", default=".", type=click.Path())
@overrides_option
def spec(path: str, **kw: Any) -> None:
    """Print the normalized spec of PATH as JSON, with its digest (code is snapshotted locally)."""
    s, base = _load_spec(path, kw)
    s, _ = _snapshot(s, base)
    click.echo(json.dumps({"digest": s.digest, "spec": s.model_dump(mode="json", by_alias=True)}, indent=2))


def _ago(ts: float | None) -> str:
    if not ts:
        return "-"
    d = max(0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if d >= size:
            return f"{int(d // size)}{unit} ago"
    return f"{int(d)}s ago"


def _eta(queue: dict[str, Any] | None) -> str:
    """When a waiting task should start: "now", "in 12m", "?" (unknown); "-" for others."""
    if not queue:
        return "-"
    ts = queue.get("estimated_start")
    if ts is None:
        return "?"
    d = ts - time.time()
    if d < 1:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if d >= size:
            return f"in {int(d // size)}{unit}"
    return f"in {int(d)}s"


def _dur(start: float | None, end: float | None) -> str:
    if not start:
        return "-"
    d = int((end or time.time()) - start)
    return f"{d // 3600}:{d % 3600 // 60:02d}:{d % 60:02d}"


STATUS_STYLE = {"pending": "yellow", "starting": "cyan", "running": "green", "cancelling": "magenta",
                "succeeded": "bold green", "failed": "bold red", "cancelled": "dim", "lost": "bold red"}
ENDING_SOON = 600
"""A running task with less time left than this (seconds) shows "ends in 4m" (styled as a warning)."""
ENDING_STYLE = "bold yellow"


def _span(seconds: float) -> str:
    """A length of time for people, to the minute: 2d03h, 1h05m, 45m; under a minute 30s."""
    d = max(0, int(seconds))
    if d < 60:
        return f"{d}s"
    days, rest = divmod(d, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours:02d}h"
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


def _time_left(t: dict[str, Any]) -> str:
    """A running task's time left: "1h05m", or "ends in 4m" under ENDING_SOON; "-" for others."""
    left = t.get("time_left")
    if t.get("status") not in ("running", "cancelling") or not isinstance(left, int | float):
        return "-"
    return f"ends in {_span(left)}" if left < ENDING_SOON else _span(left)


def _cell_style(col: str, value: str) -> str:
    if col == "TIME LEFT":
        return ENDING_STYLE if value.startswith("ends in") else ""
    return STATUS_STYLE.get(value, "") if col == "STATUS" else ""


@cli.command()
@click.option("-s", "--state", "states", multiple=True, help="Only tasks in this state (repeatable).")
@click.option("-a", "--all", "all_users", is_flag=True, help="Every user's tasks (admins).")
@click.option("-n", "--limit", default=50, show_default=True, help="How many rows to show.")
@click.option("--expand", is_flag=True, help="One row per task: an array's elements (ARRAY is ID:INDEX) and a "
              "pipeline's steps each on their own row.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the tasks as the service lists them).")
@click.option("--rich/--plain", "fancy", default=None,
              help="A coloured table (default on a terminal) or plain aligned columns (default in a pipe).")
@click.pass_obj
def ps(obj: Ctx, states: tuple[str, ...], all_users: bool, limit: int, expand: bool, as_json: bool,
       fancy: bool | None) -> None:
    """List tasks, newest first; an array or a pipeline is one row (its counts per state), unless --expand."""
    from . import tcloud_arrays

    out = _call(obj.client.list, states=list(states) or None, limit=limit, all_users=all_users)
    if all_users:
        me = _call(obj.client.whoami)
        if not me.get("admin"):
            _note(f"note: only admins see every user's tasks (-a); these are yours ({me.get('user')})")
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    grouped = any(t.get("array_id") or t.get("pipeline_id") for t in out["tasks"])
    head = ["ID", *(["ARRAY"] if expand else []), "NAME", "STATUS", *(["TASKS"] if grouped and not expand else []),
            *(["OWNER"] if all_users else [])]
    cols = [*head, "GPUS", "SUBMITTED", "TIME", "TIME LEFT", "POS", "START", "REASON"]
    if grouped and not expand:
        rows, read = tcloud_arrays.grouped_rows(obj.client, out, limit, list(states) or None, all_users)
        _table(cols, rows, fancy, wrap="REASON", styled="STATUS")
        if out["total"] > read:
            _note(f"{read} of {out['total']} tasks read (use -n)")
        return
    rows = [task_row(t, all_users, expand=expand) for t in out["tasks"]]
    more = f"{len(out['tasks'])} of {out['total']} shown (use -n)" if out["total"] > len(out["tasks"]) else ""
    _table(cols, rows, fancy, wrap="REASON", styled="STATUS")
    if more:
        _note(more)


def task_row(t: dict[str, Any], all_users: bool, *, expand: bool = False, grouped: bool = False) -> list[str]:
    """One task's ``ps`` row; ``expand`` adds ARRAY (ID:INDEX or -), ``grouped`` TASKS (- for a task of its own)."""
    queue = t.get("queue")
    array = f"{t['array_id']}:{t.get('array_index')}" if t.get("array_id") else "-"
    return [str(t["id"]), *([array] if expand else []), t["name"], t["status"], *(["-"] if grouped else []),
            *([t["owner"]] if all_users else []), _gpus(t), _ago(t["submitted_at"]),
            _dur(t["started_at"], t["finished_at"]), _time_left(t), str(queue["position"]) if queue else "-",
            _eta(queue), t.get("reason") or ""]


def _gpus(t: dict[str, Any]) -> str:
    """GPUs a task holds (its placement) or, before it has one, the GPUs it asked for."""
    if t.get("placement"):
        return str(sum(len(n.get("gpus", [])) for n in t["placement"].get("nodes", [])))
    asked = t.get("gpus_requested")
    return "-" if asked is None else str(asked)


def _table(cols: list[str], rows: list[list[str]], fancy: bool | None, wrap: str = "", styled: str = "") -> None:
    """A rich table on a terminal; plain aligned columns (no colour, nothing cut, no rich import) in a pipe.

    Cells are the service's text (names, reasons): terminal controls in them are written visibly."""
    from .termsafe import sanitize

    rows = [[sanitize(v) for v in r] for r in rows]
    if fancy is None:
        fancy = sys.stdout.isatty()
    if not fancy:
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
        for r in [cols, *rows]:
            line = "  ".join(v.ljust(w) for v, w in zip(r[:-1], widths[:-1], strict=True)) + "  " + r[-1]
            click.echo(line.rstrip())
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold")
    for col in cols:
        table.add_column(col, no_wrap=col != wrap)
    at = cols.index(styled) if styled in cols else -1
    for r in rows:  # the state column in its state's style; a task about to end in the warning style
        table.add_row(*[Text(v, style=STATUS_STYLE.get(v, "")) if i == at else Text(v, style=_cell_style(cols[i], v))
                        for i, v in enumerate(r)])
    _console().print(table)


def _task_ref() -> Any:
    from .tcloud_arrays import TaskRef

    return TaskRef()


@cli.command()
@click.argument("ref", metavar="ID[:INDEX]", type=_task_ref())
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with spec and plan).")
@click.option("--rich/--plain", "fancy", default=None, help="An array's or pipeline's table: coloured or plain.")
@click.pass_obj
def show(obj: Ctx, ref: tuple[int, int | None], as_json: bool, fancy: bool | None) -> None:
    """Show one task; ID:INDEX is element INDEX of array ID.

    The id of an array (its first element's) or of a pipeline (its first task's) shows the whole array (its
    counts and elements) or pipeline (its steps)."""
    from . import tcloud_arrays

    task_id = tcloud_arrays.resolve(obj.client, ref)
    t = _call(obj.client.show, task_id)
    if ref[1] is None and t.get("pipeline_id") == task_id:
        p = _call(obj.client.pipeline, task_id)
        if as_json:
            click.echo(json.dumps(p, indent=2))
        else:
            tcloud_arrays.print_pipeline(p, fancy)
        return
    if ref[1] is None and t.get("array_id") == task_id:
        a = _call(obj.client.array, task_id)
        if as_json:
            click.echo(json.dumps(a, indent=2))
        else:
            tcloud_arrays.print_array(obj.client, a, fancy)
        return
    if as_json:
        click.echo(json.dumps(t, indent=2))
        return
    import yaml
    from rich.markup import escape as e

    from .termsafe import sanitize

    con = _console()
    st = t["status"]
    con.print(f"[bold]task {t['id']}[/] {e(t['name'])}  [{STATUS_STYLE.get(st, '')}]{st}[/]"
              + (f"  exit {t['exit_code']}" if t.get("exit_code") is not None else ""))
    if t.get("array_id"):
        con.print(f"array {t['array_id']} element {t.get('array_index')} (tcloud show {t['array_id']}: the whole "
                  "array)" if t["array_id"] != t["id"] else f"array {t['array_id']} element {t.get('array_index')}")
    if t.get("pipeline_id"):
        con.print(f"pipeline {t['pipeline_id']}")
    if t.get("reason"):
        con.print(f"reason: {e(sanitize(t['reason']))}")
    queue = t.get("queue")
    if queue:
        at = queue.get("estimated_start")
        when = "unknown" if at is None else (
            f"{_eta(queue)} (about {time.strftime('%Y-%m-%d %H:%M', time.localtime(at))})")
        con.print(f"queue: position {queue['position']}, estimated start {when}")
    con.print(f"owner: {e(t['owner'])}   digest: {t['digest']}")
    con.print(f"submitted {_ago(t['submitted_at'])}, ran {_dur(t['started_at'], t['finished_at'])}")
    if t.get("placement"):
        con.print("placement: " + e(", ".join(
            f"{n['node']} (GPUs {','.join(map(str, n['gpus']))})" if n.get("gpus") else f"{n['node']} (no GPUs)"
            for n in t["placement"]["nodes"])))
    elif t.get("gpus_requested") is not None:
        con.print(f"asks for: {t['gpus_requested']} GPU(s)")
    _show_time(con, t)
    _show_attempts(con, obj.client, t)
    _show_usage(con, obj.client, t)
    con.print("[bold]spec[/]")
    # width: PyYAML folds long strings at 80 columns by default; the spec is printed as it is.
    _raw(yaml.safe_dump(t.get("spec"), sort_keys=False, width=1 << 30))


def _hms(seconds: int) -> str:
    d = max(0, int(seconds))
    return f"{d // 3600}:{d % 3600 // 60:02d}:{d % 60:02d}"


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _show_time(con: Any, t: dict[str, Any]) -> None:
    """"time limit: 1:00:00; deadline ...; 0:45:10 left" (a running task) or just the limit."""
    limit = t.get("time_limit")
    if not isinstance(limit, int):
        return
    line = f"time limit: {_hms(limit)}"
    if isinstance(t.get("deadline"), int | float):
        line += f"; deadline {_utc(t['deadline'])}"
    left = t.get("time_left")
    if isinstance(left, int | float) and t["status"] in ("running", "cancelling"):
        text = f"{_hms(int(left))} left"
        line += f"; [{ENDING_STYLE}]{text}[/]" if left < ENDING_SOON else f"; {text}"
    if t.get("max_restarts"):
        line += f"; restarts: at most {t['max_restarts']}"
    con.print(line)


def _optional(fn: Any, *args: Any) -> dict[str, Any] | None:
    """``fn(*args)``, or None where the service has no such endpoint or nothing for this task (404)."""
    from tacc_hub.client import ApiClientError

    try:
        out = fn(*args)
    except ApiClientError as exc:
        if exc.status == 404:
            return None
        _api_error(exc)
    return out if isinstance(out, dict) else None


def _show_attempts(con: Any, client: TaccClient, t: dict[str, Any]) -> None:
    """The task's runs (attempt, started, duration, outcome, exit code, reason), when it ran more than never."""
    from rich.markup import escape as e

    out = _optional(client.attempts, t["id"])
    runs = [a for a in (out or {}).get("attempts", []) if isinstance(a, dict)]
    if not runs:
        return
    con.print(f"[bold]runs[/] ({len(runs)})")
    rows = [["RUN", "STARTED", "DURATION", "OUTCOME", "EXIT", "REASON"]]
    for a in runs:
        started = a.get("started_at")
        n = a.get("attempt")  # 0 for the first run (TACC_ATTEMPT); shown from 1, as the log's marks and the panel
        rows.append([str(n + 1) if isinstance(n, int) else "?",
                     time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)) if started else "-",
                     _dur(started, a.get("finished_at")), str(a.get("outcome", "?")),
                     "-" if a.get("exit_code") is None else str(a["exit_code"]), str(a.get("reason") or "")])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        con.print("  " + e("  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]).rstrip())


USAGE_POINTS = 500
"""Most points GET api/tasks/ID/usage answers with (service.taskusage.MAX_POINTS): more samples are averaged."""


def _show_usage(con: Any, client: TaccClient, t: dict[str, Any]) -> None:
    """"GPU utilization: mean 37% over 2 GPUs (12 samples)"; nothing when the service has no samples."""
    out = _optional(client.usage, t["id"])
    samples = (out or {}).get("samples") or []
    mean = (out or {}).get("mean_util")
    if not samples or not isinstance(mean, int | float):
        return
    gpus = (out or {}).get("gpus")
    if not isinstance(gpus, int):
        last = samples[-1] if isinstance(samples[-1], dict) else {}
        gpus = last.get("gpus") if isinstance(last.get("gpus"), int) else 0
    over = f" over {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else ""
    n = len(samples)
    count = f"{n}+ samples" if n >= USAGE_POINTS else f"{n} sample{'s' if n != 1 else ''}"  # longer runs: averaged
    con.print(f"GPU utilization: mean {mean:.0f}%{over} ({count})")


def _waiting(t: dict[str, Any]) -> str | None:
    """Why a task has no output yet, if it has not started: its queue position, reason and start estimate."""
    if t["status"] == "starting":
        return f"task {t['id']} is starting (its environment is being prepared)"
    if t["status"] != "pending":
        return None
    queue = t.get("queue") or {}
    parts = [f"position {queue['position']} in the queue"] if queue.get("position") else []
    if t.get("reason"):
        parts.append(str(t["reason"]))
    if queue:
        parts.append("start time unknown" if queue.get("estimated_start") is None else f"starts {_eta(queue)}")
    return f"task {t['id']} is waiting to start" + (f" ({'; '.join(parts)})" if parts else "")


def _log_filter(raw: bool) -> Any:
    """What a log goes through before the terminal: ``TermSafe`` (escapes made visible), or nothing with --raw."""
    if raw:
        return None
    from .termsafe import TermSafe

    return TermSafe()


def _follow(client: TaccClient, task_id: int, offset: int = 0, raw: bool = False) -> int:
    from tacc_hub.client import ApiClientError

    safe = _log_filter(raw)
    status = "unknown"
    try:
        for event, data in client.stream_logs(task_id, offset):
            if event == "log":
                sys.stdout.write(data["data"] if safe is None else safe.feed(data["data"]))
                sys.stdout.flush()
            elif event == "end":
                status = data["status"]
                if data.get("error"):  # the log was replaced by something the service does not read (a link)
                    click.echo(f"tcloud: {data['error']}", err=True)
    except ApiClientError as exc:
        _die(exc.message if exc.status == 0 else f"{exc.message} (HTTP {exc.status})", exc.errors)
    finally:
        if safe is not None:
            sys.stdout.write(safe.flush())
            sys.stdout.flush()
    click.echo(f"task {task_id} {status}", err=True)
    return 0 if status == "succeeded" else 1


@cli.command()
@click.argument("ref", metavar="ID[:INDEX]", type=_task_ref())
@click.option("-f", "--follow", is_flag=True, help="Keep streaming until the task ends.")
@click.option("--offset", default=0, help="Start at this byte offset.")
@click.option("--raw", is_flag=True,
              help="Write the output as it is, escape sequences included (default: colours kept, other "
                   "terminal controls shown as text, e.g. \\x1b).")
@click.pass_obj
def logs(obj: Ctx, ref: tuple[int, int | None], follow: bool, offset: int, raw: bool) -> None:
    """Print a task's output (stdout and stderr); a task that has not started says so on stderr.

    ID:INDEX is element INDEX of array ID. The output is the task owner's text: terminal controls in it
    other than colours (clipboard writes, titles, cursor moves) are written visibly instead of acted on,
    unless --raw."""
    from .tcloud_arrays import resolve

    client = obj.client
    task_id = resolve(client, ref)
    if follow:
        why = _waiting(_call(client.show, task_id))
        if why:
            _note(f"{why}: following its output once it starts (Ctrl-C stops following, not the task)")
        sys.exit(_follow(client, task_id, offset, raw))
    safe = _log_filter(raw)
    wrote = False
    while True:
        chunk = _call(client.logs, task_id, offset)
        sys.stdout.write(chunk["data"] if safe is None else safe.feed(chunk["data"]))
        wrote = wrote or bool(chunk["data"])
        if chunk["next_offset"] == offset:
            break
        offset = chunk["next_offset"]
    if safe is not None:
        sys.stdout.write(safe.flush())
    sys.stdout.flush()
    if not wrote:
        why = _waiting(_call(client.show, task_id))
        if why:
            _note(f"{why}: no output yet (use -f to wait for it)")


@cli.command()
@click.argument("refs", metavar="ID[:INDEX]...", type=_task_ref(), nargs=-1, required=True)
@click.pass_obj
def cancel(obj: Ctx, refs: tuple[tuple[int, int | None], ...]) -> None:
    """Cancel tasks; ID:INDEX is element INDEX of array ID.

    The id of an array (its first element's) cancels every element not yet ended, as scancel does; the id of a
    pipeline (its first task's) every step not yet ended."""
    from .tcloud_arrays import element_id
    from .termsafe import sanitize

    client = obj.client
    for tid, index in refs:
        if index is not None:
            eid = element_id(client, tid, index)
            t = _call(client.cancel, eid)
            click.echo(f"task {eid} (array {tid}:{index}): {t['status']}")
            continue
        t = _call(client.show, tid)
        if t.get("pipeline_id") == tid:
            p = _call(client.cancel_pipeline, tid)
            click.echo(sanitize(f"pipeline {tid} ({p.get('name')}): {p.get('cancelled', 0)} task(s) cancelled"))
        elif t.get("array_id") == tid:
            a = _call(client.cancel_array, tid)
            click.echo(sanitize(f"array {tid} ({a.get('name')}): {a.get('cancelled', 0)} of {a.get('size')} "
                                "tasks cancelled"))
        else:
            t = _call(client.cancel, tid)
            click.echo(f"task {tid}: {t['status']}")


def _duration_arg(text: str) -> int:
    """``tcloud extend``'s DURATION: 3600 (seconds), 30m, 1h, 1d, 1:30:00; exit 1 naming it otherwise."""
    raw = text.strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= 9:
        return int(raw)
    from tacc_hub.schema.fields import parse_duration_s

    try:
        value = parse_duration_s(raw)
    except ValueError:
        _die(f"bad DURATION {text[:40]!r}: give seconds (3600) or a duration such as 30m, 1h or 1:30:00")
    if not isinstance(value, int):
        _die(f"bad DURATION {text[:40]!r}")
    return value


@cli.command()
@click.argument("task_id", type=int)
@click.argument("duration")
@click.pass_obj
def extend(obj: Ctx, task_id: int, duration: str) -> None:
    """Give a running task more time: DURATION is seconds (3600) or 30m, 1h, 1:30:00.

    Within the site's longest time limit and your GPU-hour budget; prints the new limit and the time left.
    """
    t = _call(obj.client.extend, task_id, _duration_arg(duration), what="extension")
    limit, left, deadline = t.get("time_limit"), t.get("time_left"), t.get("deadline")
    line = f"task {task_id}: time limit now {_hms(limit) if isinstance(limit, int) else '?'}"
    if isinstance(left, int | float):
        line += f", {_span(left)} left"
    if isinstance(deadline, int | float):
        line += f" (ends {_utc(deadline)})"
    click.echo(line)


OUTPUTS_MAX_UNPACKED = 1 << 40
"""Most bytes ``tcloud download`` unpacks (1 TiB): a bound, so that an archive that says more is refused."""


@cli.command()
@click.argument("task_id", type=int)
@click.argument("dest", required=False, type=click.Path())
@click.pass_obj
def download(obj: Ctx, task_id: int, dest: str | None) -> None:
    """Download a task's outputs and log into DEST (default ./task-ID).

    DEST gets ``output.log`` and each of the task's ``outputs`` at the path it had in the
    task's working directory (``outputs: [results]`` gives DEST/results/...).
    """
    import io
    import tarfile

    from tacc_hub.safetar import ArchiveLimits, safe_extractall

    # Outputs are results, not code: the caps of code snapshots (4 GiB, 100k entries) would refuse real ones.
    limits = ArchiveLimits(max_bytes=2**62, max_unpacked_bytes=OUTPUTS_MAX_UNPACKED, max_members=10_000_000)
    data = _call(obj.client.outputs, task_id)
    target = Path(dest or f"task-{task_id}")
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            for m in members:
                m.name = _local_name(m.name)
            safe_extractall(tar, target, limits)
    except (OSError, tarfile.TarError) as exc:
        _die(f"cannot unpack task {task_id}'s outputs into {target}: {exc}")
    click.echo(f"{sum(m.isreg() for m in members)} file(s) in {target}")


def _local_name(name: str) -> str:
    """The service archives output X as ``outputs/X``: put it back at X, unless it would clash with the log."""
    rel = name[len("outputs/"):] if name.startswith("outputs/") else ""
    if not rel or rel in (".", "output.log") or rel.startswith(("output.log/", "./")):
        return name
    return rel


@cli.command()
def schema() -> None:
    """Print the JSON Schema of tacc.yaml (for editors)."""
    from tacc_hub.schema import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def cluster(obj: Ctx, as_json: bool) -> None:
    """Show nodes and GPUs used/free."""
    out = _call(obj.client.cluster)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    rows = []
    for n in out["nodes"]:
        state = n.get("state") or "up"
        if not n.get("schedulable", True):
            state += " (no new tasks)"
        rows.append([n["name"], str(n["gpus"]), str(n["gpus_used"]), str(n["gpus_free"]), str(n.get("switch", "0")),
                     state, ",".join(map(str, n["tasks"]))])
    _table(["NODE", "GPUS", "USED", "FREE", "SWITCH", "STATE", "TASKS"], rows, None, wrap="TASKS")
    click.echo(f"{out['gpus_free']}/{out['gpus']} GPUs free, {out['pending']} pending, {out['running']} running")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def quota(obj: Ctx, as_json: bool) -> None:
    """Show your group, your limits and your group's, and GPU-hours used and left this period."""
    out = _call(obj.client.my_quota)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return

    def num(v: float | int | None, fmt: str = "{}") -> str:
        return "-" if v is None else fmt.format(v)

    ends = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(out["period_end"]))
    click.echo(f"user {out['user']} in group {out['group']}; {out['period']}ly period ends {ends}")
    click.echo(f"{'':6s} {'MAX GPUS':>9s} {'GUARANTEED':>10s} {'GPU-HOURS':>10s} {'USED':>9s} {'LEFT':>9s}")
    for who in ("user", "group"):
        lim = out["limits"][who]
        click.echo(f"{who:6s} {num(lim['max_gpus']):>9s} {num(lim['guaranteed_gpus']):>10s} "
                   f"{num(lim['gpu_hours'], '{:g}'):>10s} {out['used_gpu_hours'][who]:>9.2f} "
                   f"{num(out['remaining_gpu_hours'][who], '{:.2f}'):>9s}")


def _register() -> None:
    from . import tcloud_arrays, tcloud_exec, tcloud_notify, tcloud_ports

    tcloud_ports.register(cli)  # open, port-forward
    tcloud_exec.register(cli)  # exec, shell
    tcloud_arrays.register(cli)  # arrays and pipelines
    tcloud_notify.register(cli)  # notify: e-mail and webhooks on task events


_register()


def main() -> None:
    cli(prog_name="tcloud")


if __name__ == "__main__":
    main()
