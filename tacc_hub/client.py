"""The one typed HTTP client of the tacc_hub API (used by tcloud, the magic and tests).

Built on urllib3 (connection pooling, retries of failed connects) and
sseclient-py (the log stream): both import in a few tens of milliseconds,
which keeps ``tcloud ps`` fast.

Invariants: every non-2xx answer becomes ``ApiClientError`` carrying the
status, the service's message and its per-field errors; a service that cannot
be reached becomes ``ApiClientError`` with status 0 and a message naming the URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import urllib3


class ApiClientError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.status = status
        self.message = message
        self.errors = errors or []
        super().__init__(f"{status}: {message}" if status else message)


class TaccClient:
    def __init__(self, url: str, token: str | None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"token {token}"} if token else {}
        self.timeout = timeout
        self.http = urllib3.PoolManager(
            retries=urllib3.Retry(connect=2, read=0, redirect=0, status=0, backoff_factor=0.2), maxsize=4
        )

    def close(self) -> None:
        self.http.clear()

    def __enter__(self) -> TaccClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _url(self, path: str, params: dict[str, Any] | None) -> str:
        return self.url + path + (("?" + urlencode(params)) if params else "")

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: bytes | None = None,
                 content_type: str | None = None, stream: bool = False, timeout: Any = None) -> Any:
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        try:
            resp = self.http.request(method, self._url(path, params), body=body, headers=headers,
                                     preload_content=not stream, timeout=timeout or self.timeout)
        except urllib3.exceptions.HTTPError as exc:
            raise ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {exc}") from None
        if resp.status >= 400:
            data = resp.data if not stream else resp.read()
            try:
                doc = json.loads(data)
                raise ApiClientError(resp.status, doc.get("message", resp.reason or ""), doc.get("errors"))
            except (ValueError, AttributeError):
                raise ApiClientError(resp.status, data[:500].decode(errors="replace") or str(resp.reason)) from None
        return resp

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        resp = self._request(method, path, **kw)
        return dict(json.loads(resp.data))

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

        while True:
            resp = self._request("GET", f"/api/tasks/{int(task_id)}/logs/stream", params={"offset": offset},
                                 stream=True, timeout=urllib3.Timeout(connect=self.timeout, read=None))
            try:
                for ev in sseclient.SSEClient(resp).events():
                    data = json.loads(ev.data)
                    if ev.event == "log" and ev.id:
                        offset = int(ev.id)
                    yield ev.event, data
                    if ev.event == "end":
                        return
            except (urllib3.exceptions.HTTPError, ConnectionError):
                continue  # reconnect and resume from the last offset
            finally:
                resp.release_conn()

    def outputs(self, task_id: int) -> bytes:
        return bytes(self._request("GET", f"/api/tasks/{int(task_id)}/outputs").data)

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
