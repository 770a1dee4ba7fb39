"""TaccSpawner's pure parts and its poll/progress logic with a fake service (no hub, no processes)."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import tarfile
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tacc_spawner import form as F
from tacc_spawner import server
from tacc_spawner.client import ApiClientError
from tacc_spawner.payload import server_snapshot, server_spec, task_name
from tacc_spawner.progress import task_event, timeout_message
from tacc_spawner.spawner import TaccSpawner, _listening

CLUSTER = {"executor": "slurm", "gpus_free": 5, "partitions": ["gpu", "debug"],
           "nodes": [{"name": "n1", "gpus": 4, "gpu_type": "a100"}, {"name": "n2", "gpus": 8, "gpu_type": "v100"},
                     {"name": "n3", "gpus": 16, "gpu_type": "h100", "schedulable": False}]}
QUOTA = {"user": "alice", "group": "lab-a", "period": "month",
         "limits": {"user": {"max_gpus": 6}, "group": {"max_gpus": 3}},
         "remaining_gpu_hours": {"user": None, "group": 10.0}}
PROFILES = F.profiles_from_config([
    {"slug": "cpu", "display_name": "CPU <script>", "default": True, "time_limit": "2h"},
    {"slug": "gpu", "display_name": "GPU", "gpus": 1, "gpu_type": "a100", "requirements": ["numpy==2.1.0"]},
])


def test_limits_from_the_cluster_and_the_quota_take_the_tightest() -> None:
    lim = F.Limits.from_service(CLUSTER, QUOTA)
    assert lim.max_gpus_per_node == 8 and lim.gpu_types == ("a100", "v100")  # n3 is not schedulable
    assert lim.cap == ("group lab-a", 3) and lim.max_gpus == 3
    assert lim.budget_left == ("group lab-a", 10.0) and lim.partitions == ("debug", "gpu")


def test_the_form_escapes_everything_and_shows_the_standing() -> None:
    html = F.render_form(F.Limits.from_service(CLUSTER, QUOTA), PROFILES, notice="<b>x</b>")
    assert "CPU &lt;script&gt;" in html and "<script>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "group lab-a may hold at most 3 GPUs; group lab-a has 10.0 GPU-hours left this month" in html
    assert 'max="3"' in html and '<option value="a100">a100</option>' in html


@pytest.mark.parametrize(("raw", "message"), [
    ({"gpus": "4"}, "over quota: needs 4 GPUs; group lab-a may hold at most 3 (1 over)"),
    ({"gpus": "9"}, "gpus: 9 GPUs requested; the largest node here has 8"),
    ({"gpus": "3", "time_limit": "4h"}, "over quota: needs 12.0 GPU-hours (3 GPUs x 4 h); group lab-a has 10.0 "
                                        "GPU-hours left this month"),
    ({"gpus": "1", "gpu_type": "h100"}, "gpu_type: unknown GPU type 'h100' (available: a100, v100)"),
    ({"partition": "nope"}, "partition: unknown partition 'nope'"),
    ({"time_limit": "30h"}, "time_limit: at most 24 h"),
])
def test_check_options_names_the_limit(raw: dict[str, Any], message: str) -> None:
    opts = F.normalize_options(F.parse_form({k: [v] for k, v in raw.items()}), PROFILES)
    with pytest.raises(F.OptionsError) as err:
        F.check_options(opts, F.Limits.from_service(CLUSTER, QUOTA))
    assert message in str(err.value)


def test_options_come_from_the_profile_and_the_form_overrides() -> None:
    opts = F.normalize_options({"profile": "gpu", "memory": "16G"}, PROFILES)
    assert opts["gpus"] == 1 and opts["gpu_type"] == "a100" and opts["memory_mib"] == 16384
    assert opts["time_limit_s"] == 8 * 3600 and opts["requirements"] == ["numpy==2.1.0"]
    opts = F.normalize_options(F.parse_form({"gpus": ["2"], "requirements": ["a==1\n# c\n\nb==2"]}), PROFILES)
    assert opts["profile"] == "cpu" and opts["gpus"] == 2 and opts["requirements"] == ["a==1", "b==2"]
    F.check_options(opts, F.Limits.from_service(CLUSTER, QUOTA))  # 2 GPUs x 2 h = 4 of 10 GPU-hours: fine
    for bad, field in (({"gpus": "x"}, "gpus"), ({"time_limit": "soon"}, "time_limit"),
                       ({"memory": "lots"}, "memory"), ({"profile": "nope"}, "profile")):
        with pytest.raises(F.OptionsError, match=field):
            F.normalize_options(bad, PROFILES)


def test_the_snapshot_holds_the_secrets_privately_and_the_spec_none() -> None:
    cfg = {"env": {"JUPYTERHUB_API_TOKEN": "s3cret"}, "cmd": ["jupyterhub-singleuser"], "port": 0}
    digest, data = server_snapshot(cfg)
    assert server_snapshot(cfg) == (digest, data)  # deterministic
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members[server.CONFIG_FILE].mode == 0o600
        assert json.loads(tar.extractfile(server.CONFIG_FILE).read())["env"]["JUPYTERHUB_API_TOKEN"] == "s3cret"
        assert b"def main" in tar.extractfile("tacc_server.py").read()
    opts = F.normalize_options({"gpus": 2, "memory": "8G", "time_limit": "1h"}, [])
    spec = server_spec(name=task_name("jupyter-{username}", "a@b.c", ""), digest=digest, size=len(data), opts=opts)
    from tacc_hub.schema import spec_from_data

    parsed = spec_from_data(spec)
    assert parsed.name == "jupyter-a-b.c" and parsed.resources.gpus_per_node == 2
    assert parsed.resources.memory == 8192 and parsed.qos.qos_class == "interactive"
    assert "s3cret" not in json.dumps(spec)


def test_progress_events_follow_the_task() -> None:
    now = 1_000_000.0
    pending = {"id": 7, "status": "pending", "queue": {"reason": "Resources", "position": 2,
                                                      "estimated_start": now + 300, "detail": "needs 2 GPUs; 0 free"}}
    ev = task_event(pending, now)
    assert ev["progress"] == 20
    assert ev["message"] == ("Task 7 queued at position 2 (reason Resources: needs 2 GPUs; 0 free); estimated start "
                             "13:51:40 UTC (in 5 min)")
    running = {"id": 7, "status": "running", "placement": {"nodes": [{"node": "n2", "gpus": [0]}]}}
    assert task_event(running)["message"] == "Task 7 is running on n2; waiting for the server to start"
    assert task_event({"id": 7, "status": "failed", "reason": "exit 1"})["message"] == "Task 7 failed: exit 1"
    msg = timeout_message(pending, 60, now=now)
    assert msg.startswith("The server did not start within 60 s: task 7 is still queued at position 2 (reason "
                          "Resources") and msg.endswith("The task was cancelled.")
    assert "was running on n2 but the server had not started yet" in timeout_message(running, 60, "booting")


def test_gpu_idle_needs_every_reading_below_threshold_for_the_whole_timeout() -> None:
    clock = [0.0]
    readings: list[list[float] | None] = []
    idle = server.GpuIdle(100, 5.0, lambda: readings.pop(0), clock=lambda: clock[0])

    def at(t: float, value: list[float] | None) -> bool:
        clock[0] = t
        readings.append(value)
        return idle.sample()

    assert not at(0, [1.0, 0.0]) and not at(60, [2.0, 3.0])
    assert not at(90, [50.0, 0.0])  # one busy GPU: not idle, the window restarts
    assert not at(100, [0.0, 0.0]) and not at(150, None)  # no reading: no signal, window restarts
    assert not at(160, [0.0, 0.0]) and not at(259, [0.0, 0.0]) and at(260, [4.9, 0.0])
    assert server.parse_utilization("0, 3\n1, 0\n2, 90\n", ["0", "1"]) == [3.0, 0.0]
    assert server.parse_utilization("0, 3\n", ["0", "1"]) is None  # a GPU of ours missing: no reading
    assert server.parse_utilization("7\n", ["0"]) == [7.0] and server.parse_utilization("n/a, x", ["0"]) is None
    assert server.read_utilization(["no-such-nvidia-smi"], ["0"]) is None  # absent: no signal
    assert server.read_utilization([], ["0"]) is None and server.read_utilization(["true"], []) is None


def test_the_hub_env_never_replaces_the_task_s_launch_variables() -> None:
    env = server.server_env({"PATH": "/env/bin", "CUDA_VISIBLE_DEVICES": "1", "TACC_TASK_ID": "3"},
                            {"PATH": "/hub/bin", "CUDA_VISIBLE_DEVICES": "", "TACC_TASK_ID": "x", "SLURM_X": "y",
                             "JUPYTERHUB_API_TOKEN": "t", "PYTHONPATH": "/p", "TACC_URL": "http://hub/services/tacc"})
    assert env == {"PATH": "/env/bin", "CUDA_VISIBLE_DEVICES": "1", "TACC_TASK_ID": "3", "JUPYTERHUB_API_TOKEN": "t",
                   "PYTHONPATH": "/p", "TACC_URL": "http://hub/services/tacc"}
    assert server.server_env({"TACC_URL": "http://task"}, {"TACC_URL": "http://hub"})["TACC_URL"] == "http://task"
    assert server.with_port("http://127.0.0.1:0/user/a/", "0.0.0.0", 5000) == "http://0.0.0.0:5000/user/a/"
    assert server.route_address("http://127.0.0.1:8081/hub/api") == "127.0.0.1"
    assert _listening("x\ntacc-server: listening on 10.0.0.5:4321\n") == ("10.0.0.5", 4321)
    assert _listening("tacc-server: listening on\n") is None


class FakeService:
    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    async def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((method, args))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _spawner(fake: FakeService) -> TaccSpawner:
    sp = TaccSpawner(user=SimpleNamespace(name="alice", url="/user/alice/"), tacc_api_token="t",
                     outage_warning_after=0.0, stop_wait=1.0)
    sp._call = fake  # type: ignore[method-assign]
    sp.task_id = 7
    return sp


def test_poll_keeps_the_server_through_outages_and_reports_the_end(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeService()
    sp = _spawner(fake)
    fake.answers = [ApiClientError(0, "cannot reach"), ApiClientError(503, "busy"), ApiClientError(502, "gw"),
                    {"id": 7, "status": "running"}, {"id": 7, "status": "starting"},
                    {"id": 7, "status": "failed", "exit_code": 3}, ApiClientError(404, "no such task")]
    results = [asyncio.run(sp.poll()) for _ in range(7)]
    assert results == [None, None, None, None, None, 3, 1]
    assert "has not answered for" in caplog.text
    state = sp.get_state()
    assert state["task_id"] == 7
    other = _spawner(FakeService())
    other.clear_state()
    other.load_state(state)
    assert other.task_id == 7
    other.clear_state()
    assert other.task_id is None and asyncio.run(other.poll()) == 0


def test_stop_cancels_retrying_through_a_blip_and_waits_for_the_end() -> None:
    fake = FakeService()
    sp = _spawner(fake)
    fake.answers = [ApiClientError(503, "busy"), {"id": 7, "status": "cancelling"}, {"id": 7, "status": "cancelling"},
                    {"id": 7, "status": "cancelled"}]
    asyncio.run(sp.stop())
    assert [c[0] for c in fake.calls] == ["cancel", "cancel", "show", "show"]
    fake.answers = [ApiClientError(409, "already ended")]
    asyncio.run(sp.stop())


def test_busy_gpus_are_reported_to_the_hub_as_activity() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    got: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            got.append((self.headers["Authorization"], body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.handle_request, daemon=True).start()
    env = {"JUPYTERHUB_ACTIVITY_URL": f"http://127.0.0.1:{httpd.server_address[1]}/hub/api/users/a/activity",
           "JUPYTERHUB_API_TOKEN": "tok", "JUPYTERHUB_SERVER_NAME": ""}
    assert server.report_activity(env)
    httpd.server_close()
    auth, body = got[0]
    assert auth == "token tok" and body["servers"][""]["last_activity"] == body["last_activity"]
    assert body["last_activity"].endswith("Z")
    assert not server.report_activity({})  # no hub to tell
    idle = server.GpuIdle(10, 5.0, lambda: [0.0, 80.0])
    assert not idle.sample() and idle.busy


def test_the_idle_culler_config_culls_servers_after_8_hours() -> None:
    import subprocess
    import sys

    from tacc_spawner.culler import idle_culler

    service, role = idle_culler()
    assert service["name"] == role["name"] == "idle-culler" and role["services"] == ["idle-culler"]
    assert "--timeout=28800" in service["command"] and "delete:servers" in role["scopes"]
    assert not any("cull-users" in a for a in service["command"])  # servers only
    # The command is a real, installed culler that accepts these options.
    out = subprocess.run([*service["command"][:3], "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--timeout" in out.stdout and "--cull-every" in out.stdout, out.stderr
    assert service["command"][0] == sys.executable
    # SIGINT (the hub's first request to stop a service) stops it at once; the bare culler ignores it
    import os
    import signal
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": "x", "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api"}
    proc = subprocess.Popen(service["command"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == -signal.SIGINT
    finally:
        proc.kill()
        proc.wait()


def test_without_a_token_a_short_lived_hub_token_is_minted_for_the_user_and_renewed() -> None:
    minted: list[dict] = []

    def new_api_token(**kw: Any) -> str:
        minted.append(kw)
        return f"hub-token-{len(minted)}"

    sp = TaccSpawner(user=SimpleNamespace(name="alice", url="/user/alice/", new_api_token=new_api_token),
                     token_lifetime=3600)
    assert sp._token() == "hub-token-1" and sp._token() == "hub-token-1"  # cached while valid
    assert minted[0]["scopes"] == ["custom:tacc:tasks"] and minted[0]["expires_in"] == 3600
    sp._minted = ("hub-token-1", sp._minted[1] - 3500)  # close to its expiry: renewed
    assert sp._token() == "hub-token-2"

    seen: list[str] = []

    def answer(method: str, path: str, headers: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        token = headers["Authorization"].removeprefix("token ")
        seen.append(token)
        if token == "hub-token-2":
            return 401, {"Content-Type": "application/json"}, b'{"message": "token expired"}'
        return 200, {"Content-Type": "application/json"}, json.dumps({"id": 3, "status": "running"}).encode()

    with FakeHttp(answer) as url:
        sp.tacc_url = url
        assert asyncio.run(sp._call("show", 3))["status"] == "running"  # 401: minted again, once
    assert seen == ["hub-token-2", "hub-token-3"]


class FakeHttp:
    """A real HTTP server on 127.0.0.1 in a thread; ``answer(method, path, headers, body)`` gives each reply."""

    def __init__(self, answer: Any) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                code, headers, data = answer(self.command, self.path, self.headers, body)
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/services/tacc/"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_spawner_s_http_client_sends_what_the_api_takes_and_reports_errors_as_the_service_gave_them() -> None:
    from tacc_spawner.client import ServiceClient

    def answer(method: str, path: str, headers: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        js = {"Content-Type": "application/json"}
        if path.startswith("/services/tacc/api/tasks?dry_run=1"):
            return 400, js, json.dumps({"message": "bad spec", "errors": [{"field": "name", "message": "x"}]}).encode()
        if path == "/services/tacc/api/tasks":
            return 201, js, json.dumps({"id": 9, "got": json.loads(body)}).encode()
        if path.startswith("/services/tacc/api/code/"):
            return 201, js, b'{"digest": "d"}'
        if path == "/services/tacc/api/tasks/1":
            return 302, {"Location": "/hub/login?next=x"}, b""
        if path == "/services/tacc/api/tasks/2":
            return 200, {"Content-Type": "text/html"}, b"<html><title>JupyterHub</title></html>"
        if path == "/services/tacc/api/tasks/3":
            return 502, {"Content-Type": "text/html"}, b"<html>Bad Gateway</html>"
        if path.startswith("/services/tacc/api/tasks/4/logs?"):
            return 200, js, json.dumps({"data": "hi", "next_offset": 2}).encode()
        return 404, js, b'{"message": "no such task"}'

    async def calls(url: str) -> list[Any]:
        c = ServiceClient(url, "tok", timeout=5)
        out: list[Any] = [await c.submit({"name": "n"}), await c.upload_code("d" * 64, b"\x1f\x8b..."),
                          await c.logs(4, 7)]
        for call in (c.submit({"name": "n"}, dry_run=True), c.show(1), c.show(2), c.show(3), c.cancel(5)):
            try:
                await call
            except ApiClientError as exc:
                out.append(exc)
        return out

    server_ = FakeHttp(answer)
    with server_ as url:
        got = asyncio.run(calls(url))
    assert got[0] == {"id": 9, "got": {"name": "n"}} and got[1] == {"digest": "d"} and got[2]["data"] == "hi"
    (post, upload, logs, *_) = server_.requests
    assert post[0] == "POST" and post[2]["Content-Type"] == "application/json"
    assert post[2]["Authorization"] == "token tok"
    assert upload[0] == "PUT" and upload[2]["Content-Type"] == "application/gzip" and upload[3] == b"\x1f\x8b..."
    assert logs[1] == "/services/tacc/api/tasks/4/logs?offset=7&limit=1048576"
    dry, redirect, html, gateway, missing = got[3:]
    assert (dry.status, dry.message, dry.errors) == (400, "bad spec", [{"field": "name", "message": "x"}])
    assert redirect.status == 302 and "does not answer as the tacc_hub API" in redirect.message
    assert "a redirect to /hub/login" in redirect.message
    assert html.status == 200 and "HTML page titled 'JupyterHub' instead of JSON" in html.message
    assert gateway.status == 502 and "Bad Gateway" in gateway.message  # transient for the spawner: kept
    assert (missing.status, missing.message) == (404, "no such task")
    assert server_.requests[-1][:2] == ("POST", "/services/tacc/api/tasks/5/cancel")


def test_an_unreachable_or_silent_service_is_status_0_naming_the_url() -> None:
    import socket

    from tacc_spawner.client import ServiceClient

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts (the kernel does) but never answers

    async def one(url: str) -> ApiClientError:
        try:
            await ServiceClient(url, "t", timeout=0.5).cluster()
        except ApiClientError as exc:
            return exc
        raise AssertionError("no error")

    try:
        refused = asyncio.run(one(f"http://127.0.0.1:{port}"))
        began = time.monotonic()
        timed_out = asyncio.run(one(f"http://127.0.0.1:{silent.getsockname()[1]}"))
        took = time.monotonic() - began
    finally:
        silent.close()
    assert refused.status == 0 and "connection refused" in refused.message and f"127.0.0.1:{port}" in refused.message
    assert timed_out.status == 0 and "cannot reach the tacc_hub service" in timed_out.message and took < 5
    with pytest.raises(ApiClientError, match="not an http"):
        ServiceClient("ftp://x", "t")


@pytest.mark.parametrize("text", ["90m", "2h", "1d", "45", "1:30", "1:30:00", "2-00", "2-1:30", "3-04:05:06", " 8h ",
                                  "soon", "", "1:2:3:4", "-1", "10x"])
def test_the_spawner_s_duration_parser_is_the_schema_s(text: str) -> None:
    from tacc_hub.schema import fields as schema
    from tacc_spawner import fields as ours

    assert _outcome(ours.parse_duration_s, text) == _outcome(schema.parse_duration_s, text)


@pytest.mark.parametrize("text", ["16G", "512M", "1536K", "1T", "16GiB", "16gb", "100", "16B", "lots", "", " 8G "])
def test_the_spawner_s_memory_parser_is_the_schema_s(text: str) -> None:
    from tacc_hub.schema import fields as schema
    from tacc_spawner import fields as ours

    assert _outcome(ours.parse_memory_mib, text) == _outcome(schema.parse_memory_mib, text)


@pytest.mark.parametrize("req", ["numpy==2.1.0", "torch===2.3.0", "a[x,y]==1; python_version>'3'", "numpy", "numpy>=2",
                                 "-e .", "--index-url=http://x", "a==1\n--pre", "a==1\u2028-e x", "x" * 1020 + "==1",
                                 "x" * 1030 + "==1", "x @ https://example.org/x.whl", "x @ file:///tmp/x", " b==2 ",
                                 "./pkg", "/abs/pkg", "dir/pkg", "pkg.whl", "foo==1.0+local.whl", "file:///x",
                                 "foo==1.0+local.tar.gz; python_version>'3'"])
def test_the_spawner_s_requirement_check_decides_as_the_schema(req: str) -> None:
    """The form refuses what the task schema refuses (and every direct reference: a server's packages come from
    the index), and keeps an accepted entry as the schema stores it."""
    from pydantic import TypeAdapter, ValidationError

    from tacc_hub.schema.task import Requirement
    from tacc_spawner import fields as ours

    try:
        stored: str | None = TypeAdapter(Requirement).validate_python(req)
    except ValidationError:
        stored = None
    try:
        F.check_requirements([req])
        form_ok = True
    except F.OptionsError as exc:
        form_ok = False
        assert str(exc).startswith("requirements: ")
    assert form_ok == (stored is not None and "@" not in req and "://" not in req)
    if form_ok:
        assert ours.check_pinned(req) == stored


def _outcome(fn: Any, value: str) -> object:
    try:
        return fn(value)
    except ValueError as exc:
        return ("error", str(exc))


def test_the_default_server_command_starts_without_the_slow_import(monkeypatch: pytest.MonkeyPatch) -> None:
    sp = _spawner(FakeService())
    monkeypatch.setattr(sp, "get_args", lambda: ["--port=0"])
    monkeypatch.setattr(sp, "get_env", lambda: {})
    cmd = sp._server_config({}, 0, "", "0.0.0.0")["cmd"]
    assert cmd[:2] == ["python3", "-c"] and "rfc3987_syntax" in cmd[2] and cmd[3:] == ["--port=0"]
    # the code really starts jupyterhub-singleuser: its entry point, and the module is then left out
    code = cmd[2].replace("sys.exit(main())", "print(main is ep.load(), 'rfc3987_syntax' in sys.modules and "
                          "sys.modules['rfc3987_syntax'] is None)")
    probe = ("from importlib.metadata import entry_points; "
             "ep = [e for e in entry_points(group='console_scripts') if e.name == 'jupyterhub-singleuser'][0]; ")
    out = subprocess.run([sys.executable, "-c", probe + code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr
    sp.fast_start = False
    assert sp._server_config({}, 0, "", "0.0.0.0")["cmd"] == ["jupyterhub-singleuser", "--port=0"]
    sp.fast_start, sp.cmd = True, ["my-server"]
    assert sp._server_config({}, 0, "", "0.0.0.0")["cmd"] == ["my-server", "--port=0"]
