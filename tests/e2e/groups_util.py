"""Helpers of the array, pipeline and dependency end-to-end tests (issue 20).

Specs go to the REST API as JSON (code uploaded as a snapshot here, as tcloud does), so each test
names exactly what it sends. ``Recorder`` is a small program every element runs: it writes what it
saw (argv, its TACC_* environment, params.json, monotonic start and end) to ``rec.json`` in its
working directory, which the test reads back from the service's data directory. CLOCK_MONOTONIC is
one clock for every process of the machine, so the intervals of different elements compare.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .conftest import Api

TERMINAL = {"succeeded", "failed", "cancelled", "lost"}

RECORDER = r'''
import json, os, sys, time
start = time.monotonic()
env = {k: v for k, v in os.environ.items() if k.startswith("TACC_ARRAY_") or k.startswith("TACC_PARAM")}
params = None
path = os.environ.get("TACC_PARAMS_FILE") or os.path.join(os.environ.get("TACC_TASKDIR", "."), "params.json")
try:
    with open(path) as fh:
        params = json.load(fh)
except OSError as e:
    params = {"error": str(e)}
sleep = float(os.environ.get("REC_SLEEP", "1"))
for a in sys.argv[1:]:
    if a.startswith("--sleep="):
        sleep = float(a.split("=", 1)[1])
with open("pid", "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(sleep)
end = time.monotonic()
rec = {"argv": sys.argv[1:], "env": env, "params": params, "start": start, "end": end, "params_path": path}
with open("rec.json.tmp", "w") as fh:
    json.dump(rec, fh)
os.replace("rec.json.tmp", "rec.json")
print("REC " + json.dumps(rec), flush=True)
print("element", os.environ.get("TACC_ARRAY_INDEX"), "done", flush=True)
'''


def code_dir(files: dict[str, str]) -> Path:
    d = Path(tempfile.mkdtemp(prefix="tacc-groups-code-"))
    for name, text in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    return d


def upload_code(api: Api, files: dict[str, str] | None = None) -> dict[str, str]:
    """Pack ``files`` (default: the recorder as rec.py), PUT it, return the spec's ``code`` block."""
    from tacc_hub.snapshot import digest_of, pack

    d = code_dir(files or {"rec.py": RECORDER})
    try:
        data = pack(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    digest = digest_of(data)
    status, out = api.call("PUT", f"/api/code/{digest}", data, content_type="application/gzip")
    assert status in (200, 201), (status, out)
    return {"kind": "snapshot", "digest": digest}


def array_of(api: Api, array_id: int, state: str | None = None) -> dict[str, Any]:
    status, body = api.call("GET", f"/api/arrays/{array_id}" + (f"?state={state}" if state else ""))
    assert status == 200, (status, body)
    return body


def wait_array(api: Api, array_id: int, pred: Any, timeout: float = 120, what: str = "",
               every: float = 0.2) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = array_of(api, array_id)
        if pred(last):
            return last
        time.sleep(every)
    raise AssertionError(f"array {array_id} not {what or pred} in {timeout} s: "
                         f"{ {k: last.get(k) for k in ('status', 'counts', 'running', 'reason')} }")


def wait_ended(api: Api, task_ids: Sequence[int], timeout: float = 120) -> dict[int, dict[str, Any]]:
    """Every one of ``task_ids`` in a terminal state; their last TaskOut."""
    out: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    for tid in task_ids:
        out[tid] = api.wait_status(tid, TERMINAL, timeout=max(1.0, deadline - time.monotonic()))
    return out


def cancel_and_wait(api: Api, task_ids: Sequence[int], array_ids: Sequence[int] = (), timeout: float = 120) -> None:
    """Clean-up: cancel the arrays and tasks given (not yet ended) and wait until all have ended."""
    for aid in array_ids:
        api.call("POST", f"/api/arrays/{aid}/cancel")
    for tid in task_ids:
        _, t = api.call("GET", f"/api/tasks/{tid}")
        if t.get("status") not in TERMINAL:
            api.call("POST", f"/api/tasks/{tid}/cancel")
    all_ids = list(task_ids)
    for aid in array_ids:
        status, body = api.call("GET", f"/api/arrays/{aid}")
        if status == 200:
            all_ids += [t["id"] for t in body.get("tasks", [])]
            for t in body.get("tasks", []):
                if t.get("status") not in TERMINAL:
                    api.call("POST", f"/api/tasks/{t['id']}/cancel")
    wait_ended(api, sorted(set(all_ids)), timeout=timeout)


def record(data_dir: Path, task_id: int, timeout: float = 10) -> dict[str, Any]:
    """What the recorder of task ``task_id`` wrote (it writes rec.json last, atomically)."""
    path = data_dir / "tasks" / str(task_id) / "work" / "rec.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} wrote no {path.name}")


def record_from_log(text: str) -> dict[str, Any]:
    """The recorder's line in a task's log (``REC {...}``), where its work directory is not at hand."""
    lines = [ln for ln in text.splitlines() if ln.startswith("REC ")]
    assert len(lines) == 1, text[-2000:]
    return json.loads(lines[0][4:])


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at t before a start at t)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def param_text(v: object) -> str:
    """A parameter's value as the task sees it (contract: str as is, bool true/false, int, float repr)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)
