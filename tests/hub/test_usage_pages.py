"""The service's pages in a real browser behind the real hub: landing, admin (each section), "My usage", 403, 404.

Screenshots go to test-artifacts/. Checked in the page: the hub's stylesheet is loaded and applies,
the charts' axes have at least three ticks with every label inside the canvas and none overlapping,
no text overflows its box and nothing is wider than the viewport, and the queue's GPUs cells are
filled. ``/api/usage`` is attacked with every parameter that could name another user.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from .conftest import ARTIFACTS, BIN, HubProcess, browser_login
from .page_checks import assert_readable_chart, hub_css_applied, overflowing
from .test_admin_pages import _submit_array
from .test_hub_auth import TASKS, api, submit, wait_status


def _styled(page) -> None:
    css = hub_css_applied(page)
    assert css["sheet"], css
    assert css["navbar"] == "flex" and css["bsVar"], css  # Bootstrap's .navbar and its variables apply
    assert "Times" not in css["bodyFont"], css


@pytest.fixture(scope="module")
def gpu_history(hub: HubProcess) -> dict[str, int]:
    """alice ran a GPU task (and bob one, in another group) before the pages are looked at."""
    alice, bob, admin = hub.token("alice", TASKS), hub.token("bob", TASKS), hub.token("admin", TASKS)
    assert api(hub, admin, "PUT", "/api/admin/users/alice/group", json={"group": "lab-a"}).status_code == 200
    ids = {"alice": submit(hub, alice, "sleep 2", name="train-small", gpus=2),
           "bob": submit(hub, bob, "sleep 1", name="bobs-secret", gpus=1)}
    for who, tid in ids.items():
        wait_status(hub, alice if who == "alice" else bob, tid, {"succeeded"})
    yield ids
    api(hub, admin, "DELETE", "/api/admin/users/alice/group")


def test_the_landing_page_is_styled_and_lists_the_users_tasks(hub: HubProcess, browser, gpu_history):
    page = browser_login(browser, hub, "alice", "/services/tacc/")
    try:
        page.wait_for_selector("#task-table")
        _styled(page)
        assert "Signed in as alice (user)" in page.inner_text("#who")
        names = page.locator("#task-table tbody td.tacc-name").all_inner_texts()
        assert "train-small" in names and "bobs-secret" not in names
        nav = page.locator("#tacc-nav").inner_text()
        assert "My usage" in nav and "Admin" not in nav  # not an admin
        assert overflowing(page) == []
        page.screenshot(path=str(ARTIFACTS / "landing.png"), full_page=True)
        assert page.js_errors == []
    finally:
        page.context.close()


def test_the_usage_command_reads_the_numbers_the_api_shows(hub: HubProcess, gpu_history):
    """``tacc-hub usage --csv`` on the hub's store and ``/api/admin/usage?format=csv``: the same rows."""
    admin = hub.token("admin", TASKS)
    r = api(hub, admin, "GET", "/api/admin/usage?days=1&format=csv")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/csv")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    out = subprocess.run([str(BIN / "tacc-hub"), "usage", "--since", today, "--csv", f"--state-dir={hub.state_dir}"],
                         capture_output=True, text=True, timeout=120, cwd=hub.state_dir,
                         env={**os.environ, "TACC_DB_URL": ""}, check=True).stdout
    def rows(text: str) -> dict[tuple[str, str, str], tuple[float, int]]:
        return {(x["day"], x["user"], x["group"]): (float(x["gpu_hours"]), int(x["tasks"]))
                for x in csv.DictReader(io.StringIO(text))}
    cli_rows, api_rows = rows(out), rows(r.text)
    assert cli_rows.keys() == api_rows.keys() and (today, "alice", "lab-a") in cli_rows, (out, r.text)
    for key, (hours, n) in cli_rows.items():
        assert abs(hours - api_rows[key][0]) < 1e-3 and n == api_rows[key][1], (key, out, r.text)
    json_usage = api(hub, admin, "GET", "/api/admin/usage?days=1").json()
    assert abs(sum(h for h, _ in cli_rows.values()) - sum(v[-1] for v in json_usage["users"].values())) < 1e-3


def test_the_403_and_404_pages_are_the_styled_error_page(hub: HubProcess, browser):
    page = browser_login(browser, hub, "bob", "/services/tacc/admin")
    try:
        page.wait_for_selector("#error-card")
        resp = page.goto(hub.service_url + "/admin")
        assert resp is not None and resp.status == 403
        assert page.inner_text("#error-status") == "403"
        assert "bob is not one" in page.inner_text("#error-message")
        _styled(page)
        assert page.evaluate("getComputedStyle(document.querySelector('#error-card')).borderRadius") != "0px"  # .card
        assert overflowing(page) == []
        page.screenshot(path=str(ARTIFACTS / "error-403.png"), full_page=True)
        resp = page.goto(hub.service_url + "/no-such-page")
        assert resp is not None and resp.status == 404 and page.inner_text("#error-status") == "404"
        _styled(page)
        page.screenshot(path=str(ARTIFACTS / "error-404.png"), full_page=True)
        # the API's own 404 stays JSON
        r = requests.get(hub.service_url + "/api/no-such-thing", timeout=30,
                         headers={"Authorization": f"token {hub.token('bob', TASKS)}"})
        assert r.status_code == 404 and r.headers["Content-Type"].startswith("application/json")
    finally:
        page.context.close()


def test_the_admin_page_reads_at_a_glance(hub: HubProcess, browser, gpu_history):
    alice, bob = hub.token("alice", TASKS), hub.token("bob", TASKS)
    # something in the queue: alice holds all four GPUs, bob's task and alice's array wait behind it
    hog = submit(hub, alice, "sleep 120", name="hog", gpus=4)
    wait_status(hub, alice, hog, {"running"})
    waiting = submit(hub, bob, "sleep 1", name="waits", gpus=1)
    arr = _submit_array(hub, alice, "sweep", {"range": "0-2"})
    page = browser_login(browser, hub, "admin", "/services/tacc/admin")
    try:
        page.wait_for_selector("body[data-loaded='1']")
        page.wait_for_selector(f"#queue-table tr[data-task-id='{waiting}']")
        page.wait_for_selector(f"#queue-table tr.array[data-array-id='{arr['array']['id']}']")
        _styled(page)
        for canvas in ("chart-groups", "chart-users", "chart-util", "chart-wait"):
            assert_readable_chart(page, canvas)
        groups = page.evaluate("Chart.getChart(document.getElementById('chart-groups')).data.datasets"
                               ".map(d => d.label)")
        assert "lab-a" in groups, groups
        # every queue row says how many GPUs and nodes, and the owner's group
        rows = page.locator("#queue-table tbody tr").evaluate_all(
            "rows => rows.map(r => ({gpus: r.querySelector('td.gpus').textContent.trim(),"
            " nodes: r.querySelector('td.nodes').textContent.trim(), group: r.cells[3].textContent.trim()}))")
        assert rows and all(r["gpus"] and r["nodes"] and r["group"] for r in rows), rows
        bob_row = page.locator(f"#queue-table tr[data-task-id='{waiting}'] td").all_inner_texts()
        assert bob_row[2:7] == ["bob", "default", "waits", "1", "1"], bob_row
        top = page.locator("#top-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.user)")
        assert "alice" in top and "bob" in top
        assert page.inner_text("#audit-msg")  # the audit log, or a sentence saying it is not there
        assert overflowing(page) == []
        page.screenshot(path=str(ARTIFACTS / "admin-page.png"), full_page=True)
        for section in ("usage", "stats", "queue", "cluster", "quotas", "audit"):
            page.locator(f"#{section}").screenshot(path=str(ARTIFACTS / f"admin-{section}.png"))
        with page.expect_download() as dl:  # a click, as an admin downloads it (the cookie is good for navigations)
            page.click("#usage-csv")
        csv = Path(dl.value.path()).read_text()
        assert csv.splitlines()[0] == "day,user,group,gpu_hours,tasks" and ",alice,lab-a," in csv
        assert page.js_errors == []
    finally:
        page.context.close()
        api(hub, alice, "POST", f"/api/arrays/{arr['array']['id']}/cancel")
        for token, tid in ((alice, hog), (bob, waiting)):
            api(hub, token, "POST", f"/api/tasks/{tid}/cancel")


def test_my_usage_shows_the_period_against_the_budget_and_recent_tasks(hub: HubProcess, browser, gpu_history):
    admin = hub.token("admin", TASKS)
    assert api(hub, admin, "PUT", "/api/admin/quotas/user/alice", json={"gpu_hours": 10}).status_code == 200
    page = browser_login(browser, hub, "alice", "/services/tacc/usage")
    try:
        page.wait_for_selector("body[data-loaded='1']")
        _styled(page)
        assert "of 10 GPU-hours used this" in page.inner_text("#budget-text")
        assert page.locator("#budget-bar").is_visible()
        assert_readable_chart(page, "chart-mine")
        row = page.locator(f"#recent-table tr[data-task-id='{gpu_history['alice']}'] td").all_inner_texts()
        assert row[1] == "train-small" and row[3] == "2" and float(row[4]) > 0, row
        assert "no samples" in row[5]  # this hub's GPUs are not sampled (no nvidia-smi): said, not blank
        assert page.locator("#recent-note").is_visible()
        assert "bobs-secret" not in page.content()
        assert overflowing(page) == []
        page.screenshot(path=str(ARTIFACTS / "my-usage.png"), full_page=True)
        assert page.js_errors == []
    finally:
        page.context.close()
        api(hub, admin, "DELETE", "/api/admin/quotas/user/alice")


def test_api_usage_shows_only_the_callers_own_usage_whatever_the_parameters(hub: HubProcess, gpu_history):
    alice = hub.token("alice", TASKS)
    plain = api(hub, alice, "GET", "/api/usage").json()
    assert plain["user"] == "alice"
    quota = api(hub, alice, "GET", "/api/quota").json()
    assert abs(plain["used_gpu_hours"] - quota["used_gpu_hours"]["user"]) < 0.01
    for query in ("user=bob", "owner=bob", "all=1", "user=bob&all=1", "as=bob", "user=admin"):
        r = api(hub, alice, "GET", f"/api/usage?{query}")
        assert r.status_code == 200, (query, r.text)
        body = r.json()
        assert body["user"] == "alice", query
        assert {t["id"] for t in body["recent"]} == {t["id"] for t in plain["recent"]}, query
        assert gpu_history["bob"] not in {t["id"] for t in body["recent"]}, query
    for path in ("/api/admin/stats", "/api/admin/queue", "/api/admin/usage?format=csv"):
        assert api(hub, alice, "GET", path).status_code == 403, path
    assert api(hub, None, "GET", "/api/usage").status_code in (401, 403)


AUDIT_PAGES = {
    None: {"events": [
        {"id": 12, "at": 1796300000.0, "actor": "admin", "action": "quota.set",
         "target": "user:<img src=x onerror=alert(1)>", "task_id": None,
         "before": {"max_gpus": 4, "gpu_hours": None}, "after": {"max_gpus": 1, "gpu_hours": None},
         "detail": {}, "request_id": "r1"},
        {"id": 11, "at": 1796290000.0, "actor": "admin", "action": "task.cancel", "target": None, "task_id": 7,
         "before": None, "after": None, "detail": {}, "request_id": "r2"}], "next": 11},
    "11": {"events": [
        {"id": 3, "at": 1796200000.0, "actor": "root", "action": "token.mint", "target": "token:3", "task_id": None,
         "before": None, "after": {"user": "alice", "admin": False}, "detail": {}, "request_id": None}], "next": None},
}


def test_the_audit_section_lists_filters_and_pages_the_audit_api_as_text(hub: HubProcess, browser):
    """The audit log's answers (its contract; the API is another part's) are shown as text, filtered and paged."""
    from urllib.parse import parse_qs, urlsplit

    asked: list[dict[str, list[str]]] = []

    def audit(route) -> None:
        query = parse_qs(urlsplit(route.request.url).query)
        asked.append(query)
        route.fulfill(status=200, content_type="application/json",
                      body=json.dumps(AUDIT_PAGES[query.get("before", [None])[0]]))

    page = browser.new_context().new_page()
    page.route("**/services/tacc/api/admin/audit*", audit)
    page.goto(f"{hub.url}/hub/login?next=/services/tacc/admin")
    page.fill("#username_input", "admin")
    page.fill("#password_input", "demo")
    page.click("#login_submit")
    try:
        page.wait_for_selector("#audit-table tbody tr[data-id='12']")
        first = page.locator("#audit-table tr[data-id='12'] td").all_inner_texts()
        assert first[1:4] == ["admin", "quota.set", "user:<img src=x onerror=alert(1)>"]  # the text, as text
        assert page.locator("#audit-table img").count() == 0
        assert first[4].strip() == "max_gpus: 4 → 1"  # only what changed
        assert page.locator("#audit-table tr[data-id='11'] td").nth(3).inner_text() == "task:7"
        page.click("#audit-older")
        page.wait_for_selector("#audit-table tbody tr[data-id='3']")
        assert page.locator("#audit-table tbody tr").count() == 3 and page.locator("#audit-older").is_hidden()
        assert '{"user":"alice","admin":false}' in page.locator("#audit-table tr[data-id='3']").inner_text()
        page.fill("#a-actor", "root")
        page.fill("#a-action", "token.mint")
        page.fill("#a-since", "2026-11-01")
        page.click("#audit-form button[type=submit]")
        page.wait_for_function("() => document.querySelectorAll('#audit-table tbody tr').length === 2")
        last = asked[-1]
        assert last["actor"] == ["root"] and last["action"] == ["token.mint"] and "before" not in last
        assert float(last["since"][0]) == datetime(2026, 11, 1, tzinfo=UTC).timestamp()
        assert overflowing(page) == []
        page.locator("#audit").screenshot(path=str(ARTIFACTS / "admin-audit-events.png"))
    finally:
        page.context.close()
