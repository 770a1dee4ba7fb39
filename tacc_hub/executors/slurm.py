"""The Slurm executor: each task run is one batch job on exactly the placement our scheduler chose.

Owners: a task's job runs as its owner's Unix account (``Launch.account``; None, with
``task_identity=service``: the service's own, or the one ``submit_as`` user). ``sbatch`` and
``scancel`` run as that account (``runuser -u`` when the service is root, else ``sudo -n -u``),
so Slurm's accounting charges them (``sacct -u alice``), with ``--account`` and ``--qos`` from the
owner's tacc group (``account_map``, ``qos_map``: ``sbatch.mapped_name``). ``squeue``, ``sacct`` and
``sinfo`` run as the service: one view of every job.

Task directories (``<root>/tasks/<id>/``: launch.sh, ``work/``, ``output.log``, ``exitcode``,
``checkpoint/``) belong to the task's account, mode 0700 (``slurm_files.prepare_owned``); the
files the job writes (``job``, ``exitcode``) are read without following a link, only as regular
files of the job's uid (``slurm_files.read_job_file``); the service's own marks live in
``control_dir``. The nodes must see this machine's filesystem at the same paths (a shared file
system; on the dev cluster they are this machine). The batch job (``sbatch.py``) writes its job
id to ``job``, runs ``launch.sh`` on every node with ``srun`` and writes ``exitcode`` last (only
while ``job`` still names it); its output is appended to ``output.log``, which the log endpoints
read. A task with a venv or conda env gets it from the job's first step, on the allocation's
first node (``prepare_env``: built once per dependency digest in the env root, as the job's
user, under a lock, READY marker last); the hub builds no env for Slurm tasks.

Nodes (``slurm_nodes``): ``sinfo --json`` and ``scontrol show topology``; drained, down or not
responding nodes are left out of ``refresh_nodes`` and reported by ``node_states``. On a partition
shared with jobs tacc did not submit, the GPUs they hold are each node's ``Node.foreign``.

Observing: one ``squeue`` per poll for all tasks (ids and states as text, not ``--json``), plus
one ``sacct --json -j a,b,...`` for the jobs squeue no longer lists. When a command fails or
times out, the tasks are ``unknown`` (never ``gone``) and the next tries back off exponentially.
A job that neither command knows is ``unknown`` for ``missing_grace`` seconds (accounting may
lag) before ``gone``.

A job PENDING in Slurm after our scheduler placed it (nodes still held by a job that is ending,
or by jobs of non-tacc users) is "running" from the service's view: the scheduler has given it
its GPUs, and it starts when Slurm frees them.

Slurm unreachable (``slurm_health``): a failing ``squeue`` or ``sbatch`` that could not reach
slurmctld starts a streak; ``unavailable`` then tells the service to keep new tasks waiting (while
the next try backs off, and always once the streak is older than ``unreachable_after`` seconds)
and ``probe`` (``scontrol ping``) ends it. A launch that could not reach Slurm raises
``LaunchUnavailable``: the task waits again, it does not fail. When that sbatch timed out (the
job may have been taken after all), the next launch of the task first cancels any job of it
still in Slurm (``tacc-<id>`` in the task's directory): a task never runs twice at once.

Node failure: the job ends NODE_FAIL (we submit ``--no-requeue``); its processes on a node whose
slurmd died may live on and finish later. The batch script writes the job id to ``job`` first:
an ``exitcode`` is read only while ``job`` names the job polled, so such an orphan cannot end the
task's next run.

Cancel: ``scancel --signal=TERM`` (every step: the task's processes on each node; the batch
shell is spared so that it still collects their output and exit code), up to ``grace_period``
seconds for the task to save its state, then ``scancel --signal=KILL --full`` and ``scancel``.
Idempotent: a job that is no longer active is left alone.

TensorBoard (a plan with ``tensorboard``): launch.sh starts it on node rank 0, bound to that node's address
(``TACC_MASTER_ADDR``), on ``tensorboard_port(task_id)``: a port fixed by the task id in a block below Linux's
ephemeral range (``TENSORBOARD_PORTS``). The service must know the port when sbatch returns (it is the task's
state, ``tensorboard_port``, which the proxy reads), before the job has a node, and must not take it from a
file the task writes; a port picked free on the service's machine says nothing about the node. Two tasks
running at once on one node get the same port only when their ids are equal modulo the block's size, and
no program's outgoing connections or port-0 listeners land in the block; a port taken anyway only costs
that task its TensorBoard (its error is in ``tensorboard.log``), never the task, and the proxy reaches a port
only while the task's own processes listen on it. Anyone on the cluster's network can connect to that port,
so TensorBoard serves only under a secret path prefix made here for each run (``TACC_TENSORBOARD_SECRET``,
exported by the batch script, which lies in the task's mode-0700 directory; kept as ``tensorboard_secret``
in the state, for the proxy); it is never on a command line (see ``compiler/render.py``).

Invariants: every command is an argv list (``asyncio`` subprocess exec, never a shell);
jobs get a scrubbed environment (``env_keep``, ``SLURM_CONF`` and ``PATH=task_path``), their
launch variables being exported, quoted, by the batch script; the service never creates or writes a file
in, nor follows a link of, a directory the task's account controls once it has handed it over.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..scheduler.cluster import Node, Placement
from .base import REQUEUE_MARK, Executor, Launch, LaunchError, LaunchUnavailable, Observation, command_name
from .identity import ACCOUNT_NAME, Account
from .local import (
    DEFAULT_ENV_KEEP,
    base_environ,
    default_launcher,
    free_port,
    launcher_env,
    tensorboard_secret,
    write_control,
)
from .prepare import owner_dir, prepare_task_dir, task_env
from .sbatch import BatchJob, mapped_name, prepare_env_argv, render_batch, time_option
from .slurm_files import SMALL, owned_dir, prepare_owned, read_job_file, shared_dir
from .slurm_health import Health, SlurmError, cancel_job, cancel_strays, is_unreachable, may_have_gone_through, ping
from .slurm_nodes import SQUEUE_HOLDERS, foreign_gpus, parse_nodes, parse_switches
from .slurm_states import ACTIVE, STATES, _slurm_exit, _state_name

__all__ = ["ACTIVE", "ENV_PLAN_FILE", "REQUEUE_MARK", "STATES", "SlurmExecutor", "_slurm_exit"]

TENSORBOARD_PORTS = (23000, 6000)  # first port, count: 23000-28999 (below torch's 29500 and the ephemeral 32768+)


def tensorboard_port(task_id: int) -> int:
    """The port a task's TensorBoard listens on, on its first node (see the module docstring)."""
    first, count = TENSORBOARD_PORTS
    return first + int(task_id) % count


log = logging.getLogger(__name__)

ENV_PLAN_FILE = "env-plan.json"  # in the task dir: the EnvPlan the job's first step builds
PKG_ROOT = str(Path(__file__).resolve().parents[2])  # PYTHONPATH of that step: this very tacc_hub
TASK_PATH = "/usr/local/bin:/usr/bin:/bin"  # no directory of the service's (its CLI, its venv) on a job's PATH
SACCT_NOTHING_FOUND = frozenset({9003})  # sacct --json's "Nothing found with query": an answer, not a failure

def _tool(name: str) -> str:
    """runuser or sudo by its full path (the commands' scrubbed PATH may lack /usr/sbin)."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin:/sbin:/bin") or name


def _me() -> str | None:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return None


class SlurmExecutor(Executor):
    name = "slurm"

    def __init__(
        self,
        state_dir: str | Path,
        *,
        partition: str | None = None,
        slurm_conf: str | None = None,
        submit_as: str | None = None,
        grace_period: float = 10.0,
        env_keep: tuple[str, ...] = DEFAULT_ENV_KEEP,
        extra_env: dict[str, str] | None = None,
        bin_dir: str | None = None,
        command_timeout: float = 30.0,
        missing_grace: float = 60.0,
        max_backoff: float = 60.0,
        unreachable_after: float = 60.0,
        node_python: str | None = None,
        account_map: dict[str, str] | None = None,
        qos_map: dict[str, str] | None = None,
        control_dir: str | Path | None = None,
        task_path: str = TASK_PATH,
    ) -> None:
        self.root = Path(state_dir)
        for sub in ("tasks", "users"):  # the service's; each account reaches its own dirs in them, lists none
            shared_dir(self.root / sub)
        # The service's own marks (a task's "cancelled"): never in a dir the task's account can write.
        self.control = Path(control_dir) if control_dir else self.root / "control"
        self.launcher = default_launcher()  # for a service that is not root (see _prepare_as_owner)
        self.control.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.account_map = dict(account_map or {})  # tacc group -> sbatch --account ('*': any other; '{group}')
        self.qos_map = dict(qos_map or {})  # tacc group -> sbatch --qos, likewise
        self.partition = partition or None
        self.slurm_conf = slurm_conf or os.environ.get("SLURM_CONF") or None
        self.submit_as = submit_as or None
        self.grace_period = grace_period
        self.env_keep = env_keep
        self.task_path = task_path  # PATH of the Slurm commands and, through sbatch --export=ALL, of the jobs
        self.extra_env = dict(extra_env or {})
        self.bin_dir = bin_dir
        self.command_timeout = command_timeout
        self.missing_grace = missing_grace
        self.max_backoff = max_backoff
        self.node_python = node_python or sys.executable  # runs prepare_env on the nodes (shared filesystem)
        self._nodes: list[Node] | None = None
        self.unusable: dict[str, str] = {}
        self._failures: dict[str, int] = {}  # per command (squeue, sacct): consecutive failures
        self._retry_at: dict[str, float] = {}  # per command: no new try before this (monotonic)
        self._missing_since: dict[str, float] = {}
        self.health = Health(threshold=unreachable_after, max_backoff=min(10.0, max_backoff))
        self._unsure: set[int] = set()  # tasks whose last sbatch timed out: it may have gone through
        self._ours: set[str] = set()  # ids of the jobs this service submitted (launched, or tracked by poll)

    # --- commands -----------------------------------------------------------------------

    def _argv(self, cmd: str, *args: str, user: str | None = None) -> list[str]:
        """argv of a Slurm command, run as ``user`` (None: as the service): through ``runuser`` when the service
        is root, else ``sudo -n`` (the sudoers rule of the deployment allows only sbatch and scancel)."""
        exe = os.path.join(self.bin_dir, cmd) if self.bin_dir else cmd
        if user is None or user == _me():
            return [exe, *args]
        if not ACCOUNT_NAME.fullmatch(user):
            raise SlurmError(f"not an account name: {user[:64]!r}")
        prefix = [_tool("runuser"), "-u", user, "--"] if os.geteuid() == 0 else [_tool("sudo"), "-n", "-u", user, "--"]
        return [*prefix, exe, *args]

    def _runs_as(self, account: Account | None) -> tuple[str | None, int, int]:
        """(who submits and runs the jobs, None: the service itself; their uid; gid) for a launch."""
        if account is not None:
            return account.name, account.uid, account.gid
        if self.submit_as:  # task_identity=service with one site-wide job user
            pw = pwd.getpwnam(self.submit_as)
            return self.submit_as, pw.pw_uid, pw.pw_gid
        return None, os.geteuid(), os.getegid()

    def _uid(self, state: dict[str, Any]) -> int:
        """The uid the task's job runs as: the owner of the files it writes."""
        uid = state.get("uid")
        if isinstance(uid, int):
            return uid
        return self._runs_as(None)[1]  # a state from before jobs ran as their owners

    def _env(self) -> dict[str, str]:
        """What Slurm commands (and through sbatch --export=ALL, the jobs) see."""
        env = {k: os.environ[k] for k in self.env_keep if k in os.environ}
        env.setdefault("PATH", self.task_path)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    async def _run(self, argv: list[str]) -> str:
        began, ok = time.monotonic(), False
        try:
            out = await self._run_once(argv)
            ok = True
            return out
        finally:
            self.command_observer(command_name(argv), time.monotonic() - began, ok)

    async def _run_once(self, argv: list[str]) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, env=self._env(), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise SlurmError(f"{argv[0]}: {exc}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.command_timeout)
        except TimeoutError as exc:
            proc.kill()
            await proc.wait()
            raise SlurmError(f"{os.path.basename(argv[0])} timed out after {self.command_timeout:g} s") from exc
        if proc.returncode != 0:
            text = (err or out).decode(errors="replace").strip()[-500:]
            raise SlurmError(f"{' '.join(argv[:2])} exited {proc.returncode}: {text}")
        return out.decode(errors="replace")

    async def _json(self, *argv: str, ok_errors: frozenset[int] = frozenset()) -> dict[str, Any]:
        text = await self._run(self._argv(*argv, "--json"))
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SlurmError(f"{argv[0]} --json printed no JSON: {text[:200]!r}") from exc
        if not isinstance(data, dict):
            raise SlurmError(f"{argv[0]} --json printed {type(data).__name__}, not an object")
        errors = [e for e in data.get("errors") or []
                  if not (isinstance(e, dict) and e.get("error_number") in ok_errors)]
        if errors:
            raise SlurmError(f"{argv[0]} --json reported errors: {str(errors)[:300]}")
        return data

    # --- nodes --------------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        if self._nodes is None:
            self.refresh_nodes()
        assert self._nodes is not None
        return [Node(n.name, n.gpus, n.partition, n.gpu_type, switch=n.switch, foreign=n.foreign) for n in self._nodes]

    def refresh_nodes(self) -> list[Node]:
        """Read the nodes (``sinfo --json``), their leaf switches (``scontrol show topology``) and the GPUs jobs
        outside tacc hold on them (``squeue``; see ``slurm_nodes.foreign_gpus``)."""
        def run(*args: str) -> str:
            began = time.monotonic()
            try:
                proc = subprocess.run(self._argv(*args), env=self._env(), capture_output=True, text=True,
                                      timeout=self.command_timeout, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                self.command_observer(args[0], time.monotonic() - began, False)
                raise SlurmError(f"{args[0]}: {exc}") from exc
            self.command_observer(args[0], time.monotonic() - began, proc.returncode == 0)
            if proc.returncode != 0:
                raise SlurmError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
            return proc.stdout

        jobs = run(*SQUEUE_HOLDERS)
        try:
            data = json.loads(run("sinfo", "--json"))
        except ValueError as exc:
            raise SlurmError("sinfo --json printed no JSON") from exc
        found, unusable = parse_nodes(data, parse_switches(run("scontrol", "show", "topology")), self.partition)
        foreign = foreign_gpus(data, jobs, set(self._ours))
        for node in found:
            node.foreign = min(node.gpus, foreign.get(node.name, 0))
        self._nodes = found
        self.unusable = unusable  # left out: node -> Slurm state (e.g. "idle+DRAIN")
        return self.nodes()

    def node_states(self) -> dict[str, str]:
        return dict(self.unusable)

    # --- launch -------------------------------------------------------------------------

    def task_dir(self, task_id: int) -> Path:
        return self.root / "tasks" / str(int(task_id))

    def user_dir(self, owner: str) -> Path:
        return owner_dir(self.root, owner)

    def _user_dir(self, launch: Launch) -> Path:
        return owner_dir(self.root, launch.account.name if launch.account else launch.owner)

    def _prepare_as_owner(self, launch: Launch, job: BatchJob) -> Path:
        """A service that is not root hands another account its task dir through ``tacc-launcher prepare``
        (it lays the dir out as the account, the batch script and env plan included, see tacc_hub.launcher)."""
        plan, account = launch.plan, launch.account
        assert account is not None
        tdir = self.task_dir(launch.task_id)
        files = {**plan.files, "launch.sh": plan.script, "job.sbatch": job.script}
        if plan.env.kind != "base":
            files[ENV_PLAN_FILE] = plan.env.model_dump_json()
        spec = {
            "task_id": launch.task_id,
            "account": {"name": account.name, "uid": account.uid, "gid": account.gid},
            "task_dir": str(tdir), "user_dir": str(self._user_dir(launch)),
            "env_dir": None if plan.env.kind == "base" else str(Path(plan.env.path).parent),
            "keep": ["output.log", "checkpoint"], "files": files, "code": plan.code.model_dump(mode="json"),
            "workdir": plan.workdir, "env": base_environ(DEFAULT_ENV_KEEP, account, self.task_path),
            "env_plan": plan.env.model_dump(mode="json"), "build_env": False, "log_copy": "",
            "grace": self.grace_period,
        }
        write_control(self.control, launch.task_id, spec)
        proc = subprocess.run([*self.launcher, str(self.control), "prepare", str(int(launch.task_id))],
                              capture_output=True, text=True, env=launcher_env(), timeout=3600, check=False)
        if proc.returncode != 0:
            raise LaunchError(proc.stderr.strip().removeprefix("tacc-launcher: ")[-3000:] or "tacc-launcher failed")
        return tdir

    def _prepare(self, launch: Launch, job: BatchJob, uid: int | None, gid: int) -> Path:
        """The task dir of this run, its account's (``slurm_files.prepare_owned``; ``uid`` None: the service's).
        A venv/conda env is built by the job on its first node (see prepare_env), not here."""
        tdir, udir = self.task_dir(launch.task_id), self._user_dir(launch)
        env = launch.plan.env
        if uid is None:
            udir.mkdir(parents=True, exist_ok=True)
        else:
            owned_dir(udir, uid, gid)
        if env.kind != "base":  # the job builds it as its user: the env root is that user's
            envs = Path(env.path).parent
            if uid is not None and launch.account is not None and envs.exists() and envs.stat().st_uid != uid:
                raise LaunchError(f"the environment root {envs} is not {launch.account.name}'s: with tasks run as "
                                  "their owners, each account needs its own (ask the site)")
            envs.mkdir(parents=True, exist_ok=True)
            if uid is not None:
                owned_dir(envs, uid, gid, 0o755)

        def fill(stage: Path) -> None:
            prepare_task_dir(stage, launch, udir, build_env=False)
            if env.kind != "base":
                (stage / ENV_PLAN_FILE).write_text(env.model_dump_json())
            (stage / "job.sbatch").write_text(job.script)

        prepare_owned(tdir, uid, gid, fill)
        return tdir

    async def launch(self, launch: Launch) -> dict[str, Any]:
        if launch.task_id in self._unsure:
            await cancel_strays(self, launch.task_id)
        try:
            user, uid, gid = self._runs_as(launch.account)
        except KeyError as exc:
            raise LaunchError(f"no Unix account {self.submit_as!r} to submit Slurm jobs as") from exc
        tdir, udir = self.task_dir(launch.task_id), self._user_dir(launch)
        env = {**self.extra_env, **task_env(launch, tdir, udir, self.grace_period),
               "TACC_MASTER_PORT": str(free_port())}
        tb_port = tensorboard_port(launch.task_id) if launch.plan.tensorboard is not None else None
        tb_secret = tensorboard_secret() if tb_port is not None else None
        if tb_port is not None and tb_secret is not None:
            env.update(TACC_TENSORBOARD_PORT=str(tb_port), TACC_TENSORBOARD_SECRET=tb_secret)
        switch = {n.name: n.switch for n in self.nodes()}
        if len({switch.get(s.node, "0") for s in launch.placement.nodes}) > 1:
            env["TACC_CROSS_SWITCH"] = "1"  # the runtimes fall back to TCP (see compiler/network.py)
        step = None if launch.plan.env.kind == "base" else prepare_env_argv(self.node_python, PKG_ROOT,
                                                                             tdir / ENV_PLAN_FILE)
        job = render_batch(task_id=launch.task_id, plan=launch.plan, placement=launch.placement, task_dir=tdir,
                           env=env, partition=self.partition, env_step=step,
                           account=mapped_name("account", self.account_map, launch.group),
                           qos=mapped_name("QOS", self.qos_map, launch.group))
        try:
            if launch.account is not None and os.geteuid() != 0:
                await asyncio.to_thread(self._prepare_as_owner, launch, job)
            else:
                await asyncio.to_thread(self._prepare, launch, job, None if user is None else uid, gid)
        except LaunchError:
            raise
        except (OSError, LookupError) as exc:
            raise LaunchError(f"preparing the task failed: {exc}") from exc
        self._mark(launch.task_id, cancelled=False)
        try:
            out = await self._run(self._argv("sbatch", "--parsable", *job.options, str(tdir / "job.sbatch"),
                                             user=user))
        except SlurmError as exc:
            if is_unreachable(str(exc)):
                self.health.failed(str(exc))
                if may_have_gone_through(str(exc)):
                    self._unsure.add(launch.task_id)
                raise LaunchUnavailable(f"could not reach Slurm to submit the job: {exc}") from exc
            raise LaunchError(f"sbatch refused the job: {exc}") from exc
        self.health.ok()
        job_id = out.strip().split(";")[0]
        if not job_id.isdigit():
            raise LaunchError(f"sbatch printed no job id: {out[:200]!r}")
        self._ours.add(job_id)
        state: dict[str, Any] = {"job_id": job_id, "dir": str(tdir), "uid": uid,
                                 "nodes": len(launch.placement.nodes)}
        if tb_port is not None:
            state.update(tensorboard_port=tb_port, tensorboard_secret=tb_secret)
        if user is not None:
            state["user"] = user  # scancel runs as them
        return state

    # --- poll ---------------------------------------------------------------------------

    def _backed_off(self, cmd: str) -> str | None:
        wait = self._retry_at.get(cmd, 0.0) - time.monotonic()
        return f"{cmd} is failing; next try in {wait:.0f} s" if wait > 0 else None

    def unavailable(self) -> str | None:
        return self.health.unavailable()

    async def probe(self) -> None:
        await ping(self)

    def _failed(self, cmd: str, exc: Exception) -> str:
        if cmd == "squeue":  # slurmctld; sacct failing means slurmdbd, which launches do not need
            self.health.failed(str(exc))
        self._failures[cmd] = n = self._failures.get(cmd, 0) + 1
        delay = min(self.max_backoff, 0.5 * 2 ** (n - 1))
        self._retry_at[cmd] = time.monotonic() + delay
        log.warning("slurm: %s (retrying in %.1f s)", exc, delay)
        return f"cannot reach Slurm: {exc}"

    def _succeeded(self, cmd: str) -> None:
        if cmd == "squeue":
            self.health.ok()
        self._failures.pop(cmd, None)
        self._retry_at.pop(cmd, None)

    async def poll(self, states: dict[int, dict[str, Any]]) -> dict[int, Observation]:
        jobs = {tid: str(st.get("job_id", "")) for tid, st in states.items()}
        self._ours.update(jid for jid in jobs.values() if jid.isdigit())
        out = {tid: Observation("gone", reason="no Slurm job id recorded") for tid, jid in jobs.items()
               if not jid.isdigit()}
        wanted = {tid: jid for tid, jid in jobs.items() if jid.isdigit()}
        if not wanted:
            return out
        why = self._backed_off("squeue")
        if why:
            return {**out, **{tid: Observation("unknown", reason=why) for tid in wanted}}
        try:
            listed = await self._squeue()
        except SlurmError as exc:
            reason = self._failed("squeue", exc)
            return {**out, **{tid: Observation("unknown", reason=reason) for tid in wanted}}
        self._succeeded("squeue")
        # Accounting (slurmdbd) may be down while slurmctld answers: only the jobs squeue no
        # longer lists are then unknown (unless their exitcode file tells).
        await self._exit_codes(listed, [jid for tid, jid in wanted.items() if jid in listed and STATES.get(
            listed[jid]["job_state"], ("",))[0] == "exited" and self._exitcode_file(tid, jid, self._uid(states[tid]))
            is None])
        missing = sorted({jid for jid in wanted.values() if jid not in listed}, key=int)
        acct_down = self._backed_off("sacct") if missing else None
        if missing and acct_down is None:
            try:
                acct = await self._json("sacct", "-j", ",".join(missing), ok_errors=SACCT_NOTHING_FOUND)
            except SlurmError as exc:
                acct_down = self._failed("sacct", exc)
            else:
                self._succeeded("sacct")
                for j in acct.get("jobs", []):
                    listed.setdefault(str(j.get("job_id")), j)
        now = time.monotonic()
        for tid, jid in wanted.items():
            try:
                out[tid] = self._observe(tid, jid, listed.get(jid), now, acct_down, self._uid(states[tid]))
            except OSError as exc:
                out[tid] = Observation("unknown", reason=str(exc))
        return out

    async def _squeue(self) -> dict[str, dict[str, Any]]:
        """Job id -> {job_id, job_state} of every job slurmctld knows. Text: ``--json`` is 4 MB a poll with
        1,000 jobs and costs more CPU than all else the service does (benchmarks/bench_slurm_tracking.py)."""
        out = await self._run(self._argv("squeue", "--noheader", "--states=all", "--format=%i|%T"))
        jobs: dict[str, dict[str, Any]] = {}
        for line in out.splitlines():
            job_id, sep, state = line.strip().partition("|")
            if not sep or not job_id.isdigit():
                if line.strip():
                    raise SlurmError(f"squeue printed an unexpected line: {line[:200]!r}")
                continue
            jobs[job_id] = {"job_id": job_id, "job_state": state.strip().upper()}
        return jobs

    async def _exit_codes(self, listed: dict[str, dict[str, Any]], ended: list[str]) -> None:
        """Jobs squeue lists as ended whose task wrote no exit code (killed, node failure): ``squeue --json``
        has the code (sacct --json 22.05 reports 0 for them); rare, so the big listing is taken only then."""
        if not ended:
            return
        try:
            full = {str(j.get("job_id")): j for j in (await self._json("squeue")).get("jobs", [])}
        except SlurmError as exc:
            log.info("slurm: squeue --json for the exit codes of jobs %s: %s", ",".join(ended), exc)
            return
        listed.update({jid: full[jid] for jid in ended if jid in full})

    def _exitcode_file(self, task_id: int, job_id: str, uid: int | None = None) -> int | None:
        """The exit code the task's run wrote, only when it is job ``job_id``'s (its ``job`` file names it:
        see "Node failure" above; otherwise Slurm's word decides). Both files are the job's (it runs as
        ``uid``): read without following a link, regular files of ``uid`` only (``slurm_files.read_job_file``).
        Plain strings, no exception when absent: called for every tracked task on every poll."""
        tdir = f"{self.root}/tasks/{int(task_id)}"
        if not os.access(f"{tdir}/exitcode", os.F_OK):
            return None
        owner = self._runs_as(None)[1] if uid is None else uid
        if (read_job_file(f"{tdir}/job", owner) or "").strip() != job_id:
            return None
        text = read_job_file(f"{tdir}/exitcode", owner, SMALL)
        if text is None:
            return None
        text = text.strip()
        return int(text) if text.lstrip("-").isdigit() and len(text) < 5 else 255

    def _mark(self, task_id: int, cancelled: bool) -> None:
        """Record (or forget) that the service cancels the task's run: in the service's own ``control`` dir."""
        path = self.control / f"{int(task_id)}.cancelled"
        if cancelled:
            path.touch()
        else:
            path.unlink(missing_ok=True)

    def _cancelled(self, task_id: int) -> bool:
        return os.access(f"{self.control}/{int(task_id)}.cancelled", os.F_OK)

    def _observe(self, task_id: int, job_id: str, job: dict[str, Any] | None, now: float,
                 acct_down: str | None = None, uid: int | None = None) -> Observation:
        code = self._exitcode_file(task_id, job_id, uid)
        if job is None:
            if code is not None:
                self._missing_since.pop(job_id, None)
                return Observation("exited", exit_code=code, reason="cancelled" if self._cancelled(task_id) else None)
            if acct_down is not None:
                return Observation("unknown", reason=acct_down)
            since = self._missing_since.setdefault(job_id, now)
            if now - since < self.missing_grace:
                return Observation("unknown", reason=f"Slurm job {job_id} is not listed (yet)")
            self._missing_since.pop(job_id, None)
            return Observation("gone", reason=f"Slurm has no record of job {job_id}")
        self._missing_since.pop(job_id, None)
        state = _state_name(job.get("job_state", job.get("state")))
        status, reason = STATES.get(state, ("unknown", f"unexpected Slurm job state {state or '?'}"))
        if code is not None and state not in ("PENDING", "CONFIGURING") and REQUEUE_MARK not in (reason or ""):
            # The batch script wrote it last: the task has ended (Slurm may still be COMPLETING).
            # Not after a node failure: srun then ends (even with 0) while the task's processes did not.
            return Observation("exited", exit_code=code, reason="cancelled" if self._cancelled(task_id) else None)
        if status != "exited":
            return Observation(status, reason=reason)  # type: ignore[arg-type]
        slurm_code = _slurm_exit(job.get("exit_code"))
        if state != "COMPLETED" and not slurm_code:
            slurm_code = 1  # ended without completing: never a success
        if self._cancelled(task_id):
            reason = "cancelled"
        return Observation("exited", exit_code=slurm_code if slurm_code is not None else 0, reason=reason)

    # --- cancel -------------------------------------------------------------------------

    async def cancel(self, task_id: int, state: dict[str, Any]) -> None:
        await cancel_job(self, task_id, state)

    # --- reaching a running task ------------------------------------------------------

    def task_host(self, task_id: int, state: dict[str, Any], placement: Placement | None) -> str:
        from .ports import slurm_task_host

        return slurm_task_host(self, task_id, state, placement)

    async def port_owned(self, task_id: int, state: dict[str, Any], placement: Placement | None, port: int) -> bool:
        from .ports import slurm_port_owned

        return await slurm_port_owned(self, task_id, state, placement, port)

    async def listening_ports(self, task_id: int, state: dict[str, Any], placement: Placement | None) -> list[int]:
        from .ports import slurm_listening

        return await slurm_listening(self, task_id, state, placement)

    def exec_argv(self, task_id: int, state: dict[str, Any], placement: Placement | None, argv: list[str], *,
                  tty: bool) -> list[str]:
        from .execute import slurm_exec_argv

        return slurm_exec_argv(self, task_id, state, placement, argv, tty=tty)

    async def signal(self, task_id: int, state: dict[str, Any], signame: str) -> None:
        """SIGUSR1 to the task's process on each node if it traps it, else to its workers that do, through one
        ``srun --overlap`` step as the job's owner (``slurm_warn``): never to a process it would kill."""
        from .slurm_warn import warn_argv

        if signame != "USR1":
            raise LaunchError(f"only USR1 can be sent to a task, not {signame[:16]!r}")
        job_id = str(state.get("job_id", ""))
        if not job_id.isdigit():
            return
        user = state.get("user") if isinstance(state.get("user"), str) else None
        got = state.get("nodes")
        nodes = got if isinstance(got, int) else 1  # jobs launched before it was recorded: one node
        try:
            await self._run(warn_argv(self, job_id, nodes, user or self.submit_as))
        except SlurmError as exc:
            raise LaunchError(f"the time-limit warning of job {job_id} failed: {exc}") from exc

    async def set_time_limit(self, task_id: int, state: dict[str, Any], seconds: int) -> None:
        """``scontrol update JobId=J TimeLimit=M`` as the service (raising a limit needs a Slurm operator or
        admin: the service's account must be one)."""
        job_id = str(state.get("job_id", ""))
        if not job_id.isdigit():
            return
        minutes = time_option(int(seconds) + int(self.grace_period) + 60)
        try:
            await self._run(self._argv("scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}"))
        except SlurmError as exc:
            raise LaunchError(f"scontrol update JobId={job_id} TimeLimit={minutes} failed: {exc}") from exc

    async def gpu_usage(self, task_id: int, state: dict[str, Any], placement: Placement | None,
                        command: tuple[str, ...]) -> list[tuple[float, float | None]]:
        from .gpuquery import slurm_gpu_usage

        return await slurm_gpu_usage(self, task_id, state, placement, command)
