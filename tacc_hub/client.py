"""The one typed HTTP client of the tacc_hub API (used by tcloud, the magic and tests).

Built on the standard library's ``http.client`` (one kept-alive connection) and
sseclient-py for the log stream. A third-party HTTP stack was measured to add
more than 100 ms of imports to every ``tcloud`` command on our machines; this
client needs nothing beyond what ``tcloud`` already loads.

Invariants: every non-2xx answer becomes ``ApiClientError`` carrying the
status, the service's message and its per-field errors; a service that cannot
be reached becomes ``ApiClientError`` with status 0 and a message naming the
URL; a kept-alive connection that the server closed is reopened once.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

RESTART_WAIT_S = 60.0  # how long a log stream waits for a restarting service


class ApiClientError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.status = status
        self.message = message
        self.errors = errors or []
        super().__init__(f"{status}: {message}" if status else message)


class _Response:
    def __init__(self, status: int, reason: str, data: bytes) -> None:
        self.status, self.reason, self.data = status, reason, data


class TaccClient:
    def __init__(self, url: str, token: str | None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiClientError(0, f"not an http(s) URL: {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.headers = {"Authorization": f"token {token}"} if token else {}
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> TaccClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _target(self, path: str, params: dict[str, Any] | None) -> str:
        return self._prefix + path + (("?" + urlencode(params)) if params else "")

    def _send(self, conn: http.client.HTTPConnection, method: str, target: str, body: bytes | None,
              content_type: str | None) -> http.client.HTTPResponse:
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        conn.request(method, target, body=body, headers=headers)
        return conn.getresponse()

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: bytes | None = None,
                 content_type: str | None = None) -> _Response:
        target = self._target(path, params)
        for attempt in (0, 1):
            fresh = self._conn is None
            if self._conn is None:
                self._conn = self._connect(self.timeout)
            try:
                resp = self._send(self._conn, method, target, body, content_type)
                data = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if fresh or attempt:  # only a reused keep-alive connection earns a second try
                    raise ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {exc}") from None
            except OSError as exc:
                self.close()
                raise ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {exc}") from None
        if resp.will_close:
            self.close()
        out = _Response(resp.status, resp.reason, data)
        if out.status >= 400:
            self._raise(out)
        return out

    @staticmethod
    def _raise(resp: _Response) -> None:
        try:
            doc = json.loads(resp.data)
            message, errors = doc.get("message", resp.reason or ""), doc.get("errors")
        except (ValueError, AttributeError):
            message, errors = resp.data[:500].decode(errors="replace") or str(resp.reason), None
        raise ApiClientError(resp.status, message, errors)

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        return dict(json.loads(self._request(method, path, **kw).data))

    # tasks
    def submit(self, spec: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self._json("POST", "/api/tasks", params={"dry_run": "1"} if dry_run else None,
                          body=json.dumps(spec).encode(), content_type="application/json")

    def list(self, *, states: list[str] | None = None, limit: int = 50, before: int | None = None,
             all_users: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if states:
            params["state"] = ",".join(states)
        if before:
            params["before"] = before
        if all_users:
            params["all"] = "1"
        return self._json("GET", "/api/tasks", params=params)

    def show(self, task_id: int) -> dict[str, Any]:
        return self._json("GET", f"/api/tasks/{int(task_id)}")

    def cancel(self, task_id: int) -> dict[str, Any]:
        return self._json("POST", f"/api/tasks/{int(task_id)}/cancel")

    def logs(self, task_id: int, offset: int = 0, limit: int = 1024 * 1024) -> dict[str, Any]:
        return self._json("GET", f"/api/tasks/{int(task_id)}/logs", params={"offset": offset, "limit": limit})

    def stream_logs(self, task_id: int, offset: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ("log", {"offset", "data"}) events, then ("end", {"status"}); resumes after a dropped connection."""
        import sseclient

        down_since: float | None = None  # when a stream that worked lost its service
        while True:
            conn = self._connect(None)  # its own connection, no read timeout: the stream is long-lived
            try:
                resp = self._send(conn, "GET", self._target(f"/api/tasks/{int(task_id)}/logs/stream",
                                                            {"offset": offset}), None, None)
                if resp.status >= 400:
                    self._raise(_Response(resp.status, resp.reason, resp.read()))
                down_since = None
                for ev in sseclient.SSEClient(resp).events():
                    data = json.loads(ev.data)
                    if ev.event == "log" and ev.id:
                        offset = int(ev.id)
                    yield ev.event, data
                    if ev.event == "end":
                        return
                down_since = down_since or time.monotonic()  # closed without "end": reconnect, resume
            except ConnectionRefusedError as exc:
                # Refused on the first connect: the service is not there. Refused after a stream
                # broke: it is restarting; keep trying for RESTART_WAIT_S, then give up.
                now = time.monotonic()
                if down_since is None or now - down_since > RESTART_WAIT_S:
                    raise ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {exc}") from None
                time.sleep(0.5)
            except (http.client.HTTPException, ConnectionError):
                if down_since is None:
                    down_since = time.monotonic()
                continue  # the stream broke: reconnect and resume from the last offset
            finally:
                conn.close()

    def outputs(self, task_id: int) -> bytes:
        return self._request("GET", f"/api/tasks/{int(task_id)}/outputs").data

    # code
    def has_code(self, digest: str) -> bool:
        try:
            self._request("HEAD", f"/api/code/{digest}")
            return True
        except ApiClientError as exc:
            if exc.status == 404:
                return False
            raise

    def upload_code(self, digest: str, data: bytes) -> dict[str, Any]:
        return self._json("PUT", f"/api/code/{digest}", body=data, content_type="application/gzip")

    # cluster
    def cluster(self) -> dict[str, Any]:
        return self._json("GET", "/api/cluster")

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/api/health")

    # quotas (admin routes answer 403 to others)
    def my_quota(self, user: str | None = None) -> dict[str, Any]:
        return self._json("GET", "/api/quota", params={"user": user} if user else None)

    def quotas(self) -> dict[str, Any]:
        return self._json("GET", "/api/admin/quotas")

    def quota(self, kind: str, name: str) -> dict[str, Any]:
        return self._json("GET", f"/api/admin/quotas/{quote(kind, safe='')}/{quote(name, safe='')}")

    def set_quota(self, kind: str, name: str, limits: dict[str, Any]) -> dict[str, Any]:
        return self._json("PUT", f"/api/admin/quotas/{quote(kind, safe='')}/{quote(name, safe='')}",
                          body=json.dumps(limits).encode(), content_type="application/json")

    def delete_quota(self, kind: str, name: str) -> dict[str, Any]:
        return self._json("DELETE", f"/api/admin/quotas/{quote(kind, safe='')}/{quote(name, safe='')}")

    def groups(self) -> dict[str, Any]:
        return self._json("GET", "/api/admin/groups")

    def set_group(self, user: str, group: str | None) -> dict[str, Any]:
        path = f"/api/admin/users/{quote(user, safe='')}/group"
        if group is None:
            return self._json("DELETE", path)
        return self._json("PUT", path, body=json.dumps({"group": group}).encode(), content_type="application/json")
