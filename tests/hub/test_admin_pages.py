"""The admin pages behind the hub: admins only, quotas edited in a real browser, usage charts' data."""

from __future__ import annotations

import re
import tempfile

import requests

from tacc_hub.snapshot import digest_of, pack

from .conftest import ARTIFACTS, HubProcess, browser_login
from .test_hub_auth import TASKS, api, submit, wait_status


def _submit_array(hub: HubProcess, token: str, name: str, array: object, gpus: int = 1) -> dict:
    """An array of sleeping tasks (the service's answer: its first element with ``array`` and ``task_ids``)."""
    with tempfile.TemporaryDirectory() as empty:
        archive = pack(empty)
    digest = digest_of(archive)
    assert api(hub, token, "PUT", f"/api/code/{digest}", data=archive).status_code in (200, 201)
    spec = {"name": name, "entrypoint": "sleep 60", "resources": {"time_limit": "5m", "gpus_per_node": gpus},
            "code": {"kind": "snapshot", "digest": digest, "size": len(archive)}, "array": array}
    r = api(hub, token, "POST", "/api/tasks", json=spec)
    assert r.status_code == 201, r.text
    return r.json()


def test_non_admins_get_403_on_the_admin_pages(hub: HubProcess):
    s = hub.login("bob")
    r = s.get(hub.service_url + "/admin", timeout=30)
    assert r.status_code == 403 and "not one" in r.text
    bob = hub.token("bob", TASKS)
    for path in ("/api/admin/usage", "/api/admin/quotas", "/api/admin/groups"):
        assert api(hub, bob, "GET", path).status_code == 403, path
    assert requests.get(hub.service_url + "/admin", allow_redirects=False, timeout=30).status_code == 302  # to login


def test_an_admin_lowers_a_quota_in_the_browser_and_the_users_next_submit_is_refused(hub: HubProcess, browser):
    page = browser_login(browser, hub, "admin", "/services/tacc/admin")
    try:
        page.wait_for_url("**/services/tacc/admin")
        page.wait_for_selector("#cluster-summary:not(:empty)")
        page.select_option("#quota-form select[name=kind]", "user")
        page.fill("#quota-form input[name=name]", "alice")
        page.fill("#quota-form input[name=max_gpus]", "-2")
        page.click("#quota-form button[type=submit]")
        page.wait_for_selector("#quota-msg.error")
        assert "a number >= 0" in page.inner_text("#quota-msg")  # checked in the page...
        page.fill("#quota-form input[name=max_gpus]", "1")
        page.fill("#quota-form input[name=guaranteed_gpus]", "3")
        page.click("#quota-form button[type=submit]")
        page.wait_for_selector("#quota-msg.error >> text=guarantee")  # ...and by the service (guarantee > cap)
        page.fill("#quota-form input[name=guaranteed_gpus]", "")
        page.click("#quota-form button[type=submit]")
        page.wait_for_selector("#quota-msg.done")
        row = page.locator('#quota-table tr[data-kind="user"][data-name="alice"]')
        assert re.split(r"\s+", row.inner_text().strip())[:3] == ["user", "alice", "1"]
        page.screenshot(path=str(ARTIFACTS / "admin-quota-lowered.png"), full_page=True)
        assert page.js_errors == []

        alice = hub.token("alice", TASKS)
        spec_resp = api(hub, alice, "POST", "/api/tasks", json={
            "name": "too-big", "entrypoint": "true", "resources": {"gpus_per_node": 2},
            "code": {"kind": "git", "url": "https://example.org/x.git", "commit": "abcdef1"}})
        assert spec_resp.status_code in (403, 422), spec_resp.text
        assert "needs 2 GPUs; user alice may hold at most 1 (1 over)" in spec_resp.json()["message"]
    finally:
        page.context.close()
        admin = hub.token("admin", TASKS)
        api(hub, admin, "DELETE", "/api/admin/quotas/user/alice")


def test_usage_counts_gpu_hours_by_user_and_group(hub: HubProcess):
    admin, alice = hub.token("admin", TASKS), hub.token("alice", TASKS)
    assert api(hub, admin, "PUT", "/api/admin/users/alice/group", json={"group": "lab-a"}).status_code == 200
    try:
        tid = submit(hub, alice, "sleep 1", name="gpu-user", gpus=1)
        wait_status(hub, alice, tid, {"succeeded"})
        usage = api(hub, admin, "GET", "/api/admin/usage?days=2").json()
        assert len(usage["days"]) == 2 and usage["unit"] == "GPU-hours"
        assert usage["users"]["alice"][-1] > 0.9 / 3600  # one GPU for about a second, today
        assert usage["groups"]["lab-a"][-1] >= usage["users"]["alice"][-1]
        assert api(hub, admin, "GET", "/api/admin/usage?days=0").status_code == 400
    finally:
        api(hub, admin, "DELETE", "/api/admin/users/alice/group")


def test_the_queue_shows_an_array_as_one_row_that_opens_to_its_elements(hub: HubProcess, browser):
    alice, admin = hub.token("alice", TASKS), hub.token("admin", TASKS)
    sub = _submit_array(hub, alice, "grp-sweep", {"range": "0-5", "max_running": 1})
    array_id, ids = sub["array"]["id"], sub["task_ids"]
    assert len(ids) == 6
    page = browser_login(browser, hub, "admin", "/services/tacc/admin")
    try:
        wait_status(hub, alice, ids[0], {"running"}, timeout=60)  # max_running 1: the five others wait
        page.wait_for_url("**/services/tacc/admin")
        head = page.locator(f'#queue-table tr.array[data-array-id="{array_id}"]')
        head.wait_for(timeout=30_000)
        page.wait_for_function(  # the counts come from the service's array (1 running, 5 waiting)
            "id => /1 running, 5 waiting/.test(document.querySelector(`#queue-table tr.array[data-array-id='${id}']`)"
            "?.innerText || '')", arg=array_id, timeout=30_000)
        cells = [c.strip() for c in head.locator("td").all_inner_texts()]
        assert cells[2] == "alice" and cells[4] == "grp-sweep[6]" and cells[5] == "1 each" and cells[6] == "1", cells
        # one row for the array: none of its elements on a row of its own while it is closed
        own_rows = page.locator("#queue-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.taskId || '')")
        assert not {str(i) for i in ids} & set(own_rows), own_rows
        page.screenshot(path=str(ARTIFACTS / "admin-queue-array-closed.png"), full_page=True)

        head.locator("button.toggle").click()
        elements = page.locator(f'#queue-table tr.element[data-array-id="{array_id}"]')
        page.wait_for_function(
            "id => document.querySelectorAll(`#queue-table tr.element[data-array-id='${id}']`).length === 5",
            arg=array_id, timeout=10_000)
        assert head.locator("button.toggle").get_attribute("aria-expanded") == "true"
        shown = sorted(int(elements.nth(i).get_attribute("data-task-id") or 0) for i in range(5))
        assert shown == ids[1:]
        assert re.match(r"\[1\] \d+", elements.first.locator("td").nth(1).inner_text().strip())
        page.wait_for_timeout(5500)  # the queue is redrawn every 5 s: what is open stays open
        assert elements.count() == 5
        page.screenshot(path=str(ARTIFACTS / "admin-queue-array-open.png"), full_page=True)
        head.locator("button.toggle").click()
        page.wait_for_function("id => !document.querySelector(`#queue-table tr.element[data-array-id='${id}']`)",
                               arg=array_id, timeout=10_000)
        assert page.js_errors == []
    finally:
        page.context.close()
        api(hub, admin, "POST", f"/api/arrays/{array_id}/cancel")
        api(hub, alice, "POST", f"/api/arrays/{array_id}/cancel")
