"""A real Prometheus (Debian's ``prometheus``) scrapes the service as sites run it: under a real JupyterHub,
at ``/services/tacc/metrics``, as the hub service ``prometheus`` whose token holds ``custom:tacc:metrics``
(``TACC_PROMETHEUS_TOKEN``, tacc_hub/hub/config.py), with a scrape config made from
deploy/prometheus/prometheus.yml (its shape kept: only targets, scheme, token file and interval change).

What holds: both targets of the example (the service's and the hub's own metrics) are up; a task run
through the hub shows in a series queried back through Prometheus's HTTP API; who may read /metrics
through the hub (a user token with only the metrics scope: yes; a user's tasks token: 403; nothing:
401; a browser logged in through the hub: by its scopes); every PromQL expression of
deploy/grafana/tacc-hub.json is valid to Prometheus and names only series (and grouping labels) the
service exposes, once a task has run.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tacc_hub.snapshot import digest_of, pack
from tests.e2e.conftest import free_port
from tests.hub.conftest import HubProcess

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "tacc-hub.json"
PROMETHEUS = "/usr/bin/prometheus"
METRICS = "custom:tacc:metrics"
TASKS = "custom:tacc:tasks"


class Prometheus:
    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-3000:]}")
            try:
                if requests.get(self.url + "/-/ready", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus was not ready in 60 s: {self.log.read_text()[-3000:]}")

    def api(self, path: str, **params: str) -> Any:
        r = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=30)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (path, params, r.text[:500])
        return body["data"]

    def value(self, expr: str) -> float | None:
        result = self.api("query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def scrape_config(hub: HubProcess, token_file: Path) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml pointed at the test's hub: the same jobs, paths and authorization."""
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = "1s"
    for job in config["scrape_configs"]:
        assert job["authorization"]["type"] == "Bearer" and "credentials_file" in job["authorization"]
        job["authorization"]["credentials_file"] = str(token_file)
        job["scheme"] = "http"
        job["static_configs"] = [{"targets": [f"127.0.0.1:{hub.port}"]}]
    return config


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Prometheus, str]]:
    token = secrets.token_hex(32)
    hub = HubProcess(tmp_path_factory.mktemp("hub"), TACC_PROMETHEUS_TOKEN=token).start()
    prom: Prometheus | None = None
    try:
        work = tmp_path_factory.mktemp("prometheus")
        token_file = work / "tacc-hub.token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        prom = Prometheus(work, scrape_config(hub, token_file))
        yield hub, prom, token
    finally:
        if prom is not None:
            prom.stop()
        hub.stop()


def api(hub: HubProcess, token: str, method: str, path: str, **kw: Any) -> requests.Response:
    return requests.request(method, hub.service_url + path, headers={"Authorization": f"token {token}"},
                            timeout=60, **kw)


def submit(hub: HubProcess, token: str, entrypoint: str) -> int:
    with tempfile.TemporaryDirectory() as empty:
        archive = pack(empty)
    digest = digest_of(archive)
    assert api(hub, token, "PUT", f"/api/code/{digest}", data=archive).status_code in (200, 201)
    spec = {"name": "metrics", "entrypoint": entrypoint, "resources": {"time_limit": "5m", "gpus_per_node": 1},
            "code": {"kind": "snapshot", "digest": digest, "size": len(archive)}}
    r = api(hub, token, "POST", "/api/tasks", json=spec)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def wait_status(hub: HubProcess, token: str, tid: int, wanted: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = api(hub, token, "GET", f"/api/tasks/{tid}").json()
        if body.get("status") in wanted:
            return body
        time.sleep(0.2)
    raise AssertionError(f"task {tid} did not reach {wanted}: {body}")


def run_task(hub: HubProcess, token: str, entrypoint: str) -> dict[str, Any]:
    return wait_status(hub, token, submit(hub, token, entrypoint), {"succeeded", "failed", "cancelled", "lost"})


def wait_for(prom: Prometheus, expr: str, wanted: float, timeout: float = 60) -> float | None:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = prom.value(expr)
        if got == wanted:
            return got
        time.sleep(0.5)
    return got


def test_prometheus_scrapes_the_service_and_the_hub_as_configured(site: tuple[HubProcess, Prometheus, str]) -> None:
    _, prom, _ = site
    deadline = time.monotonic() + 60
    health: dict[str, str] = {}
    while time.monotonic() < deadline:
        targets = prom.api("targets")["activeTargets"]
        health = {t["labels"]["job"]: t["health"] for t in targets}
        if health == {"tacc": "up", "jupyterhub": "up"}:
            break
        time.sleep(0.5)
    assert health == {"tacc": "up", "jupyterhub": "up"}, prom.api("targets")
    (tacc,) = [t for t in prom.api("targets")["activeTargets"] if t["labels"]["job"] == "tacc"]
    assert tacc["scrapeUrl"].endswith("/services/tacc/metrics") and not tacc["lastError"]


def test_a_task_shows_in_a_series_queried_back(site: tuple[HubProcess, Prometheus, str]) -> None:
    hub, prom, _ = site
    alice = hub.token("alice", [TASKS])
    assert wait_for(prom, 'tacc_task_events_total{job="tacc",kind="succeeded"}', 0) == 0
    done = run_task(hub, alice, "echo metrics")
    assert done["status"] == "succeeded", done
    assert wait_for(prom, 'tacc_task_events_total{job="tacc",kind="succeeded"}', 1) == 1
    assert wait_for(prom, 'tacc_tasks{job="tacc",state="succeeded"}', 1) == 1
    assert wait_for(prom, 'tacc_task_events_total{job="tacc",kind="started"}', 1) == 1
    assert wait_for(prom, 'sum(tacc_submit_duration_seconds_count{job="tacc",route="/api/tasks"})', 1) == 1
    assert (prom.value('tacc_executor_command_duration_seconds_count{job="tacc",command="launcher-start"}') or 0) >= 1
    assert prom.value('tacc_service_starts_total{job="tacc"}') == 1


def test_who_may_read_metrics_through_the_hub(site: tuple[HubProcess, Prometheus, str]) -> None:
    hub, _, prom_token = site
    url = hub.service_url + "/metrics"
    assert requests.get(url, timeout=30).status_code == 401
    alice = hub.token("alice", [TASKS])
    refused = requests.get(url, headers={"Authorization": f"Bearer {alice}"}, timeout=30)
    assert refused.status_code == 403 and "tacc_" not in refused.text
    assert METRICS in refused.json()["message"]
    # a hub admin may make a token that holds the metrics scope only: it reads /metrics, and nothing else
    reader = hub.token("admin", [METRICS])
    ok = requests.get(url, headers={"Authorization": f"Bearer {reader}"}, timeout=30)
    assert ok.status_code == 200 and "tacc_tasks" in ok.text
    assert api(hub, reader, "GET", "/api/tasks").status_code == 403
    # alice cannot give herself the scope: the hub refuses to make such a token for her
    s = hub.login("alice")
    r = s.post(f"{hub.url}/hub/api/users/alice/tokens", json={"scopes": [METRICS]},
               headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}, timeout=30)
    assert r.status_code in (400, 403), r.text
    # a browser logged in to the service through the hub's OAuth: the cookie's scopes decide
    for user, wanted in (("alice", 403), ("admin", 200)):
        browser = hub.login(user)
        assert browser.get(hub.service_url + "/", timeout=30).status_code == 200  # the service's cookie now
        assert browser.get(url, timeout=30).status_code == wanted, user
    # the prometheus service's own token, as the scrape config sends it
    assert requests.get(url, headers={"Authorization": f"Bearer {prom_token}"}, timeout=30).status_code == 200


# --- the dashboard's queries name only what the service exposes ----------------------------------------

_FUNCS_AND_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
                    "offset", "inf", "nan"}


def _exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    out += [v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            for v in dash["templating"]["list"] if v["type"] == "query"]
    return out


def metric_names(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, labels it groups by) of a PromQL expression: strings, label matchers and ranges taken
    out; a word followed by ``(`` is a function or aggregation; ``label_values(M, L)`` names M and L."""
    lv = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", expr.strip())
    if lv:
        return {lv.group(1)}, {lv.group(2)}
    groups: set[str] = set()
    for clause in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        groups |= {g.strip() for g in clause.split(",") if g.strip()}
    rest = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    rest = re.sub(r"\{[^}]*\}", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    rest = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    names = {m.group(1) for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\b(?!\s*\()", rest)}
    return {n for n in names if n.lower() not in _FUNCS_AND_WORDS}, groups


def test_the_dashboard_names_only_series_the_service_exposes(site: tuple[HubProcess, Prometheus, str]) -> None:
    hub, prom, token = site
    alice = hub.token("alice", [TASKS])
    tid = submit(hub, alice, "sleep 120")  # running while scraped: every labelled series has a sample
    wait_status(hub, alice, tid, {"running"})
    text = requests.get(hub.service_url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30).text
    assert api(hub, alice, "POST", f"/api/tasks/{tid}/cancel").status_code in (200, 202)
    labels: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels.setdefault(s.name, set()).update(s.labels)
    exprs = _exprs()
    assert len(exprs) >= 25
    named: set[str] = set()
    for expr in exprs:
        names, groups = metric_names(expr)
        assert names, expr
        for name in names:
            assert name in labels, f"{name} (in {expr!r}) is not a series of /metrics"
            named.add(name)
        have = set().union(*(labels[n] for n in names)) | {"job", "instance"}
        assert groups <= have, f"{expr!r} groups by {groups - have}, which none of {names} has"
        # and Prometheus itself takes the expression (Grafana's $job: the example's job; its label_values(M, L):
        # the series M, which must have the label L)
        if expr.startswith("label_values("):
            (name,) = names
            assert prom.api("series", **{"match[]": name})[0][groups.pop()] == "tacc"
        else:
            prom.api("query", query=expr.replace("$job", "tacc"))
    # every family the issue asks for is on the dashboard
    for wanted in ("tacc_tasks", "tacc_queue_length", "tacc_queue_oldest_wait_seconds", "tacc_node_gpus_allocated",
                   "tacc_node_gpus_free", "tacc_group_gpus_allocated", "tacc_user_gpus_allocated",
                   "tacc_group_gpu_hours_used", "tacc_scheduling_pass_duration_seconds_bucket",
                   "tacc_api_request_duration_seconds_bucket", "tacc_submit_duration_seconds_bucket",
                   "tacc_executor_command_duration_seconds_bucket", "tacc_executor_command_failures_total",
                   "tacc_log_streams_open", "tacc_service_starts_total", "tacc_recovery_readopted_tasks",
                   "tacc_recovery_lost_tasks_total", "tacc_task_events_total"):
        assert wanted in named, f"the dashboard shows nothing of {wanted}"


def test_the_expression_parser_of_this_test() -> None:
    names, groups = metric_names('histogram_quantile(0.99, sum by (le, route) (rate(x_bucket{job="$job", '
                                 'route!~".*/logs|a{b}"}[5m])))')
    assert names == {"x_bucket"} and groups == {"le", "route"}
    assert metric_names("time() - max(a_seconds{j=\"t\"}) / 2^30")[0] == {"a_seconds"}
    assert metric_names("label_values(tacc_service_start_time_seconds, job)") == (
        {"tacc_service_start_time_seconds"}, {"job"})
