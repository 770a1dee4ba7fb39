"""Spawn -> ready: TaccSpawner (tacc service on Slurm) vs batchspawner's SlurmSpawner, same cluster, same run.

Two real JupyterHubs (each with its own configurable-http-proxy) run side by side on the Slurm dev
cluster (``scripts/slurm-dev.sh``; brought up here when it is not up):

- tacc: ``TaccSpawner`` -> a ``tacc-hub serve --TaccHub.executor=slurm`` -> sbatch; the server
  runs as root (the service submits as root on the dev cluster; ``allow_root``);
- batch (baseline): ``batchspawner.SlurmSpawner`` with ``SLURM_CONF`` in ``env_keep`` and
  ``req_keepvars_extra``, its defaults otherwise (``startup_poll_interval`` 0.5 s). ENVIRONMENT.md
  measured it (4.3 s) with ``exec_prefix="runuser -u {username} --"``; here the hub's
  interpreter lives under /root (mode 0700), which no other user can run, so it submits as root
  (``exec_prefix=""``) with ``--ServerApp.allow_root=True``, exactly as the tacc side runs. Its
  host is the job's BatchHost (n1..n4), which does not resolve here: ``state_exechost_exp=
  "127.0.0.1"`` (the dev nodes' NodeAddr).

Both start the same ``jupyterhub-singleuser`` for the same user (``cloudsdk``, a Unix user that
batchspawner needs), 1 GPU. A sample is the wall time from ``POST /hub/api/users/NAME/server``
to the hub's API reporting the server ready (polled every 20 ms), i.e. after the hub has seen
it answer and added the proxy route. Then the server is stopped and the next sample waits until
the previous job left squeue. Samples are interleaved (tacc, batch, batch, tacc, ...) so that
Slurm's own scheduling cycle (about 2 s here) and the machine's noise hit both alike; a random
0-2 s pause precedes each.

Usage: python benchmarks/bench_spawn.py [--samples 8] [--warmup 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _slurm import dev_cluster  # noqa: E402

from tests.e2e.conftest import ServiceProcess  # noqa: E402
from tests.hub.conftest import HUB_BASE_CONFIG, SpawnerHub  # noqa: E402

USER = "cloudsdk"
TARGET = 0.7

BATCH_CONFIG = HUB_BASE_CONFIG + """c.JupyterHub.services = [{{"name": "tests", "api_token": {admin_token!r}}}]
c.JupyterHub.load_roles = [{{"name": "tests", "services": ["tests"],
                            "scopes": ["admin:users", "admin:servers", "read:users", "access:servers"]}}]
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0}}
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60
c.BatchSpawnerBase.exec_prefix = ""  # submit as root, as the tacc service does here
c.Spawner.args = ["--ServerApp.allow_root=True"]
c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", "LC_ALL", "SLURM_CONF"]
c.BatchSpawnerBase.req_keepvars_extra = "SLURM_CONF"
c.BatchSpawnerBase.req_partition = "gpu"
c.BatchSpawnerBase.req_runtime = "01:00:00"
c.SlurmSpawner.req_gres = "gpu:1"
c.SlurmSpawner.state_exechost_exp = "127.0.0.1"  # squeue's %B is n1..n4; the dev nodes' NodeAddr is 127.0.0.1
"""


class BatchHub(SpawnerHub):
    def __init__(self, state: Path) -> None:
        super().__init__(state, "http://unused", {})
        (state / "jupyterhub_config.py").write_text(BATCH_CONFIG.format(
            port=self.port, hub_port=self.hub_port, proxy_api_port=self.proxy_api_port,
            chp=str(Path(sys.executable).parent / "configurable-http-proxy"), state=state,
            admin_token=self.admin_token))


def squeue_empty(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=30).stdout
        if not out.strip():
            return
        time.sleep(0.2)
    raise RuntimeError(f"jobs still in squeue after {timeout} s: {out}")


# The line each hub logs when its spawner knows where the server will listen: tacc after the task's
# wrapper printed its port (Slurm ran the job; the server process is starting), batch once
# batchspawner-singleuser (imports done) reported its port and squeue said RUNNING.
WHERE = {"tacc": re.compile(r"Server starting at "), "batch": re.compile(r"Notebook server job \d+ started at ")}
STAMP = re.compile(r"^\[I (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ")


def located_after(hub: SpawnerHub, kind: str, since: float) -> float | None:
    """Seconds from ``since`` (epoch) to the hub's log line saying where the server is (see WHERE)."""
    for line in hub.log().splitlines():
        m = STAMP.match(line)
        if m and WHERE[kind].search(line):
            ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            if ts >= since:
                return ts - since
    return None


def sample(hub: SpawnerHub, options: dict | None) -> float:
    began = time.monotonic()
    sample.wall = time.time()  # type: ignore[attr-defined]
    r = hub.api.post(f"{hub.url}/hub/api/users/{USER}/server", json=options or {}, timeout=30)
    if r.status_code not in (201, 202):
        raise RuntimeError(f"spawn refused: {r.status_code} {r.text}")
    deadline = began + 180
    while time.monotonic() < deadline:
        server = hub.user(USER)["servers"].get("")
        if server and server["ready"]:
            took = time.monotonic() - began
            break
        if not server or not server.get("pending"):
            raise RuntimeError(f"server neither ready nor pending: {server}\n{hub.log()[-8000:]}")
        time.sleep(0.02)
    else:
        raise RuntimeError(f"not ready in 180 s:\n{hub.log()[-3000:]}")
    r = hub.api.delete(f"{hub.url}/hub/api/users/{USER}/server", timeout=120)
    while hub.user(USER)["servers"]:
        time.sleep(0.1)
    squeue_empty()
    return took


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = str(REPO)
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # the jobs find the hub's tools
    with dev_cluster(), tempfile.TemporaryDirectory(prefix="bench-spawn-") as tmp:
        root = Path(tmp)
        svc = ServiceProcess(root / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=2").start()
        tacc = batch = None
        try:
            tacc = SpawnerHub(root / "hub-tacc", svc.url, {USER: svc.token(USER)}).start()
            batch = BatchHub(root / "hub-batch").start()
            for hub in (tacc, batch):
                assert hub.api.post(f"{hub.url}/hub/api/users/{USER}", timeout=10).status_code in (201, 409)
            kinds = {"tacc": (tacc, {"gpus": 1, "time_limit": "1h"}), "batch": (batch, None)}
            out: dict[str, list[float]] = {"tacc": [], "batch": []}
            located: dict[str, list[float]] = {"tacc": [], "batch": []}
            for i in range(args.warmup + args.samples):
                order = ["tacc", "batch"] if i % 2 == 0 else ["batch", "tacc"]
                for kind in order:
                    time.sleep(random.uniform(0, 2))
                    hub, opts = kinds[kind]
                    took = sample(hub, opts)
                    where = located_after(hub, kind, sample.wall)  # type: ignore[attr-defined]
                    if i >= args.warmup:
                        out[kind].append(took)
                        if where is not None:
                            located[kind].append(where)
                    split = f" (located after {where:.2f} s, then {took - where:.2f} s)" if where is not None else ""
                    print(f"{'warmup' if i < args.warmup else 'sample'} {i} {kind}: {took:.2f} s{split}", flush=True)
        finally:
            for hub in (tacc, batch):
                if hub is not None:
                    hub.stop()
            svc.stop()
    print("\nPOST /hub/api/users/NAME/server -> ready (s)")
    for kind in ("tacc", "batch"):
        v = out[kind]
        print(f"  {kind:5s}  p50 {statistics.median(v):.2f}  p90 {pct(v, 0.9):.2f}  min {min(v):.2f}  "
              f"max {max(v):.2f}  (n={len(v)})")
    for kind in ("tacc", "batch"):
        v = located[kind]
        if v:
            print(f"  {kind:5s}  POST -> spawner knows host:port: p50 {statistics.median(v):.2f}  "
                  f"p90 {pct(v, 0.9):.2f}")
    r50 = statistics.median(out["tacc"]) / statistics.median(out["batch"])
    r90 = pct(out["tacc"], 0.9) / pct(out["batch"], 0.9)
    print(f"  ratio tacc/batch: p50 {r50:.2f}x  p90 {r90:.2f}x  (target <= {TARGET}x: "
          f"{'target met' if r50 <= TARGET else 'TARGET MISSED'})")
    print(json.dumps({"tacc": out["tacc"], "batch": out["batch"], "located": located}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
