"""The panel's Notifications dialog and its "My usage" link in a real browser, on a real hub.

alice opens the dialog from the tacc panel, picks events and adds a Slack webhook (to a receiver of this
test, the one host the service is told to allow), saves, is refused a link-local URL with the field named,
and sends a test, which the receiver gets; the settings read back through the service's API are what she
saved; "My usage" opens the service's usage page in a new tab. Screenshot: test-artifacts/lab-notify.png.
The hub is test_lab_panel.py's (its fixture, with one more service flag).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests import accounts

from .conftest import ARTIFACTS, ROOT, HubProcess, browser_login
from .lab_layout import outside_panel
from .test_hub_auth import TASKS, api

USER = "alice"


class Receiver:
    def __init__(self) -> None:
        self.posts: list[Any] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/lab-hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="module")
def notify_hub(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[HubProcess]:
    state = tmp_path_factory.mktemp("notifyhub")
    lab = accounts.data_dir("tacc-labn-")
    lab.chmod(0o755)
    data = lab / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "tacc-hub-labextension").symlink_to(ROOT / "tacc_hub" / "labextension")
    news = lab / USER / "lab-user-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    (lab / USER / "lab-workspaces").mkdir()
    from .test_lab_panel import _give

    _give(lab / USER, USER)
    server_env = {"PYTHONPATH": str(ROOT), "JUPYTER_PATH": str(data),
                  "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter-config")}
    host = receiver.url.split("/")[2]
    config = state / "jupyterhub_config.py"
    config.write_text(
        f"load_subconfig({str(ROOT / 'jupyterhub_config.py')!r})\n"
        f"c.Spawner.environment = {{**c.Spawner.environment, **{server_env!r}}}\n"
        f"c.Spawner.environment['JUPYTERLAB_SETTINGS_DIR'] = {str(lab / USER / 'lab-user-settings')!r}\n"
        f"c.Spawner.environment['JUPYTERLAB_WORKSPACES_DIR'] = {str(lab / USER / 'lab-workspaces')!r}\n"
        "svc = next(s for s in c.JupyterHub.services if s['name'] == 'tacc')\n"
        f"svc['command'] = [*svc['command'], '--TaccHub.notify_webhook_hosts={host}']\n")
    h = HubProcess(state, config=config).start()
    yield h
    h.stop()


def test_notifications_dialog_saves_tests_and_links_my_usage(notify_hub: HubProcess, receiver: Receiver,
                                                              browser) -> None:
    hub = notify_hub
    token = hub.token(USER, TASKS)
    page = browser_login(browser, hub, USER, "/hub/spawn")
    page.set_viewport_size({"width": 1400, "height": 900})
    try:
        page.wait_for_selector("#spawn_form", timeout=30_000)
        page.click("#spawn_form [type=submit]")
        page.wait_for_url(f"**/user/{USER}/lab**", timeout=120_000)
        page.wait_for_selector(".jp-SideBar [data-id='tacc-hub-panel']", timeout=60_000)
        page.wait_for_timeout(1000)  # Lab restores its layout
        if not page.is_visible(".tacc-panel .tacc-header"):
            page.click('.jp-SideBar [data-id="tacc-hub-panel"]')
        page.wait_for_selector(".tacc-panel .tacc-links .tacc-usage-link", timeout=30_000)

        # "My usage": the service's page, in a new tab
        link = page.locator(".tacc-usage-link")
        assert link.get_attribute("href") == f"{hub.url}/services/tacc/usage"
        assert link.get_attribute("target") == "_blank" and "noopener" in (link.get_attribute("rel") or "")
        assert outside_panel(page) == []

        page.click(".tacc-notify-open")
        page.wait_for_selector(".jp-Dialog .tacc-notify-event", timeout=30_000)
        assert page.is_disabled(".tacc-notify-email")  # this hub has no SMTP server: said so, not offered
        for name in ("started", "ended", "failed", "preempted", "near_limit", "cancelled"):
            box = page.locator(f".tacc-notify-event input[name={name}]")
            box.set_checked(name in ("started", "failed"))
        page.fill(".tacc-notify-url", receiver.url)
        page.select_option(".tacc-notify-format", "slack")
        page.click(".tacc-notify-add")
        page.click(".tacc-notify-save")
        page.wait_for_selector(".tacc-notify-status:has-text('Saved.')", timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "lab-notify.png"))

        # read back through the service's API: what the dialog saved
        got = api(hub, token, "GET", "/api/notifications").json()
        assert got["settings"] == {"email": None, "events": ["started", "failed"],
                                   "webhooks": [{"url": receiver.url, "format": "slack"}]}, got

        # a link-local URL: refused by the service, the field named, nothing saved
        page.fill(".tacc-notify-url", "http://169.254.169.254/latest/meta-data/")
        page.click(".tacc-notify-add")
        page.click(".tacc-notify-save")
        error = page.locator(".tacc-notify-error")
        error.wait_for(timeout=30_000)
        assert "webhooks[1].url" in error.inner_text() and "link-local" in error.inner_text()
        assert api(hub, token, "GET", "/api/notifications").json()["settings"] == got["settings"]

        # a test notification, delivered by the service to the receiver in Slack's shape
        page.click("button[aria-label='Remove webhook http://169.254.169.254/latest/meta-data/']")
        page.click(".tacc-notify-test")
        page.wait_for_selector(".tacc-notify-status:has-text('Test queued to 1 channel')", timeout=30_000)
        deadline = time.monotonic() + 60
        while not receiver.posts and time.monotonic() < deadline:
            time.sleep(0.2)
        assert receiver.posts and "test notification" in receiver.posts[0]["text"], receiver.posts
        assert receiver.posts[0]["blocks"][0]["text"]["type"] == "mrkdwn"
        assert page.js_errors == [] or all("WebSocket" in e for e in page.js_errors), page.js_errors
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-notify-failure.png"))
        raise
    finally:
        page.context.close()
