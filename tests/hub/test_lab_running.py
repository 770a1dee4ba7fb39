"""A running task in the JupyterLab panel, in a real browser on a real hub: its web port as a link that opens
the task's own HTTP server through the hub, its time left (ticking) and the Extend dialog (a refusal shown
with the field it names, then +30m taken), the warning 10 minutes before its end, its GPU sparkline, and a
Terminal tab (xterm.js on the exec WebSocket, relayed by alice's own Jupyter server) where ``whoami`` says
alice. Screenshots: test-artifacts/lab-running-*.png.

The hub is test_lab_panel's (the README's ``jupyterhub_config.py`` with this checkout's server extension and
panel, Lab settings per user with the news pop-up off), started for this module because its tacc service
samples GPU use every second with a fake ``gpu_query_command`` (this machine has no GPU, and the default
samples every 30 s: a sparkline would take minutes to show) and restarts a failed task after 1 s (not 30)."""

from __future__ import annotations

import base64
import http.client
import io
import os
import re
import sys
import tarfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tacc_hub.snapshot import digest_of
from tests import accounts
from tests.e2e.conftest import free_port

from .conftest import ARTIFACTS, ROOT, HubProcess, browser_login
from .lab_layout import outside_panel, panel_width, set_panel_width
from .test_hub_auth import TASKS, api, wait_status
from .test_lab_panel import _give

USER = "alice"

# Four fake GPUs whose utilization moves with the clock (index, util %, memory MiB: nvidia-smi's CSV)
FAKE_SMI = ("import math, time\n"
            "t = time.time()\n"
            "for i in range(4):\n"
            "    print(f'{i}, {int(45 + 40 * math.sin(t / 2 + i))}, {1000 + 100 * i}')\n")


@pytest.fixture(scope="module")
def running_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    state = tmp_path_factory.mktemp("runhub")
    lab = accounts.data_dir("tacc-labrun-")
    lab.chmod(0o755)
    data = lab / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "tacc-hub-labextension").symlink_to(ROOT / "tacc_hub" / "labextension")
    news = lab / USER / "lab-user-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    (lab / USER / "lab-workspaces").mkdir()
    _give(lab / USER, USER)
    server_env = {"PYTHONPATH": str(ROOT), "JUPYTER_PATH": str(data),
                  "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter-config")}
    per_user = {"JUPYTERLAB_SETTINGS_DIR": "lab-user-settings", "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces"}
    sampling = ["--TaccHub.restart_backoff=1", "--TaccHub.gpu_sample_interval=1",
                f"--TaccHub.gpu_query_command={sys.executable}", "--TaccHub.gpu_query_command=-c",
                f"--TaccHub.gpu_query_command={FAKE_SMI}"]
    config = state / "jupyterhub_config.py"
    config.write_text(f"load_subconfig({str(ROOT / 'jupyterhub_config.py')!r})\n"
                      f"c.Spawner.environment = {{**c.Spawner.environment, **{server_env!r}}}\n"
                      + "".join(f"c.Spawner.environment[{k!r}] = lambda sp: f'{lab}/{{sp.user.name}}/{v}'\n"
                                for k, v in per_user.items())
                      + "for _s in c.JupyterHub.services:\n"
                        "    if _s.get('name') == 'tacc':\n"
                        f"        _s['command'] = [*_s['command'], *{sampling!r}]\n")
    h = HubProcess(state, config=config).start()
    yield h
    h.stop()


def _snapshot(files: dict[str, str]) -> bytes:
    """A code snapshot (tar.gz) of these files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _submit(hub: HubProcess, token: str, name: str, entrypoint: str | dict, files: dict[str, str],
            **spec: object) -> int:
    archive = _snapshot(files)
    digest = digest_of(archive)
    assert api(hub, token, "PUT", f"/api/code/{digest}", data=archive).status_code in (200, 201)
    body = {"name": name, "entrypoint": entrypoint, "resources": {"time_limit": "5m", "gpus_per_node": 1},
            "code": {"kind": "snapshot", "digest": digest, "size": len(archive)}, **spec}
    r = api(hub, token, "POST", "/api/tasks", json=body)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _open_lab(browser, hub: HubProcess):
    """Alice's Lab (her server started from the spawn form, or already running), the GPU tasks panel shown."""
    page = browser_login(browser, hub, USER, "/hub/spawn")  # her Lab, once her server runs
    page.set_viewport_size({"width": 1400, "height": 900})
    try:
        page.wait_for_selector("#spawn_form, .jp-LabShell", timeout=60_000)
        if page.locator("#spawn_form").count():  # her server is not running yet: the spawn form's defaults
            page.click("#spawn_form [type=submit]")
        page.wait_for_url(f"**/user/{USER}/lab**", timeout=120_000)
        page.wait_for_selector(".jp-SideBar [data-id='tacc-hub-panel']", timeout=60_000)
        page.wait_for_timeout(1000)  # Lab restores its layout
        if not page.is_visible(".tacc-panel .tacc-header"):
            page.click('.jp-SideBar [data-id="tacc-hub-panel"]')
        page.wait_for_selector(".tacc-panel .tacc-header")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-running-open-failure.png"))
        print(f"at {page.url}; hub log:\n{hub.log_path.read_text()[-3000:]}")
        raise
    return page


def _cancel_all(hub: HubProcess, token: str) -> None:
    for task in api(hub, token, "GET", "/api/tasks?limit=50").json()["tasks"]:
        if task["status"] in ("pending", "starting", "running") and not task["name"].startswith("jupyter-"):
            api(hub, token, "POST", f"/api/tasks/{task['id']}/cancel")


def _ws_status(url: str, headers: dict[str, str]) -> int:
    """The HTTP status of a WebSocket handshake to ``url`` (101 when it would open; the connection is then dropped)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", parts.path, headers={
            **headers, "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-Fetch-Mode": "websocket",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()})
        return conn.getresponse().status
    finally:
        conn.close()


def _time_left(page, tid: int) -> int:
    return int(page.get_attribute(f'.tacc-task[data-task-id="{tid}"] .tacc-timeleft', "data-time-left") or -1)


def test_ports_time_left_extend_and_gpu_use_of_a_running_task(running_hub: HubProcess, browser):
    hub = running_hub
    token = hub.token(USER, TASKS)
    port = free_port()
    marker = f"served-by-the-task-{uuid.uuid4().hex[:8]}"
    page = _open_lab(browser, hub)
    try:
        tid = _submit(hub, token, "web-demo", f"python3 -m http.server {port} --bind 127.0.0.1",
                      {"index.html": f"<!doctype html><title>{marker}</title><h1>{marker}</h1>\n", "logs/.keep": ""},
                      ports=[port], tensorboard={"logdir": "logs"})
        wait_status(hub, token, tid, {"running"})
        row = page.locator(f'.tacc-task[data-task-id="{tid}"][data-status="running"]')
        row.wait_for(timeout=60_000)

        # its port: a link to the hub's proxy of the task, opening in a new tab, that shows the task's page
        link = row.locator(f'a.tacc-port[data-port="{port}"]')
        link.wait_for(timeout=60_000)  # once the server listens
        assert link.get_attribute("href") == f"/services/tacc/tasks/{tid}/proxy/{port}/"
        assert link.get_attribute("target") == "_blank" and "noopener" in (link.get_attribute("rel") or "")
        with page.context.expect_page() as opened:
            link.click()
        tab = opened.value
        tab.wait_for_load_state()
        try:
            tab.wait_for_selector(f"h1:has-text('{marker}')", timeout=30_000)
        except Exception:
            tab.screenshot(path=str(ARTIFACTS / "lab-running-port-failure.png"))
            print(f"the port's tab at {tab.url}: {tab.content()[:2000]}")
            log = hub.log_path.read_text()
            print(log[log.find("Traceback") - 2000:][:8000])
            raise
        assert tab.url.startswith(f"{hub.url}/services/tacc/tasks/{tid}/proxy/{port}/"), tab.url
        tab.close()

        # TensorBoard beside it: one click opens it in a new tab, through the hub
        board = row.locator("a.tacc-tensorboard:not(.tacc-disabled)")
        board.wait_for(timeout=90_000)  # once TensorBoard listens
        tb_port = int(board.get_attribute("data-port") or 0)
        assert tb_port != port and board.get_attribute("href") == f"/services/tacc/tasks/{tid}/proxy/{tb_port}/"
        with page.context.expect_page() as opened:
            board.click()
        tab = opened.value
        tab.wait_for_function("() => /TensorBoard/.test(document.title)", timeout=60_000)
        tab.close()

        # time left: under the 5 minutes of its limit, ticking; 10 minutes before the end a notification
        page.wait_for_selector(f'.tacc-task[data-task-id="{tid}"] .tacc-timeleft', timeout=30_000)
        first = _time_left(page, tid)
        assert 0 < first <= 300, first
        page.wait_for_function("([id, t]) => Number(document.querySelector(`.tacc-task[data-task-id='${id}'] "
                               ".tacc-timeleft`)?.dataset.timeLeft) < t", arg=[tid, first], timeout=10_000)
        assert re.fullmatch(r"[1-5]m \d\ds left|\d+s left", row.locator(".tacc-timeleft").inner_text())
        toast = page.locator(f".Toastify__toast:has-text('Task {tid} (web-demo) reaches its time limit in')")
        toast.wait_for(timeout=30_000)
        assert toast.locator("button:has-text('Extend')").count() == 1

        # GPU use: a sparkline of the samples, labelled with their mean
        spark = row.locator(".tacc-spark")
        spark.wait_for(timeout=30_000)
        usage = api(hub, token, "GET", f"/api/tasks/{tid}/usage").json()
        assert usage["samples"], usage
        assert re.fullmatch(r"GPU \d{1,3}%", spark.inner_text().strip()), spark.inner_text()
        assert spark.locator("polyline").count() == 1
        # it follows the samples (the service samples every second here; the panel asks as often, at most every 5 s)
        page.wait_for_function("el => el.querySelector('polyline').getAttribute('points').split(' ').length >= 6",
                               arg=spark.element_handle(), timeout=30_000)

        # the row's Extend opens the dialog (Cancel changes nothing); so does the notification's
        page.click(f'.tacc-task[data-task-id="{tid}"] .tacc-task-head')
        page.click(f'button[aria-label="Extend the time limit of task {tid}"]')
        dialog = page.locator(".jp-Dialog .tacc-extend")
        dialog.wait_for()
        page.click(".jp-Dialog .jp-mod-reject:has-text('Cancel')")
        dialog.wait_for(state="detached")
        toast.locator("button:has-text('Extend')").click()
        dialog.wait_for()
        toast.wait_for(state="detached", timeout=10_000)  # the notification's action closes it

        # Extend: a refusal (over the site's maximum of 7 days) shown with its field, then +30m taken
        page.fill(".tacc-extend-input", "8d")
        page.click(".jp-Dialog .jp-mod-accept")
        error = page.locator(".jp-Dialog .tacc-extend-error")
        error.wait_for(timeout=30_000)
        assert error.inner_text().startswith("seconds: ") and "max_time_limit" in error.inner_text(), error.inner_text()
        assert page.input_value(".tacc-extend-input") == "8d"  # what was typed is kept
        page.screenshot(path=str(ARTIFACTS / "lab-running-extend-refused.png"))
        page.click(".jp-Dialog .tacc-preset:has-text('+30m')")
        assert "left after extending by 30m 00s" in page.inner_text(".tacc-extend-preview")
        page.click(".jp-Dialog .jp-mod-accept")
        dialog.wait_for(state="detached")
        page.wait_for_function("id => Number(document.querySelector(`.tacc-task[data-task-id='${id}'] .tacc-timeleft`)"
                               "?.dataset.timeLeft) > 1800", arg=tid, timeout=30_000)
        after = api(hub, token, "GET", f"/api/tasks/{tid}").json()
        assert after["time_limit"] == 300 + 1800, after
        assert 1800 < _time_left(page, tid) <= 2100

        assert outside_panel(page) == []
        page.wait_for_function("el => el.querySelector('polyline').getAttribute('points').split(' ').length >= 12",
                               arg=spark.element_handle(), timeout=30_000)  # a sparkline worth a look, for the shots
        page.screenshot(path=str(ARTIFACTS / "lab-running-panel.png"))
        page.locator(".tacc-panel").screenshot(path=str(ARTIFACTS / "lab-running-panel-close.png"))
        assert set_panel_width(page, 420) > 380
        assert outside_panel(page) == []
        page.locator(".tacc-panel").screenshot(path=str(ARTIFACTS / "lab-running-panel-wide.png"))
        errors = [e for e in page.js_errors if not ("WebSocket" in e and "/api/kernels/" in e)]
        assert errors == [], errors
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-running-failure.png"))
        print(f"at {page.url}; hub log:\n{hub.log_path.read_text()[-3000:]}")
        raise
    finally:
        page.context.close()
        _cancel_all(hub, token)


def test_a_terminal_in_a_running_task(running_hub: HubProcess, browser):
    hub = running_hub
    token = hub.token(USER, TASKS)
    page = _open_lab(browser, hub)
    try:
        tid = _submit(hub, token, "shell-demo", "sleep 300", {"README": "a task to open a shell in\n"})
        page.wait_for_selector(f'.tacc-task[data-task-id="{tid}"][data-status="running"]', timeout=60_000)
        page.click(f'.tacc-task[data-task-id="{tid}"] .tacc-task-head')
        page.click(f'button[aria-label="Open a terminal in task {tid}"]')
        term = page.locator(f'.tacc-terminal[data-task-id="{tid}"]')
        term.wait_for(timeout=30_000)
        page.wait_for_selector(f'.tacc-terminal[data-task-id="{tid}"][data-status="connected"]', timeout=30_000)
        rows = term.locator(".xterm-rows")
        page.wait_for_function("el => el.textContent.trim().length > 0", arg=rows.element_handle(),
                               timeout=30_000)  # the shell's prompt
        term.locator(".xterm-helper-textarea").focus()
        page.keyboard.type("whoami\n")
        page.wait_for_function("el => /whoami\\s*\\n\\s*alice\\s*\\n/.test(el.innerText)", arg=rows.element_handle(),
                               timeout=30_000)
        # the tty has the tab's size (the first frame), and follows it (a resize frame)
        size = re.compile(r"^size=(\d+) (\d+)$", re.M)

        def tty_size(expected_count: int) -> tuple[int, int]:
            page.keyboard.type("echo size=$(stty size)\n")
            page.wait_for_function("([el, n]) => (el.innerText.match(/^size=\\d+ \\d+$/mg) || []).length >= n",
                                   arg=[rows.element_handle(), expected_count], timeout=30_000)
            found = size.findall(rows.inner_text())
            return int(found[-1][0]), int(found[-1][1])

        tall, wide = tty_size(1)
        assert tall == rows.locator(":scope > div").count(), (tall, wide)
        before = panel_width(page)
        assert set_panel_width(page, before + 200) > before + 100  # the main area, so the terminal, narrows
        page.wait_for_timeout(500)  # xterm fits itself to the tab on the next frames
        term.locator(".xterm-helper-textarea").focus()
        _, narrower = tty_size(2)
        assert 10 < narrower < wide - 10, (wide, narrower)
        set_panel_width(page, before)
        for close in page.locator(".Toastify__toast button[title='Hide notification']").all():  # for the shot
            close.click()
        page.locator(".Toastify__toast").first.wait_for(state="detached", timeout=10_000)
        page.wait_for_timeout(500)  # xterm's fit after the resize
        page.screenshot(path=str(ARTIFACTS / "lab-running-terminal.png"))
        # in the dark theme, the terminal takes Lab's colours
        page.click("#jp-menu-panel .lm-MenuBar-itemLabel:text-is('Settings')")
        page.hover(".lm-Menu .lm-Menu-itemLabel:text-is('Theme')")
        page.click(".lm-Menu .lm-Menu-itemLabel:text-is('JupyterLab Dark')")
        page.wait_for_selector("body[data-jp-theme-light=false]", state="attached", timeout=30_000)
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)  # Lab's theme-change splash
        page.wait_for_function("el => getComputedStyle(el).backgroundColor !== 'rgb(255, 255, 255)'",
                               arg=term.locator(".xterm-viewport").element_handle(), timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / "lab-running-terminal-dark.png"))
        term.locator(".xterm-helper-textarea").focus()
        page.keyboard.type("exit 3\n")
        page.wait_for_function("el => el.textContent.includes('[process exited with status 3]')",
                               arg=rows.element_handle(), timeout=30_000)
        assert page.get_attribute(f'.tacc-terminal[data-task-id="{tid}"]', "data-status") == "exited"

        # once the task has ended, Reconnect says why there is no shell (the service's answer, through the relay)
        assert api(hub, token, "POST", f"/api/tasks/{tid}/cancel").status_code == 200
        wait_status(hub, token, tid, {"cancelled"})
        page.click(".tacc-terminal-tab .jp-Toolbar-item:has-text('Reconnect') button")
        page.wait_for_selector(f'.tacc-terminal[data-task-id="{tid}"][data-status="error"]', timeout=30_000)
        page.wait_for_function("el => /\\[task \\d+ is cancelled[^\\]]*not running/.test(el.innerText)",
                               arg=rows.element_handle(), timeout=30_000)

        # another site's page cannot open it with alice's cookies: her server refuses a foreign Origin
        cookies = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies(f"{hub.url}/user/{USER}/"))
        relay = f"ws://127.0.0.1:{hub.port}/user/{USER}/tacc/api/tasks/{tid}/exec"
        assert _ws_status(relay, {"Cookie": cookies, "Origin": "http://evil.example"}) == 403
        assert _ws_status(relay, {"Cookie": cookies, "Origin": hub.url}) == 101  # the same cookies, from Lab's origin
        errors = [e for e in page.js_errors if not ("WebSocket" in e and "/api/kernels/" in e)]
        assert errors == [], errors
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-running-terminal-failure.png"))
        print(f"at {page.url}; hub log:\n{hub.log_path.read_text()[-3000:]}")
        raise
    finally:
        page.context.close()
        _cancel_all(hub, token)


def test_a_restarted_task_shows_its_attempt(running_hub: HubProcess, browser):
    """Its first run fails (TACC_ATTEMPT 0); restarted (qos.max_restarts 2), the row says "attempt 2 of 3" and
    the details list the run that failed."""
    hub = running_hub
    token = hub.token(USER, TASKS)
    page = _open_lab(browser, hub)
    try:
        tid = _submit(hub, token, "flaky", {"shell": ['[ "$TACC_ATTEMPT" -ge 1 ] || exit 3', "sleep 300"]},
                      {"README": "fails once\n"}, qos={"max_restarts": 2})
        badge = page.locator(f'.tacc-task[data-task-id="{tid}"][data-status="running"] .tacc-attempt')
        badge.wait_for(timeout=60_000)
        assert badge.inner_text() == "attempt 2 of 3"
        page.click(f'.tacc-task[data-task-id="{tid}"] .tacc-task-head')
        history = page.locator(f'.tacc-task[data-task-id="{tid}"] .tacc-attempts li')
        history.first.wait_for(timeout=30_000)
        assert history.count() == 1, history.all_inner_texts()
        assert re.fullmatch(r"attempt 1 failed: exited with status 3 on \S+ after \d+s", history.inner_text()), \
            history.inner_text()
        page.locator(".tacc-panel").screenshot(path=str(ARTIFACTS / "lab-running-attempt.png"))
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-running-attempt-failure.png"))
        print(f"at {page.url}; hub log:\n{hub.log_path.read_text()[-3000:]}")
        raise
    finally:
        page.context.close()
        _cancel_all(hub, token)
