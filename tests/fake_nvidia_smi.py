#!/usr/bin/env python3
"""A stand-in for ``nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits``.

    fake_nvidia_smi.py [--control FILE] [--runs FILE] INDEX=UTIL,MEMORY ...

prints ``INDEX, UTIL, MEMORY`` for each reading given. ``--control FILE``: the first word of FILE (when it
exists) chooses what this run does instead: ``ok`` (the readings), ``garbage`` (non-numeric, hostile and
non-UTF-8 lines), ``huge`` (more than 64 KiB), ``hang`` (writes its pid to FILE.hang-pid, then sleeps an
hour), ``fail`` (exit 6, as nvidia-smi without a driver). ``--runs FILE``: each run appends a line
``MODE`` there, so that tests can wait for runs instead of sleeping. Standard library only: it runs
inside Slurm jobs as the tasks' users too (with Debian's /usr/bin/python3).
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    control = runs = None
    readings: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--control":
            control = next(args)
        elif arg == "--runs":
            runs = next(args)
        else:
            readings.append(arg)
    mode = "ok"
    if control and os.path.exists(control):
        with open(control) as fh:
            mode = (fh.read().split() or ["ok"])[0]
    if runs:
        with open(runs, "a") as fh:
            fh.write(mode + "\n")
    out = sys.stdout.buffer
    if mode == "hang":
        with open(f"{control}.hang-pid", "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(3600)
        return 0
    if mode == "fail":
        print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", file=sys.stderr)
        return 6
    if mode == "garbage":
        out.write(b"index, utilization.gpu [%], memory.used [MiB]\n0, [N/A], [N/A]\n1, nan, 5\n0, 1e999, 1\n"
                  b"\xff\xfe0, 50, 10\n1, 0x10, 3\n-1, 50, 5\n0 ; 99 ; 1\n1, 50\x00, 2\n")
        return 0
    if mode == "huge":
        out.write(b"0, 99, 1\n" * 10000)
        return 0
    for r in readings:
        index, _, rest = r.partition("=")
        util, _, memory = rest.partition(",")
        out.write(f"{index}, {util}, {memory}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
