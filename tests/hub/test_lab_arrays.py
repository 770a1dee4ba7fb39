"""Arrays and pipelines in the JupyterLab panel, in a real browser on a real hub: an array is one row (its
elements never one by one) with the service's counts (done / running / waiting / failed) and a progress bar,
that opens to its elements (index, parameters, status; an element opens as its task row, log included) and
cancels all that have not ended; a 2-step pipeline is one row whose steps are listed in order with what each
waits for, and Cancel all ends the step still to run. Screenshots: test-artifacts/lab-arrays-*.png.

The hub is test_lab_panel's (the README's ``jupyterhub_config.py`` with this checkout's server extension and
panel), started for this module; everything is submitted through the service's API as alice, as tcloud would.
"""

from __future__ import annotations

import time

import pytest

from tacc_hub.snapshot import digest_of

from .conftest import ARTIFACTS, HubProcess
from .lab_layout import outside_panel, set_panel_width, wrapped
from .test_hub_auth import TASKS, api, wait_status
from .test_lab_panel import lab_hub  # noqa: F401  (the fixture, started for this module)
from .test_lab_running import USER, _open_lab, _snapshot

# One element per value: "ok" ends at once, "fail" exits 3, "sleep" runs until cancelled.
ELEMENT = ("import sys, time\n"
           "v = sys.argv[1]\n"
           "print('element', v, flush=True)\n"
           "sys.exit(3) if v == 'fail' else time.sleep(300 if v == 'sleep' else 0)\n")
TOP = 'ul.tacc-tasks[aria-label="Your tasks"] > li'


def _code(hub: HubProcess, token: str, files: dict[str, str]) -> dict:
    archive = _snapshot(files)
    digest = digest_of(archive)
    assert api(hub, token, "PUT", f"/api/code/{digest}", data=archive).status_code in (200, 201)
    return {"kind": "snapshot", "digest": digest, "size": len(archive)}


def _spec(name: str, code: dict, argv: list[str], **more: object) -> dict:
    return {"name": name, "entrypoint": {"argv": argv}, "resources": {"time_limit": "5m", "gpus_per_node": 0},
            "code": code, **more}


def _counts(page, array_id: int) -> dict[str, int]:
    sel = f'{TOP}.tacc-array[data-array-id="{array_id}"] .tacc-counts'
    return {k: int(page.get_attribute(sel, f"data-{k}") or -1) for k in ("done", "running", "waiting", "failed")}


def _wait_counts(page, array_id: int, want: dict[str, int], timeout: float = 90_000) -> None:
    sel = f'{TOP}.tacc-array[data-array-id="{array_id}"] .tacc-counts' + "".join(
        f'[data-{k}="{v}"]' for k, v in want.items())
    try:
        page.wait_for_selector(sel, timeout=timeout)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-counts-failure.png"))
        raise AssertionError(f"the row shows {_counts(page, array_id)}, expected {want}") from None


def _tidy(page, where: str) -> None:
    """Nothing of the panel past its edges; the open row's buttons on one line."""
    assert outside_panel(page) == [], where
    if page.locator(".tacc-group.tacc-open .tacc-actions .tacc-btn").count():
        assert wrapped(page, ".tacc-group.tacc-open > .tacc-task-body > .tacc-actions .tacc-btn") == [], where


def test_an_array_is_one_row_with_its_counts_opens_to_its_elements_and_cancels_all(lab_hub: HubProcess,  # noqa: F811
                                                                                   browser):
    hub = lab_hub
    token = hub.token(USER, TASKS)
    code = _code(hub, token, {"el.py": ELEMENT})
    values = ["ok", "ok", "fail", "sleep", "sleep"]
    r = api(hub, token, "POST", "/api/tasks", json=_spec(
        "lab-sweep", code, ["python3", "el.py", "{value}"], array={"values": values, "max_running": 1}))
    assert r.status_code == 201, r.text
    sub = r.json()
    array_id, ids = sub["array"]["id"], sub["task_ids"]
    assert len(ids) == 5
    page = _open_lab(browser, hub)
    try:
        # max_running 1: two succeed, one fails, one runs, one waits behind it
        row = page.locator(f'{TOP}.tacc-array[data-array-id="{array_id}"]')
        row.wait_for(timeout=60_000)
        _wait_counts(page, array_id, {"done": 2, "running": 1, "waiting": 1, "failed": 1})
        shown = api(hub, token, "GET", f"/api/arrays/{array_id}").json()
        assert (shown["done"], shown["running"], shown["waiting"], shown["failed"]) == (2, 1, 1, 1), shown
        assert row.count() == 1
        tops = page.locator(TOP).evaluate_all("els => els.map(e => e.dataset.taskId || '')")
        assert not {str(i) for i in ids} & set(tops), tops  # no element has a row of its own
        assert "lab-sweep" in row.locator(".tacc-task-title").inner_text()
        assert "[5]" in row.locator(".tacc-task-title").inner_text()
        assert row.get_attribute("data-status") == "running"
        parts = row.locator(".tacc-progress-part").evaluate_all(
            "els => els.map(e => [e.dataset.kind, Number(e.dataset.count)])")
        assert parts == [["done", 2], ["failed", 1], ["running", 1], ["waiting", 1]], parts
        assert row.locator(".tacc-task-body").count() == 0  # closed
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-row.png"))

        # opened: the elements in index order, with their parameters and status
        row.locator("> .tacc-task-head").click()
        elements = row.locator("li.tacc-element")
        elements.nth(4).wait_for(timeout=10_000)
        assert [elements.nth(i).get_attribute("data-index") for i in range(5)] == ["0", "1", "2", "3", "4"]
        assert [elements.nth(i).get_attribute("data-status") for i in range(5)] == [
            "succeeded", "succeeded", "failed", "running", "pending"]
        page.wait_for_function(  # parameters come with each element's spec
            "id => [...document.querySelectorAll(`li.tacc-array[data-array-id='${id}'] .tacc-element-params`)]"
            ".map(e => e.textContent).join('|') === 'value=ok|value=ok|value=fail|value=sleep|value=sleep'",
            arg=array_id, timeout=30_000)
        _tidy(page, "array open")
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-open.png"))

        # an element opens as its own task row: its log
        elements.nth(2).locator("button.tacc-element-head").click()
        failed = row.locator(f'li.tacc-task[data-task-id="{ids[2]}"].tacc-open')
        failed.wait_for(timeout=10_000)
        failed.locator(".tacc-log-text:has-text('element fail')").wait_for(timeout=30_000)
        assert f"[2] of array #{array_id}" in failed.locator(".tacc-element-mark").inner_text()
        assert failed.locator("button:has-text('Resubmit')").count() == 0  # an element belongs to its array
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-element.png"))

        # Cancel all: the running and the waiting element end cancelled; ended ones keep their state
        row.locator("button.tacc-cancel-all").click()
        page.locator(".jp-Dialog button.jp-mod-warn:has-text('Cancel all')").click()
        _wait_counts(page, array_id, {"done": 2, "running": 0, "waiting": 0, "failed": 1})
        for tid, want in zip(ids, ["succeeded", "succeeded", "failed", "cancelled", "cancelled"], strict=True):
            assert wait_status(hub, token, tid, {want}, timeout=60)["status"] == want
        page.wait_for_selector(f'{TOP}.tacc-array[data-array-id="{array_id}"][data-status="failed"]', timeout=30_000)
        assert row.locator("button.tacc-cancel-all").is_disabled()
        assert "2 cancelled" in row.locator(".tacc-counts").inner_text()

        # a narrow panel: still nothing past its edges
        set_panel_width(page, 300)
        page.wait_for_timeout(500)
        _tidy(page, "narrow panel")
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-narrow.png"))
        assert page.js_errors == []
    finally:
        page.context.close()
        api(hub, token, "POST", f"/api/arrays/{array_id}/cancel")


def test_a_pipeline_is_one_row_its_steps_in_order_with_what_each_waits_for(lab_hub: HubProcess,  # noqa: F811
                                                                          browser):
    hub = lab_hub
    token = hub.token(USER, TASKS)
    code = _code(hub, token, {"step.py": "import sys, time\nprint('step', sys.argv[1], flush=True)\n"
                                         "time.sleep(float(sys.argv[2]))\n"})
    body = {"name": "prep-train", "steps": [
        {"name": "prepare", "spec": _spec("prepare", code, ["python3", "step.py", "prepare", "12"])},
        {"name": "train", "needs": ["prepare"], "spec": _spec("train", code, ["python3", "step.py", "train", "300"])}]}
    r = api(hub, token, "POST", "/api/pipelines", json=body)
    assert r.status_code == 201, r.text
    p = r.json()
    pid = p["id"]
    steps = {s["name"]: s for s in p["steps"]}
    prepare, train = steps["prepare"]["task_id"], steps["train"]["task_id"]
    page = _open_lab(browser, hub)
    try:
        row = page.locator(f'{TOP}.tacc-pipeline[data-pipeline-id="{pid}"]')
        row.wait_for(timeout=60_000)
        tops = page.locator(TOP).evaluate_all("els => els.map(e => e.dataset.taskId || '')")
        assert str(prepare) not in tops and str(train) not in tops, tops  # its steps are in its row only
        chain = row.locator(".tacc-chain-step").evaluate_all("els => els.map(e => e.dataset.step)")
        assert chain == ["prepare", "train"]

        row.locator("> .tacc-task-head").click()
        step_rows = row.locator("li.tacc-step")
        step_rows.nth(1).wait_for(timeout=10_000)
        assert [step_rows.nth(i).get_attribute("data-step") for i in range(2)] == ["prepare", "train"]
        train_row = row.locator('li.tacc-step[data-step="train"]')
        assert train_row.get_attribute("data-status") == "pending"
        assert train_row.locator(".tacc-step-waits").inner_text() == "waits for prepare"
        _tidy(page, "pipeline open")
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-pipeline.png"))

        # a step opens as its task's row
        row.locator('li.tacc-step[data-step="prepare"] > button.tacc-step-head').click()
        opened = row.locator(f'li.tacc-task[data-task-id="{prepare}"].tacc-open')
        opened.locator(".tacc-log-text:has-text('step prepare')").wait_for(timeout=60_000)

        # prepare succeeds, then train runs; Cancel all ends train
        assert wait_status(hub, token, prepare, {"succeeded"}, timeout=90)["status"] == "succeeded"
        wait_status(hub, token, train, {"running"}, timeout=60)
        page.wait_for_selector(f'{TOP}.tacc-pipeline[data-pipeline-id="{pid}"] '
                               'li.tacc-step[data-step="train"][data-status="running"]', timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-pipeline-running.png"))
        row.locator("button.tacc-cancel-all").first.click()
        page.locator(".jp-Dialog button.jp-mod-warn:has-text('Cancel all')").click()
        assert wait_status(hub, token, train, {"cancelled"}, timeout=60)["status"] == "cancelled"
        page.wait_for_selector(f'{TOP}.tacc-pipeline[data-pipeline-id="{pid}"] '
                               'li.tacc-step[data-step="train"][data-status="cancelled"]', timeout=30_000)
        assert api(hub, token, "GET", f"/api/pipelines/{pid}").json()["status"] == "cancelled"
        page.screenshot(path=str(ARTIFACTS / "lab-arrays-pipeline-cancelled.png"))
        assert page.js_errors == []
    finally:
        page.context.close()
        api(hub, token, "POST", f"/api/pipelines/{pid}/cancel")


def test_others_arrays_are_404_through_the_relay(lab_hub: HubProcess):  # noqa: F811
    """Bob, through his own Jupyter server's relay, cannot see or cancel alice's array."""
    hub = lab_hub
    alice = hub.token(USER, TASKS)
    code = _code(hub, alice, {"el.py": ELEMENT})
    r = api(hub, alice, "POST", "/api/tasks", json=_spec("alice-only", code, ["python3", "el.py", "{value}"],
                                                         array={"values": ["sleep", "sleep"], "max_running": 1}))
    assert r.status_code == 201, r.text
    array_id = r.json()["array"]["id"]
    try:
        bob = hub.login("bob")
        xsrf = {"X-XSRFToken": bob.cookies.get("_xsrf", path="/hub/") or ""}
        started = bob.post(f"{hub.url}/hub/api/users/bob/server", headers=xsrf, timeout=60)
        assert started.status_code in (201, 202, 400), started.text  # 400: already running
        base = f"{hub.url}/user/bob/tacc/api"
        probe = None
        for _ in range(120):  # his server up, and his browser session on it (the hub's OAuth, as Lab's page does)
            lab = bob.get(f"{hub.url}/user/bob/lab", timeout=30)
            if lab.status_code == 200 and "/user/bob/lab" in lab.url:
                probe = bob.get(f"{base}/arrays", timeout=30)
                if probe.status_code == 200:
                    break
            time.sleep(1)
        else:
            pytest.fail(f"bob's relay did not answer: {probe.status_code if probe else lab.status_code}")
        assert array_id not in [a["id"] for a in probe.json()["arrays"]]
        assert bob.get(f"{base}/arrays/{array_id}", timeout=30).status_code == 404
        xsrf_user = {"X-XSRFToken": bob.cookies.get("_xsrf", path="/user/bob/") or ""}
        assert xsrf_user["X-XSRFToken"], bob.cookies
        cancel = bob.post(f"{base}/arrays/{array_id}/cancel", headers=xsrf_user, timeout=30)
        assert cancel.status_code == 404, cancel.text
        left = api(hub, alice, "GET", f"/api/arrays/{array_id}").json()
        assert left["waiting"] + left["running"] == 2, left  # nothing was cancelled
    finally:
        api(hub, alice, "POST", f"/api/arrays/{array_id}/cancel")
