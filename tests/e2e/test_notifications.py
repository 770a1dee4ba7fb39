"""Notifications through the real service: a real SMTP server (aiosmtpd) and a local webhook receiver.

Its own service (SMTP on a local aiosmtpd, webhooks allowed only to this test's receivers, quick retries)
and, for each event a user can ask for (started, ended, failed, preempted, near_limit), a task that makes
it happen; each notification must reach the mailbox and each webhook in its shape. Then: a dead endpoint
(one that accepts and never answers, one that refuses) holds up no one else; retries end ``failed`` with
the last error in the history; pending rows survive a restart; and the attacks: another user's settings,
SSRF URLs, CR/LF in a task name, hostile names in Slack's mrkdwn.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from aiosmtpd.controller import Controller
from prometheus_client.parser import text_string_to_metric_families

from .conftest import Api, ServiceProcess, free_port, tcloud, write_task

# -- the receivers ------------------------------------------------------------------------


class Mailbox:
    """aiosmtpd handler: keeps every message it is given."""

    def __init__(self) -> None:
        self.mails: list[tuple[list[str], EmailMessage]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = message_from_bytes(envelope.content, policy=policy.default)
        self.mails.append((list(envelope.rcpt_tos), msg))  # type: ignore[arg-type]
        return "250 OK"


class Hooks:
    """A webhook receiver: every POST, by path, in arrival order."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, Any, float]] = []
        hooks = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                hooks.posts.append((self.path, json.loads(body), time.time()))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Any]:
        return [body for p, body, _ in self.posts if p == path]


def wait_for(pred: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{what}: not seen in {timeout} s")


class Env:
    def __init__(self, svc: ServiceProcess, mailbox: Mailbox, hooks: Hooks, hang: socket.socket,
                 refused_port: int) -> None:
        self.svc, self.mailbox, self.hooks = svc, mailbox, hooks
        self.hang_url = f"http://127.0.0.1:{hang.getsockname()[1]}/hang"
        self.refused_url = f"http://127.0.0.1:{refused_port}/refused"

    def api(self, user: str) -> Api:
        return Api(self.svc.url, self.svc.token(user))

    def mails_to(self, address: str, subject_part: str) -> list[EmailMessage]:
        return [m for rcpt, m in self.mailbox.mails if address in rcpt and subject_part in str(m["Subject"])]


def _config(state: Path, smtp_port: int, allowed: list[str]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "tacc_hub_config.py").write_text(
        f"c.TaccHub.smtp_host = '127.0.0.1'\nc.TaccHub.smtp_port = {smtp_port}\n"
        "c.TaccHub.smtp_security = 'none'\nc.TaccHub.smtp_from = 'tacc@cluster.example'\n"
        f"c.TaccHub.notify_webhook_hosts = {allowed!r}\n"
        "c.TaccHub.notify_retry_delays = [0.5, 1.0]\nc.TaccHub.notify_timeout = 30.0\n"
        "c.TaccHub.notify_task_link = 'https://hub.example/services/tacc/api/tasks/{id}'\n")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    mailbox = Mailbox()
    smtp = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    hooks = Hooks()
    hang = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    hang.bind(("127.0.0.1", 0))
    hang.listen(64)
    refused_port = free_port()  # nothing listens there
    state = tmp_path_factory.mktemp("svc-notify")
    allowed = [f"127.0.0.1:{p}" for p in (hooks.port, hang.getsockname()[1], refused_port)]
    _config(state, smtp.port, allowed)
    svc = ServiceProcess(state, "--gpus=2", "--TaccHub.grace_period=2", "--TaccHub.policy=srpt-oracle").start()
    yield Env(svc, mailbox, hooks, hang, refused_port)
    svc.stop()
    smtp.stop()
    hooks.server.shutdown()
    hang.close()


def _settings(e: Env, user: str, body: dict[str, Any]) -> dict[str, Any]:
    status, out = e.api(user).call("PUT", "/api/notifications", body)
    assert status == 200, out
    return out


def _submit(e: Env, user: str, d: Path) -> int:
    res = tcloud(e.svc, user, "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout)["id"])


ALL = ["started", "ended", "failed", "preempted", "near_limit"]


def _alice(e: Env, user: str = "alice") -> None:
    _settings(e, user, {"email": f"{user}@uni.example", "events": ALL, "webhooks": [
        {"url": e.hooks.url(f"/{user}-json")}, {"url": e.hooks.url(f"/{user}-slack"), "format": "slack"},
        {"url": e.hooks.url(f"/{user}-teams"), "format": "teams"}]})


def _json_for(e: Env, tid: int, event: str, user: str = "alice") -> dict[str, Any]:
    return wait_for(lambda: next((b for b in e.hooks.at(f"/{user}-json")
                                  if b["event"] == event and (b["task"] or {}).get("id") == tid), None),
                    f"json webhook {event} of task {tid}")


def _all_channels(e: Env, tid: int, event: str, words: str, user: str = "alice") -> dict[str, Any]:
    """The notification of ``event`` about ``tid`` in all four channels; the generic JSON one."""
    body = _json_for(e, tid, event, user)
    assert body["version"] == 1 and body["task"]["owner"] == user, body
    assert body["task"]["url"] == f"https://hub.example/services/tacc/api/tasks/{tid}"
    mail = wait_for(lambda: e.mails_to(f"{user}@uni.example", f"task {tid} "), f"mail of task {tid}")
    assert any(words in str(m["Subject"]) for m in wait_for(
        lambda: [m for m in e.mails_to(f"{user}@uni.example", f"task {tid} ") if words in str(m["Subject"])],
        f"mail '{words}' of task {tid}")), [str(m["Subject"]) for m in mail]
    slack = wait_for(lambda: [b for b in e.hooks.at(f"/{user}-slack") if f"task {tid} " in b["text"]
                              and words in b["text"]], f"slack {event} of {tid}")
    assert slack[0]["blocks"][0]["type"] == "section" and slack[0]["blocks"][0]["text"]["type"] == "mrkdwn"
    teams = wait_for(lambda: [b for b in e.hooks.at(f"/{user}-teams") if f"task {tid} " in b["title"]
                              and words in b["title"]], f"teams {event} of {tid}")
    assert teams[0]["@type"] == "MessageCard" and teams[0]["sections"][0]["facts"][0]["name"] == "Task"
    assert teams[0]["potentialAction"][0]["targets"][0]["uri"] == body["task"]["url"]
    return body


# -- each event ---------------------------------------------------------------------------


def test_started_and_ended_reach_mail_and_every_webhook(env: Env, tmp_path: Path) -> None:
    _alice(env)
    tid = _submit(env, "alice", write_task(tmp_path / "ok", "name: fine-run\ncode: .\nentrypoint: echo hi\n"))
    started = _all_channels(env, tid, "started", "started")
    assert started["kind"] == "started" and started["task"]["name"] == "fine-run"
    ended = _all_channels(env, tid, "ended", "succeeded")
    assert ended["task"]["state"] == "succeeded" and ended["task"]["exit_code"] == 0
    mail = env.mails_to("alice@uni.example", f"task {tid} (fine-run) succeeded")[0]
    assert mail["From"] == "tacc@cluster.example" and "Exit code: 0" in mail.get_content()
    _, hist = env.api("alice").call("GET", "/api/notifications/history")
    sent = [d for d in hist["deliveries"] if d["task_id"] == tid]
    assert len(sent) == 8 and all(d["status"] == "sent" and d["attempts"] == 1 for d in sent), sent


def test_failed_names_its_exit_code(env: Env, tmp_path: Path) -> None:
    _alice(env)
    tid = _submit(env, "alice", write_task(tmp_path / "bad", "name: bad-run\ncode: .\nentrypoint: exit 3\n"))
    body = _all_channels(env, tid, "failed", "failed")
    assert body["kind"] == "failed" and body["task"]["exit_code"] == 3 and "status 3" in body["task"]["reason"]


def test_near_limit_is_told_at_the_warning(env: Env, tmp_path: Path) -> None:
    _alice(env)
    d = write_task(tmp_path / "near", "name: near\ncode: .\nentrypoint:\n"
                   "  - trap 'echo got-usr1; exit 0' USR1\n  - while true; do sleep 0.2; done\n"
                   "resources: {time_limit: 70}\nqos: {warn_before: 66}\n")
    tid = _submit(env, "alice", d)
    body = _all_channels(env, tid, "near_limit", "near its time limit")
    assert "left of its time limit of 70 s" in body["task"]["reason"], body
    _all_channels(env, tid, "ended", "succeeded")  # it trapped the warning and exited


def test_preempted_is_told(env: Env, tmp_path: Path) -> None:
    """ivan's preemptible task (1 h limit, no history: predicted 1 h) gives way to h's 1-minute one."""
    _alice(env, "ivan")
    low = _submit(env, "ivan", write_task(tmp_path / "low", "name: low\ncode: .\nentrypoint: sleep 600\nresources: "
                                          "{gpus_per_node: 2, time_limit: 3600}\nqos: {preemptible: true}\n"))
    env.api("ivan").wait_status(low, {"running"})
    high = _submit(env, "h", write_task(tmp_path / "high", "name: high\ncode: .\nentrypoint: sleep 1\n"
                                        "resources: {gpus_per_node: 2, time_limit: 60}\n"))
    body = _all_channels(env, low, "preempted", "preempted", "ivan")
    assert body["kind"] == "preempted" and "preempted" in body["task"]["reason"]
    env.api("h").wait_status(high, {"succeeded"})
    env.api("ivan").call("POST", f"/api/tasks/{low}/cancel")
    env.api("ivan").wait_status(low, {"cancelled"})


# -- isolation of failing endpoints, retries, restarts --------------------------------------


def _history(e: Env, user: str) -> list[dict[str, Any]]:
    status, out = e.api(user).call("GET", "/api/notifications/history")
    assert status == 200, out
    return out["deliveries"]


def test_a_dead_endpoint_delays_no_one_else_and_ends_failed(env: Env, tmp_path: Path) -> None:
    """dave's webhooks: one that accepts and never answers (tries time out after 30 s), one that refuses.
    While dave's first try to the silent one is still in flight, carol's task is scheduled and her
    notification delivered; the refusing one is retried (0.5 s, 1 s) and ends failed with its error."""
    _settings(env, "dave", {"events": ["started"], "webhooks": [{"url": env.hang_url}, {"url": env.refused_url}]})
    _settings(env, "carol", {"events": ["started"], "webhooks": [{"url": env.hooks.url("/carol")}]})
    dave_task = _submit(env, "dave", write_task(tmp_path / "d", "name: d\ncode: .\nentrypoint: echo d\n"))
    wait_for(lambda: [d for d in _history(env, "dave") if d["destination"] == env.refused_url
                      and d["attempts"] >= 1], "dave's first try to the refusing endpoint")
    hang_row = next(d for d in _history(env, "dave") if d["destination"] == env.hang_url)
    assert hang_row["status"] == "pending" and hang_row["attempts"] == 0  # its first try: still in flight

    carol_task = _submit(env, "carol", write_task(tmp_path / "c", "name: c\ncode: .\nentrypoint: echo c\n"))
    got = wait_for(lambda: [b for b in env.hooks.at("/carol") if b["task"]["id"] == carol_task],
                   "carol's started notification")
    assert got[0]["event"] == "started"
    # carol's task was started and told while dave's silent endpoint still held its first try
    hang_row = next(d for d in _history(env, "dave") if d["destination"] == env.hang_url)
    assert hang_row["status"] == "pending" and hang_row["attempts"] == 0, hang_row
    assert dave_task < carol_task

    refused = wait_for(lambda: [d for d in _history(env, "dave") if d["destination"] == env.refused_url
                                and d["status"] == "failed"], "the refusing endpoint given up")
    assert refused[0]["attempts"] == 3 and "refused" in refused[0]["last_error"].lower(), refused
    out = tcloud(env.svc, "dave", "notify", "history")
    assert out.returncode == 0 and "failed" in out.stdout and env.refused_url in out.stdout, out.stdout
    # what an admin's Prometheus sees of it: retries and the try given up, beside carol's sent one
    admin = env.svc.token("admin", admin=True)
    text = requests.get(env.svc.url + "/metrics", headers={"Authorization": f"token {admin}"}, timeout=30).text
    tries = {(s.labels["channel"], s.labels["outcome"]): s.value for f in text_string_to_metric_families(text)
             if f.name == "tacc_notification_tries" for s in f.samples if s.name.endswith("_total")}
    assert tries[("webhook", "failed")] >= 1 and tries[("webhook", "retry")] >= 2, tries
    assert tries[("webhook", "sent")] >= 1, tries


def test_pending_notifications_are_delivered_after_a_restart(tmp_path: Path) -> None:
    """A try in flight when the service stops leaves its row pending; the next start delivers it."""
    mailbox = Mailbox()
    smtp = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    hang = socket.socket()
    hang.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)
    port = hang.getsockname()[1]
    _config(tmp_path / "state", smtp.port, [f"127.0.0.1:{port}"])
    svc = ServiceProcess(tmp_path / "state", "--gpus=1").start()
    receiver: ThreadingHTTPServer | None = None
    try:
        api = Api(svc.url, svc.token("ann"))
        assert api.call("PUT", "/api/notifications", {"events": ["ended"], "webhooks": [
            {"url": f"http://127.0.0.1:{port}/ann", "format": "json"}]})[0] == 200
        res = tcloud(svc, "ann", "submit", str(write_task(tmp_path / "t", "name: t\ncode: .\nentrypoint: echo t\n")),
                     "--json")
        assert res.returncode == 0, res.stderr
        tid = int(json.loads(res.stdout)["id"])
        api.wait_status(tid, {"succeeded"})
        wait_for(lambda: [d for d in api.call("GET", "/api/notifications/history")[1]["deliveries"]
                          if d["task_id"] == tid], "the row written")
        svc.stop()
        row = api  # the service is down: read the row after the restart
        hang.close()
        posts: list[Any] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        receiver = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=receiver.serve_forever, daemon=True).start()
        svc.start()
        got = wait_for(lambda: [p for p in posts if p["task"]["id"] == tid], "the pending notification delivered")
        assert got[0]["event"] == "ended"
        hist = row.call("GET", "/api/notifications/history")[1]["deliveries"]
        assert [(d["status"], d["attempts"]) for d in hist if d["task_id"] == tid] == [("sent", 1)], hist
    finally:
        svc.stop()
        smtp.stop()
        if receiver is not None:
            receiver.shutdown()
        hang.close()


def test_test_notification_reaches_each_channel(env: Env) -> None:
    _settings(env, "sam", {"email": "sam@uni.example", "events": ["ended"],
                           "webhooks": [{"url": env.hooks.url("/sam"), "format": "slack"}]})
    res = tcloud(env.svc, "sam", "notify", "test")
    assert res.returncode == 0 and "2" in res.stdout, (res.stdout, res.stderr)
    wait_for(lambda: env.mails_to("sam@uni.example", "test notification"), "the test e-mail")
    body = wait_for(lambda: env.hooks.at("/sam"), "the test webhook")[0]
    assert "test notification" in body["text"]


# -- attacks ----------------------------------------------------------------------------------


def test_no_one_reads_or_changes_another_users_settings(env: Env) -> None:
    _alice(env)
    before = env.api("alice").call("GET", "/api/notifications")[1]
    bob = env.api("bob")
    assert bob.call("GET", "/api/notifications?user=alice")[0] == 403
    assert bob.call("GET", "/api/notifications/history?user=alice")[0] == 403
    status, _ = bob.call("PUT", "/api/notifications?user=alice", {"email": "bob@uni.example", "webhooks": []})
    assert status == 403
    assert bob.call("PUT", "/api/notifications", {"email": "bob@uni.example"})[0] == 200  # his own only
    assert env.api("alice").call("GET", "/api/notifications")[1] == before
    assert all(d["destination"] != "alice@uni.example" for d in _history(env, "bob"))
    admin = Api(env.svc.url, env.svc.token("admin", admin=True))
    assert admin.call("GET", "/api/notifications?user=alice")[1]["settings"] == before["settings"]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:22/hook",  # loopback, not in the site's list
    "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
    "file:///etc/passwd",
    "gopher://127.0.0.1:25/",
    "http://user:pw@example.org/hook",
    "http://localhost:{port}/alice-json",  # a name that resolves to loopback (the list names 127.0.0.1 only)
    "http://[::1]:{port}/",
    "http://10.1.2.3/hook",
    "http://0.0.0.0:{port}/",
    "http://[::ffff:127.0.0.1]:22/",
    "http://example.org/a b",
])
def test_ssrf_urls_are_refused(env: Env, url: str) -> None:
    _alice(env)
    before = env.api("alice").call("GET", "/api/notifications")[1]
    status, out = env.api("alice").call("PUT", "/api/notifications", {
        "webhooks": [{"url": url.replace("{port}", str(env.hooks.port))}]})
    assert status == 422, out
    assert out["errors"][0]["field"] == "webhooks[0].url", out
    assert env.api("alice").call("GET", "/api/notifications")[1] == before  # nothing saved


@pytest.mark.parametrize(("body", "field"), [
    ({"email": "alice@uni.example\r\nBcc: victim@evil.example"}, "email"),
    ({"email": "not-an-address"}, "email"),
    ({"events": ["started", "reboot"]}, "events"),
    ({"webhooks": [{"url": "https://example.org/h", "format": "xml"}]}, "webhooks[0].format"),
    ({"webhooks": [{"url": f"https://example.org/h{i}"} for i in range(6)]}, "webhooks"),
    ({"webhooks": [{"url": "https://example.org/h", "secret": "x"}]}, "webhooks[0].secret"),
    ({"colour": "red"}, "colour"),
])
def test_bad_settings_are_refused_naming_the_field(env: Env, body: dict[str, Any], field: str) -> None:
    status, out = env.api("bob").call("PUT", "/api/notifications", body)
    assert status == 422, out
    assert out["errors"][0]["field"] == field, out


def test_a_task_name_with_cr_lf_never_reaches_a_header(env: Env) -> None:
    """The schema refuses such a name at submit; nothing of it reaches the outbox (the formatter's own
    defence, for any text, is tests/unit/test_notify_payloads.py)."""
    _alice(env)
    api = env.api("alice")
    status, out = api.call("POST", "/api/tasks", {"name": "x\r\nBcc: victim@evil.example", "entrypoint": "true"})
    assert status == 422, out
    assert all("victim" not in str(m) for _, m in env.mailbox.mails)


def test_tcloud_notify_changes_one_thing_at_a_time(env: Env) -> None:
    def run(*args: str) -> str:
        res = tcloud(env.svc, "cy", "notify", *args)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        return res.stdout

    assert "e-mail:   (none)" in run()
    assert "cy@uni.example" in run("email", "cy@uni.example")
    assert "events:   started, ended, failed" in run("on", "started")
    assert "events:   started, ended, failed, preempted\n" in run("off", "near_limit")
    url = env.hooks.url("/cy")
    assert f"{url}  [teams]" in run("webhook", "add", url, "--format", "teams")
    out = json.loads(run("--json"))["settings"]
    assert out == {"email": "cy@uni.example", "events": ["started", "ended", "failed", "preempted"],
                   "webhooks": [{"url": url, "format": "teams"}]}
    assert "webhooks: (none)" in run("webhook", "remove", url)
    assert "cy@uni.example" not in run("email", "--off")
    bad = tcloud(env.svc, "cy", "notify", "webhook", "add", "http://169.254.169.254/")
    assert bad.returncode == 1 and "webhooks[0].url" in bad.stderr and "link-local" in bad.stderr, bad.stderr


def test_a_tasks_own_notify_block_is_mailed(env: Env, tmp_path: Path) -> None:
    """``notify:`` in the task file (what sbatch's --mail-user/--mail-type become), with no settings saved."""
    d = write_task(tmp_path / "own", "name: own-notify\ncode: .\nentrypoint: echo hi\n"
                   "notify: {email: dee@uni.example, events: [end]}\n")
    tid = _submit(env, "dee", d)
    mail = wait_for(lambda: env.mails_to("dee@uni.example", f"task {tid} (own-notify) succeeded"), "dee's mail")
    assert mail[0]["To"] == "dee@uni.example"
    assert not env.mails_to("dee@uni.example", f"task {tid} (own-notify) started")  # start was not asked for
