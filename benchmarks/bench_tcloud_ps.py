"""``tcloud ps`` with 10,000 tasks in the store (target: <= 300 ms wall time).

The store is filled before the service starts: 10,000 tasks of one user, inserted with
``Store.insert_tasks`` (spec and plan compiled by the service's own compiler and site
profile, so rows have their real size), all terminal (succeeded / failed / cancelled,
with start and end times), so nothing launches. Then the installed console script
``tcloud ps`` runs as a subprocess (absolute path) ``--runs`` times after 2 warm-up runs,
once with its output to a pipe (plain columns, as a script sees it) and once on a
pseudo-terminal (the rich table a person sees); the figures are the median wall times.

Baselines, same run: the same interpreter running ``-c pass`` (the startup floor of this
Python, site hooks included) and ``tcloud --version`` (console script + click, no
request). Also printed: the API call alone (GET /api/tasks?limit=50 from this process)
and what the imports of the CLI cost, to show where the time goes.

Usage: python benchmarks/bench_tcloud_ps.py [--tasks 10000] [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import BIN, Api, Service, clean_env, header, ms, pct, ratio, verdict

from tacc_hub.compiler import compile_task
from tacc_hub.schema import spec_from_data
from tacc_hub.service.app import TaccHub
from tacc_hub.store import NewTask, Store, TaskStatus

TARGET = 0.300
USER = "alice"


def fill(svc: Service, n: int) -> None:
    app = TaccHub()
    app.state_dir = str(svc.state_dir)
    site = app.site_profile()
    spec = spec_from_data({
        "name": "train", "code": {"kind": "snapshot", "digest": "ab" * 32},
        "entrypoint": {"argv": ["python", "train.py", "--epochs", "10"]},
        "environment": {"variables": {"SEED": "1"}}, "resources": {"gpus_per_node": 0, "time_limit": "2h"}})
    plan = compile_task(spec, site)
    spec_doc = spec.model_dump(mode="json", by_alias=True)
    plan_doc = plan.model_dump(mode="json")
    now = time.time()
    kinds = [(TaskStatus.SUCCEEDED, None, 0)] * 16 + [(TaskStatus.FAILED, "exited with status 1", 1)] * 3 + [
        (TaskStatus.CANCELLED, "cancelled", None)]
    with Store(svc.db_url) as store:
        store.migrate()
        for start in range(0, n, 1000):
            rows = []
            for i in range(start, min(n, start + 1000)):
                status, reason, _ = kinds[i % len(kinds)]
                rows.append(NewTask(owner=USER, name=f"train-{i}", digest=plan.task_digest, spec=spec_doc,
                                    plan=plan_doc, submitted_at=now - (n - i) * 60.0, status=status, reason=reason))
            store.insert_tasks(rows)
        # Fill in what a finished task has (times, exit code, placement): one statement, fixture only.
        placement = json.dumps({"nodes": [{"node": "localhost", "gpus": []}]})
        with store.engine.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE tasks SET started_at = submitted_at + 3, finished_at = submitted_at + 45, "
                "exit_code = CASE status WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 END, "
                "placement = ? WHERE status != 'cancelled'", (placement,))
        total = store.counts_by_status(USER)
    print(f"store filled: {sum(total.values())} tasks of {USER} "
          f"({', '.join(f'{k}: {v}' for k, v in total.items() if v)})", flush=True)


def time_cmd(argv: list[str], env: dict[str, str], runs: int, warmup: int = 2, check_out: str | None = None
             ) -> list[float]:
    out: list[float] = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{argv} exited {p.returncode}: {p.stderr[-2000:]}")
        if check_out is not None and check_out not in p.stdout + p.stderr:
            raise RuntimeError(f"{argv}: expected {check_out!r} in the output:\n{p.stdout[-2000:]}")
        if i >= warmup:
            out.append(dt)
    return out


def time_in_pty(argv: list[str], env: dict[str, str], runs: int, warmup: int = 2, check_out: str = "") -> list[float]:
    """Wall time of ``argv`` with its stdout on a pseudo-terminal (what a person at a terminal gets)."""
    import os
    import pty
    import threading

    out: list[float] = []
    for i in range(warmup + runs):
        master, slave = pty.openpty()
        chunks: list[bytes] = []

        def drain(fd: int = master, sink: list[bytes] = chunks) -> None:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    return
                if not data:
                    return
                sink.append(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdout=slave, stderr=subprocess.PIPE, env=env, timeout=30)
        dt = time.perf_counter() - t0
        os.close(slave)
        reader.join(5)
        os.close(master)
        text = b"".join(chunks).decode(errors="replace")
        if p.returncode != 0 or check_out not in text:
            raise RuntimeError(f"{argv} in a pty: exit {p.returncode}, output {text[-500:]!r}")
        if i >= warmup:
            out.append(dt)
    return out


def line(label: str, xs: list[float]) -> str:
    return f"{label}: median {ms(pct(xs, 50))}  p90 {ms(pct(xs, 90))}  min {ms(min(xs))}  max {ms(max(xs))}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()

    header(f"tcloud ps with {args.tasks} tasks in the store")
    py = sys.executable
    tcloud = str(BIN / "tcloud")
    with Service("--gpus=0", name="ps") as svc:
        token = svc.token(USER)
        fill(svc, args.tasks)
        svc.start()
        env = clean_env(TACC_URL=svc.url, TACC_TOKEN=token)

        ps = time_cmd([tcloud, "ps"], env, args.runs, check_out=f"of {args.tasks} shown")
        ps_tty = time_in_pty([tcloud, "ps"], {**env, "COLUMNS": "160"}, args.runs, check_out=f"of {args.tasks} shown")
        floor = time_cmd([py, "-c", "pass"], env, args.runs)
        version = time_cmd([tcloud, "--version"], env, args.runs)
        ps_json = time_cmd([tcloud, "ps", "--json"], env, args.runs, check_out=f'"total": {args.tasks}')

        api = Api(svc.url, token)
        req: list[float] = []
        for _ in range(args.runs + 2):
            t0 = time.perf_counter()
            status, body = api.call("GET", "/api/tasks?limit=50")
            req.append(time.perf_counter() - t0)
            if status != 200 or body["total"] != args.tasks:
                raise RuntimeError(f"list failed: {status}")
        req = req[2:]

        imports = {}
        for mod in ("click", "http.client", "tacc_hub.client", "rich.console", "rich.table", "tacc_hub.cli.tcloud"):
            imports[mod] = time_cmd([py, "-c", f"import {mod}"], env, 7, warmup=1)

    p50 = pct(ps, 50)
    f50 = pct(floor, 50)
    print(line("tcloud ps (output to a pipe: plain columns)", ps))
    print(line("tcloud ps (output to a terminal: rich table)", ps_tty))
    print(line("tcloud ps --json", ps_json))
    print(line("baseline python -c pass", floor))
    print(line("baseline tcloud --version", version))
    print(line("GET /api/tasks?limit=50 alone (in-process, keep-alive)", req))
    print("import cost over the interpreter floor (median, each in a fresh interpreter): " + ", ".join(
        f"{m} {ms(pct(v, 50) - f50)}" for m, v in imports.items()))
    print(f"ratio tcloud ps / python -c pass: {ratio(p50, f50)}; tcloud ps / tcloud --version: "
          f"{ratio(p50, pct(version, 50))}; time above the interpreter floor: {ms(p50 - f50)}")
    verdict(p50 <= TARGET, f"piped: median {ms(p50)} <= {ms(TARGET)}")
    verdict(pct(ps_tty, 50) <= TARGET, f"terminal: median {ms(pct(ps_tty, 50))} <= {ms(TARGET)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
