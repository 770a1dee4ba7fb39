"""Reading a running task's GPU utilization: ``gpu_query_command`` (nvidia-smi's CSV), run and parsed strictly.

The command (``TaccHub.gpu_query_command``, by default ``nvidia-smi --query-gpu=index,utilization.gpu,
memory.used --format=csv,noheader,nounits``) prints one line ``index, util %, memory MiB`` per GPU of the
node it runs on. :func:`parse_gpu_csv` reads it strictly: ASCII numbers only (``[N/A]``, ``nan``, ``1e999``,
unknown fields and lines that are not UTF-8 are skipped, never guessed at), utilization clamped to 0..100,
the first line of an index wins. :func:`run_query` runs it with bounded output (:data:`MAX_OUTPUT` bytes:
more is no reading) and bounded time (:data:`TIMEOUT_S`: then its whole process group is killed), stdin
closed, no shell. A command that is missing gives no samples, logged once per command (not every pass).

Two executors, one contract (``Executor.gpu_usage``: ``[(util %, memory MiB | None)]``, one per GPU of the
task that answered; empty when nothing could be read):

* :func:`local_gpu_usage`: the command on this machine, as the service, mapped to the task by the GPU slot
  indices of its placement (slot ``i`` is ``CUDA_VISIBLE_DEVICES`` ``i``, nvidia-smi's index ``i``). In a
  :func:`sampling_pass` (the sampler opens one per pass) one run serves every task of the pass.
* :func:`slurm_gpu_usage`: one ``srun --jobid=J --overlap --nodes=1 --ntasks=1 -w FIRSTNODE`` step as the
  job's owner, which prints the step's ``CUDA_VISIBLE_DEVICES`` and then runs the command: the step gets
  the job's GPUs (Slurm gives a step all of its job's GRES by default), so the readings are mapped by
  those indices (with ``ConstrainDevices`` nvidia-smi sees only them, renumbered from 0 as the variable
  is). Only the first node of a multi-node task is read. That output comes from a process in the owner's
  job, which the owner's own processes can tamper with (same uid): it is untrusted. It can only lie about
  that user's own usage (the service reads nothing else from it, and parses it with the limits above).

Stdlib only at run time (the cluster types are imported for typing alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..scheduler.cluster import Placement
    from .slurm import SlurmExecutor

log = logging.getLogger("tacc_hub.gpuquery")

MAX_OUTPUT = 64 * 1024
"""Bytes of the command's output read at most; a longer output is no reading at all."""
TIMEOUT_S = 5.0
"""Seconds the command may run; then its process group is killed and there is no reading."""
MAX_INDEX = 4095
MAX_MEMORY_MIB = 1 << 30  # 1 PiB: a larger memory figure is nonsense, the line is skipped

Usage = list[tuple[float, float | None]]
Reading = dict[int, tuple[float, float | None]]  # nvidia-smi index -> (util %, memory MiB | None)

_NUMBER = re.compile(r"-?[0-9]{1,12}(?:\.[0-9]{1,9})?")
_INDEX = re.compile(r"[0-9]{1,4}")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_JOB = re.compile(r"[0-9]{1,18}")
CVD_MARK = b"TACC_CVD="
# Run in the task's step: print the step's CUDA_VISIBLE_DEVICES, then become the command ("$@", never text).
STEP_SCRIPT = 'printf "TACC_CVD=%s\\n" "${CUDA_VISIBLE_DEVICES-}"; exec "$@"'
STEP_NAME = "tacc-gpu-query"


def parse_gpu_csv(data: bytes) -> Reading:
    """``index -> (util %, memory MiB | None)`` from ``index, util[, memory]`` lines (nvidia-smi ``csv,noheader,
    nounits``). Lines that are not ASCII, have another number of fields, or whose index or util is not a plain
    decimal number are skipped; a memory field that is not one (``[N/A]``) is None; util is clamped to 0..100."""
    out: Reading = {}
    if len(data) > MAX_OUTPUT:
        return out
    for raw in data.split(b"\n"):
        try:
            line = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (2, 3) or not _INDEX.fullmatch(parts[0]) or not _NUMBER.fullmatch(parts[1]):
            continue
        index = int(parts[0])
        if index > MAX_INDEX or index in out:
            continue
        util = min(100.0, max(0.0, float(parts[1])))
        memory: float | None = None
        if len(parts) == 3 and _NUMBER.fullmatch(parts[2]):
            memory = float(parts[2])
            if not 0 <= memory <= MAX_MEMORY_MIB:
                memory = None
        out[index] = (util, memory)
    return out


def parse_indices(text: str) -> list[int] | None:
    """``CUDA_VISIBLE_DEVICES`` as GPU indices (``0,1``); None when it is empty or not a list of indices
    (``NoDevFiles``, UUIDs)."""
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    if not parts or not all(_INDEX.fullmatch(p) for p in parts):
        return None
    return [int(p) for p in parts]


# --- running the command ---------------------------------------------------------------


@dataclass
class _Once:
    """Which failures were logged already (a missing command is logged once, not every pass)."""

    seen: set[str] = field(default_factory=set)

    def warn(self, key: str, message: str, *args: Any) -> None:
        if key in self.seen:
            log.debug(message, *args)
            return
        if len(self.seen) < 1000:
            self.seen.add(key)
        log.warning(message, *args)


_once = _Once()


@dataclass(frozen=True)
class Result:
    """How a run ended: ``out`` (None: no reading) and why not, for the log."""

    out: bytes | None
    why: str = ""
    missing: bool = False  # the command could not be started at all


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL to the command's process group, and our ends of its pipes closed: a process that left the
    group (setsid) and holds them open must not keep ``wait()`` waiting for their end."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    transport = getattr(proc, "_transport", None)  # asyncio's: wait() ends once the pipes are closed too
    if transport is not None:
        transport.close()


async def run_query(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S,
                    limit: int = MAX_OUTPUT) -> Result:
    """Run ``argv`` (no shell, stdin closed, its own session) and return its stdout if it exits 0 within
    ``timeout`` seconds having printed at most ``limit`` bytes. Otherwise (or when cancelled) its whole
    process group is killed and there is no output."""
    if not argv:
        return Result(None, "no command", missing=True)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env if env is not None else _plain_env(), cwd="/",
            start_new_session=True)
    except (OSError, ValueError) as exc:  # not there, not executable, a NUL in an argument
        return Result(None, f"{argv[0][:200]}: {getattr(exc, 'strerror', None) or exc}", missing=True)
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout, proc.stderr

    async def read_all() -> tuple[bytes, bytes]:
        async def err() -> bytes:
            data = await stderr.read(4096)  # for the log; the rest is drained and dropped
            while await stderr.read(65536):
                pass
            return data

        err_task = asyncio.ensure_future(err())
        try:
            chunks: list[bytes] = []
            size = 0
            while True:
                chunk = await stdout.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise _TooLong
                chunks.append(chunk)
            await proc.wait()
            return b"".join(chunks), await err_task
        finally:
            err_task.cancel()

    done = False
    try:
        out, err = await asyncio.wait_for(read_all(), timeout)
        done = True
    except TimeoutError:
        return Result(None, f"{os.path.basename(argv[0])} did not finish in {timeout:g} s (killed)")
    except _TooLong:
        return Result(None, f"{os.path.basename(argv[0])} printed more than {limit} bytes (killed)")
    finally:
        if not done:
            _kill_group(proc)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(proc.wait())
    if proc.returncode != 0:
        text = err.decode("utf-8", "replace").strip()[-300:]
        return Result(None, f"{os.path.basename(argv[0])} exited {proc.returncode}: {text!r}",
                      missing=proc.returncode == 127)
    return Result(out)


class _TooLong(Exception):
    pass


def _plain_env() -> dict[str, str]:
    """What the command sees on this machine: the service's PATH and a C locale, none of its secrets."""
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C", "LC_ALL": "C"}


# --- local: one run per pass -----------------------------------------------------------


class SamplingPass:
    """One pass of the sampler over the running tasks: the readings of this machine it shares."""

    def __init__(self) -> None:
        self._local: dict[tuple[str, ...], asyncio.Future[Reading | None]] = {}

    def local_reading(self, command: tuple[str, ...]) -> asyncio.Future[Reading | None]:
        fut = self._local.get(command)
        if fut is None:
            fut = self._local[command] = asyncio.ensure_future(read_local(command))
        return fut


_PASS: contextvars.ContextVar[SamplingPass | None] = contextvars.ContextVar("tacc_gpu_pass", default=None)


@contextlib.contextmanager
def sampling_pass() -> Iterator[SamplingPass]:
    """Tasks created inside share one :class:`SamplingPass` (asyncio tasks copy the context they start in):
    every ``local_gpu_usage`` call among them costs one run of the command in all."""
    p = SamplingPass()
    token = _PASS.set(p)
    try:
        yield p
    finally:
        _PASS.reset(token)


async def read_local(command: tuple[str, ...]) -> Reading | None:
    """One run of ``command`` on this machine, parsed; None when there is no reading (logged)."""
    res = await run_query(list(command), timeout=TIMEOUT_S)
    if res.out is None:
        if res.missing:
            _once.warn(f"missing:{command[:1]}", "GPU query command unavailable, no GPU samples: %s", res.why)
        else:
            _once.warn(f"local:{res.why[:40]}", "GPU query gave no reading: %s", res.why)
        return None
    return parse_gpu_csv(res.out)


def _first_node(placement: Placement | None) -> tuple[str, list[int]] | None:
    if placement is None or not placement.nodes:
        return None
    first = placement.nodes[0]
    return (first.node, list(first.gpus)) if first.gpus else None


async def local_gpu_usage(ex: Any, task_id: int, state: dict[str, Any], placement: Placement | None,
                          command: tuple[str, ...]) -> Usage:
    """The readings of the task's GPU slots (``placement.nodes[0].gpus``) on this machine."""
    node = _first_node(placement)
    if node is None or not command:
        return []
    p = _PASS.get()
    if p is None:
        reading = await read_local(command)
    else:
        reading = await asyncio.shield(p.local_reading(command))  # one caller's cancel spares the others
    if not reading:
        return []
    return [reading[g] for g in node[1] if g in reading]


# --- slurm: one step per task ------------------------------------------------------------


def step_argv(ex: SlurmExecutor, job_id: str, node: str, user: str | None, command: tuple[str, ...]) -> list[str]:
    """The ``srun`` step, as ``user``, that prints its ``CUDA_VISIBLE_DEVICES`` and runs ``command``."""
    return ex._argv("srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
                    "--time=1", "--quiet", f"--job-name={STEP_NAME}", "--",
                    "/bin/sh", "-c", STEP_SCRIPT, STEP_NAME, *command, user=user)


def parse_step_output(out: bytes, gpus_on_node: int) -> Usage:
    """The readings of the step's GPUs: its first line is ``TACC_CVD=<indices>``, the rest the command's CSV.
    Without usable indices, every line is taken only when there are exactly as many as the task's GPUs there
    (device cgroups: nvidia-smi sees those alone)."""
    first, _, rest = out.partition(b"\n")
    if not first.startswith(CVD_MARK):
        return []
    reading = parse_gpu_csv(rest)
    try:
        indices = parse_indices(first[len(CVD_MARK):].decode("ascii"))
    except UnicodeDecodeError:
        indices = None
    if indices is None:
        return [reading[i] for i in sorted(reading)] if len(reading) == gpus_on_node else []
    return [reading[i] for i in dict.fromkeys(indices) if i in reading][:max(0, gpus_on_node)]


async def slurm_gpu_usage(ex: SlurmExecutor, task_id: int, state: dict[str, Any], placement: Placement | None,
                          command: tuple[str, ...]) -> Usage:
    """The readings of the task's GPUs on its first node, from a step of its own job, run as its owner."""
    node = _first_node(placement)
    job_id = str(state.get("job_id", ""))
    if node is None or not command or not _JOB.fullmatch(job_id) or not _NODE.fullmatch(node[0]):
        return []
    from .slurm import SlurmError

    user = state.get("user") if isinstance(state.get("user"), str) else None
    try:
        argv = step_argv(ex, job_id, node[0], user or ex.submit_as or None, command)
    except SlurmError as exc:  # not an account name: no reading
        _once.warn(f"argv:{task_id}", "GPU query of task %s not run: %s", task_id, exc)
        return []
    res = await run_query(argv, env=ex._env(), timeout=TIMEOUT_S)
    if res.out is None:
        if res.missing:
            _once.warn(f"slurm-missing:{command[:1]}", "GPU query in task %s's job unavailable: %s", task_id,
                       res.why)
        else:
            log.debug("GPU query in task %s's job gave no reading: %s", task_id, res.why)
        return []
    return parse_step_output(res.out, len(node[1]))
