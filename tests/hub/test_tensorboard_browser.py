"""A real TensorBoard started by a task, in a real browser, through the hub's proxy and the service's.

alice submits the DDP example (held up after training, see tests/e2e/test_tensorboard.py) with a hub
token; Chromium, logged in through the hub's form as alice, opens
``<hub>/services/tacc/tasks/ID/proxy/PORT/`` and TensorBoard's dashboard shows the example's scalars
(screenshot: test-artifacts/tensorboard.png), though TensorBoard serves only under its secret path prefix
(the proxy adds it): the secret is in no URL the browser asks for, no header and no body it gets, nor in the
page. bob, logged in as himself, gets 404 on the same URL.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_tensorboard import EPOCHS, STEPS, example_task_dir, wait_for
from tests.e2e.test_tensorboard import _secret as task_secret

from .conftest import ARTIFACTS, HubProcess, browser_login
from .test_hub_auth import TASKS, api, wait_status

BIN = Path(sys.executable).parent


def _wait_drawn(page, timeout_ms: int = 30_000) -> None:
    """Until the charts (drawn by a worker, after their data came) look the same twice running."""
    shots: list[bytes] = []
    for _ in range(timeout_ms // 500):
        shots.append(page.screenshot())
        if len(shots) > 1 and shots[-1] == shots[-2]:
            return
        page.wait_for_timeout(500)
    raise AssertionError("TensorBoard's page kept changing")


def test_tensorboard_dashboard_in_the_browser_and_not_for_bob(hub: HubProcess, browser, tmp_path: Path) -> None:
    token = hub.token("alice", TASKS, note="tcloud")
    env = {**os.environ, "TACC_URL": hub.service_url, "TACC_TOKEN": token, "TACC_CONFIG": "/nonexistent"}
    res = subprocess.run([str(BIN / "tcloud"), "submit", str(example_task_dir(tmp_path))], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    tid = int(re.search(r"submitted task (\d+)", res.stdout + res.stderr).group(1))
    try:
        wait_status(hub, token, tid, {"running"}, timeout=300)
        log = wait_for("the training ends", lambda: (
            t := api(hub, token, "GET", f"/api/tasks/{tid}/logs").json().get("data", "")) and "trained" in t and t,
            timeout=300)
        port = int(re.search(r"tacc: TensorBoard on port (\d+)", log).group(1))
        path = f"/services/tacc/tasks/{tid}/proxy/{port}/"
        # TensorBoard started before runs/ existed: wait until it has read the event files
        wait_for("TensorBoard has the scalars", lambda: {"train/loss", "train/lr"} <= set(
            api(hub, token, "GET", f"/tasks/{tid}/proxy/{port}/data/plugin/scalars/tags").json().get(".", {})))

        secret = task_secret(hub, tid)  # (hub.state_dir holds the service's database too)
        page = browser_login(browser, hub, "alice", path)
        seen: list[str] = []  # every URL the page asked for, and what came back, as the browser has them

        def record(resp) -> None:
            seen.append(f"{resp.url} {resp.status} {resp.headers}")
            try:
                seen.append(resp.body().decode("latin-1"))
            except Exception:  # a redirect or a body already gone: its URL and headers are kept
                pass

        try:
            page.wait_for_url(f"{hub.url}{path}", timeout=60_000)
            page.on("response", record)
            page.reload()  # the dashboard again, every request and response recorded
            page.wait_for_selector("text=TensorBoard", timeout=60_000)
            for tag in ("train/loss", "train/lr"):  # the example's scalar tags, each on a card of its own
                page.get_by_text(tag, exact=True).first.wait_for(state="visible", timeout=60_000)
            # the cards' data tables show the last step's values once the series came through the proxy
            page.get_by_text(str(EPOCHS * STEPS - 1), exact=True).first.wait_for(state="visible", timeout=60_000)
            page.wait_for_load_state("networkidle")
            _wait_drawn(page)
            page.screenshot(path=str(ARTIFACTS / "tensorboard.png"), full_page=True)
            assert page.js_errors == []
            assert any("/data/plugin/scalars/" in u for u in seen), seen[:20]  # the recording saw the data come,
            assert any('"train/loss"' in b for b in seen)  # bodies included
            assert secret not in "\n".join(seen) and secret not in page.content()
        finally:
            page.context.close()

        # bob, logged in through the hub as himself, in the browser: no such task
        page = browser_login(browser, hub, "bob", path)
        try:
            page.wait_for_url(f"{hub.url}{path}", timeout=60_000)
            resp = page.goto(f"{hub.url}{path}")
            assert resp is not None and resp.status == 404, resp and (resp.status, resp.text()[:300])
            assert "TensorBoard" not in page.content()
        finally:
            page.context.close()
    finally:
        api(hub, token, "POST", f"/api/tasks/{tid}/cancel")
    wait_status(hub, token, tid, {"cancelled"}, timeout=60)
