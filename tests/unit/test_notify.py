"""Notifications without a service: payload shapes and their escaping, the SSRF rules, settings checks,
and the notifier's rate cap and retries against a real store (the real SMTP server and webhooks are
tests/e2e/test_notifications.py)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import ipaddress
import time
from typing import Any

import pytest
from pydantic import ValidationError

from tacc_hub.notify import Notifier, NotifyConfig, SitePolicy, payloads
from tacc_hub.notify.deliver import DeliveryError
from tacc_hub.notify.settings import NotifySettings, load_settings
from tacc_hub.notify.urlcheck import GuardedResolver, Refused, check_address, check_url_form
from tacc_hub.service.events import TaskEvent
from tacc_hub.store import NewTask, Store

HOSTILE = "x\r\nBcc: victim@evil.example\r\n\r\n<!channel> <https://evil.example|click> & more"


def _task(name: str = "train", reason: str | None = HOSTILE) -> dict[str, Any]:
    return {"id": 7, "name": name, "owner": "alice", "state": "failed", "reason": reason, "exit_code": 3,
            "submitted_at": 1.0, "started_at": 2.0, "finished_at": 3.0}


def test_email_headers_never_carry_cr_lf_from_user_text() -> None:
    msg = payloads.message("failed", "failed", 3.0, _task(name=HOSTILE), link="https://hub.example/t/7")
    mail = payloads.email(msg, sender="tacc@hub.example", to="alice@uni.example")
    raw = mail.as_bytes()
    back = email.message_from_bytes(raw, policy=email.policy.default)
    assert back["Bcc"] is None and back.get_all("To") == ["alice@uni.example"]
    subject = str(back["Subject"])
    assert "\r" not in subject and "\n" not in subject and subject.startswith("tacc: task 7 (x Bcc:")
    headers = raw.split(b"\n\n", 1)[0]
    assert b"victim" in headers  # only inside the one Subject line ...
    assert not any(line.startswith(b"Bcc") for line in headers.splitlines())  # ... never a header of its own


def test_slack_escapes_mentions_and_links_in_user_text() -> None:
    body = payloads.slack(payloads.message("failed", "failed", 3.0, _task(name="a<b>&c", reason=HOSTILE)))
    text = body["blocks"][0]["text"]["text"]
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    assert "<https://evil.example|click>" not in text and "&lt;https://evil.example|click&gt;" in text
    assert "a&lt;b&gt;&amp;c" in body["text"] and "<" not in body["text"]
    assert body["blocks"][0]["type"] == "section" and body["blocks"][0]["text"]["type"] == "mrkdwn"


def test_teams_card_escapes_and_links() -> None:
    card = payloads.teams(payloads.message("failed", "failed", 3.0, _task(name="a<b>"), link="https://h/t/7"))
    assert card["@type"] == "MessageCard" and "a&lt;b&gt;" in card["title"]
    reason = next(f["value"] for f in card["sections"][0]["facts"] if f["name"] == "Reason")
    assert "<!channel>" not in reason and "\n" not in reason
    assert card["potentialAction"][0]["targets"][0]["uri"] == "https://h/t/7"


def test_generic_json_message_schema() -> None:
    msg = payloads.message("ended", "succeeded", 3.0, {**_task(reason=None), "state": "succeeded", "exit_code": 0},
                           link="https://h/t/7")
    assert set(msg) == {"version", "event", "kind", "at", "text", "task", "note"}
    assert msg["task"]["url"] == "https://h/t/7" and msg["text"] == "tacc: task 7 (train) succeeded"
    assert set(msg["task"]) == {"id", "name", "owner", "state", "reason", "exit_code", "submitted_at",
                                "started_at", "finished_at", "url"}


SITE = SitePolicy(email=True, webhook_hosts=("127.0.0.1:8080", "*.hooks.example"),
                  own_addresses=frozenset({"203.0.113.5"}))


@pytest.mark.parametrize("url", [
    "ftp://example.org/x", "file:///etc/passwd", "http://u:p@example.org/", "http://u@example.org/",
    "http:///nohost", "http://127.0.0.1:8081/", "http://169.254.169.254/", "http://[fe80::1]/",
    "http://192.168.1.1/", "http://100.64.0.1/", "http://224.0.0.1/", "http://0.0.0.0/",
    "http://[::ffff:10.0.0.1]/", "http://203.0.113.5/", "http://example.org/\r\nX: y", "javascript:alert(1)",
])
def test_url_form_refusals(url: str) -> None:
    with pytest.raises(Refused):
        check_url_form(url, SITE)


@pytest.mark.parametrize("url", ["https://example.org/hook?k=1", "http://127.0.0.1:8080/x",
                                 "https://a.hooks.example/x", "http://93.184.216.34/"])
def test_url_form_accepted(url: str) -> None:
    assert check_url_form(url, SITE) == url


def test_hosts_only_is_a_strict_allow_list() -> None:
    strict = SitePolicy(webhook_hosts=("hooks.slack.com",), webhook_hosts_only=True)
    assert check_url_form("https://hooks.slack.com/services/x", strict)
    with pytest.raises(Refused, match=r"only to hooks\.slack\.com"):
        check_url_form("https://example.org/x", strict)


def test_guarded_resolver_drops_private_answers_at_connect_time() -> None:
    """DNS rebinding: whatever a name resolved to when saved, the connection's own lookup is judged."""
    async def go() -> None:
        r = GuardedResolver(site=SitePolicy())
        with pytest.raises(Refused, match="loopback"):
            await r.resolve("localhost", 80)
        allowed = GuardedResolver(site=SitePolicy(webhook_hosts=("localhost",)))
        assert await allowed.resolve("localhost", 80)
    asyncio.run(go())


def test_check_address_public_ok() -> None:
    check_address(ipaddress.ip_address("93.184.216.34"), SitePolicy())
    with pytest.raises(Refused):
        check_address(ipaddress.ip_address("::1"), SitePolicy())


def test_settings_rules_name_the_field() -> None:
    ok = NotifySettings.model_validate({"email": "a@uni.example", "events": ["failed", "started", "failed"]},
                                       context={"site": SitePolicy(email=True, email_domains=("uni.example",))})
    assert ok.events == ["started", "failed"]
    cases = [({"email": "a@elsewhere.example"}, SitePolicy(email=True, email_domains=("uni.example",))),
             ({"email": "a@uni.example"}, SitePolicy(email=False)),
             ({"events": ["near_limit"]}, SitePolicy(events=("started",))),
             ({"webhooks": [{"url": "https://example.org/x"}]}, SitePolicy(webhooks=False))]
    for body, site in cases:
        with pytest.raises(ValidationError):
            NotifySettings.model_validate(body, context={"site": site})


# -- the notifier, with a real store and a recording sender --------------------------------


class Recorder:
    def __init__(self, fail: int = 0) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        self.fail = fail

    async def send(self, channel: str, destination: str, payload: dict[str, Any]) -> None:
        if self.fail:
            self.fail -= 1
            raise DeliveryError("HTTP 503: busy")
        self.sent.append((channel, destination, payload))

    def close(self) -> None:
        pass


@pytest.fixture
def store(tmp_path: Any) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.migrate()
    return s


def _tasks(store: Store, n: int) -> list[int]:
    return [r.id for r in store.insert_tasks([NewTask("alice", "t", "d" * 64, {}, {}, submitted_at=0.0)] * n)]


def test_rate_cap_drops_and_says_how_many(store: Store) -> None:
    store.set_notify_settings("alice", {"email": None, "events": ["started"],
                                        "webhooks": [{"url": "https://example.org/h", "format": "json"}]})
    config = NotifyConfig(rate_per_minute=3)
    notifier = Notifier(store, config, sender=Recorder())  # type: ignore[arg-type]
    ids = _tasks(store, 6)
    now = time.time()
    for tid in ids[:5]:
        notifier.on_event(TaskEvent("started", tid, "alice", now))
    notifier.flush()
    assert len(store.due_notifications(now + 1)) == 3 and notifier.dropped == {"alice": 2}
    notifier.on_event(TaskEvent("started", ids[5], "alice", now + 61))
    notifier.flush()
    rows = store.due_notifications(now + 100)
    assert len(rows) == 4 and "2 earlier notification(s) were dropped" in rows[-1].payload["message"]["note"]


def test_retries_then_sent_and_history(store: Store) -> None:
    store.set_notify_settings("alice", {"email": None, "events": ["failed"],
                                        "webhooks": [{"url": "https://example.org/h", "format": "slack"}]})
    sender = Recorder(fail=2)
    notifier = Notifier(store, NotifyConfig(retry_delays=(0.05, 0.1)), sender=sender)  # type: ignore[arg-type]
    (tid,) = _tasks(store, 1)

    async def go() -> None:
        await notifier.start()
        notifier.on_event(TaskEvent("failed", tid, "alice", time.time(), reason="exited with status 1"))
        for _ in range(200):
            if sender.sent:
                break
            await asyncio.sleep(0.02)
        await notifier.stop()
    asyncio.run(go())
    (row,) = store.notification_history("alice")
    assert row.status == "sent" and row.attempts == 3 and sender.sent[0][2]["format"] == "slack"


def test_history_is_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from tacc_hub.store import notify

    monkeypatch.setattr(notify, "HISTORY_PER_USER", 3)
    for _ in range(5):
        (rid,) = store.add_notifications([("bob", "webhook", "https://e.org/h", "ended", None, {})])
        store.notification_sent(rid, 1)
    store.add_notifications([("bob", "webhook", "https://e.org/h", "ended", None, {})])
    rows = store.notification_history("bob", 50)
    assert [r.status for r in rows] == ["pending", "sent", "sent", "sent"]


def test_a_tasks_own_notify_block_mails_within_the_sites_domains(store: Store) -> None:
    """``notify:`` in a spec (sbatch --mail-user/--mail-type): its address for its events; ``end`` is any
    outcome; an address outside the site's domains is never mailed; webhooks come from settings only."""
    site = SitePolicy(email=True, email_domains=("uni.example",))
    notifier = Notifier(store, NotifyConfig(site=site), sender=Recorder())  # type: ignore[arg-type]
    none = load_settings(None)
    spec = {"notify": {"email": "me@lab.uni.example", "events": ["end", "time_limit"]}}
    assert notifier.channels(none, "ended", spec) == (["me@lab.uni.example"], [])
    assert notifier.channels(none, "failed", spec) == (["me@lab.uni.example"], [])
    assert notifier.channels(none, "near_limit", spec) == (["me@lab.uni.example"], [])
    assert notifier.channels(none, "started", spec) == ([], [])
    outside = {"notify": {"email": "victim@elsewhere.example", "events": ["start"]}}
    assert notifier.channels(none, "started", outside) == ([], [])
    mine = NotifySettings.model_construct(email="a@uni.example", events=["started"], webhooks=[])
    assert notifier.channels(mine, "started", {"notify": {"events": ["start"]}}) == (["a@uni.example"], [])
    no_mail = Notifier(store, NotifyConfig(site=SitePolicy(email=False)), sender=Recorder())  # type: ignore[arg-type]
    assert no_mail.channels(none, "ended", spec) == ([], [])


def test_a_test_notification_goes_only_where_the_site_still_allows(store: Store) -> None:
    """Settings saved while the site allowed webhooks and e-mail; it no longer does: a test queues nothing."""
    store.set_notify_settings("alice", {"email": "a@uni.example", "events": ["ended"],
                                        "webhooks": [{"url": "https://example.org/h", "format": "json"}]})
    off = Notifier(store, NotifyConfig(site=SitePolicy(email=False, webhooks=False)),
                   sender=Recorder())  # type: ignore[arg-type]
    assert off.queue_test("alice") == 0 and store.notification_history("alice") == []
    on = Notifier(store, NotifyConfig(site=SitePolicy(email=True)), sender=Recorder())  # type: ignore[arg-type]
    assert on.queue_test("alice") == 2
