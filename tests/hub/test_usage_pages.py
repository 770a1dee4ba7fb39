"""The service's pages in a real browser behind the real hub: landing, admin (each section), "My usage", 403, 404.

Screenshots go to test-artifacts/. Checked in the page: the hub's stylesheet is loaded and applies,
the charts' axes have at least three ticks with every label inside the canvas and none overlapping,
no text overflows its box and nothing is wider than the viewport, and the queue's GPUs cells are
filled. ``/api/usage`` is attacked with every parameter that could name another user.
"""

from __future__ import annotations

import csv
import io
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
        page.wait_for_selector("#audit-msg >> text=/events? shown, newest first/")  # the real audit log
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


def test_the_audit_section_shows_real_admin_actions_as_text_filtered_and_paged(hub: HubProcess, browser):
    """Admin actions done through the real API show up in the admin page's audit section, before -> after, with
    hostile text as text; the filters and the "Older" page ask the real audit API."""
    admin = hub.token("admin", TASKS)
    hostile = "<img src=x onerror=alert(1)>"
    minted = api(hub, admin, "POST", "/api/admin/tokens", json={"user": "alice", "note": hostile})
    assert minted.status_code == 201, minted.text
    token_id = minted.json()["id"]
    name = "audit-page-user"
    for cap in range(1, 53):  # more than one page (50) of quota edits
        assert api(hub, admin, "PUT", f"/api/admin/quotas/user/{name}", json={"max_gpus": cap}).status_code == 200
    assert api(hub, admin, "DELETE", f"/api/admin/tokens/{token_id}").status_code in (200, 204)
    page = browser_login(browser, hub, "admin", "/services/tacc/admin")
    try:
        page.wait_for_selector("#audit-table tbody tr")
        rows = page.locator("#audit-table tbody tr")
        newest = rows.first.locator("td").all_inner_texts()
        assert newest[1:4] == ["admin", "token_revoke", f"token:{token_id}"], newest
        assert rows.count() == 50 and page.locator("#audit-older").is_visible()
        edit = page.locator("#audit-table tbody tr", has_text=f"quota:user/{name}").first.locator("td")
        assert edit.nth(2).inner_text() == "quota_set" and edit.nth(4).inner_text().strip() == "max_gpus: 51 → 52"
        page.click("#audit-older")
        mint = page.locator("#audit-table tbody tr", has_text="token_create").filter(has_text=f"token:{token_id}")
        mint.wait_for(timeout=15_000)
        assert hostile in mint.inner_text()  # the note, shown as text
        assert page.locator("#audit-table img").count() == 0
        first_cap = page.locator("#audit-table tbody tr", has_text=f"quota:user/{name}").last.locator("td")
        assert first_cap.nth(4).inner_text().strip().startswith("∅ → "), first_cap.all_inner_texts()
        page.fill("#a-action", "token_create")
        page.fill("#a-target", f"token:{token_id}")
        page.click("#audit-form button[type=submit]")
        page.wait_for_function("() => document.querySelectorAll('#audit-table tbody tr').length === 1")
        assert page.locator("#audit-table tbody tr td").nth(2).inner_text() == "token_create"
        assert page.locator("#audit-older").is_hidden()
        page.fill("#a-action", "")
        page.fill("#a-target", "")
        page.fill("#a-since", "2999-01-01")  # nothing that recent
        page.click("#audit-form button[type=submit]")
        page.wait_for_selector("#audit-msg >> text=No audit events match")
        assert overflowing(page) == []
        page.fill("#a-since", "")
        page.click("#audit-form button[type=submit]")
        page.wait_for_function("() => document.querySelectorAll('#audit-table tbody tr').length === 50")
        page.locator("#audit").screenshot(path=str(ARTIFACTS / "admin-audit-events.png"))
        assert page.js_errors == []
    finally:
        page.context.close()
        api(hub, admin, "DELETE", f"/api/admin/quotas/user/{name}")


def test_pages_answer_a_request_id_of_their_own_choosing(hub: HubProcess):
    """The pages carry a request id as the API does: a well-formed one is kept, anything else replaced."""
    s = hub.login("alice")
    plain = s.get(hub.service_url + "/", timeout=30)
    assert plain.status_code == 200 and len(plain.headers["X-Request-Id"]) == 16, plain.headers
    int(plain.headers["X-Request-Id"], 16)
    kept = s.get(hub.service_url + "/usage", headers={"X-Request-Id": "trace-0123456789"}, timeout=30)
    assert kept.headers["X-Request-Id"] == "trace-0123456789"
    for hostile in ("<script>alert(1)</script>", "a b c d e f g h", "x" * 200, "'; DROP TABLE audit_events; --"):
        r = s.get(hub.service_url + "/admin", headers={"X-Request-Id": hostile}, timeout=30)
        assert r.status_code == 403 and r.headers["X-Request-Id"] != hostile and len(r.headers["X-Request-Id"]) == 16
