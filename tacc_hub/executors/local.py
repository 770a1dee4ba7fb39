"""The local executor: tasks as process groups on this machine.

Each task gets ``<state_dir>/tasks/<id>/`` holding ``launch.sh`` and the
plan's files, ``work/`` (its code), ``output.log`` (stdout and stderr) and,
once it ends, ``exitcode``. A fixed supervisor (no user data in it) runs
``launch.sh`` in a new session and writes ``exitcode`` atomically, so a
restarted service can tell "finished while we were away" (exitcode present)
from "still running" (pid alive with the same start time) from "lost"
(neither).

Preemption: a preempted task gets SIGTERM and ``grace_period`` seconds
(``TACC_PREEMPT_GRACE``) to save its state in ``TACC_CHECKPOINT_DIR``
(``<id>/checkpoint/``); when it runs again, that folder and ``output.log``
are kept (the log is appended to) and ``TACC_ATTEMPT`` counts earlier runs.

Invariants: tasks get a scrubbed environment (``env_keep`` plus the launch
variables), never the service's own secrets; GPU slots reach the task only
through ``CUDA_VISIBLE_DEVICES``; cancel is SIGTERM to the whole process group,
then SIGKILL after ``grace_period``; a pid is only signalled after its start
time matches the one recorded at launch (no killing a recycled pid).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from ..scheduler.cluster import Node
from .base import Executor, Launch, LaunchError, Observation
from .prepare import owner_dir, prepare_task_dir, task_env

SUPERVISOR = (
    'cd -- "$1" || exit 111\n'
    "bash ./launch.sh >>output.log 2>&1\n"
    "rc=$?\n"
    "printf '%s\\n' \"$rc\" > exitcode.tmp && mv -f exitcode.tmp exitcode\n"
    'if [ -n "$2" ] && [ -e "output.log" ]; then\n'
    '  mkdir -p -- "$(dirname -- "work/$2")" && cp -- output.log "work/$2"\n'
    "fi\n"
    'exit "$rc"\n'
)

DEFAULT_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR", "OPENBLAS_CORETYPE",
                    "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")


def proc_start_time(pid: int) -> int | None:
    """Kernel start time (clock ticks since boot) of a pid, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = data[data.rfind(")") + 2:].split()
    try:
        if fields[0] == "Z":
            return None  # a zombie has finished
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalExecutor(Executor):
    name = "local"

    def __init__(
        self,
        state_dir: str | Path,
        *,
        gpus: int = 0,
        node_name: str = "localhost",
        grace_period: float = 10.0,
        env_keep: tuple[str, ...] = DEFAULT_ENV_KEEP,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(state_dir)
        (self.root / "tasks").mkdir(parents=True, exist_ok=True)
        (self.root / "users").mkdir(parents=True, exist_ok=True)
        self.gpus = gpus
        self.node_name = node_name
        self.grace_period = grace_period
        self.env_keep = env_keep
        self.extra_env = dict(extra_env or {})
        self._children: dict[int, asyncio.subprocess.Process] = {}

    def nodes(self) -> list[Node]:
        return [Node(name=self.node_name, gpus=self.gpus)]

    def task_dir(self, task_id: int) -> Path:
        return self.root / "tasks" / str(int(task_id))

    def user_dir(self, owner: str) -> Path:
        return owner_dir(self.root, owner)

    def _prepare(self, launch: Launch) -> Path:
        return prepare_task_dir(self.task_dir(launch.task_id), launch, self.user_dir(launch.owner))

    def _environ(self, launch: Launch, tdir: Path) -> dict[str, str]:
        env = {k: os.environ[k] for k in self.env_keep if k in os.environ}
        env.update(self.extra_env)
        slots = launch.placement.nodes[0].gpus if launch.placement.nodes else []
        env.update(task_env(launch, tdir, self.user_dir(launch.owner), self.grace_period))
        env.update({
            "TACC_NODE_RANK": "0",
            "TACC_NNODES": "1",
            "TACC_MASTER_ADDR": "127.0.0.1",
            "TACC_MASTER_PORT": str(free_port()),
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in slots),
        })
        return env

    async def launch(self, launch: Launch) -> dict[str, Any]:
        if len(launch.placement.nodes) != 1 or launch.placement.nodes[0].node != self.node_name:
            raise LaunchError("the local executor runs single-node tasks on this machine only")
        try:
            tdir = await asyncio.to_thread(self._prepare, launch)
        except LaunchError:
            raise
        except OSError as exc:
            raise LaunchError(f"preparing the task failed: {exc}") from exc
        log_copy = launch.plan.log_file or ""
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", SUPERVISOR, "tacc-supervisor", str(tdir), log_copy,
                cwd=tdir, env=self._environ(launch, tdir), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(f"starting the task failed: {exc}") from exc
        self._children[launch.task_id] = proc
        asyncio.get_running_loop().create_task(self._reap(launch.task_id, proc))
        return {"pid": proc.pid, "start_time": proc_start_time(proc.pid), "dir": str(tdir)}

    async def _reap(self, task_id: int, proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(Exception):
            await proc.wait()
        self.wake()

    def _alive(self, state: dict[str, Any]) -> bool:
        pid = state.get("pid")
        if not isinstance(pid, int):
            return False
        now = proc_start_time(pid)
        return now is not None and (state.get("start_time") is None or now == state.get("start_time"))

    def _observe(self, task_id: int, state: dict[str, Any]) -> Observation:
        tdir = self.task_dir(task_id)
        child = self._children.get(task_id)
        code_file = tdir / "exitcode"
        if code_file.exists():
            text = code_file.read_text().strip()
            self._children.pop(task_id, None)
            try:
                return Observation("exited", exit_code=int(text))
            except ValueError:
                return Observation("exited", exit_code=255, reason=f"unreadable exit status {text[:20]!r}")
        if child is not None and child.returncode is None:
            return Observation("running")
        if child is None and self._alive(state):
            return Observation("running")
        if child is not None and child.returncode is not None:
            self._children.pop(task_id, None)
            rc = child.returncode
            why = f"killed by signal {-rc}" if rc < 0 else f"supervisor exited {rc}"
            return Observation("gone", reason=f"the task's processes ended without an exit status ({why})")
        return Observation("gone", reason="the task's process is gone and left no exit status (it was running while "
                                           "the service was down, or was killed from outside)")

    async def poll(self, states: dict[int, dict[str, Any]]) -> dict[int, Observation]:
        out: dict[int, Observation] = {}
        for task_id, state in states.items():
            try:
                out[task_id] = self._observe(task_id, state)
            except OSError as exc:
                out[task_id] = Observation("unknown", reason=str(exc))
        return out

    async def cancel(self, task_id: int, state: dict[str, Any]) -> None:
        if not self._alive(state) and task_id not in self._children:
            return
        pid = int(state["pid"])
        for sig, wait in ((signal.SIGTERM, self.grace_period), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not self._group_alive(pid):
                    return
                await asyncio.sleep(0.05)

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # The leader may be a zombie awaiting reaping while the rest are gone.
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if os.getpgid(int(entry.name)) == pgid and proc_start_time(int(entry.name)) is not None:
                        return True
                except (ProcessLookupError, PermissionError):
                    continue
        return False
