"""``tacc-launcher RUN_DIR VERB ID``: checks who calls, reads the task's launch.json, and runs a verb.

Exit status: 0 done; 1 refused or failed (the reason on stderr, one line, shown to the task's owner);
2 usage. ``start`` prints one JSON line (``{"pid": .., "start_time": ..}``) once the task runs, then
keeps running as the task's supervisor (see ``supervise``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import stat
import sys
from collections.abc import Iterator
from typing import Any

FLOOR_FILE = "/etc/tacc-hub/launcher.json"
DEFAULT_FLOOR = 1000
MAX_SPEC_BYTES = 64 * 1024 * 1024
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


VERBS = ("start", "prepare", "cancel", "kill", "signal", "exec")
USAGE = ("usage: tacc-launcher RUN_DIR start|prepare|cancel|kill|signal ID\n"
         "       tacc-launcher RUN_DIR exec ID [--tty] -- ARGV...")


class Refused(Exception):
    """The launcher will not do this; ``str()`` is the reason."""


def caller() -> tuple[int, int]:
    """(uid, gid) of whoever asked: sudo's caller, else our own real ids."""
    if os.getuid() == 0 and os.environ.get("SUDO_UID", "").isdigit():
        return int(os.environ["SUDO_UID"]), int(os.environ.get("SUDO_GID", "0") or 0)
    return os.getuid(), os.getgid()


@contextlib.contextmanager
def as_caller(uid: int, gid: int) -> Iterator[None]:
    """Open files with the caller's rights (root reads nothing the service could not)."""
    if os.geteuid() != 0 or uid == 0:
        yield
        return
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def uid_floor() -> int:
    """The lowest uid a task may run as: 1000, or a root-owned /etc/tacc-hub/launcher.json's ``min_uid``."""
    try:
        fd = os.open(FLOOR_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return DEFAULT_FLOOR
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_uid != 0 or st.st_mode & 0o022:
            raise Refused(f"{FLOOR_FILE} must be owned by root and writable by root only")
        value = json.loads(fh.read(65536) or b"{}").get("min_uid", DEFAULT_FLOOR)
    return max(1, int(value))


def check_private(fd: int, uid: int, what: str) -> None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        raise Refused(f"{what} must be a directory owned by uid {uid} and writable by it alone")


def open_control(run_dir: str, task_id: str, uid: int, gid: int) -> int:
    """The fd of RUN_DIR/ID after checking both are the caller's private directories."""
    if not os.path.isabs(run_dir) or not task_id.isdigit() or len(task_id) > 19:
        raise Refused("usage: tacc-launcher RUN_DIR VERB ID (absolute RUN_DIR, numeric ID)")
    with as_caller(uid, gid):
        run_fd = os.open(run_dir, DIR_FLAGS)
        try:
            check_private(run_fd, uid, run_dir)
            fd = os.open(task_id, DIR_FLAGS, dir_fd=run_fd)
        finally:
            os.close(run_fd)
    check_private(fd, uid, f"{run_dir}/{task_id}")
    return fd


def read_file(dir_fd: int, name: str, uid: int, gid: int, limit: int = MAX_SPEC_BYTES) -> bytes:
    with as_caller(uid, gid):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(f"{name} is not a regular file")
        return fh.read(limit)


def check_account(spec: dict[str, Any], caller_uid: int) -> dict[str, Any] | None:
    """The account the task runs as, checked against the system (None: the caller's own)."""
    acct = spec.get("account")
    if acct is None:
        return None
    try:
        pw = pwd.getpwnam(str(acct["name"]))
    except KeyError:
        raise Refused(f"no Unix account {str(acct['name'])[:64]!r}") from None
    floor = uid_floor()
    if pw.pw_uid != acct.get("uid") or pw.pw_gid != acct.get("gid"):
        raise Refused(f"account {pw.pw_name!r} has uid {pw.pw_uid}, gid {pw.pw_gid}, not what the service sent")
    if pw.pw_uid < floor or pw.pw_uid == caller_uid:
        raise Refused(f"account {pw.pw_name!r} (uid {pw.pw_uid}) may not run tasks (uid < {floor}, or the "
                      "service's own)")
    if pw.pw_uid != os.geteuid() and os.geteuid() != 0:
        raise Refused("running tasks as their owners needs root: run tacc-launcher through sudo "
                      "(deploy/sudoers.d/tacc-hub) or set TaccHub.task_identity = 'service'")
    return {"name": pw.pw_name, "uid": pw.pw_uid, "gid": pw.pw_gid, "home": pw.pw_dir,
            "groups": os.getgrouplist(pw.pw_name, pw.pw_gid)}  # once, here: each child would load NSS again


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] not in VERBS or (len(args) != 3 and args[1] != "exec"):
        print(USAGE, file=sys.stderr)
        return 2
    run_dir, verb, task_id = args[:3]
    uid, gid = caller()
    try:
        ctl = open_control(run_dir, task_id, uid, gid)
        if verb in ("cancel", "kill", "signal"):
            from .supervise import signal_supervisor

            signal_supervisor(ctl, uid, gid, hard=verb == "kill", warn=verb == "signal")
            return 0
        if verb == "exec":
            from .execute import run_exec

            return run_exec(ctl, uid, gid, args[3:])
        spec = json.loads(read_file(ctl, "launch.json", uid, gid))
        if not isinstance(spec, dict) or str(spec.get("task_id")) != task_id:
            raise Refused("launch.json does not describe this task")
        account = check_account(spec, uid)
        from .prepare import prepare

        task_fd = prepare(spec, account, ctl, uid, gid)
        if verb == "prepare":
            return 0
        from .supervise import supervise

        return supervise(spec, account, ctl, task_fd, uid, gid)
    except Refused as exc:
        print(f"tacc-launcher: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tacc-launcher: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    except (ValueError, KeyError, TypeError) as exc:
        print(f"tacc-launcher: malformed launch.json: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
