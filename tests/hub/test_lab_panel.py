"""The JupyterLab side panel in a real browser, on a real hub: a user logs in, starts their server (a
tacc task: TaccSpawner, as the README's hub does), opens a notebook in Lab, submits it from the
notebook's toolbar, sees it RUNNING in the panel with its log streaming, and cancels it.
Screenshots: test-artifacts/lab-*.png.

The hub is the README's (``jupyterhub_config.py``, loaded by a small config file), with additions to
users' servers' environment: ``PYTHONPATH`` is this checkout and ``JUPYTER_PATH`` names a directory
whose ``labextensions/`` links to this checkout's build of the panel, so the code under test (server
extension and panel) is what runs even where the venv holds another copy; Lab's user settings and
workspaces live in the hub's state directory (the test switches to the dark theme; the machine's
own Lab settings are left alone), with the news pop-up off."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator

import pytest

from .conftest import ARTIFACTS, ROOT, HubProcess, browser_login
from .test_hub_auth import TASKS, api, submit, wait_status

USER = "alice"  # on this module's own hub
TICKS = 120  # a line every half second: a minute, far longer than the test needs


def _notebook() -> str:
    cell = (f"import time\nfor i in range({TICKS}):\n    print(f'tick {{i}}', flush=True)\n    time.sleep(0.5)\n")
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                   "source": cell}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    })


@pytest.fixture(scope="module")
def lab_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    state = tmp_path_factory.mktemp("labhub")
    data = state / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "tacc-hub-labextension").symlink_to(ROOT / "tacc_hub" / "labextension")
    settings = state / "lab-user-settings"
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    server_env = {"PYTHONPATH": str(ROOT), "JUPYTER_PATH": str(data),
                  "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter-config"), "JUPYTERLAB_SETTINGS_DIR": str(settings),
                  "JUPYTERLAB_WORKSPACES_DIR": str(state / "lab-workspaces")}
    config = state / "jupyterhub_config.py"
    config.write_text(f"load_subconfig({str(ROOT / 'jupyterhub_config.py')!r})\n"
                      f"c.Spawner.environment = {{**c.Spawner.environment, **{server_env!r}}}\n")
    h = HubProcess(state, config=config).start()
    yield h
    h.stop()


def test_submit_the_open_notebook_watch_it_run_and_cancel_it(lab_hub: HubProcess, browser):
    hub = lab_hub
    home = hub.state_dir / "users" / USER  # the server's root: the user's directory of the service's executor
    folder = f"labtest-{uuid.uuid4().hex[:8]}"
    (home / folder).mkdir(parents=True)
    (home / folder / "ticks.ipynb").write_text(_notebook())

    page = browser_login(browser, hub, USER, "/hub/spawn")
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/logs/stream" in r.url else None)
    page.set_viewport_size({"width": 1400, "height": 900})
    t0 = time.monotonic()
    try:
        page.wait_for_selector("#spawn_form", timeout=30_000)  # TaccSpawner's options form: its defaults
        page.click("#spawn_form [type=submit]")
        page.wait_for_url(f"**/user/{USER}/lab**", timeout=120_000)
        page.goto(f"{hub.url}/user/{USER}/lab/tree/{folder}/ticks.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)

        # the panel, from the right side bar
        page.click('.jp-SideBar [data-id="tacc-hub-panel"]')
        page.wait_for_selector(".tacc-panel .tacc-header")

        # Submit from the notebook toolbar: the dialog shows the captured environment
        page.click(".tacc-submit-button")
        dialog = page.locator(".jp-Dialog .tacc-submit-dialog")
        dialog.wait_for()
        page.wait_for_selector(".tacc-preview .tacc-digest", timeout=60_000)
        pinned = page.inner_text(".tacc-preview .tacc-digest")
        page.uncheck("#tacc-f-packages")  # a quick run: no package install
        page.wait_for_function("d => { const e = document.querySelector('.tacc-preview .tacc-digest');"
                               " return e && e.textContent !== d; }", arg=pinned, timeout=60_000)
        page.fill("#tacc-f-name", "lab-ticks")
        page.wait_for_selector(".tacc-preview-wrap[aria-busy=false] .tacc-digest", timeout=60_000)
        assert "ticks" in page.inner_text(".tacc-preview")  # the converted notebook is the entry point
        page.screenshot(path=str(ARTIFACTS / "lab-submit-dialog.png"))
        page.click(".jp-Dialog .jp-mod-accept")

        # the new task is selected in the panel: RUNNING, with its log streaming
        row = page.locator(".tacc-task.tacc-open")
        row.wait_for(timeout=30_000)
        task_id = int(row.get_attribute("data-task-id") or 0)
        assert task_id > 0
        page.wait_for_selector(f'.tacc-task[data-task-id="{task_id}"][data-status="running"]', timeout=60_000)
        page.wait_for_function("() => /tick 3\\b/.test(document.querySelector('.tacc-log-text')?.textContent || '')",
                               timeout=60_000)
        # through the hub's streaming proxy the log arrives as server-sent events (not the chunked fallback)
        assert page.get_attribute(".tacc-log-state", "data-state") == "streaming"
        log = page.inner_text(".tacc-log-text")
        assert re.search(r"tick 0\ntick 1\ntick 2\ntick 3", log), log
        assert "lab-ticks" in row.inner_text()
        # run and elapsed times move with the clock
        page.wait_for_function("id => /ran [1-9]\\d*s/.test(document.querySelector(`.tacc-task[data-task-id='${id}']`)"
                               "?.textContent || '')", arg=task_id, timeout=15_000)
        # close the log and open it again: it goes on from the byte offset it had (no line twice, none lost)
        log_button = page.locator(f'.tacc-task[data-task-id="{task_id}"] button:has-text("Log")')
        log_button.click()
        page.wait_for_selector(".tacc-log-text", state="detached")
        page.wait_for_timeout(1500)
        log_button.click()
        page.wait_for_function("() => /tick 9\\b/.test(document.querySelector('.tacc-log-text')?.textContent || '')",
                               timeout=30_000)
        lines = page.inner_text(".tacc-log-text").strip().splitlines()
        assert lines == [f"tick {i}" for i in range(len(lines))], lines
        resumed = [u for u in streams if f"/tasks/{task_id}/logs/stream?offset=" in u and "offset=0" not in u]
        assert resumed, streams

        # the cluster view: free GPUs per node and switch (the embedded hub's local executor: 4 slots)
        page.click(".tacc-header button:has-text('Cluster')")
        page.wait_for_selector(".tacc-cluster .tacc-node", timeout=30_000)
        assert re.search(r"\d+ of 4 GPUs free", page.inner_text(".tacc-cluster-sum"))
        page.screenshot(path=str(ARTIFACTS / "lab-panel-running.png"))

        # cancel from the panel (keyboard reachable: a labelled button)
        page.click(f'button[aria-label="Cancel task {task_id}"]')
        page.click(".jp-Dialog .jp-mod-accept:has-text('Cancel task')")  # the confirmation
        page.wait_for_selector(f'.tacc-task[data-task-id="{task_id}"][data-status="cancelled"]', timeout=60_000)
        page.wait_for_selector(".tacc-log-state[data-state=ended]", timeout=30_000)
        # the state changes were notified (Lab's notification centre, from the status bar)
        page.click(".jp-Notification-Status")
        notes = page.locator(".jp-Notification-List")
        notes.locator(f"text=Task {task_id} (lab-ticks) was cancelled").wait_for(timeout=30_000)
        assert notes.locator(f"text=Task {task_id} (lab-ticks) is running").count() == 1
        page.screenshot(path=str(ARTIFACTS / "lab-panel-cancelled.png"))
        page.keyboard.press("Escape")

        # the task's spec, from the keyboard
        page.focus(f'.tacc-task[data-task-id="{task_id}"] button:has-text("Spec")')
        page.keyboard.press("Enter")
        spec = json.loads(page.inner_text(".tacc-spec-text"))
        assert spec["name"] == "lab-ticks" and spec["entrypoint"]["argv"][0] == "python"

        # resubmit: the same spec again, so the same digest, as a new task the panel opens
        page.click(f'button[aria-label="Resubmit task {task_id} with the same spec"]')
        again = page.locator(".tacc-task.tacc-open")
        page.wait_for_function("id => Number(document.querySelector('.tacc-task.tacc-open')?.dataset.taskId) > id",
                               arg=task_id, timeout=30_000)
        again_id = int(again.get_attribute("data-task-id") or 0)
        token = hub.token(USER, TASKS)
        first, second = (api(hub, token, "GET", f"/api/tasks/{i}").json() for i in (task_id, again_id))
        assert second["digest"] == first["digest"] and second["spec"] == first["spec"]
        page.wait_for_selector(f'.tacc-task[data-task-id="{again_id}"][data-status="running"]', timeout=60_000)
        page.click(f'button[aria-label="Cancel task {again_id}"]')
        page.click(".jp-Dialog .jp-mod-accept:has-text('Cancel task')")
        page.wait_for_selector(f'.tacc-task[data-task-id="{again_id}"][data-status="cancelled"]', timeout=60_000)

        # a waiting task shows its queue position, reason and estimated start (tasks made with the API:
        # the panel shows them too); all 4 GPU slots are taken by the first
        blocker = submit(hub, token, "sleep 60", name="blocker", gpus=4)
        wait_status(hub, token, blocker, {"running"})
        waiter = submit(hub, token, "true", name="waiter", gpus=4)
        queued = page.locator(f'.tacc-task[data-task-id="{waiter}"] .tacc-queue')
        queued.wait_for(timeout=30_000)
        page.wait_for_selector(f'.tacc-task[data-task-id="{waiter}"] >> text=4 GPUs, 1 node', timeout=30_000)
        assert re.match(r"#1 in queue \(\w+\), (starts (in .+|now)|start unknown)$", queued.inner_text()), \
            queued.inner_text()

        # an admin lowers alice's quota: her next submit of the notebook is refused, the limit named
        admin = hub.token("admin", TASKS)
        assert api(hub, admin, "PUT", f"/api/admin/quotas/user/{USER}", json={"max_gpus": 1}).status_code == 200
        try:
            page.click(".tacc-submit-button")
            page.locator(".jp-Dialog .tacc-submit-dialog").wait_for()
            page.uncheck("#tacc-f-packages")
            page.fill("#tacc-f-gpus", "2")
            page.wait_for_selector(".tacc-preview-wrap[aria-busy=false] .tacc-digest", timeout=60_000)
            page.click(".jp-Dialog .jp-mod-accept")
            refused = page.locator(".jp-Dialog:has-text('Submit failed')")
            refused.wait_for(timeout=60_000)
            said = refused.inner_text()
            assert said.count(f"needs 2 GPUs; user {USER} may hold at most 1 (1 over)") == 1, said  # once
            page.screenshot(path=str(ARTIFACTS / "lab-submit-over-quota.png"))
            refused.locator("button:has-text('Close')").click()
            refused.wait_for(state="detached")
        finally:
            api(hub, admin, "DELETE", f"/api/admin/quotas/user/{USER}")

        # the same panel in the dark theme, from the command palette
        page.keyboard.press("Control+Shift+C")
        page.keyboard.type("JupyterLab Dark")
        page.keyboard.press("Enter")
        page.wait_for_selector("body[data-jp-theme-light=false]", state="attached", timeout=30_000)
        page.wait_for_timeout(500)  # the theme's CSS
        page.screenshot(path=str(ARTIFACTS / "lab-panel-dark.png"))
        # The hub's proxy (Python configurable-http-proxy) answers no WebSocket subprotocol, so Chromium
        # refuses Lab's first kernel socket and Lab falls back to the legacy protocol: not ours.
        errors = [e for e in page.js_errors if not ("WebSocket" in e and "/api/kernels/" in e)]
        assert errors == [], errors
        print(f"lab panel flow: {time.monotonic() - t0:.1f} s")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-failure.png"))
        print(f"at {page.url}; hub log:\n{hub.log_path.read_text()[-3000:]}")
        raise
    finally:
        page.context.close()
        token = hub.token(USER, TASKS)  # leave no task of ours holding GPUs for the session's other tests
        for task in api(hub, token, "GET", "/api/tasks?limit=50").json()["tasks"]:
            if task["status"] in ("pending", "starting", "running"):
                api(hub, token, "POST", f"/api/tasks/{task['id']}/cancel")
