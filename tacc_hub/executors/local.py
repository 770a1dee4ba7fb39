"""The local executor: tasks as supervised process trees on this machine, run as their owners.

Each task gets ``<data_dir>/tasks/<id>/`` (owned by the task's user, mode 0700: ``launch.sh`` and the
plan's files, ``work/`` (its code), ``output.log``, ``checkpoint/``) and a control directory
``<run_dir>/<id>/`` that only the service (and root) can enter: ``launch.json`` (written here: what to
run, as whom, with which environment) and what ``tacc-launcher`` writes there as root
(``supervisor.json``, ``exitcode``, ``notes``). The launcher (``tacc_hub.launcher``) prepares the
directory as the user and stays on as the task's supervisor: a root subreaper that kills every
process of the task before it writes ``exitcode``, so "exitcode present" means "the run and all its
processes are over, its GPUs are free"; "supervisor alive (same pid and start time)" means running;
neither means lost.

Preemption and cancel: ``tacc-launcher cancel`` (SIGTERM to the supervisor): the whole tree gets
SIGTERM and, ``grace_period`` seconds later (``TACC_PREEMPT_GRACE``), SIGKILL; the grace period is
counted by the supervisor, so a service restart in between changes nothing. A preempted task keeps
``checkpoint/`` and ``output.log`` (appended to) and ``TACC_ATTEMPT`` counts earlier runs.

TensorBoard (a plan with ``tensorboard``): launch.sh starts it on 127.0.0.1 and a port picked free here at
launch (``TACC_TENSORBOARD_PORT``), serving only under a secret path prefix made here for each run
(``TACC_TENSORBOARD_SECRET``: in launch.json, which only root reads, and the task's environment, which only
its user reads; never on a command line); both are returned in the task's state (``tensorboard_port``,
``tensorboard_secret``) for the proxy. The supervisor ends it with the task.

Invariants: tasks get a scrubbed environment (``env_keep`` plus the launch variables, ``PATH`` from
``task_path``, ``HOME``/``USER`` of their account), never the service's own; GPU slots reach the task
only through ``CUDA_VISIBLE_DEVICES``; a supervisor is only signalled after its start time matches
the one recorded at launch (no signalling a recycled pid).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

from ..launcher.proctree import start_time as proc_start_time
from ..scheduler.cluster import Node, Placement
from .base import Executor, Launch, LaunchError, Observation
from .identity import Account, Identity
from .prepare import input_copies, owner_dir, task_env

DEFAULT_ENV_KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                    "OMP_NUM_THREADS")
DEFAULT_TASK_PATH = "/usr/local/bin:/usr/bin:/bin"
KEEP = ("output.log", "checkpoint")  # what a task's next run (after a preemption) finds again
READY_TIMEOUT_S = 3600.0  # preparing may build an env


def default_launcher(direct: bool = False) -> list[str]:
    """How the service runs tacc-launcher: itself when root (or ``direct``: service identity, no one else to
    become), else through sudo (deploy/sudoers.d/tacc-hub).

    Run directly, it starts without ``site`` (``-I -S``: 20 ms instead of 70 with an editable install) and
    finds tacc_hub where this process found it; it imports nothing but the standard library and tacc_hub."""
    if os.geteuid() == 0 or direct:
        root = str(Path(__file__).resolve().parents[2])
        boot = f"import sys; sys.path.insert(0, {root!r}); from tacc_hub.launcher.cli import main; sys.exit(main())"
        return [sys.executable, "-I", "-S", "-c", boot]
    return ["sudo", "-n", str(Path(sys.executable).parent / "tacc-launcher")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tensorboard_secret() -> str:
    """A fresh secret path prefix for one run's TensorBoard (URL-safe, 192 bits)."""
    return secrets.token_urlsafe(24)


def base_environ(env_keep: tuple[str, ...], account: Account | None, task_path: str) -> dict[str, str]:
    """What every task starts from: the kept variables, PATH, and its account's HOME, USER and LOGNAME."""
    env = {k: os.environ[k] for k in env_keep if k in os.environ}
    env["PATH"] = task_path
    if account is not None:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name)
    else:
        env["HOME"] = os.environ.get("HOME", "/")
    return env


def write_control(run_dir: Path, task_id: int, spec: dict[str, Any]) -> Path:
    """``<run_dir>/<id>/`` (0700) with ``spec`` as launch.json (0600) for tacc-launcher, and nothing of a run before."""
    ctl = run_dir / str(int(task_id))
    ctl.mkdir(mode=0o700, exist_ok=True)
    os.chmod(ctl, 0o700)
    for name in ("exitcode", "notes", "supervisor.json"):
        with contextlib.suppress(FileNotFoundError):
            (ctl / name).unlink()
    tmp = ctl / ".launch.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(spec, fh)
    tmp.replace(ctl / "launch.json")
    return ctl


def launcher_env() -> dict[str, str]:
    """What tacc-launcher starts with: nothing of the service's environment."""
    return {"PATH": DEFAULT_TASK_PATH, "LANG": os.environ.get("LANG", "C.UTF-8")}


class LocalExecutor(Executor):
    name = "local"

    def __init__(
        self,
        data_dir: str | Path,
        *,
        run_dir: str | Path | None = None,
        identity: Identity | None = None,
        launcher: list[str] | None = None,
        gpus: int = 0,
        node_name: str = "localhost",
        grace_period: float = 10.0,
        env_keep: tuple[str, ...] = DEFAULT_ENV_KEEP,
        extra_env: dict[str, str] | None = None,
        task_path: str = DEFAULT_TASK_PATH,
    ) -> None:
        self.root = Path(data_dir)
        self.run_dir = Path(run_dir) if run_dir is not None else self.root / "run"
        for d in (self.root / "tasks", self.root / "users", self.root / "envs"):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o711)  # noqa: S103 - searchable, not listable: users reach their own entries
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)
        self.identity = identity or Identity()
        self.launcher = list(launcher) if launcher else default_launcher(direct=self.identity.mode == "service")
        self.gpus = gpus
        self.node_name = node_name
        self.grace_period = grace_period
        self.env_keep = env_keep
        self.extra_env = dict(extra_env or {})
        self.task_path = task_path
        self._children: dict[int, asyncio.subprocess.Process] = {}

    def nodes(self) -> list[Node]:
        return [Node(name=self.node_name, gpus=self.gpus)]

    def task_dir(self, task_id: int) -> Path:
        return self.root / "tasks" / str(int(task_id))

    def control_dir(self, task_id: int) -> Path:
        return self.run_dir / str(int(task_id))

    def user_dir(self, owner: str, account: Account | None = None) -> Path:
        return owner_dir(self.root, account.name if account is not None else owner)

    def launch_spec(self, launch: Launch, tensorboard_port: int | None = None,
                    tensorboard_secret: str | None = None) -> dict[str, Any]:
        """launch.json: everything tacc-launcher needs, so that it takes nothing but a task id.
        ``tensorboard_port``/``_secret``: TensorBoard's port and path prefix (``TACC_TENSORBOARD_PORT``/``_SECRET``),
        for a plan with ``tensorboard``."""
        plan, account = launch.plan, launch.account
        tdir = self.task_dir(launch.task_id)
        user_dir = self.user_dir(launch.owner, account)
        slots = launch.placement.nodes[0].gpus if launch.placement.nodes else []
        env = base_environ(self.env_keep, account, self.task_path)
        env.update(self.extra_env)
        env.update(task_env(launch, tdir, user_dir, self.grace_period))
        master_port = free_port()
        while master_port == tensorboard_port:  # two free ports, not one twice
            master_port = free_port()
        env.update({
            "TACC_NODE_RANK": "0",
            "TACC_NNODES": "1",
            "TACC_MASTER_ADDR": "127.0.0.1",
            "TACC_MASTER_PORT": str(master_port),
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in slots),
        })
        if tensorboard_port is not None:
            env["TACC_TENSORBOARD_PORT"] = str(int(tensorboard_port))
        if tensorboard_secret is not None:
            env["TACC_TENSORBOARD_SECRET"] = tensorboard_secret
        return {
            "task_id": launch.task_id,
            "account": None if account is None else {"name": account.name, "uid": account.uid, "gid": account.gid},
            "task_dir": str(tdir),
            "user_dir": str(user_dir),
            "env_dir": None if plan.env.kind == "base" else str(Path(plan.env.path).parent),
            "keep": list(KEEP),
            "files": {**plan.files, "launch.sh": plan.script},
            "code": plan.code.model_dump(mode="json"),
            "workdir": plan.workdir,
            "env": env,
            "env_plan": plan.env.model_dump(mode="json"),
            "build_env": True,
            "log_copy": plan.log_file or "",
            "grace": self.grace_period,
            # earlier tasks' files, copied by the launcher as the task's user before the program (issue 20)
            **({"inputs": input_copies(plan, self.root / "tasks")} if plan.inputs else {}),
        }

    def write_control(self, launch: Launch, tensorboard_port: int | None = None,
                      tensorboard_secret: str | None = None) -> Path:
        """A fresh ``<run_dir>/<id>/`` holding launch.json (mode 0600), nothing of an earlier run."""
        return write_control(self.run_dir, launch.task_id,
                             self.launch_spec(launch, tensorboard_port, tensorboard_secret))

    async def _call(self, verb: str, task_id: int) -> tuple[int, str]:
        """Run a short launcher verb (cancel, kill); (exit status, its message)."""
        began = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *self.launcher, str(self.run_dir), verb, str(int(task_id)), env=launcher_env(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        self.command_observer(f"launcher-{verb}", time.monotonic() - began, not proc.returncode)
        return proc.returncode or 0, err.decode(errors="replace").strip()

    async def launch(self, launch: Launch) -> dict[str, Any]:
        if len(launch.placement.nodes) != 1 or launch.placement.nodes[0].node != self.node_name:
            raise LaunchError("the local executor runs single-node tasks on this machine only")
        tb_port = free_port() if launch.plan.tensorboard is not None else None
        tb_secret = tensorboard_secret() if tb_port is not None else None
        began = time.monotonic()  # launcher-start: until the task is ready (its env built) or refused
        try:
            await asyncio.to_thread(self.write_control, launch, tb_port, tb_secret)
            proc = await asyncio.create_subprocess_exec(
                *self.launcher, str(self.run_dir), "start", str(int(launch.task_id)), env=launcher_env(),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self.command_observer("launcher-start", time.monotonic() - began, False)
            raise LaunchError(f"starting the task failed: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), READY_TIMEOUT_S)
        except TimeoutError:
            self.command_observer("launcher-start", time.monotonic() - began, False)
            await self._call("kill", launch.task_id)
            raise LaunchError(f"the task was not ready after {READY_TIMEOUT_S:g} s of preparation") from None
        try:
            ready = json.loads(line)
        except ValueError:
            self.command_observer("launcher-start", time.monotonic() - began, False)
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            await proc.wait()
            reason = err.removeprefix("tacc-launcher: ") or f"tacc-launcher exited {proc.returncode}"
            raise LaunchError(reason[-3000:]) from None
        self.command_observer("launcher-start", time.monotonic() - began, True)
        self._children[launch.task_id] = proc
        asyncio.get_running_loop().create_task(self._reap(launch.task_id, proc))
        state: dict[str, Any] = {"pid": int(ready["pid"]), "start_time": ready.get("start_time"),
                                 "dir": str(self.task_dir(launch.task_id))}
        if tb_port is not None:
            state.update(tensorboard_port=tb_port, tensorboard_secret=tb_secret)
        return state

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
        ctl = self.control_dir(task_id)
        try:
            text = (ctl / "exitcode").read_text().strip()
        except FileNotFoundError:
            text = None
        if text is not None:
            self._children.pop(task_id, None)
            notes = (ctl / "notes").read_text().strip() if (ctl / "notes").exists() else ""
            reason = "; ".join(n for n in notes.splitlines() if n and n != "cancelled") or None
            try:
                code = int(text)
            except ValueError:
                return Observation("exited", exit_code=255, reason=f"unreadable exit status {text[:20]!r}")
            if code != 0 and reason:
                reason = f"exited with status {code}; {reason}"
            return Observation("exited", exit_code=code, reason=reason)
        if self._alive(state):
            return Observation("running")
        self._children.pop(task_id, None)
        return Observation("gone", reason="the task's supervisor is gone and left no exit status (the machine "
                                           "restarted, or it was killed from outside)")

    async def poll(self, states: dict[int, dict[str, Any]]) -> dict[int, Observation]:
        out: dict[int, Observation] = {}
        for task_id, state in states.items():
            try:
                out[task_id] = self._observe(task_id, state)
            except OSError as exc:
                out[task_id] = Observation("unknown", reason=str(exc))
        return out

    async def cancel(self, task_id: int, state: dict[str, Any]) -> None:
        """SIGTERM to the tree through the supervisor; returns once the supervisor wrote the exit status."""
        if not self._alive(state):
            return
        for verb, wait in (("cancel", self.grace_period + 5.0), ("kill", 30.0)):
            rc, err = await self._call(verb, task_id)
            if rc != 0:
                raise LaunchError(f"tacc-launcher {verb} failed: {err}")
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if (self.control_dir(task_id) / "exitcode").exists() or not self._alive(state):
                    return
                await asyncio.sleep(0.05)

    # --- reaching a running task ------------------------------------------------------

    def task_host(self, task_id: int, state: dict[str, Any], placement: Placement | None) -> str:
        return "127.0.0.1"

    async def port_owned(self, task_id: int, state: dict[str, Any], placement: Placement | None, port: int) -> bool:
        from .ports import local_port_owned

        return await asyncio.to_thread(local_port_owned, self, task_id, state, port)

    async def listening_ports(self, task_id: int, state: dict[str, Any], placement: Placement | None) -> list[int]:
        from .ports import local_listening

        return await asyncio.to_thread(local_listening, self, task_id, state)

    def exec_argv(self, task_id: int, state: dict[str, Any], placement: Placement | None, argv: list[str], *,
                  tty: bool) -> list[str]:
        """``tacc-launcher RUN_DIR exec ID [--tty] -- ARGV``: the launcher checks the task still runs, becomes
        its user and starts ARGV in its directory with its launch environment (``launcher.execute``)."""
        return [*self.launcher, str(self.run_dir), "exec", str(int(task_id)), *(["--tty"] if tty else []), "--",
                *argv]

    async def signal(self, task_id: int, state: dict[str, Any], signame: str) -> None:
        """SIGUSR1 to the task's main process, through its supervisor (``tacc-launcher signal``)."""
        if signame != "USR1":
            raise LaunchError(f"only USR1 can be sent to a task, not {signame[:16]!r}")
        if not self._alive(state):
            return
        rc, err = await self._call("signal", task_id)
        if rc != 0:
            raise LaunchError(f"tacc-launcher signal failed: {err}")

    async def gpu_usage(self, task_id: int, state: dict[str, Any], placement: Placement | None,
                        command: tuple[str, ...]) -> list[tuple[float, float | None]]:
        from .gpuquery import local_gpu_usage

        return await local_gpu_usage(self, task_id, state, placement, command)
