"""Build (or find ready) a task's environment where the task runs: ``python -m tacc_hub.executors.prepare_env FILE``.

FILE holds the task's ``EnvPlan`` as JSON. The Slurm executor runs this as the first step of a
batch job, on the allocation's first node, so that environments are built on the cluster and
not on the hub. The protocol is ``prepare.ensure_env``'s: one directory per dependency digest
under the site's shared env root, built under a file lock and usable only once its READY
marker exists, so concurrent jobs, and the hub's own local executor, never see a half-built
env; a digest already built is reused at once.

Prints one ``tacc: environment ...`` line (it goes to the task's log) and exits 0, or prints
why it failed to stderr and exits 1 (the batch script then ends the task with that code).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tacc_hub.compiler.plan import EnvPlan

from .base import LaunchError
from .prepare import ensure_env


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tacc_hub.executors.prepare_env ENV_PLAN_JSON", file=sys.stderr)
        return 2
    try:
        env = EnvPlan.model_validate_json(Path(args[0]).read_text())
    except (OSError, ValueError) as exc:
        print(f"tacc: cannot read the environment plan {args[0]}: {exc}", file=sys.stderr)
        return 1
    began = time.monotonic()
    try:
        built = ensure_env(env)
    except (LaunchError, OSError) as exc:
        print(f"tacc: preparing the {env.kind} environment {env.digest} failed: {exc}", file=sys.stderr)
        return 1
    what = f"built in {time.monotonic() - began:.1f} s" if built else "ready (reused)"
    print(f"tacc: {env.kind} environment {env.digest} {what} at {env.path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
