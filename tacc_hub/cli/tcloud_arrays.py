"""tcloud's part for many tasks at once (issue 20): arrays and pipelines in ps, show, logs, cancel and submit.

- ``ID:INDEX`` names element INDEX of array ID (:class:`TaskRef`; resolved with ``GET /api/arrays/ID?index=``);
  a bare ``ID`` is a task id, which is also how an array (its first element's id) and a pipeline (its
  first task's id) are named: ``cancel`` and ``show`` of such an id act on the whole array or pipeline
  (as ``scancel`` of an array job id), a pipeline before an array.
- ``ps`` shows one row per array (``NAME[size]``, counts per state in ``TASKS``) and per pipeline (its
  steps' states), unless ``--expand``; the rows of tasks of their own are as before.
- ``submit`` of a pipeline file (a top-level ``steps:``) uploads each step's code and submits it as one
  request; ``--array`` and ``--sweep`` replace a spec's ``array``.

Every name, reason and step text from the service is written through :func:`termsafe.sanitize`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import click

from .termsafe import sanitize

if TYPE_CHECKING:
    from tacc_hub.client import TaccClient

MAX_PAGES = 20
"""Most extra pages of 500 tasks ``ps`` reads to fill its rows when array elements take up the first page."""

RUNNING = ("starting", "running", "cancelling")
COUNT_ORDER = ("running", "waiting", "succeeded", "failed", "cancelled", "lost")


class TaskRef(click.ParamType):
    """``12`` (a task, an array or a pipeline) or ``12:7`` (element 7 of array 12): (id, index or None)."""

    name = "ID[:INDEX]"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[int, int | None]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        m = re.fullmatch(r"([0-9]{1,18}):([0-9]{1,10})|([0-9]{1,18})", text) if text.isascii() else None
        if m is None:
            self.fail(f"{text[:40]!r} is not a task id (12) or an array element (12:7)", param, ctx)
        if m.group(3) is not None:
            return int(m.group(3)), None
        return int(m.group(1)), int(m.group(2))


def element_id(client: TaccClient, array_id: int, index: int) -> int:
    """The task id of element ``index`` of array ``array_id`` (exit 1 naming them when there is none)."""
    from .tcloud import _call, _die

    out = _call(client.array, array_id, index=index)
    tasks = [t for t in out.get("tasks", []) if isinstance(t, dict) and t.get("array_index") == index]
    if not tasks:
        _die(f"array {array_id} has no element {index} (it has {out.get('size', '?')} elements)")
    return int(tasks[0]["id"])


def resolve(client: TaccClient, ref: tuple[int, int | None]) -> int:
    """The task id a :class:`TaskRef` names."""
    tid, index = ref
    return tid if index is None else element_id(client, tid, index)


def ref_text(ref: tuple[int, int | None]) -> str:
    return str(ref[0]) if ref[1] is None else f"{ref[0]}:{ref[1]}"


def counts_text(counts: dict[str, Any]) -> str:
    """Elements per state for people: "4 running, 60 waiting, 36 succeeded" (starting/cancelling count as running,
    pending as waiting; states without elements left out)."""
    merged: dict[str, int] = {}
    for state, n in counts.items():
        if not isinstance(n, int) or n <= 0:
            continue
        key = "running" if state in RUNNING else "waiting" if state == "pending" else str(state)
        merged[key] = merged.get(key, 0) + n
    order = [k for k in COUNT_ORDER if k in merged] + sorted(k for k in merged if k not in COUNT_ORDER)
    return ", ".join(f"{merged[k]} {sanitize(k)}" for k in order) or "no tasks"


def steps_text(steps: list[Any]) -> str:
    """A pipeline's steps and their states: "prepare succeeded, train running, evaluate pending"."""
    parts = []
    for s in steps:
        if isinstance(s, dict):
            parts.append(f"{sanitize(str(s.get('name', '?')))} {sanitize(str(s.get('status', '?')))}")
    return ", ".join(parts) or "no steps"


def pipeline_reason(p: dict[str, Any]) -> str:
    """The first reason among steps that have not succeeded, named by its step ("train: Dependency: ...")."""
    for s in p.get("steps") or []:
        if isinstance(s, dict) and s.get("status") != "succeeded" and s.get("reason"):
            return f"{s.get('name')}: {s['reason']}"
    return ""


def _group_row(kind: str, g: dict[str, Any], all_users: bool) -> list[str]:
    from .tcloud import _ago

    if kind == "array":
        name, tasks = f"{g.get('name', '?')}[{g.get('size', '?')}]", counts_text(g.get("counts") or {})
        reason = str(g.get("reason") or "")
    else:
        name, tasks = str(g.get("name", "?")), steps_text(g.get("steps") or [])
        reason = pipeline_reason(g)
    return [str(g.get("id")), name, str(g.get("status", "?")), tasks, *([str(g.get("owner", ""))] if all_users else []),
            "-", _ago(g.get("created_at")), "-", "-", "-", "-", reason]


def _fetch_groups(client: TaccClient, kind: str, ids: set[int], all_users: bool) -> dict[int, dict[str, Any]]:
    """The arrays (or pipelines) ``ids``: from the newest listed, then one by one for any older one."""
    from .tcloud import _optional

    if not ids:
        return {}
    lister = client.arrays if kind == "array" else client.pipelines
    listed = _optional(lambda: lister(limit=min(500, max(50, len(ids))), all_users=all_users)) or {}
    found = {int(g["id"]): g for g in listed.get(f"{kind}s", []) if isinstance(g, dict) and g.get("id") in ids}
    for gid in sorted(ids - set(found)):
        one = _optional(lambda gid=gid: client.array(gid, tasks=False) if kind == "array" else client.pipeline(gid))
        if one is not None:
            found[gid] = one
    return found


def grouped_rows(client: TaccClient, first: dict[str, Any], limit: int, states: list[str] | None,
                 all_users: bool) -> tuple[list[list[str]], int]:
    """``ps``'s rows, newest first: a task of its own as ``task_row`` makes it, an array or pipeline as one row.

    Pages of tasks are read until ``limit`` rows are found (array elements take no row of their own),
    at most ``MAX_PAGES`` more. A page that ends inside an array whose last element (id = array id +
    size - 1) was seen skips to below the array's id: its elements fill exactly that range of ids (the
    store inserts them in one transaction, the array's id is its first's), so nothing else is skipped.
    Returns the rows and how many tasks were read.
    """
    from .tcloud import _call, task_row

    lone: dict[int, dict[str, Any]] = {}
    arrays: set[int] = set()
    pipelines: set[int] = set()
    top: dict[int, int] = {}  # array id -> the highest element id seen
    known: dict[int, dict[str, Any]] = {}
    page, pages, read = first, 0, 0
    while True:
        tasks = [t for t in page.get("tasks", []) if isinstance(t, dict)]
        for t in tasks:
            read += 1
            if t.get("array_id"):
                top[int(t["array_id"])] = max(top.get(int(t["array_id"]), 0), int(t["id"]))
            if t.get("pipeline_id"):
                pipelines.add(int(t["pipeline_id"]))
            elif t.get("array_id"):
                arrays.add(int(t["array_id"]))
            else:
                lone[int(t["id"])] = t
        if len(lone) + len(arrays) + len(pipelines) >= limit or not page.get("next_before") or pages >= MAX_PAGES:
            break
        before = int(page["next_before"])
        last = tasks[-1] if tasks else {}
        aid = last.get("array_id")
        if isinstance(aid, int) and 0 < aid < int(last.get("id", 0)):
            if aid not in known:
                known.update(_fetch_groups(client, "array", {aid}, all_users))
            size = (known.get(aid) or {}).get("size")
            if isinstance(size, int) and top.get(aid) == aid + size - 1:
                before = aid  # the rest of this array's elements: no row of their own
        pages += 1
        page = _call(client.list, states=states, limit=500, before=before, all_users=all_users)
    arrays_out = {k: v for k, v in known.items() if k in arrays}
    arrays_out.update(_fetch_groups(client, "array", arrays - set(arrays_out), all_users))
    found = {**{("array", k): v for k, v in arrays_out.items()},
             **{("pipeline", k): v for k, v in _fetch_groups(client, "pipeline", pipelines, all_users).items()}}
    keyed: list[tuple[int, list[str]]] = [(tid, task_row(t, all_users, grouped=True)) for tid, t in lone.items()]
    keyed += [(gid, _group_row(kind, g, all_users)) for (kind, gid), g in found.items()]
    keyed.sort(key=lambda kr: kr[0], reverse=True)
    return [r for _, r in keyed[:limit]], read


def print_array(client: TaccClient, a: dict[str, Any], fancy: bool | None) -> None:
    """``tcloud show ARRAY_ID``: the array's summary, then its elements (INDEX, ID, STATUS, EXIT, TIME, REASON)."""
    from .tcloud import _ago, _dur, _table

    mr = a.get("max_running")
    click.echo(sanitize(f"array {a.get('id')} {a.get('name')}[{a.get('size')}]  {a.get('status')}"))
    if a.get("reason"):
        click.echo(sanitize(f"reason: {a['reason']}"))
    click.echo(sanitize(f"owner: {a.get('owner')}   created {_ago(a.get('created_at'))}"
                        + (f"   at most {mr} at once" if mr else "")
                        + (f"   pipeline {a['pipeline_id']} step {a.get('step')}" if a.get("pipeline_id") else "")))
    click.echo(counts_text(a.get("counts") or {}))
    rows = [[str(t.get("array_index")), str(t.get("id")), str(t.get("status")),
             "-" if t.get("exit_code") is None else str(t["exit_code"]),
             _dur(t.get("started_at"), t.get("finished_at")), str(t.get("reason") or "")]
            for t in a.get("tasks", []) if isinstance(t, dict)]
    _table(["INDEX", "ID", "STATUS", "EXIT", "TIME", "REASON"], rows, fancy, wrap="REASON", styled="STATUS")


def print_pipeline(p: dict[str, Any], fancy: bool | None) -> None:
    """``tcloud show PIPELINE_ID``: the pipeline, then one line per step (STEP, NEEDS, TASK, STATUS, REASON)."""
    from .tcloud import _ago, _table

    click.echo(sanitize(f"pipeline {p.get('id')} {p.get('name')}  {p.get('status')}"))
    click.echo(sanitize(f"owner: {p.get('owner')}   created {_ago(p.get('created_at'))}"))
    rows = []
    for s in p.get("steps") or []:
        if not isinstance(s, dict):
            continue
        what = f"array {s['array_id']}" if s.get("array_id") else f"task {s.get('task_id')}"
        rows.append([str(s.get("name")), ",".join(map(str, s.get("needs") or [])) or "-", what,
                     str(s.get("status")), str(s.get("reason") or "")])
    _table(["STEP", "NEEDS", "TASKS", "STATUS", "REASON"], rows, fancy, wrap="REASON", styled="STATUS")


def submitted_array(out: dict[str, Any]) -> str:
    """"submitted array 12: 100 tasks (12-111), at most 4 at once"."""
    a = out.get("array") or {}
    ids = [i for i in out.get("task_ids") or [] if isinstance(i, int)]
    size = a.get("size", len(ids))
    span = ""
    if ids:
        lo, hi = min(ids), max(ids)
        span = f" ({lo}-{hi})" if hi - lo + 1 == len(ids) else f" ({lo} to {hi})"
    mr = a.get("max_running")
    return sanitize(f"submitted array {a.get('id', out.get('id'))}: {size} task{'s' if size != 1 else ''}{span}"
                    + (f", at most {mr} at once" if mr else ""))


def submitted_pipeline(p: dict[str, Any]) -> list[str]:
    """"submitted pipeline 30 (train-eval): 3 steps" and one line per step."""
    steps = [s for s in p.get("steps") or [] if isinstance(s, dict)]
    lines = [f"submitted pipeline {p.get('id')} ({p.get('name')}): {len(steps)} step{'s' if len(steps) != 1 else ''}"]
    width = max((len(str(s.get("name"))) for s in steps), default=0)
    for s in steps:
        what = f"array {s['array_id']}" if s.get("array_id") else f"task {s.get('task_id')}"
        needs = s.get("needs") or []
        lines.append(f"  {str(s.get('name')).ljust(width)}  {what}: {s.get('status')}"
                     + (f" (needs {', '.join(map(str, needs))})" if needs else ""))
    return [sanitize(line) for line in lines]


def register(cli: click.Group) -> None:
    """Nothing of its own to add: ps, show, logs, cancel and submit (tcloud.py) call this module's helpers."""
