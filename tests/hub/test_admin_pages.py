"""The admin pages behind the hub: admins only, quotas edited in a real browser, usage charts' data."""

from __future__ import annotations

import re

import requests

from .conftest import ARTIFACTS, HubProcess, browser_login
from .test_hub_auth import TASKS, api, submit, wait_status


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
