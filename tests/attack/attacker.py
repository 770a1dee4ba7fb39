"""A hostile student's task: tries, from inside its own task, everything issue 17 lists, and reports each try.

Run inside a task (standard library only): ``python attacker.py targets.json``. ``targets.json``
names what the attacker is after: the service's state (database, code store, CLI), a victim's task
(its files, its control directory, its processes). Every attempt prints one line
``ATTACK <name> BLOCKED|SUCCEEDED <detail>``, and the last line is ``ATTACK-SUMMARY {"attempts": n,
"succeeded": [names]}``. An attempt that cannot be made (no target found) counts as SUCCEEDED with
"no target": a suite that tries nothing must not pass.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from typing import Any

results: list[tuple[str, bool, str]] = []


def attempt(name: str, fn: Callable[[], Any]) -> None:
    """``fn`` succeeding (returning anything but False) means the attack worked."""
    try:
        got = fn()
    except OSError as exc:
        results.append((name, False, f"{type(exc).__name__}: {exc.strerror}"))
        return
    except sqlite3.Error as exc:
        results.append((name, False, f"sqlite3: {exc}"))
        return
    if got is False:
        results.append((name, False, "no effect"))
    else:
        results.append((name, True, repr(got)[:200]))


def procs_of(uid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as fh:
                    uids = next(line.split()[1:] for line in fh if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(uids[0]) == uid:
                out.append(int(name))
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ancestors() -> list[int]:
    out, pid = [], os.getppid()
    while pid > 1:
        out.append(pid)
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        pid = int(data[data.rfind(b")") + 2:].split()[1])
    return out


def read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(64)


def write(path: str, data: bytes, mode: str = "ab") -> bool:
    with open(path, mode) as fh:
        fh.write(data)
    return True


def kill_any(pids: list[int], sig: int) -> Any:
    if not pids:
        return "no target"
    done = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            done.append(pid)
        except ProcessLookupError:
            continue
        except PermissionError:
            continue
    return done or False


def environ_any(pids: list[int]) -> Any:
    if not pids:
        return "no target"
    got = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if fh.read(1):
                    got.append(pid)
        except OSError:
            continue
    return got or False


def run_cli(cli: str, state_dir: str) -> Any:
    proc = subprocess.run([cli, "token", os.environ.get("USER", "me"), "--admin", f"--state-dir={state_dir}"],
                          capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout.strip() or False if proc.returncode == 0 else False


def sqlite_insert(db: str) -> Any:
    conn = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=1)
    conn.execute("INSERT INTO api_tokens (token_hash, user, admin, created_at) VALUES ('x', 'mallory', 1, 0)")
    conn.commit()
    return True


def main() -> int:
    t = json.loads(open(sys.argv[1]).read())
    v = t["victim"]
    attempt("read the service database", lambda: read(t["db"]))
    attempt("write the service database", lambda: write(t["db"], b"x"))
    attempt("insert an admin token into the database", lambda: sqlite_insert(t["db"]))
    attempt("list the service's state dir", lambda: os.listdir(t["state_dir"]))
    attempt("find the service CLI on PATH", lambda: shutil.which("tacc-hub") or False)
    attempt("mint an admin token with the service CLI", lambda: run_cli(t["cli"], t["state_dir"]))
    attempt("list every task's directory", lambda: os.listdir(os.path.join(t["data_dir"], "tasks")))
    attempt("read a code snapshot in the code store", lambda: read(t["code_archive"]))
    attempt("overwrite a code snapshot in the code store", lambda: write(t["code_archive"], b"x", "r+b"))
    attempt("list the victim's task dir", lambda: os.listdir(v["task_dir"]))
    for rel in ("launch.sh", "output.log", "work/secret.txt", "checkpoint/secret.txt"):
        attempt(f"read the victim's {rel}", lambda rel=rel: read(os.path.join(v["task_dir"], rel)))
    attempt("read the victim's user dir", lambda: os.listdir(v["user_dir"]))
    attempt("append a forged line to the victim's log",
            lambda: write(os.path.join(v["task_dir"], "output.log"), b"forged by the attacker\n"))
    attempt("write the victim's exit status", lambda: write(os.path.join(v["control_dir"], "exitcode"), b"0\n", "w"))
    attempt("read the victim's launch.json", lambda: read(os.path.join(v["control_dir"], "launch.json")))
    mine_ctl = os.path.join(t["state_dir"], "run", os.environ.get("TACC_TASK_ID", "0"))
    attempt("write my own exit status", lambda: write(os.path.join(mine_ctl, "exitcode"), b"0\n", "w"))
    victim_pids = procs_of(v["uid"])
    attempt("read the environment of the victim's processes", lambda: environ_any(victim_pids))
    attempt("read the service's environment", lambda: environ_any([t["service_pid"]]))
    attempt("kill the victim's processes", lambda: kill_any(victim_pids, signal.SIGKILL))
    marks = t.get("supervisor_marks", ["tacc_hub.launcher", "tacc-launcher"])  # Slurm: slurmstepd
    supervisors = [p for p in procs_of(0) if any(m in cmdline(p) for m in marks)]
    mine = [p for p in ancestors() if p in supervisors]
    attempt("signal the victim's supervisor", lambda: kill_any([p for p in supervisors if p not in mine],
                                                               signal.SIGKILL))
    attempt("kill my own supervisor", lambda: kill_any(mine, signal.SIGKILL))
    for name, ok, detail in results:
        print(f"ATTACK {name} {'SUCCEEDED' if ok else 'BLOCKED'} {detail}", flush=True)
    print("ATTACK-SUMMARY " + json.dumps({"attempts": len(results), "succeeded": [n for n, ok, _ in results if ok]}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
