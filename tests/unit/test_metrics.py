"""GET /metrics over real HTTP, in process: a real controller (fake executor, real SQLite store), the app as
``TaccHub.build`` wires it, our own tokens and a stand-in hub.

What holds: the exposition parses with prometheus_client's own parser; the counters and gauges move as
tasks are submitted, run and end; who may read it (401 without credentials, 403 without the scope, a hub
service token with the scope may); no request text becomes a label (routes are patterns, odd methods
are "other"); two services in one process keep apart registries.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import tornado.httpclient
import tornado.httpserver
from prometheus_client.parser import text_string_to_metric_families

from tacc_hub.compiler import SiteProfile
from tacc_hub.executors import FakeExecutor
from tacc_hub.executors.base import command_name
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.schema import spec_from_data
from tacc_hub.service.app import make_app
from tacc_hub.service.auth import TokenAuth, new_token
from tacc_hub.service.base import ServiceContext
from tacc_hub.service.controller import Controller
from tacc_hub.service.hubauth import HubModeAuth
from tacc_hub.service.metrics import Metrics, count_start, route_label
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tacc_hub.store import Store, TaskStatus

S = TaskStatus


class FakeHub:
    """The hub's answers for tokens (what ``HubOAuth.user_for_token`` returns); no cookie logins."""

    cookie_name = "tacc-services-cookie"

    def __init__(self, models: dict[str, dict[str, Any]]) -> None:
        self.models = models

    async def user_for_token(self, token: str, session_id: str = "", sync: bool = True) -> dict[str, Any] | None:
        return self.models.get(token)

    def get_session_id(self, handler: Any) -> str:
        return ""

    async def get_user(self, handler: Any, sync: bool = True) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Svc:
    def __init__(self, tmp: Path, hub: FakeHub | None = None, executor: FakeExecutor | None = None) -> None:
        """A service on ``tmp`` (a second one on the same ``tmp`` and ``executor``: the first one restarted)."""
        self.store = Store(f"sqlite:///{tmp / 'db.sqlite'}")
        self.store.migrate()
        codes = CodeStore(tmp / "code")
        src = tmp / "src"
        src.mkdir(exist_ok=True)
        (src / "a.py").write_text("print(1)\n")
        data = pack(src)
        self.archive = data
        self.digest = digest_of(data)
        codes.put(self.digest, data)
        site = SiteProfile(pythons={"3.11": sys.executable}, default_python="3.11", env_root=str(tmp / "envs"),
                           code_root=str(tmp / "code"), max_gpus_per_node=4)
        self.executor = executor or FakeExecutor(gpus=4)
        self.ctl = Controller(self.store, self.executor, site, FifoGang(), codes, poll_interval=0.05)
        self.metrics = Metrics()
        self.metrics.watch(self.ctl, "month")
        self.metrics.count_start(tmp)
        tokens = TokenAuth(self.store)
        auth: Any = tokens if hub is None else HubModeAuth(tokens, hub)  # type: ignore[arg-type]
        self.ctx = ServiceContext(store=self.store, controller=self.ctl, auth=auth, code_store=codes,
                                  max_code_bytes=1 << 20, max_body_bytes=1 << 20, log_poll_interval=0.05,
                                  metrics=self.metrics)
        self.admin = new_token(self.store, "root", admin=True)
        self.alice = new_token(self.store, "alice")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/services/tacc"
        self.server: tornado.httpserver.HTTPServer | None = None

    async def start(self) -> Svc:
        await self.ctl.start()
        self.server = tornado.httpserver.HTTPServer(make_app(self.ctx, "/services/tacc/"))
        self.server.listen(self.port, "127.0.0.1")
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.stop()
        await self.ctl.stop()
        self.store.close()

    def spec(self, gpus: int = 0) -> Any:
        return spec_from_data({"name": "t", "code": {"kind": "snapshot", "digest": self.digest},
                               "entrypoint": {"argv": ["python", "a.py"]}, "resources": {"gpus_per_node": gpus}})

    async def get(self, path: str, token: str | None = None, scheme: str = "Bearer",
                  method: str = "GET") -> tornado.httpclient.HTTPResponse:
        headers = {"Authorization": f"{scheme} {token}"} if token else {}
        return await tornado.httpclient.AsyncHTTPClient().fetch(
            self.url + path, method=method, headers=headers, raise_error=False,
            allow_nonstandard_methods=True)

    async def scrape(self, token: str | None = None) -> dict[str, float]:
        """Every sample as ``name{label="v",...}`` -> value, parsed by prometheus_client's parser."""
        r = await self.get("/metrics", token or self.admin)
        assert r.code == 200, r.body[:300]
        assert r.headers["Content-Type"].startswith("text/plain")
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(r.body.decode()):
            for s in fam.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
        return out


@pytest_asyncio.fixture(loop_scope="function")  # the loop the test runs on serves it
async def svc(tmp_path: Path) -> AsyncIterator[Svc]:
    s = await Svc(tmp_path).start()
    yield s
    await s.stop()


async def until(pred: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_series_move_as_tasks_run_and_end(svc: Svc) -> None:
    before = await svc.scrape()
    assert before["tacc_tasks{state=\"running\"}"] == 0
    assert before["tacc_task_events_total{kind=\"started\"}"] == 0
    assert before["tacc_service_starts_total"] == 1
    assert before["tacc_node_gpus_free{node=\"n1\",switch=\"0\"}"] == 4
    assert "process_cpu_seconds_total" in before  # the standard process collector

    rec = await svc.ctl.submit("alice", svc.spec(gpus=2))
    await until(lambda: svc.store.get(rec.id).status == S.RUNNING)
    busy = await svc.scrape()
    assert busy["tacc_tasks{state=\"running\"}"] == 1
    assert busy["tacc_task_events_total{kind=\"submitted\"}"] == 1
    assert busy["tacc_task_events_total{kind=\"started\"}"] == 1
    assert busy["tacc_node_gpus_allocated{node=\"n1\",switch=\"0\"}"] == 2
    assert busy["tacc_node_gpus_free{node=\"n1\",switch=\"0\"}"] == 2
    assert busy["tacc_user_gpus_allocated{user=\"alice\"}"] == 2
    assert busy["tacc_group_gpus_allocated{group=\"default\"}"] == 2
    assert busy["tacc_scheduling_pass_duration_seconds_count"] > before["tacc_scheduling_pass_duration_seconds_count"]

    # a second one waits for GPUs: the queue says why, and since when
    waiting = await svc.ctl.submit("bob", svc.spec(gpus=4))
    await asyncio.sleep(0.7)  # past the queue's explain_interval
    queued = await svc.scrape()
    assert queued["tacc_queue_length{reason=\"Resources\"}"] == 1
    assert queued["tacc_queue_oldest_wait_seconds{reason=\"Resources\"}"] > 0
    assert queued["tacc_queue_length{reason=\"Dependency\"}"] == 0

    svc.executor.finish(rec.id, 0)
    await until(lambda: svc.store.get(rec.id).status == S.SUCCEEDED)
    await until(lambda: svc.store.get(waiting.id).status == S.RUNNING)
    svc.executor.finish(waiting.id, 3)
    await until(lambda: svc.store.get(waiting.id).status == S.FAILED)
    svc.ctl.reload_quotas()  # the GPU-hours re-count (every quota_refresh seconds in the loop)
    after = await svc.scrape()
    assert after["tacc_tasks{state=\"succeeded\"}"] == 1
    assert after["tacc_tasks{state=\"failed\"}"] == 1
    assert after["tacc_tasks{state=\"running\"}"] == 0
    assert after["tacc_task_events_total{kind=\"succeeded\"}"] == 1
    assert after["tacc_task_events_total{kind=\"failed\"}"] == 1
    assert after["tacc_queue_length{reason=\"Resources\"}"] == 0
    assert after["tacc_node_gpus_allocated{node=\"n1\",switch=\"0\"}"] == 0
    assert after["tacc_group_gpu_hours_used{group=\"default\",period=\"month\"}"] > 0
    assert "tacc_user_gpus_allocated{user=\"alice\"}" not in after


async def test_api_latency_is_labelled_by_route_pattern_never_by_path(svc: Svc) -> None:
    for tid in ("12345", "99999999"):
        assert (await svc.get(f"/api/tasks/{tid}", svc.admin, scheme="token")).code == 404
    for odd in ("FOOBAR", "PROPFIND"):  # an attacker's methods
        await svc.get(f"/api/tasks/1?{odd}", svc.admin, method=odd)
    await svc.get("/no/such/thing/" + "x" * 50, svc.admin)
    got = await svc.scrape()
    key = 'tacc_api_request_duration_seconds_count{method="GET",route="/api/tasks/{id}",status="4xx"}'
    assert got[key] == 2
    assert got['tacc_api_request_duration_seconds_count{method="other",route="/api/tasks/{id}",status="4xx"}'] == 2
    assert got['tacc_api_request_duration_seconds_count{method="GET",route="unmatched",status="4xx"}'] == 1
    labels = " ".join(k for k in got if k.startswith("tacc_api_request"))
    assert "12345" not in labels and "FOOBAR" not in labels and "xxxx" not in labels


async def test_submit_latency_and_log_streams(svc: Svc) -> None:
    http = tornado.httpclient.AsyncHTTPClient()
    auth = {"Authorization": f"token {svc.alice}"}
    put = await http.fetch(f"{svc.url}/api/code/{svc.digest}", method="PUT", body=svc.archive, headers=auth,
                           raise_error=False)
    assert put.code in (200, 201), put.body
    body = json.dumps({"name": "t", "code": {"kind": "snapshot", "digest": svc.digest},
                       "entrypoint": {"argv": ["true"]}})
    r = await http.fetch(svc.url + "/api/tasks", method="POST", body=body, raise_error=False,
                         headers={**auth, "Content-Type": "application/json"})
    assert r.code == 201, r.body
    tid = int(json.loads(r.body)["id"])
    got = await svc.scrape()
    assert got['tacc_submit_duration_seconds_count{route="/api/tasks"}'] == 1
    assert got['tacc_api_request_duration_seconds_count{method="PUT",route="/api/code/{digest}",status="2xx"}'] == 1
    assert got["tacc_log_streams_open"] == 0

    chunks: list[bytes] = []
    stream = asyncio.ensure_future(http.fetch(f"{svc.url}/api/tasks/{tid}/logs/stream", headers=auth,
                                              streaming_callback=chunks.append, request_timeout=30))
    await until(lambda: chunks)
    assert (await svc.scrape())["tacc_log_streams_open"] == 1
    await until(lambda: svc.store.get(tid).status == S.RUNNING)
    svc.executor.finish(tid, 0)
    await stream  # the stream ends with the task
    assert b"event: end" in b"".join(chunks)
    got = await svc.scrape()
    assert got["tacc_log_streams_open"] == 0
    assert got['tacc_api_request_duration_seconds_count{method="GET",route="/api/tasks/{id}/logs/stream",'
               'status="2xx"}'] == 1


async def test_who_may_read_it(svc: Svc) -> None:
    assert (await svc.get("/metrics")).code == 401
    assert (await svc.get("/metrics", "not-a-token")).code == 401
    refused = await svc.get("/metrics", svc.alice)  # a valid token, not an admin's
    assert refused.code == 403
    assert b"tacc_" not in refused.body
    assert (await svc.get("/metrics?token=" + svc.admin)).code == 401  # never read from the URL
    assert (await svc.get("/metrics", svc.admin, scheme="token")).code == 200
    assert (await svc.get("/metrics", svc.admin, scheme="Bearer")).code == 200


async def test_hub_tokens_need_the_metrics_scope(tmp_path: Path) -> None:
    hub = FakeHub({
        "prom": {"kind": "service", "name": "prometheus", "scopes": ["custom:tacc:metrics"]},
        "staff": {"kind": "user", "name": "admin", "scopes": ["custom:tacc:admin"]},
        "alice": {"kind": "user", "name": "alice", "scopes": ["custom:tacc:tasks"], "admin": True},
        "culler": {"kind": "service", "name": "idle-culler", "scopes": ["read:users"]},
    })
    svc = await Svc(tmp_path, hub).start()
    try:
        assert (await svc.get("/metrics", "prom")).code == 200
        assert (await svc.get("/metrics", "staff")).code == 200
        assert (await svc.get("/metrics", "alice")).code == 403  # a hub admin, but no metrics scope
        assert (await svc.get("/metrics", "culler")).code == 403
        assert (await svc.get("/metrics", "unknown")).code == 401
        assert (await svc.get("/metrics")).code == 401
        # the service token works for /metrics only: the API still refuses a non-user
        assert (await svc.get("/api/tasks", "prom")).code == 403
        assert (await svc.get("/metrics", svc.admin)).code == 200  # our own admin tokens still do
    finally:
        await svc.stop()


async def test_two_services_keep_their_own_registries(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = await Svc(tmp_path / "a").start()
    b = await Svc(tmp_path / "b").start()
    try:
        rec = await a.ctl.submit("alice", a.spec())
        await until(lambda: a.store.get(rec.id).status == S.RUNNING)
        assert (await a.scrape())['tacc_task_events_total{kind="started"}'] == 1
        assert (await b.scrape())['tacc_task_events_total{kind="started"}'] == 0
    finally:
        await a.stop()
        await b.stop()


async def test_recovery_counts_readopted_tasks(tmp_path: Path) -> None:
    first = await Svc(tmp_path).start()
    rec = await first.ctl.submit("alice", first.spec(gpus=1))
    await until(lambda: first.store.get(rec.id).status == S.RUNNING)
    await first.stop()
    # the service restarts on the same store; the executor still runs the task
    again = Svc(tmp_path, executor=first.executor)
    await again.start()
    try:
        got = await again.scrape()
        assert got["tacc_recovery_readopted_tasks"] == 1
        assert got["tacc_recovery_lost_tasks_total"] == 0
        assert got["tacc_service_starts_total"] == 2  # counted in the state dir: it survives the restart
        first.executor.vanish(rec.id)
        await until(lambda: again.store.get(rec.id).status == S.LOST)
        got = await again.scrape()
        assert got["tacc_recovery_lost_tasks_total"] == 1
        assert got['tacc_task_events_total{kind="lost"}'] == 1
    finally:
        await again.stop()


def test_route_labels_and_command_names(tmp_path: Path) -> None:
    assert route_label(r"/api/tasks/(\d+)/logs$") == "/api/tasks/{id}/logs"
    assert route_label(r"/api/code/([^/]+)") == "/api/code/{digest}"
    assert route_label(r"/api/admin/quotas/(?P<kind>user|group)/(?P<name>[^/]+)") == "/api/admin/quotas/{kind}/{name}"
    assert route_label(r"/admin/static/(admin\.(?:js|css))") == "/admin/static/{id}"
    assert route_label(r"/tasks/(?P<id>\d+)/proxy/(?P<port>\d+)(?P<path>/.*|)") == "/tasks/{id}/proxy/{port}{path}"
    assert route_label(r"/?") == "/" and route_label(r"/admin/?") == "/admin"
    assert route_label(r"/api/openapi\.json$") == "/api/openapi.json"
    assert command_name(["/usr/sbin/runuser", "-u", "alice", "--", "/usr/bin/sbatch", "--parsable"]) == "sbatch"
    assert command_name(["/usr/bin/sudo", "-n", "-u", "bob", "--", "scancel", "12"]) == "scancel"
    assert command_name(["squeue", "--json"]) == "squeue"
    assert [count_start(tmp_path) for _ in range(3)] == [1, 2, 3]
    (tmp_path / "service_starts").write_text("garbage")
    assert count_start(tmp_path) == 1
    assert (tmp_path / "service_starts").stat().st_mode & 0o777 == 0o600


async def test_slurm_commands_are_timed_and_their_failures_counted(tmp_path: Path) -> None:
    """The Slurm executor's command runner tells the metrics of each command (real processes: stand-in
    ``squeue`` and ``scancel`` scripts in its bin_dir)."""
    from tacc_hub.executors import SlurmExecutor
    from tacc_hub.executors.slurm_health import SlurmError

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("squeue", "echo '12|RUNNING'"), ("scancel", "echo 'scancel: error' >&2; exit 1")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    ex = SlurmExecutor(tmp_path / "state", bin_dir=str(bin_dir))
    metrics = Metrics()
    ex.command_observer = metrics.observe_command
    assert "12|RUNNING" in await ex._run(ex._argv("squeue", "--noheader"))
    with pytest.raises(SlurmError):
        await ex._run(ex._argv("scancel", "12"))
    r = metrics.registry
    assert r.get_sample_value("tacc_executor_command_duration_seconds_count", {"command": "squeue"}) == 1
    assert r.get_sample_value("tacc_executor_command_failures_total", {"command": "squeue"}) == 0
    assert r.get_sample_value("tacc_executor_command_duration_seconds_count", {"command": "scancel"}) == 1
    assert r.get_sample_value("tacc_executor_command_failures_total", {"command": "scancel"}) == 1


def test_the_hub_configs_give_prometheus_the_metrics_scope(tmp_path: Path) -> None:
    """The demo hub (hub_settings) and the production one (deploy/jupyterhub_config.py) register the service
    ``prometheus`` with the metrics scopes only when TACC_PROMETHEUS_TOKEN is given; admins hold the scope."""
    import json
    import os
    import subprocess

    from tacc_hub.hub.config import hub_settings
    from tacc_hub.service.scopes import METRICS_SCOPE

    root = Path(__file__).resolve().parents[2]
    kw: dict[str, Any] = dict(repo=root, python=sys.executable, hub_port=8000, service_port=8765, users="alice",
                              admins="admin", password=None, executor="local", spawner="tacc")
    demo = hub_settings(state_dir=tmp_path / "a", prometheus_token="t0ken-for-prometheus", **kw)["JupyterHub"]
    plain = hub_settings(state_dir=tmp_path / "b", **kw)["JupyterHub"]
    assert "prometheus" not in {s["name"] for s in plain["services"]}
    assert "prometheus" not in {r["name"] for r in plain["load_roles"]}
    (svc,) = [s for s in demo["services"] if s["name"] == "prometheus"]
    assert svc == {"name": "prometheus", "api_token": "t0ken-for-prometheus"}  # no URL, no command: a token only
    roles = {r["name"]: r for r in demo["load_roles"]}
    assert roles["prometheus"]["scopes"] == [METRICS_SCOPE, "read:metrics"]
    assert roles["prometheus"]["services"] == ["prometheus"]
    assert METRICS_SCOPE in roles["tacc-admins"]["scopes"] and METRICS_SCOPE not in roles["user"]["scopes"]
    assert METRICS_SCOPE in demo["custom_scopes"]

    deploy = str(root / "deploy")
    code = ("import json\nfrom traitlets.config.loader import PyFileConfigLoader\n"
            f"cfg = PyFileConfigLoader('jupyterhub_config.py', path={deploy!r}).load_config()\n"
            "print(json.dumps({'services': cfg.JupyterHub.services, 'roles': cfg.JupyterHub.load_roles}))")
    env = {**os.environ, "TACC_SERVICE_API_TOKEN": "t0k", "TACC_PROMETHEUS_TOKEN": "t0ken-for-prometheus"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120, check=True)
    prod = json.loads(out.stdout)
    assert [s for s in prod["services"] if s["name"] == "prometheus"] == [svc]
    assert [r for r in prod["roles"] if r["name"] == "prometheus"] == [roles["prometheus"]]
