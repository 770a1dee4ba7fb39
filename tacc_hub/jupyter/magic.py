"""The ``%tacc`` magic: submit the notebook, a script or a cell as a task, and follow tasks.

```
%load_ext tacc_hub
%tacc submit [NOTEBOOK|SCRIPT] [--gpus N] [--nodes N] [--tasks-per-node N] [--cpus N] [--memory M]
             [--time T] [--partition P] [--runtime NAME] [--name NAME] [--code snapshot|git]
             [--no-packages] [--no-monitor]
             [--array RANGE | --sweep NAME=V1,V2 ...] [--max-running N] [-- ARGS...]
%%tacc [same options]            the cell's code runs as a task (from the current directory's code)
%tacc ps [-s STATE] [-n N]       your tasks
%tacc show ID | logs ID [-f] | cancel ID...
%tacc array ID [--cancel]        an array: counts per state and its elements (or cancel all not yet ended)
```

``--array 0-9`` (Slurm's syntax: ``0-15:2``, ``1,3,8-10``, ``0-15%4``) and ``--sweep lr=1e-3,3e-4 --sweep
bs=32,64`` (the grid: every combination, in the order written) make the submitted spec an ``array``: one
task per element, each seeing ``TACC_ARRAY_INDEX`` and ``TACC_PARAM_<NAME>``, and ``{lr}``-style
placeholders in ARGS replaced item by item. Sweep values are numbers where they read as one (``32``,
``1e-3``), else text as typed; they go into the spec's JSON, never through a shell.

``submit`` without a path submits this kernel's notebook as the Jupyter server names it now
(``session.find_server``: renames followed), and only once saved with the running cell in it;
a notebook's own ``%tacc`` lines are left out of its task. Code is captured as the Lab panel
captures it (``capture``: the server's root bounds which git repository is the user's).
``submit`` returns a live monitor (ipywidgets) in a kernel with a running event loop, and
prints in plain IPython. ``--no-packages`` (or ``TACC_CAPTURE_PACKAGES=0``) leaves the
environment's pinned packages out of the spec. User errors (bad options, an invalid spec,
an API error) print a message, not a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from tacc_hub.client import ApiClientError
from tacc_hub.schema import SpecError, TaskSpec
from tacc_hub.schema.arrays import sweep_grid

from .capture import CaptureError, capture, client_from_env, submit_captured
from .monitor import TaskMonitor
from .session import ServerSession, find_server
from .taskline import detail, status_line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%tacc: {message}\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or self.format_help())  # --help


def _resource_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=int, help="GPUs per node")
    p.add_argument("--nodes", type=int)
    p.add_argument("--tasks-per-node", type=int)
    p.add_argument("--cpus", type=int, help="CPUs per task")
    p.add_argument("--memory", help="memory per node, e.g. 16G")
    p.add_argument("--time", help="time limit, e.g. 30m")
    p.add_argument("--partition")
    p.add_argument("--runtime", help="plain, torchrun, deepspeed, ...")
    p.add_argument("--name")
    p.add_argument("--code", choices=["snapshot", "git"], default="snapshot",
                   help="send a snapshot (default), or the origin remote's commit plus a patch")
    p.add_argument("--no-packages", action="store_true", help="leave the pinned packages out of the spec")
    p.add_argument("--no-monitor", action="store_true", help="print instead of showing the live monitor")
    p.add_argument("--array", metavar="RANGE",
                   help="an array of tasks: 0-9, 0-15:2, 1,3,8-10, 0-15%%4 (at most 4 at once)")
    p.add_argument("--sweep", metavar="NAME=V1,V2", action="append", default=[],
                   help="a parameter grid (repeat for more parameters: every combination is one task)")
    p.add_argument("--max-running", type=int, metavar="N", help="at most N elements of the array at once")


def parser() -> _Parser:
    p = _Parser(prog="%tacc", add_help=True)
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser, required=True)
    s = sub.add_parser("submit", help="submit a notebook or script (default: the notebook of this kernel)")
    s.add_argument("path", nargs="?")
    _resource_options(s)
    ps = sub.add_parser("ps", help="your tasks")
    ps.add_argument("-s", "--state", action="append", default=[])
    ps.add_argument("-n", "--limit", type=int, default=20)
    for name in ("show", "logs"):
        q = sub.add_parser(name)
        q.add_argument("task_id", type=int)
        if name == "logs":
            q.add_argument("-f", "--follow", action="store_true", help="wait until the task ends")
    c = sub.add_parser("cancel")
    c.add_argument("task_ids", type=int, nargs="+")
    a = sub.add_parser("array", help="an array: counts per state and its elements")
    a.add_argument("array_id", type=int)
    a.add_argument("--cancel", action="store_true", help="cancel every element not yet ended")
    return p


def cell_parser() -> _Parser:
    p = _Parser(prog="%%tacc")
    _resource_options(p)
    return p


def _packages_default() -> bool:
    return os.environ.get("TACC_CAPTURE_PACKAGES", "1").lower() not in ("0", "false", "no", "off")


def _resources(ns: argparse.Namespace) -> dict[str, Any]:
    return {"gpus": ns.gpus, "nodes": ns.nodes, "tasks_per_node": ns.tasks_per_node, "cpus": ns.cpus,
            "memory": ns.memory, "time": ns.time, "partition": ns.partition}


def array_of(ns: argparse.Namespace) -> dict[str, Any] | None:
    """The spec's ``array`` from ``--array`` / ``--sweep`` / ``--max-running`` (None: a single task)."""
    if ns.array is not None and ns.sweep:
        raise UsageError("%tacc submit: give --array or --sweep, not both")
    if ns.max_running is not None and ns.array is None and not ns.sweep:
        raise UsageError("%tacc submit: --max-running is for an array (--array or --sweep)")
    array: dict[str, Any]
    if ns.array is not None:
        spec = ns.array.strip()
        max_running = None
        if "%" in spec:
            spec, _, limit = spec.partition("%")
            if not limit.isdigit():
                raise UsageError(f"%tacc submit: --array {ns.array}: after % comes how many run at once, e.g. 0-15%4")
            max_running = int(limit)
        array = {"range": spec}
        if max_running is not None:
            array["max_running"] = max_running
    elif ns.sweep:
        try:
            array = {"grid": sweep_grid(ns.sweep)}  # the same reading as tcloud submit --sweep
        except ValueError as exc:
            raise UsageError(f"%tacc submit: {exc}") from None
    else:
        return None
    if ns.max_running is not None:
        array["max_running"] = ns.max_running
    return array


def with_array(spec: TaskSpec, array: dict[str, Any] | None) -> TaskSpec:
    """The spec with ``array`` added, validated as the service validates it (a UsageError naming the field)."""
    if array is None:
        return spec
    data = spec.model_dump(mode="json", by_alias=True)
    data["array"] = array
    try:
        return TaskSpec.model_validate(data)
    except (SpecError, ValueError) as exc:
        errors = getattr(exc, "errors", None)
        lines = []
        if callable(errors):  # pydantic's ValidationError
            for e in errors():
                where = ".".join(str(x) for x in e.get("loc", ()))
                lines.append(f"\n  {where}: {e.get('msg')}")
        raise UsageError(f"tacc: the array is not valid{''.join(lines) or f': {exc}'}") from None


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _current_cell(shell: Any) -> str:
    """The source of the cell running now, as typed ("" where IPython keeps no history)."""
    raw = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or [""]
    return str(raw[-1])


def _started_as(shell: Any) -> Path | None:
    """The notebook the kernel was told at its start (stale after a rename): only where no server answers."""
    ns = getattr(shell, "user_ns", {})
    for value in (ns.get("__vsc_ipynb_file__"), ns.get("__session__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(value, str) and value.endswith(".ipynb"):
            # jupyter_server 2 names it absolute; older ones relative to the root, the kernel runs in its folder
            for candidate in (Path(value), Path.cwd() / Path(value).name):
                if candidate.is_file():
                    return candidate
    return None


def this_notebook(shell: Any, server: ServerSession | None) -> Path:
    """The notebook this kernel runs, as the user sees it now, and saved: else a UsageError saying what to do.

    The server's sessions know the path now (renames included); the cell running ``%tacc submit`` must be
    in the saved file, else what is on disk is not what the user sees (not saved since it was written).
    """
    if server is not None and server.notebook is not None:
        notebook = server.notebook
        if notebook.suffix != ".ipynb":
            raise UsageError(f"%tacc submit: this kernel runs {server.path}, not a notebook: "
                             "give the notebook or script to submit")
    elif server is not None:
        raise UsageError(f"%tacc submit: no notebook of the Jupyter server at {server.url} uses this kernel: "
                         "give the notebook or script to submit")
    else:
        found = _started_as(shell)
        if found is None:
            raise UsageError("%tacc submit: give the notebook or script to submit "
                             "(no Jupyter server says which notebook this kernel runs)")
        notebook = found
    if not notebook.is_file():
        raise UsageError(f"%tacc submit: {notebook.name} is not saved yet: "
                         "save the notebook first (Ctrl+S), then run this cell again")
    cell = _norm(_current_cell(shell))
    if cell and cell not in _saved_cells(notebook):
        raise UsageError(f"%tacc submit: {notebook.name} as saved does not hold this cell yet, so it is not what "
                         "you see: save the notebook first (Ctrl+S), then run this cell again")
    return notebook


def _saved_cells(notebook: Path) -> set[str]:
    try:
        doc = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"%tacc submit: {notebook.name} is not a readable notebook: {exc}") from None
    cells = doc.get("cells", []) if isinstance(doc, dict) else []
    out = set()
    for c in cells:
        if isinstance(c, dict) and c.get("cell_type") == "code":
            src = c.get("source", "")
            out.add(_norm("".join(src) if isinstance(src, list) else str(src)))
    return out


def _api(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except ApiClientError as exc:
        detail = "".join(f"\n  {e.get('field') or '(document)'}: {e.get('message')}" for e in exc.errors)
        raise UsageError(f"tacc: {exc.message}{f' (HTTP {exc.status})' if exc.status else ''}{detail}") from None


@magics_class
class TaccMagics(Magics):
    @line_cell_magic
    def tacc(self, line: str, cell: str | None = None) -> Any:
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%tacc: {exc}") from None
        script_args: list[str] = []
        if "--" in argv:  # what follows -- goes to the script
            at = argv.index("--")
            argv, script_args = argv[:at], argv[at + 1:]
        if cell is not None:
            ns = cell_parser().parse_args(argv)
            return self._submit(ns, path=None, cell=cell, args=script_args, server=find_server())
        ns = parser().parse_args(argv)
        if ns.cmd == "submit":
            server = find_server()
            path = ns.path or str(this_notebook(self.shell, server))
            return self._submit(ns, path=path, cell=None, args=script_args, server=server)
        with client_from_env() as client:
            if ns.cmd == "ps":
                self._ps(_api(client.list, states=ns.state or None, limit=ns.limit))
            elif ns.cmd == "show":
                t = _api(client.show, ns.task_id)
                print(f"task {t['id']} {t['name']}: {status_line(t)}")
            elif ns.cmd == "logs":
                self._logs(client, ns.task_id, ns.follow)
            elif ns.cmd == "cancel":
                for task_id in ns.task_ids:
                    t = _api(client.cancel, task_id)
                    print(f"task {t['id']}: {t['status']}")
            elif ns.cmd == "array":
                if ns.cancel:
                    a = _api(client.cancel_array, ns.array_id)
                    print(f"array {a['id']} {a['name']}[{a['size']}]: {a.get('cancelled', 0)} cancelled; "
                          f"{_counts(a)}")
                else:
                    self._array(_api(client.array, ns.array_id))
        return None

    def _submit(self, ns: argparse.Namespace, *, path: str | None, cell: str | None, args: list[str],
                server: ServerSession | None) -> Any:
        try:
            cap = capture(path, cell=cell, cwd=Path.cwd(), name=ns.name, resources=_resources(ns),
                          runtime=ns.runtime, args=args, pin_packages=not ns.no_packages and _packages_default(),
                          code=ns.code, project_root=server.root_dir if server else None)
        except CaptureError as exc:
            detail = "".join(f"\n  {e.get('field')}: {e.get('message')}" for e in exc.errors)
            raise UsageError(f"tacc: {exc.message}{detail}") from None
        array = array_of(ns)
        if array is not None:
            cap = replace(cap, spec=with_array(cap.spec, array))
        for note in cap.notes:
            print(f"note: {note}", file=sys.stderr)
        with client_from_env() as client:
            task = _api(submit_captured, client, cap)
        if task.get("array"):
            self._submitted_array(task)
            return None
        print(f"submitted task {task['id']} ({task['name']}, spec {task['digest'][:12]}): {status_line(task)}")
        if ns.no_monitor:
            return None
        try:
            monitor = TaskMonitor(client_from_env, task)
        except ImportError:
            monitor = None
        if monitor is None or not monitor.start():
            print(f"follow it with: %tacc logs {task['id']} -f")
            return None
        return monitor

    @staticmethod
    def _submitted_array(task: dict[str, Any]) -> None:
        """What a submitted array is and how to follow it (the live monitor is for one task)."""
        a = task["array"]
        ids = task.get("task_ids") or [task["id"]]
        span = f"task {ids[0]}" if len(ids) == 1 else f"tasks {ids[0]}..{ids[-1]}"
        limit = f", at most {a['max_running']} at once" if a.get("max_running") else ""
        print(f"submitted array {a['id']} ({a['name']}[{a['size']}], {span}{limit}): {_counts(a)}")
        print(f"follow it with: %tacc array {a['id']}   (its elements; %tacc logs {ids[0]} -f for the first;"
              f" %tacc array {a['id']} --cancel cancels all), or in the GPU tasks panel")

    @staticmethod
    def _array(a: dict[str, Any]) -> None:
        limit = f", at most {a['max_running']} at once" if a.get("max_running") else ""
        print(f"array {a['id']} {a['name']}[{a['size']}]: {a['status']}{limit}; {_counts(a)}")
        if a.get("reason") and a.get("waiting"):
            print(f"  {a['reason']}")
        print(f"{'INDEX':>6}  {'TASK':>6}  {'STATUS':<10}  QUEUE / REASON")
        for t in a.get("tasks", []):
            print(f"{t.get('array_index', ''):>6}  {t['id']:>6}  {t['status']:<10}  {detail(t)}")

    @staticmethod
    def _ps(out: dict[str, Any]) -> None:
        tasks = out.get("tasks", [])
        if not tasks:
            print("no tasks")
            return
        print(f"{'ID':>6}  {'STATUS':<10}  {'NAME':<24}  QUEUE / REASON")
        for t in tasks:
            print(f"{t['id']:>6}  {t['status']:<10}  {t['name'][:24]:<24}  {detail(t)}")

    @staticmethod
    def _logs(client: Any, task_id: int, follow: bool) -> None:
        offset = 0
        while True:
            chunk = _api(client.logs, task_id, offset=offset)
            if chunk.get("data"):
                print(chunk["data"], end="", flush=True)
            offset = int(chunk.get("next_offset", offset))
            if not follow or chunk.get("eof"):
                if follow:
                    print(f"\n[task {task_id} {chunk.get('status')}]")
                return
            if not chunk.get("data"):
                time.sleep(0.5)


def _counts(a: dict[str, Any]) -> str:
    """``3 done, 2 running, 4 waiting, 1 failed`` (cancelled too when there are)."""
    text = (f"{a.get('done', 0)} done, {a.get('running', 0)} running, {a.get('waiting', 0)} waiting, "
            f"{a.get('failed', 0)} failed")
    cancelled = (a.get("counts") or {}).get("cancelled", 0)
    return text + (f", {cancelled} cancelled" if cancelled else "")


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(TaccMagics)
