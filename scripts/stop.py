"""Stop what ``scripts/start.sh`` started (``./scripts/start.sh stop``), cleanly, leaving nothing running.

start.sh records what it started in ``$TACC_STATE_DIR/running.json`` (the hub's or the service's pid,
ports, the admin name). In order: every user's server is stopped through the hub's API (an admin token
from ``jupyterhub token``), every active task is cancelled through the service's API (an admin token
of the service's own) and awaited, then the hub (or the service alone) gets SIGTERM and is awaited;
it stops its managed services and the proxy. Tasks are supervised by root launchers (``tacc-launcher``,
which outlive the service): a task whose supervisor still runs then (no ``exitcode`` in its control dir
``<state>/run/<id>/``) is killed through ``tacc-launcher <state>/run kill <id>``, which kills every process
of the task, and awaited. Last, any process still carrying the state directory or the data directory in
its command line or environment (a kernel, a task's child) is named, then terminated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tacc_hub.client import TaccClient
from tacc_hub.store import ACTIVE

NONCE = f"TACC_STOPPING={os.getpid()}"  # in the environment of what we start ourselves (jupyterhub token)


def say(msg: str) -> None:
    print(f"stop: {msg}", file=sys.stderr, flush=True)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat[stat.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def ours(*dirs: Path) -> list[int]:
    """Live processes whose command line or environment names one of ``dirs`` (not us, nor our callers)."""
    keys = [str(d).encode() for d in dirs]
    skip = ancestors()
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in skip:
            continue
        try:
            fields = (proc / "cmdline").read_bytes().split(b"\0") + (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if NONCE.encode() in fields:
            continue
        if any(key in f and (f.endswith(key) or key + b"/" in f) for f in fields for key in keys) \
                and alive(int(proc.name)):
            out.append(int(proc.name))
    return sorted(out)


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.2)


def hub_api(base: str, token: str, method: str, path: str) -> Any:
    req = urllib.request.Request(f"{base}/hub/api{path}", method=method,  # noqa: S310 (base: http://127.0.0.1)
                                 headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310
        body = resp.read()
    return json.loads(body) if body else None


def stop_servers(run: dict[str, Any], env: dict[str, str], timeout: float) -> None:
    base = run["hub_api"]
    cmd = [str(Path(sys.executable).parent / "jupyterhub"), "token", "-f", run["config"], run["admin"]]
    got = subprocess.run(cmd, env=env, cwd=run["repo"], capture_output=True, text=True, timeout=120, check=False)
    token = got.stdout.strip().splitlines()[-1] if got.returncode == 0 and got.stdout.strip() else ""
    if not token:
        say(f"no hub admin token ({got.stderr.strip()[-300:]}); servers are stopped with their tasks")
        return
    users = hub_api(base, token, "GET", "/users")
    for user in users:
        for name in (user.get("servers") or {}):
            say(f"stopping {user['name']}'s server{' ' + name if name else ''}")
            path = f"/users/{user['name']}/servers/{name}" if name else f"/users/{user['name']}/server"
            with contextlib.suppress(OSError):
                hub_api(base, token, "DELETE", path)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(u.get("servers") for u in hub_api(base, token, "GET", "/users")):
            return
        time.sleep(0.5)
    say("some servers did not stop in time; their tasks are cancelled next")


def cancel_tasks(url: str, token: str, timeout: float) -> None:
    states = sorted(s.value for s in ACTIVE)
    with TaccClient(url, token) as client:
        active = client.list(states=states, limit=500, all_users=True)["tasks"]
        for task in active:
            if task["status"] != "cancelling":
                say(f"cancelling task {task['id']} ({task['owner']}, {task['status']})")
                with contextlib.suppress(Exception):
                    client.cancel(int(task["id"]))
        end = time.monotonic() + timeout
        while active and time.monotonic() < end:
            time.sleep(0.5)
            active = client.list(states=states, limit=500, all_users=True)["tasks"]
        if active:
            say(f"tasks still active after {timeout:.0f} s: {[t['id'] for t in active]}")


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[19])


def live_supervisors(run_dir: Path) -> dict[int, int]:
    """{task id: supervisor pid} of the tasks whose root supervisor still runs (no exit status yet)."""
    out: dict[int, int] = {}
    if not run_dir.is_dir():
        return out
    for ctl in run_dir.iterdir():
        if not ctl.name.isdigit() or (ctl / "exitcode").exists():
            continue
        try:
            info = json.loads((ctl / "supervisor.json").read_text())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if start_time(pid) is not None and start_time(pid) == info.get("start_time"):
            out[int(ctl.name)] = pid
    return out


def kill_tasks(run_dir: Path, timeout: float) -> None:
    """``tacc-launcher RUN_DIR kill ID`` for every task still supervised: all its processes get SIGKILL."""
    left = live_supervisors(run_dir)
    for task_id, pid in sorted(left.items()):
        say(f"task {task_id} still runs (supervisor pid {pid}): killing its processes (tacc-launcher kill)")
        got = subprocess.run([sys.executable, "-I", "-m", "tacc_hub.launcher", str(run_dir), "kill", str(task_id)],
                             capture_output=True, text=True, timeout=60, check=False,
                             env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": os.environ.get("LANG", "C.UTF-8")})
        if got.returncode != 0:
            say(f"tacc-launcher kill {task_id} failed: {got.stderr.strip()[-300:]}")
    end = time.monotonic() + timeout
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = live_supervisors(run_dir)
    if left:
        say(f"supervisors still running after {timeout:.0f} s: {sorted(left.values())}")


def main() -> int:
    state = Path(os.environ.get("TACC_STATE_DIR") or Path.cwd() / ".tacc").resolve()
    record = state / "running.json"
    try:
        run = json.loads(record.read_text())
    except (OSError, ValueError):
        run = None
    timeout = float(os.environ.get("TACC_STOP_TIMEOUT", "60"))
    env = {**os.environ, "TACC_STATE_DIR": str(state), "TACC_STOPPING": str(os.getpid())}
    pid = int(run["pid"]) if run else 0
    if run and alive(pid):
        try:
            if run["mode"] == "hub":
                stop_servers(run, env, timeout)
            token = (state / "stop-token").read_text().strip()
            cancel_tasks(run["tacc_url"], token, timeout)
        except Exception as exc:
            say(f"could not stop servers and tasks through the APIs ({exc}); stopping the processes instead")
        say(f"stopping the {'hub' if run['mode'] == 'hub' else 'service'} (pid {pid})")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if wait_gone([pid], timeout):
            say(f"pid {pid} did not stop on SIGTERM; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    else:
        say(f"nothing recorded as running in {state}")
    kill_tasks(state / "run", 30)
    data = Path(run["data_dir"]) if run and run.get("data_dir") else Path(f"{state}-data")
    left = wait_gone(ours(state, data), 10)
    if left:
        for p in left:
            with contextlib.suppress(OSError):
                say(f"left running, terminating: {p} {Path(f'/proc/{p}/cmdline').read_bytes()[:200]!r}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGTERM)
        for p in wait_gone(left, 10):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    record.unlink(missing_ok=True)
    say("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
