"""A real JupyterHub (its own process, the PyPI configurable-http-proxy, DummyAuthenticator) spawning
with TaccSpawner onto a real tacc service, shared by the tests of a session.

The spawner reaches the service through ``FaultProxy``, a small HTTP forwarder in the test process
that can be told to answer 503 or to drop connections: the tests break the spawner's view of the
service without touching the service (or the servers it runs). Per-user service tokens come from
``tacc-hub token`` (standalone mode) and reach the hub's config through a JSON file.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.e2e.conftest import BIN, ROOT, ServiceProcess, free_port

USERS = ("alice", "bob", "carol", "dave", "gina", "tim", "rita")


class FaultProxy:
    """Forwards HTTP to ``target``; ``mode`` "ok", "503" (a JSON 503) or "drop" (closes without an answer)."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.mode = "ok"
        self.seen: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                proxy.seen.append(f"{self.command} {self.path} {proxy.mode}")
                if proxy.mode == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if proxy.mode == "503":
                    data = b'{"status": 503, "message": "unavailable (test)"}'
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


HUB_CONFIG = """
import json, sys
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.pid_file = "{state}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "tacc_hub.spawner.TaccSpawner"
c.JupyterHub.services = [{{"name": "tests", "api_token": {admin_token!r}}}]
c.JupyterHub.load_roles = [{{"name": "tests", "services": ["tests"],
                            "scopes": ["admin:users", "admin:servers", "read:users", "access:servers"]}}]
c.JupyterHub.cleanup_servers = True
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0}}  # POST answers 202 at once: progress is streamed
c.Spawner.poll_interval = 1
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 90
c.TaccSpawner.tacc_url = {tacc_url!r}
c.TaccSpawner.allow_root = True
c.TaccSpawner.start_poll_interval = 0.1
c.TaccSpawner.outage_warning_after = 2
c.TaccSpawner.gpu_idle_timeout = 0
c.TaccSpawner.profiles = [
    {{"slug": "cpu", "display_name": "CPU only", "default": True, "gpus": 0, "time_limit": "2h"}},
    {{"slug": "one-gpu", "display_name": "One GPU <b>", "gpus": 1, "time_limit": "4h"}},
]
tokens = json.load(open({tokens_file!r}))
c.TaccSpawner.tacc_api_token = lambda spawner: tokens[spawner.user.name]

def pre_spawn(spawner):
    name = spawner.user.name
    if name == "tim":  # a short start timeout: the timeout test
        spawner.start_timeout = 6
    if name == "gina":  # GPU idle culling with a fake reading: every GPU at 0 %
        spawner.gpu_idle_timeout = 15
        spawner.gpu_sample_interval = 0.5
        spawner.gpu_util_command = [sys.executable, "-c", "print('0, 0'); print('1, 0')"]

c.Spawner.pre_spawn_hook = pre_spawn
"""


class Hub:
    def __init__(self, state: Path, tacc_url: str, tokens: dict[str, str], extra_config: str = "") -> None:
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        self.port, self.hub_port, self.proxy_api_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_token = secrets.token_hex(16)
        tokens_file = state / "tacc-tokens.json"
        tokens_file.write_text(json.dumps(tokens))
        (state / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
            port=self.port, hub_port=self.hub_port, proxy_api_port=self.proxy_api_port,
            chp=str(BIN / "configurable-http-proxy"), state=state, admin_token=self.admin_token,
            tacc_url=tacc_url, tokens_file=str(tokens_file)) + extra_config)
        self.proc: subprocess.Popen[bytes] | None = None
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"token {self.admin_token}"

    def start(self) -> Hub:
        log = (self.state / "hub.log").open("ab")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(16)}
        self.proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(self.state / "jupyterhub_config.py")],
                                     cwd=self.state, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyterhub exited: {self.log()[-3000:]}")
            try:
                if self.api.get(self.url + "/hub/api/", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"jupyterhub did not answer in 60 s: {self.log()[-3000:]}")

    def log(self) -> str:
        return (self.state / "hub.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def user(self, name: str) -> dict:
        r = self.api.get(f"{self.url}/hub/api/users/{name}", timeout=10)
        r.raise_for_status()
        return r.json()

    def wait_ready(self, name: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.user(name)["servers"].get("")
            if server and server["ready"]:
                return server
            if not server or not server.get("pending"):
                raise AssertionError(f"{name}'s server is neither ready nor pending: {server}\n{self.log()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"{name}'s server was not ready in {timeout} s:\n{self.log()[-3000:]}")

    def progress(self, name: str, timeout: float = 60) -> list[dict]:
        """Every event of the progress stream (SSE) until it ends (ready or failed)."""
        events = []
        with self.api.get(f"{self.url}/hub/api/users/{name}/server/progress", stream=True, timeout=timeout) as r:
            r.raise_for_status()
            for line in r.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    ev = json.loads(line[5:])
                    events.append(ev)
                    if ev.get("ready") or ev.get("failed"):
                        break
        return events


@pytest.fixture(scope="session")
def tacc_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(tmp_path_factory.mktemp("tacc"), "--gpus=2", "--TaccHub.grace_period=2",
                         ).start()
    for user in USERS:
        svc.token(user)
    svc.token("root", admin=True)
    yield svc
    svc.stop()


@pytest.fixture(scope="session")
def fault_proxy(tacc_service: ServiceProcess) -> Iterator[FaultProxy]:
    proxy = FaultProxy(tacc_service.url)
    yield proxy
    proxy.close()


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory, tacc_service: ServiceProcess,
        fault_proxy: FaultProxy) -> Iterator[Hub]:
    hub = Hub(tmp_path_factory.mktemp("hub"), fault_proxy.url,
              {u: tacc_service.tokens[u] for u in USERS}).start()
    yield hub
    hub.stop()


@pytest.fixture(autouse=True)
def _proxy_ok(fault_proxy: FaultProxy) -> Iterator[None]:
    fault_proxy.mode = "ok"
    yield
    fault_proxy.mode = "ok"


__all__ = ["FaultProxy", "Hub", "sys"]
