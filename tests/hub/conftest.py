"""A real JupyterHub (its own process, the real proxy) running tacc_hub as its managed service.

One hub is shared by the tests of a session. It is started exactly as the README's command
starts it (``jupyterhub -f jupyterhub_config.py``), on free ports, with its state in a temporary
directory and the demo users ``alice``, ``bob``, ``carol`` and ``admin`` (password ``demo``). Tests act as
users do: they log in through the hub's login form, and make API tokens on the hub with the
scopes they ask for; there is no back door.
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
    def __init__(self, state_dir: Path, **env: str) -> None:
        self.state_dir = state_dir
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
               "TACC_DEMO_USERS": "alice,bob", "TACC_DEMO_ADMINS": "admin", "TACC_DB_URL": "", **self.env}
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(ROOT / "jupyterhub_config.py")],
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

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
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
    # carol is the Lab panel's browser test's own user: no other test logs in as her (a login spawns a server)
    h = HubProcess(tmp_path_factory.mktemp("hub"), TACC_HUB_SPAWNER="simple", TACC_DEMO_USERS="alice,bob,carol").start()
    yield h
    h.stop()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("TACC_TEST_ARTIFACTS", ROOT / "test-artifacts"))


@pytest.fixture(scope="session")
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


def prepare_lab_home(hub: HubProcess, user: str) -> Path:
    """The user's home for a local server (SimpleLocalProcessSpawner: ``STATE/home/USER``), set up as an
    installed tacc_hub would be, but from this checkout: the Lab panel's build and the server extension
    enabled in the user's Jupyter paths (so the code under test is what runs even when the venv holds
    another copy), Lab's news pop-up turned off, and ``allow_root`` where the tests run as root."""
    home = hub.state_dir / "home" / user
    labext = home / ".local/share/jupyter/labextensions/tacc-hub-labextension"
    labext.parent.mkdir(parents=True, exist_ok=True)
    if not labext.is_symlink():
        labext.symlink_to(ROOT / "tacc_hub" / "labextension")
    server_conf = ROOT / "jupyter-config" / "jupyter_server_config.d" / "tacc_hub.json"
    conf_d = home / ".jupyter" / "jupyter_server_config.d"
    conf_d.mkdir(parents=True, exist_ok=True)
    (conf_d / "tacc_hub.json").write_text(server_conf.read_text())
    if os.geteuid() == 0:  # test machines run as root; a server refuses to unless told
        (home / ".jupyter" / "jupyter_server_config.json").write_text('{"ServerApp": {"allow_root": true}}')
    news = home / ".jupyter/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    news.parent.mkdir(parents=True, exist_ok=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    return home
