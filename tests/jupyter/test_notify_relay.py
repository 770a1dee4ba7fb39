"""The server extension relays the notification routes to the real service, as the server's user."""

from __future__ import annotations

from .test_extension import call


def test_notification_settings_are_relayed(jp_asyncio_loop, jp_fetch, tacc_env):
    code, out = call(jp_asyncio_loop, jp_fetch, "PUT", "notifications",
                     body={"email": None, "events": ["failed", "started"], "webhooks": []})
    assert code == 200, out
    assert out["user"] == "nbuser" and out["settings"]["events"] == ["started", "failed"]
    code, out = call(jp_asyncio_loop, jp_fetch, "GET", "notifications")
    assert code == 200 and out["settings"]["events"] == ["started", "failed"], out
    assert out["usage_url"] == "/usage" and out["site"]["email"] is False  # the shared service: no SMTP
    # the service's refusal, with its field, comes back as it is
    code, out = call(jp_asyncio_loop, jp_fetch, "PUT", "notifications",
                     body={"webhooks": [{"url": "http://169.254.169.254/latest/meta-data/"}]})
    assert code == 422 and out["errors"][0]["field"] == "webhooks[0].url", out
    code, out = call(jp_asyncio_loop, jp_fetch, "PUT", "notifications", body=["not", "an", "object"])
    assert code == 400, out
    code, out = call(jp_asyncio_loop, jp_fetch, "GET", "notifications", "history", params={"limit": "5"})
    assert code == 200 and out["deliveries"] == [], out
    code, out = call(jp_asyncio_loop, jp_fetch, "POST", "notifications", "test", body={})
    assert code == 200 and out == {"queued": 0}, out  # nothing set: nothing queued
