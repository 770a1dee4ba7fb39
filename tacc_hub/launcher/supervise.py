"""The supervisor: runs ``bash ./launch.sh`` as the task's user and outlives every process of it.

It stays root (the task can neither signal it nor write its files), is a subreaper (orphans of
the task become its children), and ends only when no descendant is left: when the task's main
process exits, leftovers get SIGTERM and, a second later, SIGKILL; on ``cancel`` (SIGTERM to the
supervisor) the whole tree gets SIGTERM and, after the grace period, SIGKILL; on ``kill`` (SIGUSR1)
SIGKILL at once; on ``signal`` (SIGUSR2) the task's main process gets SIGUSR1 (its time-limit
warning) if it traps it, else its child processes that do (``proctree.warn``): never one it would
kill. Then it copies the log into the work tree when the plan asks (as the user) and
writes ``exitcode`` (and ``notes``) into the service's control directory: their presence means
"every process of this run is gone", so the service may hand the GPUs on.

Files in the control directory: ``supervisor.json`` (pid and kernel start time, written before the
task starts), ``supervisor.log`` (its own messages), ``exitcode``, ``notes``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

from .cli import Refused, read_file
from .prepare import drop_to
from .proctree import become_subreaper, descendants, kill_all, reap, signal_tree, start_time, warn

WATCHED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT}
LEFTOVER_GRACE_S = 1.0


def _write(ctl: int, name: str, text: str) -> None:
    tmp = f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=ctl)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.rename(tmp, name, src_dir_fd=ctl, dst_dir_fd=ctl)


def _exec_task(spec: dict[str, Any], account: dict[str, Any] | None, task_fd: int) -> None:
    """In the task's child: a session of its own, the user's identity, output.log as stdout and stderr."""
    try:
        os.setsid()
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        drop_to(account)
        os.umask(0o027)
        os.fchdir(task_fd)
        log = os.open("output.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 65536)
        env = {str(k): str(v) for k, v in spec["env"].items()}
        os.execve("/bin/bash", ["bash", "./launch.sh"], env)  # noqa: S606 - fixed argv, no user text
    except BaseException as exc:  # the child never returns into the supervisor
        with open("/dev/stderr", "w") as fh:
            fh.write(f"tacc-launcher: starting the task failed: {exc}\n")
        os._exit(127)


def _copy_log(spec: dict[str, Any], account: dict[str, Any] | None, task_fd: int) -> None:
    """``log_file`` of the plan: the finished log copied into the work tree, as the user (links stay theirs)."""
    dest = str(spec.get("log_copy") or "")
    if not dest:
        return
    pid = os.fork()
    if pid == 0:
        try:
            drop_to(account)
            os.fchdir(task_fd)
            target = os.path.join("work", dest)
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            with open("output.log", "rb") as src, open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.waitpid(pid, 0)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def supervise(spec: dict[str, Any], account: dict[str, Any] | None, ctl: int, task_fd: int, uid: int,
              gid: int) -> int:
    """Start the task and watch it until its last process is gone; returns the task's exit code."""
    grace = max(0.0, float(spec.get("grace", 10.0)))
    for name in ("exitcode", "notes", ".exitcode.tmp"):
        try:
            os.unlink(name, dir_fd=ctl)
        except FileNotFoundError:
            pass
    become_subreaper()
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    child = os.fork()
    if child == 0:
        _exec_task(spec, account, task_fd)
    me = os.getpid()
    _write(ctl, "supervisor.json", json.dumps({"pid": me, "start_time": start_time(me), "child": child}) + "\n")
    print(json.dumps({"pid": me, "start_time": start_time(me)}), flush=True)
    logfd = os.open("supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644, dir_fd=ctl)
    null = os.open(os.devnull, os.O_RDONLY)
    for target, src in ((0, null), (1, logfd), (2, logfd)):
        os.dup2(src, target)
    sys.stdout = sys.stderr = os.fdopen(1, "w", buffering=1, closefd=False)

    rc: int | None = None
    kill_at: float | None = None
    cancelled = leftovers_termed = False
    leftovers = 0
    reaped: list[tuple[int, int]] = []
    while True:
        for pid, status in reaped + reap():
            if pid == child:
                rc = _exit_code(status)
        reaped = []
        now = time.monotonic()
        if rc is not None:
            left = descendants()
            if not left:
                break
            if not leftovers_termed:
                leftovers, leftovers_termed = len(left), True
                signal_tree(signal.SIGTERM)
                kill_at = min(kill_at or now + LEFTOVER_GRACE_S, now + LEFTOVER_GRACE_S)
        if kill_at is not None and now >= kill_at:
            reaped = kill_all()
            kill_at = now + 1.0  # again, should anything have slipped through
            continue
        timeout = 1.0 if kill_at is None else max(0.01, min(1.0, kill_at - now))
        info = signal.sigtimedwait(WATCHED, timeout)
        if info is None:
            continue
        if info.si_signo == signal.SIGTERM and not cancelled:
            cancelled = True
            signal_tree(signal.SIGTERM)
            kill_at = min(kill_at or now + grace, now + grace)
        elif info.si_signo == signal.SIGUSR1:
            cancelled = True
            kill_at = now
        elif info.si_signo == signal.SIGUSR2 and rc is None:
            # ``signal``: the time-limit warning (Slurm's --signal), SIGUSR1 to the task's main process if it
            # traps it, else to its workers that do; a process without a handler would die of it: spared
            sent = warn(child, signal.SIGUSR1)
            print(f"time-limit warning: SIGUSR1 sent to {sent} process(es) of the task that trap it")
    _copy_log(spec, account, task_fd)
    notes = []
    if cancelled:
        notes.append("cancelled")
    if leftovers:
        notes.append(f"{leftovers} leftover process(es) of the task were killed after it ended")
    _write(ctl, "notes", "\n".join(notes) + ("\n" if notes else ""))
    _write(ctl, "exitcode", f"{rc if rc is not None else 255}\n")
    print(f"task {spec.get('task_id')} ended: exit {rc}; {'; '.join(notes) or 'no leftovers'}")
    return 0


def signal_supervisor(ctl: int, uid: int, gid: int, *, hard: bool, warn: bool = False) -> None:
    """``cancel``: SIGTERM to the supervisor (the task's grace period runs there); ``kill``: SIGUSR1;
    ``signal`` (``warn``): SIGUSR2, which the supervisor turns into SIGUSR1 to the task's main process."""
    try:
        info = json.loads(read_file(ctl, "supervisor.json", uid, gid, 4096))
    except FileNotFoundError:
        return  # never started
    pid, started = int(info["pid"]), info.get("start_time")
    if start_time(pid) is None or start_time(pid) != started:
        return  # already gone (or the pid was recycled: not ours to signal)
    with open(f"/proc/{pid}/status") as fh:
        uids = next(line.split()[1:] for line in fh if line.startswith("Uid:"))
    if int(uids[0]) not in (0, os.geteuid()):
        raise Refused(f"pid {pid} is not a supervisor")
    os.kill(pid, signal.SIGUSR2 if warn else signal.SIGUSR1 if hard else signal.SIGTERM)
