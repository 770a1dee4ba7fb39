"""A real JupyterHub (its own process, the real proxy) running tacc_hub as its managed service.

One hub is shared by the tests of a session. It is started exactly as the README's command
starts it (``jupyterhub -f jupyterhub_config.py``), on free ports, with its state in a temporary
directory, its data dir (tasks' and users' folders) in one every account can reach, and the demo
users ``alice``, ``bob`` and ``admin`` (password ``demo``), each with a Unix account of their own: as
the README's hub run as root, their tasks and servers run as those accounts. Tests act as users
do: they log in through the hub's login form, and make API tokens on the hub with the scopes they
ask for; there is no back door.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests import accounts
from tests.accounts import ensure_accounts

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PASSWORD = "demo"


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_hub_ports() -> tuple[int, int]:
    """A hub port P with P+1 (proxy API) and P+81 (hub API) free too, and a service port."""
    for _ in range(200):
        base = random.randrange(20000, 40000)
        if all(_free(p) for p in (base, base + 1, base + 81, base + 90)):
            return base, base + 90
    raise RuntimeError("no free block of ports for a hub")


class HubProcess:
    def __init__(self, state_dir: Path, config: Path | None = None, data_dir: Path | None = None,
                 **env: str) -> None:
        ensure_accounts()
        self.state_dir = state_dir
        # tasks and servers run as alice and bob: pytest's tmp dirs are root's alone, the data dir must not be
        self.data_dir = data_dir or accounts.data_dir("tacc-hub-data-")
        self.config = config or ROOT / "jupyterhub_config.py"  # another file may load_subconfig() this one
        self.port, self.service_port = free_hub_ports()
        self.url = f"http://127.0.0.1:{self.port}"
        self.service_url = f"{self.url}/services/tacc"
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._sessions: dict[str, requests.Session] = {}

    @property
    def log_path(self) -> Path:
        return self.state_dir / "hub.log"

    def start(self, timeout: float = 90) -> HubProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               "TACC_STATE_DIR": str(self.state_dir), "TACC_HUB_PORT": str(self.port),
               "TACC_PORT": str(self.service_port), "TACC_DEMO_PASSWORD": PASSWORD,
               "TACC_DEMO_USERS": "alice,bob", "TACC_DEMO_ADMINS": "admin", "TACC_DB_URL": "",
               "TACC_DATA_DIR": str(self.data_dir), "TACC_TASK_IDENTITY": "", **self.env}  # "": decided as root
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(self.config)],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the hub exited: {self.log_path.read_text()[-4000:]}")
            try:
                if (requests.get(self.url + "/hub/api/", timeout=2).status_code == 200
                        and requests.get(self.service_url + "/api/health", timeout=2).status_code == 200):
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the hub did not come up in {timeout} s: {self.log_path.read_text()[-4000:]}")

    def stop_servers(self) -> None:
        """Stop every user's server through the hub (the hub itself leaves them running when it stops)."""
        s = self.login("admin")
        xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}
        for user in s.get(self.url + "/hub/api/users", timeout=30).json():
            for name in user.get("servers") or {}:
                path = f"servers/{name}" if name else "server"
                s.delete(f"{self.url}/hub/api/users/{user['name']}/{path}", headers=xsrf, timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(u.get("servers") for u in s.get(
                self.url + "/hub/api/users", timeout=30).json()):
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.stop_servers()
            except requests.RequestException:
                pass  # the hub is not answering: nothing to ask it
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def login(self, user: str) -> requests.Session:
        """A browser-like session logged in through the hub's login form (cached per user)."""
        if user in self._sessions:
            return self._sessions[user]
        s = requests.Session()
        page = s.get(self.url + "/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
        assert xsrf, page.text[:500]
        r = s.post(self.url + "/hub/login", data={"username": user, "password": PASSWORD, "_xsrf": xsrf.group(1)},
                   timeout=30)
        assert r.ok and "jupyterhub-session-id" in s.cookies, (r.status_code, r.text[:300])
        self._sessions[user] = s
        return s

    def token(self, user: str, scopes: list[str], note: str = "test") -> str:
        """An API token made on the hub by the logged-in user, with these scopes (as the token page does)."""
        s = self.login(user)
        r = s.post(f"{self.url}/hub/api/users/{user}/tokens", json={"scopes": scopes, "note": note},
                   headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}, timeout=30)
        assert r.status_code == 201, (r.status_code, r.text[:300])
        return str(r.json()["token"])


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    h = HubProcess(tmp_path_factory.mktemp("hub")).start()
    yield h
    h.stop()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("TACC_TEST_ARTIFACTS", ROOT / "test-artifacts"))


# Module scope: Playwright's sync API keeps its event loop current while it is open, and pytest-asyncio's
# tests later in the session (tests/jupyter) then fail with "Cannot close a running event loop".
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium driven by Playwright (no browser download); screenshots go to test-artifacts/."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def browser_login(browser, hub: HubProcess, user: str, next_path: str):
    """A fresh browser page, logged in through the hub's login form, at ``next_path``."""
    page = browser.new_context().new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # uncaught errors and console errors, but not the browser's note on a 4xx the page asked for and handles
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    page.goto(f"{hub.url}/hub/login?next={next_path}")
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    page.wait_for_load_state()
    page.js_errors = errors
    return page


# --- TaccSpawner ---------------------------------------------------------------------------------
# A second kind of hub, for the spawner's tests (test_spawn.py, test_form.py, test_restart.py; the
# Slurm test and benchmarks/bench_spawn.py reuse SpawnerHub): its own process, the PyPI
# configurable-http-proxy, DummyAuthenticator, TaccSpawner onto a standalone tacc service (per-user
# tokens of ``tacc-hub token`` reach the hub's config through a JSON file). The spawner reaches the
# service through ``FaultProxy``, a small HTTP forwarder in the test process that can be told to
# answer 503 or to drop connections, so the tests break the spawner's view of the service without
# touching the service or the servers it runs.

import http.client  # noqa: E402
import json  # noqa: E402
import secrets  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

from tests.e2e.conftest import ServiceProcess, free_port  # noqa: E402

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


# What every test hub (and the spawn benchmark's) has: ports, state files, DummyAuthenticator.
HUB_BASE_CONFIG = """
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
"""

HUB_CONFIG = """
import json, sys
""" + HUB_BASE_CONFIG + """c.JupyterHub.spawner_class = "tacc_spawner.TaccSpawner"
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


class SpawnerHub:
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

    def start(self) -> SpawnerHub:
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
def _fault_proxy(tacc_service: ServiceProcess) -> Iterator[FaultProxy]:
    proxy = FaultProxy(tacc_service.url)
    yield proxy
    proxy.close()


@pytest.fixture
def fault_proxy(_fault_proxy: FaultProxy) -> Iterator[FaultProxy]:
    """The session's fault proxy, forwarding ("ok") at the start and at the end of each test."""
    _fault_proxy.mode = "ok"
    yield _fault_proxy
    _fault_proxy.mode = "ok"


@pytest.fixture(scope="session")
def spawner_hub(tmp_path_factory: pytest.TempPathFactory, tacc_service: ServiceProcess,
                _fault_proxy: FaultProxy) -> Iterator[SpawnerHub]:
    """A hub spawning with TaccSpawner onto ``tacc_service`` (through the fault proxy)."""
    hub = SpawnerHub(tmp_path_factory.mktemp("spawnhub"), _fault_proxy.url,
                     {u: tacc_service.tokens[u] for u in USERS}).start()
    yield hub
    hub.stop()
