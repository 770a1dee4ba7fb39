"""The JupyterLab side panel in a real browser, on a real hub: a user logs in, starts their server (a
tacc task: TaccSpawner, as the README's hub does), opens a notebook in Lab, submits it from the
notebook's toolbar, sees it RUNNING in the panel with its log streaming, and cancels it.
Screenshots: test-artifacts/lab-*.png.

The hub is the README's (``jupyterhub_config.py``, loaded by a small config file), with additions to
users' servers' environment: ``PYTHONPATH`` is this checkout and ``JUPYTER_PATH`` names a directory
whose ``labextensions/`` links to this checkout's build of the panel, so the code under test (server
extension and panel) is what runs even where the venv holds another copy; Lab's user settings and
workspaces live in a directory of the test's, one per user (the test switches to the dark theme; the
machine's own Lab settings are left alone), with the news pop-up off. Servers run as their users'
Unix accounts: what they read is readable by every account, what they write (settings, workspaces,
the notebook's folder in alice's own 0700 folder) is their user's."""

from __future__ import annotations

import json
import os
import pwd
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import accounts

from .conftest import ARTIFACTS, ROOT, HubProcess, browser_login
from .lab_layout import outside_panel, set_panel_width, wrapped
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


def _give(path: Path, user: str) -> None:
    """``path`` and everything under it to ``user`` (what the server writes must be the account's)."""
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(top, name), pw.pw_uid, pw.pw_gid)


@pytest.fixture(scope="module")
def lab_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    state = tmp_path_factory.mktemp("labhub")
    lab = accounts.data_dir("tacc-lab-")  # the servers (alice, bob) read and write here: not pytest's tmp (root's)
    lab.chmod(0o755)
    data = lab / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "tacc-hub-labextension").symlink_to(ROOT / "tacc_hub" / "labextension")
    for user in ("alice", "bob"):  # each server (as its user) writes its own Lab settings and workspaces
        news = lab / user / "lab-user-settings" / "@jupyterlab" / "apputils-extension" / \
            "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True)
        news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
        (lab / user / "lab-workspaces").mkdir()
        _give(lab / user, user)
    server_env = {"PYTHONPATH": str(ROOT), "JUPYTER_PATH": str(data),
                  "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter-config")}
    per_user = {"JUPYTERLAB_SETTINGS_DIR": "lab-user-settings", "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces"}
    config = state / "jupyterhub_config.py"
    config.write_text(f"load_subconfig({str(ROOT / 'jupyterhub_config.py')!r})\n"
                      f"c.Spawner.environment = {{**c.Spawner.environment, **{server_env!r}}}\n"
                      + "".join(f"c.Spawner.environment[{k!r}] = lambda sp: f'{lab}/{{sp.user.name}}/{v}'\n"
                                for k, v in per_user.items()))
    h = HubProcess(state, config=config).start()
    yield h
    h.stop()


def test_submit_the_open_notebook_watch_it_run_and_cancel_it(lab_hub: HubProcess, browser):
    hub = lab_hub
    home = hub.data_dir / "users" / USER  # the server's root: the user's folder in the service's data dir
    folder = f"labtest-{uuid.uuid4().hex[:8]}"
    home.mkdir(mode=0o700, exist_ok=True)
    (home / folder).mkdir(parents=True)
    (home / folder / "ticks.ipynb").write_text(_notebook())
    _give(home, USER)  # as if alice had made it: her tasks and server run as her

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
        spec = yaml.safe_load(page.inner_text(".tacc-spec-text"))  # the full spec, as YAML
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
        head = queued.locator(".tacc-queue-head").inner_text()
        assert re.match(r"#1 in queue · \w+ · (starts now|starts in \d+[smhd]|start time unknown)$", head), head

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


def _check_layout(page, where: str) -> None:
    """Header and task buttons each on one line, nothing of the panel past its edges; a screenshot to look at."""
    assert wrapped(page, ".tacc-header .tacc-btn") == [], where
    assert wrapped(page, ".tacc-task.tacc-open .tacc-actions .tacc-btn") == [], where
    assert outside_panel(page) == [], where
    assert page.eval_on_selector(".tacc-title", "e => e.scrollWidth <= e.clientWidth"), where  # not cut


def _queue_matches_service(page, hub: HubProcess, token: str, tid: int) -> dict:
    """The panel's estimate is the service's queue.estimated_start (the very value; the words follow the
    %tacc monitor's rule), its detail the service's detail."""
    row = f'.tacc-task[data-task-id="{tid}"] .tacc-queue'
    for _ in range(20):  # the service's explanation may be renewed between two reads
        q = api(hub, token, "GET", f"/api/tasks/{tid}").json()["queue"]
        shown = page.get_attribute(row, "data-estimated-start")
        want = "" if q["estimated_start"] is None or q["reason"] == "OverQuota" else q["estimated_start"]
        if (shown == "" and want == "") or (shown and want != "" and float(shown) == want):
            break
        page.wait_for_timeout(500)
    else:
        raise AssertionError(f"panel estimate {shown!r}, service {q}")
    shown = page.inner_text(f"{row} .tacc-queue-detail")
    if q["reason"] == "OverQuota":  # under the headline "Can never start under the current quota": the rest
        assert shown.lower().rstrip(".") in q["detail"].lower(), (shown, q)
    else:
        assert shown == q["detail"], (shown, q)
    return q


def test_waiting_tasks_say_why_and_the_panel_fits_its_width(lab_hub: HubProcess, browser):
    """Bob's server holds his one GPU: his next task waits behind it (the panel says so: reason, the service's
    detail and estimate, the server marked as his), its log area says it waits instead of streaming nothing,
    and streams once it runs. A task that can never fit once an admin lowers his quota is shown as such, with
    a notification. Header and task buttons stay on one line and nothing runs past the panel's edge, at Lab's
    default width, a narrow and a wide one (screenshots test-artifacts/lab-panel-{waiting,narrow,wide,spec}.png)."""
    hub, user = lab_hub, "bob"
    admin, token = hub.token("admin", TASKS), hub.token(user, TASKS)
    page = browser_login(browser, hub, user, "/hub/spawn")
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/logs/stream" in r.url else None)
    page.set_viewport_size({"width": 1400, "height": 900})
    quota = f"/api/admin/quotas/user/{user}"
    try:
        page.wait_for_selector("#spawn_form", timeout=30_000)
        page.fill("#tacc-gpus", "1")  # the server holds one GPU
        page.click("#spawn_form [type=submit]")
        page.wait_for_url(f"**/user/{user}/lab**", timeout=120_000)
        page.wait_for_selector(".jp-SideBar [data-id='tacc-hub-panel']", timeout=60_000)
        page.wait_for_timeout(1000)  # Lab restores its layout (from the user's own workspaces folder)
        if not page.is_visible(".tacc-panel .tacc-header"):  # the side bar's button toggles the panel
            page.click('.jp-SideBar [data-id="tacc-hub-panel"]')
        page.wait_for_selector(".tacc-panel .tacc-header")
        page.wait_for_selector("body[data-jp-theme-light]", state="attached", timeout=30_000)
        if page.get_attribute("body", "data-jp-theme-light") == "false":  # the other test left Lab's settings dark
            page.click("#jp-menu-panel .lm-MenuBar-itemLabel:text-is('Settings')")
            page.hover(".lm-Menu .lm-Menu-itemLabel:text-is('Theme')")
            page.click(".lm-Menu .lm-Menu-itemLabel:text-is('JupyterLab Light')")
            page.wait_for_selector("body[data-jp-theme-light=true]", state="attached", timeout=30_000)
            page.wait_for_timeout(500)  # the theme's CSS
        server = next(t for t in api(hub, token, "GET", "/api/tasks?limit=50").json()["tasks"]
                      if t["name"] == f"jupyter-{user}" and t["status"] == "running")

        # bob may hold 2 GPUs: "big" (2) waits behind his server (1); then the admin lowers the cap to 1
        assert api(hub, admin, "PUT", quota, json={"max_gpus": 2}).status_code == 200
        big = submit(hub, token, "echo big ran", name="big", gpus=2)
        page.wait_for_selector(f'.tacc-task[data-task-id="{big}"] .tacc-queue[data-reason="Quota"]', timeout=30_000)
        assert api(hub, admin, "PUT", quota, json={"max_gpus": 1}).status_code == 200
        small = submit(hub, token, "echo hello from small; sleep 30", name="small", gpus=1)

        # big can never start now: said so, with no estimate, and notified
        over = page.locator(f'.tacc-task[data-task-id="{big}"] .tacc-queue.tacc-overquota')
        over.wait_for(timeout=30_000)
        assert over.locator(".tacc-queue-head").inner_text() == "Can never start under the current quota"
        q = _queue_matches_service(page, hub, token, big)
        assert q["reason"] == "OverQuota" and q["estimated_start"] is None and "at most 1" in q["detail"], q
        assert not re.search(r"starts (now|in)|start time", over.inner_text()), over.inner_text()
        toast = page.locator(f".Toastify__toast:has-text('Task {big} (big) can never start under the current quota')")
        toast.wait_for(timeout=30_000)
        assert "at most 1" in toast.inner_text()

        # small waits behind bob's own server, which is marked as his
        queued = page.locator(f'.tacc-task[data-task-id="{small}"] .tacc-queue[data-reason="Quota"]')
        queued.wait_for(timeout=30_000)
        q = _queue_matches_service(page, hub, token, small)
        head = queued.locator(".tacc-queue-head").inner_text()
        assert re.match(r"#\d+ in queue · Quota · (starts now|starts in \d+[smhd]|start time unknown)$", head), head
        mark = page.locator(f'.tacc-task[data-task-id="{server["id"]}"] .tacc-server-mark')
        assert mark.inner_text() == "your Jupyter server"

        # its log area: waiting, and why (no stream opened yet)
        page.click(f'.tacc-task[data-task-id="{small}"] .tacc-task-head')
        state = page.locator(f'.tacc-task[data-task-id="{small}"] .tacc-log-state')
        state.wait_for()
        assert state.get_attribute("data-state") == "waiting"
        assert state.inner_text() == "Waiting to start (Quota): the log streams here once it runs.", state.inner_text()
        assert not [u for u in streams if f"/tasks/{small}/logs/stream" in u], streams
        page.locator(".Toastify__toast").first.wait_for(state="detached", timeout=30_000)  # toasts gone for the shots
        _check_layout(page, "Lab's default width")
        page.screenshot(path=str(ARTIFACTS / "lab-panel-waiting.png"))

        narrow = set_panel_width(page, 200)
        assert narrow < 300, narrow
        _check_layout(page, f"narrow ({narrow:.0f} px)")
        page.screenshot(path=str(ARTIFACTS / "lab-panel-narrow.png"))
        page.locator(".tacc-panel").screenshot(path=str(ARTIFACTS / "lab-panel-narrow-close.png"))

        # the spec: a summary, the digest shortened (copy button), the whole spec as YAML
        page.click(f'.tacc-task[data-task-id="{small}"] button:has-text("Spec")')
        page.wait_for_selector(".tacc-spec-text")
        full = api(hub, token, "GET", f"/api/tasks/{small}").json()
        assert yaml.safe_load(page.inner_text(".tacc-spec-text")) == full["spec"]
        assert page.get_attribute(".tacc-spec-digest", "data-digest") == full["digest"]
        summary = page.inner_text(".tacc-spec-summary")
        assert "1 GPU, 1 node" in summary and "5 min" in summary, summary
        _check_layout(page, f"narrow ({narrow:.0f} px), spec")
        page.screenshot(path=str(ARTIFACTS / "lab-panel-spec.png"))
        page.locator(".tacc-panel").screenshot(path=str(ARTIFACTS / "lab-panel-spec-close.png"))
        wide = set_panel_width(page, 480)
        assert wide > 400, wide
        _check_layout(page, f"wide ({wide:.0f} px), spec")
        page.screenshot(path=str(ARTIFACTS / "lab-panel-wide.png"))

        # the quota raised: both start; small's log streams once it runs
        assert api(hub, admin, "DELETE", quota).status_code in (200, 204)
        page.click(f'.tacc-task[data-task-id="{small}"] button:has-text("Log")')
        page.wait_for_function("() => /hello from small/.test(document.querySelector('.tacc-log-text')?.textContent"
                               " || '')", timeout=60_000)
        assert page.get_attribute(f'.tacc-task[data-task-id="{small}"] .tacc-log-state', "data-state") != "waiting"
        wait_status(hub, token, big, {"succeeded"})
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-failure-waiting.png"))
        print(f"at {page.url}; hub log:\n{hub.log_path.read_text()[-3000:]}")
        raise
    finally:
        page.context.close()
        api(hub, admin, "DELETE", quota)
        for task in api(hub, token, "GET", "/api/tasks?limit=50").json()["tasks"]:
            if task["status"] in ("pending", "starting", "running"):
                api(hub, token, "POST", f"/api/tasks/{task['id']}/cancel")
