"""The time-limit warning on Slurm: SIGUSR1 to each node's task process if it traps it, else to its workers that do.

``scancel --signal=USR1`` would signal every process of every step, and a process without a handler
for SIGUSR1 dies of it: a task that never asked for the warning would lose its last minutes. So
the warning is one ``srun --overlap`` step on every node of the job, as the job's owner, running
:data:`SCRIPT` (fixed text: no user input reaches it but the job id, checked to be digits): on its
node it finds the owner's processes of this job on this node (``SLURM_JOB_ID``, ``SLURMD_NODENAME``
in their environment) that slurmstepd started for a step other than the batch script and this one,
and applies the rule of the local supervisor (``launcher.proctree.warn``).
"""

from __future__ import annotations

from typing import Any

SCRIPT = r"""
import os, signal, sys
job, me = sys.argv[1], os.environ.get("SLURM_STEP_ID", "")
node = os.environ.get("SLURMD_NODENAME", "").encode()
uid, sig = os.getuid(), signal.SIGUSR1

def status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                k, _, v = line.partition(b":")
                out[k] = v.strip()
    except OSError:
        pass
    return out

def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return dict(e.split(b"=", 1) for e in fh.read().split(b"\0") if b"=" in e)
    except OSError:
        return {}

procs = {}
for name in os.listdir("/proc"):
    if name.isdigit():
        st = status(int(name))
        if st.get(b"Uid", b"").split()[:1] == [str(uid).encode()] and b"PPid" in st:
            procs[int(name)] = st

def comm(pid):
    try:
        with open(f"/proc/{pid}/comm", "rb") as fh:
            return fh.read().strip()
    except OSError:
        return b""

def catches(st):
    try:
        return bool(int(st.get(b"SigCgt", b"0"), 16) >> (sig - 1) & 1)
    except ValueError:
        return False

sent = 0
for pid, st in procs.items():
    env = environ(pid)
    step = env.get(b"SLURM_STEP_ID", b"").decode(errors="replace")
    if env.get(b"SLURM_JOB_ID") != job.encode() or not step.isdigit() or step == me \
            or env.get(b"SLURMD_NODENAME", b"") != node:
        continue
    if comm(int(st[b"PPid"])) != b"slurmstepd":
        continue  # not a step's task process (one of their children)
    targets = [pid] if catches(st) else [p for p, s in procs.items() if int(s[b"PPid"]) == pid and catches(s)]
    for t in targets:
        try:
            os.kill(t, sig)
            sent += 1
        except OSError:
            pass
print(f"tacc: SIGUSR1 sent to {sent} process(es) of job {job} on this node", file=sys.stderr)
"""


def warn_argv(ex: Any, job_id: str, nodes: int, user: str | None) -> list[str]:
    """``srun --jobid=J --overlap -N nodes --ntasks-per-node=1 PYTHON -I -S -c SCRIPT J`` as ``user``."""
    if not job_id.isdigit():
        raise ValueError(f"not a job id: {job_id[:32]!r}")
    return ex._argv("srun", f"--jobid={job_id}", "--overlap", f"--nodes={max(1, int(nodes))}",
                    "--ntasks-per-node=1", "--time=1", "--quiet", "--job-name=tacc-warn", "--",
                    ex.node_python, "-I", "-S", "-c", SCRIPT, job_id, user=user)
