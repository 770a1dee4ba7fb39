"""What runs inside a server task: starts ``jupyterhub-singleuser`` and watches its GPUs.

TaccSpawner ships this file, as ``tacc_server.py``, in the code snapshot of every server task,
next to ``.tacc-server.json`` (the hub's environment for the server, its command and settings).
It uses the standard library only, so the task needs nothing of tacc_hub on its nodes.

1. Reads ``.tacc-server.json`` and deletes it at once (it holds ``JUPYTERHUB_API_TOKEN``).
2. Picks the port: the one the spawner chose (local executor), else a free one on this node
   (Slurm: several servers may share a node). Prints ``tacc-server: listening on HOST:PORT``
   (HOST: the address of this node on the route to the hub) to the task's log, where the
   spawner reads it.
3. Runs the server command as a child, forwarding SIGTERM/SIGINT, and exits with its status.
   With the user's extra packages the task runs in a venv of its own, which has neither JupyterLab's
   configuration and assets nor the hub's editable packages (``/lab`` would be a 404): the server then
   runs on ``server_python`` (the interpreter the venv was built from, which has them all, and which
   the user's packages cannot drop or shadow), and the notebooks' ``python3`` kernel on the venv's
   interpreter (a kernelspec in ``$TACC_TASKDIR/.tacc-jupyter``, first on ``JUPYTER_PATH``), where
   the packages are.
4. GPU idle signal: while the task holds GPUs (``CUDA_VISIBLE_DEVICES``) and ``gpu_idle_timeout``
   is set, samples their utilization (``nvidia-smi``, or the configured command) every
   ``gpu_sample_interval`` seconds; when every sample for ``gpu_idle_timeout`` seconds is below
   ``gpu_idle_threshold`` percent, the server is stopped (exit 0, a line in the log says why),
   even if a browser tab keeps it "active" for the hub. No reading (no nvidia-smi, no GPUs, a
   failing command) is no signal: the server is never stopped for it. The other way round, a
   reading with a GPU at or above the threshold is reported to the hub as activity of the
   server (``JUPYTERHUB_ACTIVITY_URL``), so the idle culler keeps a server that computes on its
   GPUs with no browser attached.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

CONFIG_FILE = ".tacc-server.json"
READY_PREFIX = "tacc-server: listening on "
CULLED_PREFIX = "tacc-server: stopping: "
# Variables the executor sets for the task; the hub's values must not replace them.
KEEP_TASK_VARS = ("PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_VISIBLE_DEVICES", "HOME", "USER")
KEEP_TASK_PREFIXES = ("TACC_", "SLURM_")
FROM_HUB = ("TACC_URL",)  # where the service is, for tcloud, %tacc and the Lab panel inside the server
NVIDIA_SMI = ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"]


def server_env(base: dict[str, str], hub_env: dict[str, str]) -> dict[str, str]:
    """The task's environment with the hub's variables added (the task's own launch variables win;
    the hub's ``TACC_URL`` reaches the server, since a task has none of its own)."""
    env = dict(base)
    for key, value in hub_env.items():
        if key in FROM_HUB and key not in base:
            pass
        elif key in KEEP_TASK_VARS or key.startswith(KEEP_TASK_PREFIXES):
            continue
        env[key] = value
    return env


def server_command(cmd: list[str], python: str, server_python: str | None) -> list[str]:
    """``cmd`` on the server's own interpreter: ``python`` (the wrapper's, as the spawner named it) becomes
    ``server_python``; a bare command name its namesake beside ``server_python``, when there is one."""
    if not server_python or not cmd:
        return cmd
    first = cmd[0]
    if first in (python, "python", "python3"):
        return [server_python, *cmd[1:]]
    beside = os.path.join(os.path.dirname(server_python), first)
    if os.sep not in first and os.access(beside, os.X_OK):
        return [beside, *cmd[1:]]
    return cmd


# The kernel: the server's site directories added *after* the venv's own (the user's packages win in notebooks),
# with their .pth files read (editable installs such as a development tacc_hub: ``%tacc`` works), then ipykernel.
KERNEL_BOOT = ("import os, runpy, site, sys; [site.addsitedir(d) for d in sys.argv.pop(1).split(os.pathsep) if d]; "
               "runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)")


def site_dirs(python: str, timeout: float = 30.0) -> list[str]:
    """The site-packages directories of ``python``; [] when it cannot say."""
    try:
        out = subprocess.run([python, "-c", "import json, site; print(json.dumps(site.getsitepackages()))"],
                             capture_output=True, text=True, timeout=timeout, check=True)
        dirs = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    return [str(d) for d in dirs if isinstance(d, str) and os.path.isdir(d)]


def own_kernel(root: Path, python: str, env: dict[str, str], server_sites: list[str]) -> Path:
    """A ``python3`` kernelspec running ``python`` (the task's venv) with ``server_sites`` after its own packages,
    under ``root``, first on ``JUPYTER_PATH`` in ``env``: a spec found on that path replaces ipykernel's built-in
    one (which would run the server's Python, without the user's packages)."""
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-c", KERNEL_BOOT, os.pathsep.join(server_sites), "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python", "metadata": {"debugger": True}}))
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(root), env.get("JUPYTER_PATH", "")) if p)
    return spec


def pick_port(bind_ip: str) -> int:
    with socket.socket() as s:
        s.bind((bind_ip if bind_ip not in ("", "*") else "0.0.0.0", 0))
        return int(s.getsockname()[1])


def route_address(hub_api_url: str) -> str:
    """This node's address on the route to the hub (no packet is sent: a UDP socket only picks a route)."""
    host = urlsplit(hub_api_url).hostname or "127.0.0.1"
    port = urlsplit(hub_api_url).port or 80
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, port))
            return str(s.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def with_port(service_url: str, bind_ip: str, port: int) -> str:
    parts = urlsplit(service_url)
    return urlunsplit((parts.scheme or "http", f"{bind_ip}:{port}", parts.path, parts.query, parts.fragment))


# --- GPU idle signal ------------------------------------------------------------------


def parse_utilization(text: str, devices: list[str]) -> list[float] | None:
    """Utilization (percent) of ``devices`` from ``index, util`` lines (or bare numbers, one per device)."""
    by_index: dict[str, float] = {}
    bare: list[float] = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            if len(parts) >= 2:
                by_index[parts[0]] = float(parts[1])
            elif parts and parts[0]:
                bare.append(float(parts[0]))
        except ValueError:
            return None
    if by_index:
        found = [by_index[d] for d in devices if d in by_index]
        return found if len(found) == len(devices) else None
    return bare or None


def read_utilization(command: list[str], devices: list[str], timeout: float = 20.0) -> list[float] | None:
    """One reading of the task's GPUs; None when there is no reading (no command, failure, unparsable)."""
    if not devices or not command or shutil.which(command[0]) is None:
        return None
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return parse_utilization(proc.stdout, devices)


class GpuIdle:
    """Decides, from utilization samples, when the GPUs have been idle for ``timeout`` seconds."""

    def __init__(self, timeout: float, threshold: float, reader: Callable[[], list[float] | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self.threshold = threshold
        self.reader = reader
        self.clock = clock
        self.idle_since: float | None = None
        self.busy = False  # the last reading had a GPU at or above the threshold

    def sample(self) -> bool:
        """Take a reading; True when the GPUs have been idle (every reading below threshold) for ``timeout``."""
        now = self.clock()
        values = self.reader()
        self.busy = values is not None and max(values) >= self.threshold
        if values is None or self.timeout <= 0:
            self.idle_since = None  # no signal: never idle because of it
            return False
        if self.busy:
            self.idle_since = None
            return False
        if self.idle_since is None:
            self.idle_since = now
        return now - self.idle_since >= self.timeout


def report_activity(env: dict[str, str], timeout: float = 10.0) -> bool:
    """Tell the hub the server is active now (as jupyterhub-singleuser does); False if it could not."""
    url, token = env.get("JUPYTERHUB_ACTIVITY_URL"), env.get("JUPYTERHUB_API_TOKEN")
    if not url or not token:
        return False
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    body = json.dumps({"servers": {env.get("JUPYTERHUB_SERVER_NAME", ""): {"last_activity": now}},
                       "last_activity": now}).encode()
    req = urllib.request.Request(url, data=body, method="POST",  # noqa: S310 - the hub's own URL
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return 200 <= resp.status < 300
    except (OSError, ValueError):
        return False


def _devices() -> list[str]:
    raw = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return [d.strip() for d in raw.split(",") if d.strip() and d.strip() != "-1"]


def main() -> int:
    cfg_path = Path(CONFIG_FILE)
    cfg = json.loads(cfg_path.read_text())
    cfg_path.unlink()
    hub_env: dict[str, str] = cfg["env"]
    env = server_env(dict(os.environ), hub_env)
    bind_ip = cfg.get("bind_ip") or "0.0.0.0"
    port = int(cfg.get("port") or 0) or pick_port(bind_ip)
    host = cfg.get("ip") or route_address(hub_env.get("JUPYTERHUB_API_URL", ""))
    if "JUPYTERHUB_SERVICE_URL" in env:
        env["JUPYTERHUB_SERVICE_URL"] = with_port(env["JUPYTERHUB_SERVICE_URL"], bind_ip, port)
    server_python = cfg.get("server_python") or None
    if server_python == sys.executable or not (server_python and os.access(server_python, os.X_OK)):
        server_python = None  # already on it (no extra packages), or it is not there: run as given
    cmd = server_command([str(a) for a in cfg["cmd"]], str(cfg.get("python") or "python3"), server_python)
    if server_python:
        own_kernel(Path(os.environ.get("TACC_TASKDIR") or os.getcwd()) / ".tacc-jupyter", sys.executable, env,
                   site_dirs(server_python))
    if not any(a.startswith(("--notebook-dir", "--ServerApp.root_dir")) for a in cmd):
        userdir = os.environ.get("TACC_USERDIR")
        if userdir and os.path.isdir(userdir):
            os.chdir(userdir)
    print(f"{READY_PREFIX}{host}:{port}", flush=True)
    child = subprocess.Popen(cmd, env=env)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    gpu = cfg.get("gpu") or {}
    devices = _devices()
    command = list(gpu.get("command") or NVIDIA_SMI)
    idle = GpuIdle(float(gpu.get("idle_timeout") or 0), float(gpu.get("threshold", 5.0)),
                   lambda: read_utilization(command, devices))
    interval = max(0.1, float(gpu.get("interval") or 60.0))
    watching = bool(devices) and (idle.timeout > 0 or bool(gpu.get("report_activity", True)))
    while True:
        try:
            rc = child.wait(timeout=interval if watching else None)
            return rc if rc >= 0 else 128 - rc
        except subprocess.TimeoutExpired:
            pass
        stop = idle.sample()
        if idle.busy and gpu.get("report_activity", True):
            report_activity(env)
        if stop:
            print(f"{CULLED_PREFIX}its GPUs ({','.join(devices)}) have been idle (below {idle.threshold:g}% "
                  f"utilization) for {idle.timeout:g} s", flush=True)
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return 0


if __name__ == "__main__":
    sys.exit(main())
