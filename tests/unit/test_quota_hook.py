"""Every successful quota or membership change through the API bumps ``TaccHub.quota_version``; refusals do not."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import tornado.httpclient
import tornado.httpserver

from tacc_hub.service.app import TaccHub
from tacc_hub.service.auth import new_token


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_changes_bump_quota_version(tmp_path: Path):
    hub = TaccHub()
    hub.initialize([f"--TaccHub.state_dir={tmp_path}", "--TaccHub.quota_period=week",
                    "--TaccHub.config_file=/nonexistent.py"])
    ctx, app = hub.build()
    assert ctx.quota_period == "week"
    admin = new_token(ctx.store, "root", admin=True)
    user = new_token(ctx.store, "ann")
    port = _free_port()
    server = tornado.httpserver.HTTPServer(app)
    server.listen(port, "127.0.0.1")
    client = tornado.httpclient.AsyncHTTPClient()

    async def call(method: str, path: str, token: str, body: object = None) -> int:
        resp = await client.fetch(f"http://127.0.0.1:{port}{path}", method=method, raise_error=False,
                                  headers={"Authorization": f"token {token}"},
                                  body=None if body is None else json.dumps(body),
                                  allow_nonstandard_methods=True)
        return resp.code

    try:
        assert hub.quota_version == 0
        assert await call("PUT", "/api/admin/quotas/user/ann", admin, {"max_gpus": 2}) == 200
        assert hub.quota_version == 1
        assert await call("PUT", "/api/admin/users/ann/group", admin, {"group": "lab"}) == 200
        assert await call("DELETE", "/api/admin/users/ann/group", admin) == 200
        assert await call("DELETE", "/api/admin/quotas/user/ann", admin) == 200
        assert hub.quota_version == 4
        # refused or read-only requests change nothing
        assert await call("PUT", "/api/admin/quotas/user/ann", user, {"max_gpus": 2}) == 403
        assert await call("PUT", "/api/admin/quotas/user/ann", admin, {"max_gpus": -2}) == 400
        assert await call("DELETE", "/api/admin/quotas/user/ann", admin) == 404
        assert await call("GET", "/api/admin/quotas", admin) == 200
        assert await call("GET", "/api/quota", user) == 200
        assert hub.quota_version == 4
    finally:
        server.stop()
        ctx.store.close()
