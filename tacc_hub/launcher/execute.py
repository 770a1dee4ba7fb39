"""``tacc-launcher RUN_DIR exec ID [--tty] -- ARGV...``: a command inside a running task, as its user.

Root reads ``launch.json`` and ``supervisor.json`` with the caller's rights and refuses unless the
task's supervisor is alive (its pid still has the recorded kernel start time, and no ``exitcode``
was written). A forked child then starts a session of its own (with ``--tty``: fd 0, a terminal the
service opened, becomes its controlling terminal), drops to the task's account for good, enters
the task's working directory (``<task_dir>`` then ``work`` then ``<workdir>``, after the drop: a link there leads only
where the user may go) and execs ARGV with the task's launch environment (``spec["env"]``, then the
unconditional exports of its ``launch.sh``: its own variables, its venv's PATH; ``TERM`` for a
terminal); ARGV[0] is looked up in that environment's PATH. No ARGV with ``--tty``: the account's
login shell (``-l``), else bash.

The root parent is a subreaper (what the command leaves behind stays its descendant), forwards
SIGINT, SIGTERM and SIGHUP to the command's process group (SIGTERM: every descendant is killed 1 s
later, an interactive shell ignores it), and kills every descendant when the task's supervisor goes
away (checked every second) or when the command has ended (SIGTERM, then SIGKILL a second
later): nothing of an exec outlives it or the task. Exit status: the command's (128+N when
killed by signal N); 2 usage; 1 refused, with one line on stderr.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import sys
import time
from typing import Any

from .cli import Refused, check_account, read_file
from .prepare import drop_to
from .proctree import become_subreaper, descendants, kill_all, reap, signal_tree, start_time

EXEC_USAGE = "usage: tacc-launcher RUN_DIR exec ID [--tty] -- ARGV..."
FORWARDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
WATCHED = FORWARDED | {signal.SIGCHLD}
CHECK_INTERVAL_S = 1.0
LEFTOVER_GRACE_S = 1.0
TERM_GRACE_S = 1.0
PR_SET_PDEATHSIG = 1
TERM_NAME = re.compile(r"[A-Za-z0-9._+-]{1,64}")
DEFAULT_TERM = "xterm-256color"

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
EXPORT_RE = re.compile(r"export ([A-Za-z_][A-Za-z0-9_]*)=(.*)")
WORKDIR_LINE = 'cd -- "${TACC_WORKDIR}"'


def _variable(text: str, i: int, env: dict[str, str]) -> tuple[str, int] | None:
    """The value of ``$NAME`` or ``${NAME}`` at ``text[i]`` and the index after it; None for anything else."""
    if text.startswith("${", i):
        end = text.find("}", i + 2)
        name = text[i + 2:end] if end > 0 else ""
        return (env.get(name, ""), end + 1) if NAME_RE.fullmatch(name) else None
    m = NAME_RE.match(text, i + 1)
    return (env.get(m.group(0), ""), m.end()) if m else None


def expand_word(text: str, env: dict[str, str]) -> str | None:
    """One shell word as bash would expand it, for the quoting and variables the compiler writes
    (``'...'``, ``"..."``, ``$NAME``, ``${NAME}``, backslashes); None for anything else (``$(...)``,
    backquotes, several words, operators): such a line is left out rather than guessed at."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                return None
            out.append(text[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\':
                    out.append(text[i + 1])
                    i += 2
                elif text[i] == "$":
                    got = _variable(text, i, env)
                    if got is None:
                        return None
                    out.append(got[0])
                    i = got[1]
                elif text[i] == "`":
                    return None
                else:
                    out.append(text[i])
                    i += 1
            if i >= n:
                return None
            i += 1
        elif c == "\\":
            if i + 1 >= n:
                return None
            out.append(text[i + 1])
            i += 2
        elif c == "$":
            got = _variable(text, i, env)
            if got is None:
                return None
            out.append(got[0])
            i = got[1]
        elif c.isspace() or c in "`;&|<>()#":
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


def script_exports(script: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the unconditional ``export NAME=WORD`` lines of a task's ``launch.sh`` applied, in order,
    up to where it enters its working directory: the task's own variables and its venv or conda PATH."""
    env = dict(env)
    for line in script.splitlines():
        if line.startswith(WORKDIR_LINE):
            break
        m = EXPORT_RE.fullmatch(line)
        if m is None:
            continue
        value = expand_word(m.group(2), env)
        if value is not None and "\0" not in value:
            env[m.group(1)] = value
    return env


def parse_args(args: list[str]) -> tuple[bool, list[str]] | None:
    """(tty, argv) from ``[--tty] -- ARGV...``; None when that is not what ``args`` says."""
    if "--" not in args:
        return None
    cut = args.index("--")
    flags, argv = args[:cut], args[cut + 1:]
    if any(f != "--tty" for f in flags) or len(flags) > 1:
        return None
    tty = bool(flags)
    if not argv and not tty:
        return None
    if any("\0" in a for a in argv):
        return None
    return tty, argv


def supervisor_alive(ctl: int, uid: int, gid: int) -> bool:
    """Whether the task's supervisor still runs (same pid and start time, a root process) and wrote no exit code."""
    try:
        os.stat("exitcode", dir_fd=ctl, follow_symlinks=False)
        return False
    except FileNotFoundError:
        pass
    try:
        info = json.loads(read_file(ctl, "supervisor.json", uid, gid, 4096))
        pid, started = int(info["pid"]), info.get("start_time")
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return False
    if pid <= 1 or started is None or start_time(pid) != started:
        return False
    try:
        with open(f"/proc/{pid}/status") as fh:
            uids = next(line.split()[1:] for line in fh if line.startswith("Uid:"))
    except (OSError, StopIteration):
        return False
    return int(uids[0]) in (0, os.geteuid())


def login_shell(account: dict[str, Any] | None) -> list[str]:
    """The account's login shell as a login shell; bash when it has none that can run."""
    try:
        shell = pwd.getpwuid(account["uid"] if account else os.getuid()).pw_shell
    except KeyError:
        shell = ""
    if not shell or not os.path.isabs(shell) or shell.endswith(("nologin", "false")) or not os.access(shell, os.X_OK):
        shell = "/bin/bash"
    return [shell, "-l"]


def work_dir(spec: dict[str, Any]) -> str:
    workdir = os.path.normpath(str(spec.get("workdir") or "."))
    if os.path.isabs(workdir) or workdir.split(os.sep)[0] == "..":
        raise Refused(f"bad working directory {workdir[:200]!r} in launch.json")
    return os.path.join(str(spec["task_dir"]), "work", workdir)


def _child(account: dict[str, Any] | None, cwd: str, env: dict[str, str], argv: list[str], tty: bool) -> None:
    """In the command's child: its own session (and terminal), the task's user, directory and environment."""
    try:
        os.setsid()
        if tty:
            import fcntl
            import termios

            try:
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            except PermissionError:  # the caller's session holds it: ours now (root may take it over)
                fcntl.ioctl(0, termios.TIOCSCTTY, 1)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for sig in (*FORWARDED, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.closerange(3, 65536)  # the control directory's fd, before the user's identity
        drop_to(account)
        _die_with_parent()  # after the drop, which clears it: should this launcher be killed, so is the command
        os.umask(0o027)
        try:
            os.chdir(cwd)
        except OSError as exc:
            sys.stderr.write(f"tacc-launcher: cannot enter the task's working directory: {exc.strerror}\n")
            os._exit(1)
        try:
            os.execvpe(argv[0], argv, env)  # noqa: S606 - an argv list, no shell
        except FileNotFoundError:
            sys.stderr.write(f"tacc-launcher: {argv[0][:200]}: command not found\n")
            os._exit(127)
        except PermissionError:
            sys.stderr.write(f"tacc-launcher: {argv[0][:200]}: permission denied\n")
            os._exit(126)
    except BaseException as exc:  # the child never returns into the launcher
        try:
            sys.stderr.write(f"tacc-launcher: starting the command failed: {exc}\n")
        finally:
            os._exit(127)


def _die_with_parent() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() == 1:  # the launcher is already gone
        os._exit(1)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def run_exec(ctl: int, uid: int, gid: int, args: list[str]) -> int:
    """Run the command of ``args`` (``[--tty] -- ARGV...``) in the task of control directory ``ctl``."""
    parsed = parse_args(args)
    if parsed is None:
        print(EXEC_USAGE, file=sys.stderr)
        return 2
    tty, argv = parsed
    spec = json.loads(read_file(ctl, "launch.json", uid, gid))
    if not isinstance(spec, dict) or not isinstance(spec.get("env"), dict):
        raise Refused("launch.json does not describe a task")
    if not supervisor_alive(ctl, uid, gid):
        raise Refused("the task is not running")
    account = check_account(spec, uid)
    if tty and not os.isatty(0):
        raise Refused("--tty needs a terminal as standard input")
    cwd = work_dir(spec)
    env = {str(k): str(v) for k, v in spec["env"].items()}
    files = spec.get("files")
    if isinstance(files, dict) and isinstance(files.get("launch.sh"), str):
        env = script_exports(files["launch.sh"], env)
    if tty:
        term = os.environ.get("TERM", "")
        env["TERM"] = term if TERM_NAME.fullmatch(term) else DEFAULT_TERM
        argv = argv or login_shell(account)

    become_subreaper()
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    child = os.fork()
    if child == 0:
        _child(account, cwd, env, argv, tty)
    rc: int | None = None
    kill_at: float | None = None
    next_check = time.monotonic() + CHECK_INTERVAL_S
    while True:
        for pid, status in reap():
            if pid == child:
                rc = _exit_code(status)
        now = time.monotonic()
        if rc is not None:
            if not descendants():
                return rc
            if kill_at is None:
                signal_tree(signal.SIGTERM)  # the command ended: what it left behind goes too
                kill_at = now + LEFTOVER_GRACE_S
        if now >= next_check:
            next_check = now + CHECK_INTERVAL_S
            if kill_at is None and not _still_running(ctl, uid, gid):
                kill_at = now  # the task ended: so does everything it was running
        if kill_at is not None and now >= kill_at:
            for pid, status in kill_all():
                if pid == child:
                    rc = _exit_code(status)
            if rc is not None and not descendants():
                return rc
            kill_at = now + 1.0
            continue
        wait = min(next_check, kill_at or next_check) - now
        info = signal.sigtimedwait(WATCHED, max(0.01, wait))
        if info is not None and info.si_signo in FORWARDED and rc is None:
            try:
                os.killpg(child, info.si_signo)
            except (ProcessLookupError, PermissionError):
                pass
            if info.si_signo == signal.SIGTERM:  # a shell ignores it: everything goes after the grace
                kill_at = min(kill_at or now + TERM_GRACE_S, now + TERM_GRACE_S)


def _still_running(ctl: int, uid: int, gid: int) -> bool:
    try:
        return supervisor_alive(ctl, uid, gid)
    except OSError:
        return False
