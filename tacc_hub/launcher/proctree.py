"""Finding and killing every descendant of this process (the supervisor is their subreaper).

With ``PR_SET_CHILD_SUBREAPER`` set, a process that loses its parent (``setsid`` and double-fork
daemons included) is reparented to the supervisor, so "the task's processes" are exactly the
supervisor's descendants. Signals go through pidfds opened after the parent was checked, so a pid
recycled between the scan and the signal is never hit.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def start_time(pid: int) -> int | None:
    """Kernel start time (clock ticks since boot) of a pid; None if it does not exist or is a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return None if fields[0] == b"Z" else int(fields[19])
    except (IndexError, ValueError):
        return None


def _parents() -> dict[int, int]:
    """pid -> ppid of every live (non-zombie) process."""
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[0] != b"Z":
            out[int(name)] = int(fields[1])
    return out


def descendants(root: int | None = None) -> list[int]:
    """Live descendants of ``root`` (default: this process), parents before children."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return int(data[data.rfind(b")") + 2:].split()[1])


def signal_tree(sig: int) -> int:
    """Send ``sig`` to every descendant; returns how many were signalled."""
    found = descendants()
    mine = {os.getpid(), *found}
    sent = 0
    for pid in found:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if _ppid(pid) in mine:  # still the process we found (a recycled pid has another parent)
                signal.pidfd_send_signal(fd, sig)
                sent += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return sent


def reap() -> list[tuple[int, int]]:
    """(pid, wait status) of every child that has ended, without blocking."""
    out: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def kill_all() -> list[tuple[int, int]]:
    """SIGKILL every descendant until none is left (a process being killed may still fork once).

    Returns what was reaped meanwhile, so that the caller still learns its own child's status."""
    reaped = reap()
    for _ in range(1000):
        if not signal_tree(signal.SIGKILL):
            break
        time.sleep(0.01)
        reaped += reap()
    return reaped + reap()


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (``SigCgt`` in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def warn(main: int, sig: int) -> int:
    """Send ``sig`` to ``main`` if it catches it, else to each of its children that does (torchrun's and
    mpirun's workers); never to a process that would die of it. Returns how many were signalled."""
    targets = [main] if catches(main, sig) else [p for p, pp in _parents().items() if pp == main and catches(p, sig)]
    sent = 0
    for pid in targets:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if pid == main or _ppid(pid) == main:  # not a recycled pid
                signal.pidfd_send_signal(fd, sig)
                sent += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return sent
