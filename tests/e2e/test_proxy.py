"""The web-port proxy on the local executor, through a real ``tacc-hub serve`` and the real ``tcloud``.

alice's task serves HTTP (a declared port) and a WebSocket echo (an undeclared one) with tornado;
bob's task serves a port of its own. Through ``/tasks/ID/proxy/PORT/``: pages, a streamed answer that
arrives before it ends, a 1 MiB upload, WebSocket echo and close codes, ``/ports``; then the
attacks: bob's token, the caller's credentials (the task logs what it received), Set-Cookie from the
task, an admin's view (sandboxed), alice's proxy to bob's port (also from an IPV6_V6ONLY socket on
the same port), to the service's own port, and to a task that is not running. ``tcloud open`` and
``tcloud port-forward`` last.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import urllib3
import websocket

from .conftest import BIN, ROOT, Api, ServiceProcess, free_port, tcloud, write_task
from .test_isolation import submit, wait_log

pytestmark = pytest.mark.timeout(300)

SERVER = '''
"""A task's web server for the proxy tests (runs inside a task, as its owner).

``python proxy_server.py HTTP_PORT WS_PORT [--v6only-also PORT]``: HTTP on 127.0.0.1:HTTP_PORT
(``/headers`` prints what it got to the task log and answers it as JSON; ``/stream`` sends a first
chunk, then waits for a file ``release`` in its directory before the rest; ``/upload`` answers the
body's size and SHA-256; ``/cookies`` sets cookies a proxy must re-scope or drop; ``/redirect``
answers 302 to ``/headers``), and a WebSocket echo on 127.0.0.1:WS_PORT (``bye`` closes with 4002).
``--v6only-also PORT`` also listens on ``[::]:PORT`` (IPV6_V6ONLY), next to someone else's
``127.0.0.1:PORT``: the attack the proxy must not fall for.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import sys

import tornado.httpserver
import tornado.web
import tornado.websocket


class Headers(tornado.web.RequestHandler):
    def get(self, rest: str = "") -> None:
        seen = {"method": self.request.method, "uri": self.request.uri, "headers": dict(self.request.headers.get_all())}
        print("HEADERS " + json.dumps(seen), flush=True)
        self.write(seen)

    post = get
    head = get


class Stream(tornado.web.RequestHandler):
    async def get(self) -> None:
        self.write("first\\n")
        await self.flush()
        for _ in range(1200):
            if os.path.exists("release"):
                break
            await asyncio.sleep(0.05)
        self.write("second\\n")


@tornado.web.stream_request_body
class Upload(tornado.web.RequestHandler):
    def prepare(self) -> None:
        self.size = 0
        self.sha = hashlib.sha256()

    def data_received(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.sha.update(chunk)

    def post(self) -> None:
        self.write({"size": self.size, "sha256": self.sha.hexdigest()})


class Cookies(tornado.web.RequestHandler):
    def get(self) -> None:
        self.add_header("Set-Cookie", "plain=1; Path=/; Domain=evil.example; HttpOnly")
        self.add_header("Set-Cookie", "deep=2; Path=/sub")
        self.add_header("Set-Cookie", "jupyterhub-hub-login=stolen; Path=/hub/")
        self.add_header("Service-Worker-Allowed", "/")
        self.write("cookies")


class Redirect(tornado.web.RequestHandler):
    def get(self) -> None:
        self.redirect("/headers")


class Echo(tornado.websocket.WebSocketHandler):
    def on_message(self, message: str | bytes) -> None:
        if message == "bye":
            self.close(4002, "bye to you")
            return
        self.write_message(message, binary=isinstance(message, bytes))


async def main() -> None:
    http_port, ws_port = int(sys.argv[1]), int(sys.argv[2])
    app = tornado.web.Application([(r"/headers(.*)", Headers), (r"/tasks/.*/headers(.*)", Headers),
                                   (r"/stream", Stream), (r"/upload", Upload),
                                   (r"/cookies", Cookies), (r"/redirect", Redirect)])
    app.listen(http_port, "127.0.0.1")
    tornado.web.Application([(r"/echo", Echo)]).listen(ws_port, "127.0.0.1")
    if "--v6only-also" in sys.argv:
        port = int(sys.argv[sys.argv.index("--v6only-also") + 1])
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind(("::", port))
        s.listen(8)
        s.setblocking(False)
        server = tornado.httpserver.HTTPServer(app)
        server.add_socket(s)
    print(f"SERVING {http_port} {ws_port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
'''

ALICE_TASK = """name: web
code: .
ports: [{http}]
entrypoint: python server.py {http} {ws} --v6only-also {bob}
"""
BOB_TASK = """name: bobweb
code: .
entrypoint: python -m http.server {port} --bind 127.0.0.1
"""


@dataclass
class Web:
    alice: Api
    bob: Api
    admin: Api
    task: int
    bob_task: int
    http: int
    ws: int
    bob_port: int
    work: Path


def _wait_listening(api: Api, tid: int, port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        _, last = api.call("GET", f"/api/tasks/{tid}/ports")
        if any(p["port"] == port and p["listening"] for p in last.get("ports", [])):
            return
        time.sleep(0.1)
    raise AssertionError(f"task {tid} never listened on {port}: {last}")


@pytest.fixture(scope="module")
def web(service: ServiceProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    http, ws, bob_port = free_port(), free_port(), free_port()
    tmp = tmp_path_factory.mktemp("proxy")
    bob = Api(service.url, service.token("bob"))
    bob_task = submit(service, "bob", write_task(tmp / "bob", BOB_TASK.format(port=bob_port)))
    bob.wait_status(bob_task, {"running"}, timeout=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # bob's server first, so that alice's v6-only socket sits beside it
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", bob_port)) == 0:
                break
        time.sleep(0.1)
    alice = Api(service.url, service.token("alice"))
    task = submit(service, "alice", write_task(tmp / "alice", ALICE_TASK.format(http=http, ws=ws, bob=bob_port),
                                                {"server.py": SERVER}))
    alice.wait_status(task, {"running"}, timeout=120)
    wait_log(alice, task, "SERVING", timeout=120)
    _wait_listening(alice, task, ws)
    yield Web(alice, bob, Api(service.url, service.token("root", admin=True)), task, bob_task, http, ws, bob_port,
              service.data_dir / "tasks" / str(task) / "work")
    for api, tid in ((alice, task), (bob, bob_task)):
        api.call("POST", f"/api/tasks/{tid}/cancel")


def get(api: Api, path: str, headers: dict[str, str] | None = None, **kw: object) -> urllib3.BaseHTTPResponse:
    return api.http.request("GET", api.url + path, headers={**api.headers, **(headers or {})}, retries=False,
                            redirect=False, timeout=30, **kw)


def test_pages_of_a_task_are_reached_through_the_proxy(web: Web) -> None:
    base = f"/tasks/{web.task}/proxy/{web.http}"
    r = get(web.alice, base)
    assert r.status == 302 and r.headers["Location"] == base + "/", (r.status, r.headers)
    r = get(web.alice, base + "/headers/x?a=1&b=%20")
    assert r.status == 200, r.data
    seen = json.loads(r.data)
    assert seen["uri"] == "/headers/x?a=1&b=%20"  # the prefix stripped, the query as sent
    assert seen["headers"]["X-Forwarded-Prefix"] == base
    assert seen["headers"]["Host"] == f"127.0.0.1:{web.http}"
    assert "Content-Security-Policy" not in r.headers  # the owner's own pages are not sandboxed
    r = get(web.alice, f"/tasks/{web.task}/proxy/absolute/{web.http}/headers/abs")
    assert json.loads(r.data)["uri"] == f"/tasks/{web.task}/proxy/absolute/{web.http}/headers/abs"
    r = get(web.alice, base + "/redirect")  # a redirect to /headers stays under the prefix
    assert r.status == 302 and r.headers["Location"] == base + "/headers", r.headers
    r = web.alice.http.request("HEAD", web.alice.url + base + "/headers/", headers=web.alice.headers, retries=False)
    assert r.status == 200 and r.data == b""


def test_a_streamed_answer_arrives_before_it_ends(web: Web) -> None:
    release = web.work / "release"
    release.unlink(missing_ok=True)
    r = get(web.alice, f"/tasks/{web.task}/proxy/{web.http}/stream", preload_content=False)
    assert r.status == 200
    first = r.read1(64) if hasattr(r, "read1") else r.read(6)
    assert first.startswith(b"first"), first  # the task has not finished its answer yet: it waits for us
    release.touch()
    rest = first + r.read()
    assert rest == b"first\nsecond\n", rest
    release.unlink()


def test_a_body_reaches_the_task_whole(web: Web) -> None:
    body = os.urandom(1024 * 1024)
    import hashlib

    r = web.alice.http.request("POST", web.alice.url + f"/tasks/{web.task}/proxy/{web.http}/upload", body=body,
                               headers={**web.alice.headers, "Content-Type": "application/octet-stream"},
                               retries=False, timeout=60)
    assert r.status == 200, r.data
    assert json.loads(r.data) == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    chunks = (body[i:i + 65536] for i in range(0, len(body), 65536))  # chunked, no Content-Length
    r = web.alice.http.request("POST", web.alice.url + f"/tasks/{web.task}/proxy/{web.http}/upload", body=chunks,
                               headers=web.alice.headers, chunked=True, retries=False, timeout=60)
    assert json.loads(r.data)["size"] == len(body), r.data
    # a body over the limit (max_code_bytes, 256 MiB by default) is refused from its headers, unread
    import http.client

    conn = http.client.HTTPConnection(web.alice.url.removeprefix("http://"), timeout=30)
    conn.putrequest("POST", f"/tasks/{web.task}/proxy/{web.http}/upload")
    conn.putheader("Authorization", web.alice.headers["Authorization"])
    conn.putheader("Content-Length", str(2**30))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and json.loads(resp.read())["errors"][0]["field"] == "body"
    conn.close()


def test_a_websocket_echo_works_both_ways_with_close_codes(web: Web) -> None:
    url = web.alice.url.replace("http://", "ws://") + f"/tasks/{web.task}/proxy/{web.ws}/echo"
    ws = websocket.create_connection(url, header=[f"Authorization: {web.alice.headers['Authorization']}"],
                                     timeout=30)
    ws.send("hello")
    assert ws.recv() == "hello"
    ws.send_binary(b"\x00\x01binary")
    assert ws.recv() == b"\x00\x01binary"
    big = "x" * 300_000
    ws.send(big)
    assert ws.recv() == big
    ws.close()
    # the close code the task's server chose reaches the caller
    ws = websocket.WebSocket()
    ws.connect(url, header=[f"Authorization: {web.alice.headers['Authorization']}"], timeout=30)
    ws.send("bye")
    opcode, frame = ws.recv_data(control_frame=True)
    assert opcode == websocket.ABNF.OPCODE_CLOSE and int.from_bytes(frame[:2], "big") == 4002, (opcode, frame)
    assert frame[2:] == b"bye to you"
    ws.close()
    bad = websocket.WebSocket()
    with pytest.raises(websocket.WebSocketBadStatusException) as err:
        bad.connect(url, header=[f"Authorization: {web.bob.headers['Authorization']}"], timeout=30)
    assert err.value.status_code == 404


def test_ports_lists_declared_and_listening(web: Web) -> None:
    status, out = web.alice.call("GET", f"/api/tasks/{web.task}/ports")
    assert status == 200, out
    ports = {p["port"]: p for p in out["ports"]}
    assert ports[web.http] == {"port": web.http, "declared": True, "listening": True, "label": None,
                               "url": f"/tasks/{web.task}/proxy/{web.http}/"}
    assert ports[web.ws]["declared"] is False and ports[web.ws]["listening"] is True
    assert web.bob_port not in ports  # alice's v6-only socket does not make bob's port hers
    assert web.bob.call("GET", f"/api/tasks/{web.task}/ports")[0] == 404


def test_bob_gets_404_as_for_no_task(web: Web) -> None:
    for path in (f"/tasks/{web.task}/proxy/{web.http}/headers", f"/tasks/{web.task}/proxy/absolute/{web.http}/x"):
        r = get(web.bob, path)
        assert r.status == 404 and json.loads(r.data)["message"] == f"no task {web.task}", r.data
    r = get(web.bob, "/tasks/999999/proxy/80/")
    assert r.status == 404 and json.loads(r.data)["message"] == "no task 999999"
    r = get(Api(web.alice.url, None), f"/tasks/{web.task}/proxy/{web.http}/headers")
    assert r.status == 401, r.data


def test_the_callers_credentials_never_reach_the_task(web: Web) -> None:
    token = web.alice.headers["Authorization"].split()[1]
    r = get(web.alice, f"/tasks/{web.task}/proxy/{web.http}/headers/creds?token={token}&keep=1", headers={
        "Cookie": "jupyterhub-session-id=HUBSESSION; jupyterhub-hub-login=HUBLOGIN; mine=kept",
        "X-Forwarded-For": "6.6.6.6", "X-Forwarded-Host": "evil.example", "X-Forwarded-Prefix": "/evil",
        "Forwarded": "for=6.6.6.6", "Proxy-Authorization": "Basic c2VjcmV0", "Connection": "keep-alive, X-Hop",
        "X-Hop": "hop-secret"})
    assert r.status == 200, r.data
    seen = json.loads(r.data)
    assert seen["uri"] == "/headers/creds?keep=1"
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["cookie"] == "mine=kept"
    assert "authorization" not in headers and "proxy-authorization" not in headers and "x-hop" not in headers
    assert "forwarded" not in headers
    # (X-Forwarded-For is the caller's address as the service sees it: with xheaders, the hub proxy's word)
    assert headers["x-forwarded-prefix"] == f"/tasks/{web.task}/proxy/{web.http}"
    assert headers["x-forwarded-host"] == web.alice.url.removeprefix("http://")
    log = wait_log(web.alice, web.task, "/headers/creds")
    for secret in (token, "HUBSESSION", "HUBLOGIN", "hop-secret", "evil.example", "c2VjcmV0"):
        assert secret not in log


def test_cookies_of_the_task_stay_under_its_proxy_path(web: Web) -> None:
    r = get(web.alice, f"/tasks/{web.task}/proxy/{web.http}/cookies")
    assert r.status == 200
    cookies = r.headers.getlist("Set-Cookie")
    scope = f"/tasks/{web.task}/proxy/{web.http}/"
    assert sorted(cookies) == sorted([f"plain=1; Path={scope}; HttpOnly", f"deep=2; Path={scope}sub"]), cookies
    assert "Service-Worker-Allowed" not in r.headers


def test_an_admin_sees_the_page_sandboxed(web: Web) -> None:
    r = get(web.admin, f"/tasks/{web.task}/proxy/{web.http}/headers")
    assert r.status == 200, r.data
    assert r.headers["Content-Security-Policy"] == "sandbox allow-scripts allow-forms allow-popups"


def test_alice_cannot_reach_other_ports_through_her_task(service: ServiceProcess, web: Web, tmp_path: Path) -> None:
    # bob's task's port (alice's task even listens on [::] at that port), the service's own, and one nobody has
    for port in (web.bob_port, service.port, free_port()):
        r = get(web.alice, f"/tasks/{web.task}/proxy/{port}/")
        assert r.status == 404, (port, r.data)
        assert json.loads(r.data)["message"] == f"task {web.task} does not listen on port {port}"
    ws = websocket.WebSocket()
    with pytest.raises(websocket.WebSocketBadStatusException) as err:
        ws.connect(web.alice.url.replace("http://", "ws://") + f"/api/tasks/{web.task}/ports/{web.bob_port}/tunnel",
                   header=[f"Authorization: {web.alice.headers['Authorization']}"], timeout=30)
    assert err.value.status_code == 404
    # bob's server is there and answers bob's own proxy
    assert get(web.bob, f"/tasks/{web.bob_task}/proxy/{web.bob_port}/").status == 200
    # a task that is not running: 409 with its state
    done = submit(service, "alice", write_task(tmp_path / "done", "name: done\ncode: .\nentrypoint: echo done\n"))
    web.alice.wait_status(done, {"succeeded"})
    r = get(web.alice, f"/tasks/{done}/proxy/{web.http}/")
    assert r.status == 409 and "succeeded, not running" in json.loads(r.data)["message"], r.data


def test_one_audit_row_per_user_task_and_port(service: ServiceProcess, web: Web) -> None:
    for _ in range(3):
        assert get(web.alice, f"/tasks/{web.task}/proxy/{web.http}/headers").status == 200
    with sqlite3.connect(service.state_dir / "tacc.sqlite") as db:
        rows = db.execute("SELECT actor, detail FROM audit_events WHERE action = 'proxy' AND task_id = ?",
                          (web.task,)).fetchall()
    assert sorted(rows) == sorted({(a, d) for a, d in rows}), rows  # no duplicates
    assert ("alice", json.dumps({"port": web.http})) in rows, rows


def test_tcloud_open_prints_the_url(service: ServiceProcess, web: Web) -> None:
    res = tcloud(service, "alice", "open", str(web.task), str(web.http), "--print")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"{service.url}/tasks/{web.task}/proxy/{web.http}/"
    res = tcloud(service, "alice", "open", str(web.task), "--print")  # two ports listen: it lists them
    assert res.returncode != 0 and str(web.http) in res.stdout + res.stderr and str(web.ws) in res.stdout + res.stderr
    res = tcloud(service, "bob", "open", str(web.task), str(web.http), "--print")
    assert res.returncode == 1 and f"no task {web.task}" in res.stderr


def test_tcloud_port_forward_tunnels_http(service: ServiceProcess, web: Web) -> None:
    local = free_port()
    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token("alice"), "TACC_CONFIG": "/nonexistent",
           "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([str(BIN / "tcloud"), "port-forward", str(web.task), str(web.http), str(local)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        http = urllib3.PoolManager()
        deadline = time.monotonic() + 30
        while True:
            try:
                r = http.request("GET", f"http://127.0.0.1:{local}/headers/tunnel", retries=False, timeout=10)
                break
            except urllib3.exceptions.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.1)
        assert r.status == 200 and json.loads(r.data)["uri"] == "/headers/tunnel"
        r = http.request("POST", f"http://127.0.0.1:{local}/upload", body=b"z" * 300_000, retries=False, timeout=30)
        assert json.loads(r.data)["size"] == 300_000
        held = socket.create_connection(("127.0.0.1", local), timeout=30)  # a browser's keep-alive connection
        held.sendall(b"GET /headers/held HTTP/1.1\r\nHost: x\r\n\r\n")
        assert held.recv(64).startswith(b"HTTP/1.1 200"), "the held connection is carried"
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C stops it even with that connection still open
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # seen once under load: dump its threads (faulthandler) to learn where
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"Ctrl-C did not stop tcloud port-forward within 30 s; its threads:\n{err}")
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    res = tcloud(service, "bob", "port-forward", str(web.task), str(web.http), str(free_port()))
    assert res.returncode == 1 and f"no task {web.task}" in res.stderr, res.stderr


def test_through_the_hub_a_browser_logs_in_and_its_cookies_stay_out(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Hub mode needs a hub (its own, as tests/hub starts it): the browser's way in is the hub's OAuth."""
    import requests

    from tests.hub.conftest import HubProcess

    hub = HubProcess(tmp_path_factory.mktemp("proxyhub")).start()
    try:
        token = hub.token("alice", ["custom:tacc:tasks"], note="proxy")
        http, ws = free_port(), free_port()
        d = write_task(hub.data_dir / "proxy-task", f"name: web\ncode: .\nports: [{http}]\n"
                       f"entrypoint: python server.py {http} {ws}\n", {"server.py": SERVER})
        d.chmod(0o755)
        env = {**os.environ, "TACC_URL": hub.service_url, "TACC_TOKEN": token, "TACC_CONFIG": "/nonexistent"}
        res = subprocess.run([str(BIN / "tcloud"), "submit", str(d), "--json"], capture_output=True, text=True,
                             env=env, timeout=120)
        assert res.returncode == 0, res.stderr
        tid = json.loads(res.stdout)["id"]
        api = Api(hub.service_url, token)
        _wait_listening(api, tid, http, timeout=120)
        page = f"{hub.service_url}/tasks/{tid}/proxy/{http}/headers"
        r = requests.get(page, headers={"Accept": "text/html"}, allow_redirects=False, timeout=30)
        assert r.status_code == 302 and "/hub/api/oauth2/authorize" in r.headers["Location"], r.headers
        r = requests.get(page, allow_redirects=False, timeout=30)  # not a browser page load: 401
        assert r.status_code == 401, r.text
        s = hub.login("alice")
        r = s.get(page, headers={"Accept": "text/html"}, timeout=30)
        assert r.status_code == 200, r.text[:300]
        assert any("/services/tacc/oauth_callback" in h.headers.get("Location", "") for h in r.history)
        names = {c.name for c in s.cookies}
        assert {"service-tacc", "jupyterhub-session-id", "_xsrf"} <= names, names  # the browser holds them...
        headers = {k.lower(): v for k, v in r.json()["headers"].items()}
        assert "cookie" not in headers, headers  # ...and the task gets none of them
        assert headers["x-forwarded-prefix"] == f"/services/tacc/tasks/{tid}/proxy/{http}"
        upload = f"{hub.service_url}/tasks/{tid}/proxy/{http}/upload"
        r = s.post(upload, data=b"abc", headers={"Origin": hub.url}, timeout=30)
        assert r.status_code == 200 and r.json()["size"] == 3, r.text  # a page of the site may post
        r = s.post(upload, data=b"abc", headers={"Origin": "http://evil.example"}, timeout=30)
        assert r.status_code == 403, r.text  # another site may not, with the cookie
        ws_url = f"ws://127.0.0.1:{hub.port}/services/tacc/tasks/{tid}/proxy/{ws}/echo"
        cookie = "; ".join(f"{c.name}={c.value}" for c in s.cookies if c.name == "service-tacc")
        conn = websocket.create_connection(ws_url, cookie=cookie, origin=hub.url, timeout=30)
        conn.send("through the hub")
        assert conn.recv() == "through the hub"
        conn.close()
        with pytest.raises(websocket.WebSocketBadStatusException) as err:  # another site's page, with the cookie
            websocket.create_connection(ws_url, cookie=cookie, origin="http://evil.example", timeout=30)
        assert err.value.status_code == 403
        r = s.request("PROPFIND", page, headers={"Origin": hub.url}, timeout=30)
        assert r.status_code == 405 and "<html>" in r.text, r.text  # the task's server's own 405: relayed
        r = hub.login("bob").get(page, headers={"Accept": "text/html"}, timeout=30)
        assert r.status_code == 404, r.text
        r = hub.login("admin").get(page, headers={"Accept": "text/html"}, timeout=30)
        assert r.status_code == 200 and r.headers["Content-Security-Policy"].startswith("sandbox"), r.headers
        api.call("POST", f"/api/tasks/{tid}/cancel")
    finally:
        hub.stop()
