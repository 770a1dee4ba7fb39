"""The one typed HTTP client of the tacc_hub API (used by tcloud, the magic and tests).

Invariants: every non-2xx answer becomes ``ApiClientError`` carrying the
status, the service's message and its per-field errors; connection failures
become ``ApiClientError`` with status 0 and a message that says which URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx


class ApiClientError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.status = status
        self.message = message
        self.errors = errors or []
        super().__init__(f"{status}: {message}" if status else message)


class TaccClient:
    def __init__(self, url: str, token: str | None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"token {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> TaccClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            resp = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {exc}") from None
        if resp.status_code >= 400:
            try:
                body = resp.json()
                raise ApiClientError(resp.status_code, body.get("message", resp.reason_phrase), body.get("errors"))
            except ValueError:
                raise ApiClientError(resp.status_code, resp.text[:500] or resp.reason_phrase) from None
        return resp

    # tasks
    def submit(self, spec: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        params = {"dry_run": "1"} if dry_run else {}
        return dict(self._call("POST", "/api/tasks", json=spec, params=params).json())

    def list(self, *, states: list[str] | None = None, limit: int = 50, before: int | None = None,
             all_users: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if states:
            params["state"] = ",".join(states)
        if before:
            params["before"] = before
        if all_users:
            params["all"] = "1"
        return dict(self._call("GET", "/api/tasks", params=params).json())

    def show(self, task_id: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/tasks/{int(task_id)}").json())

    def cancel(self, task_id: int) -> dict[str, Any]:
        return dict(self._call("POST", f"/api/tasks/{int(task_id)}/cancel").json())

    def logs(self, task_id: int, offset: int = 0, limit: int = 1024 * 1024) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/tasks/{int(task_id)}/logs",
                               params={"offset": offset, "limit": limit}).json())

    def stream_logs(self, task_id: int, offset: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ("log", {"offset", "data"}) events, then ("end", {"status"}); resumes after a dropped connection."""
        from httpx_sse import connect_sse

        while True:
            try:
                with connect_sse(self.http, "GET", f"/api/tasks/{int(task_id)}/logs/stream",
                                 params={"offset": offset}, timeout=httpx.Timeout(30.0, read=None)) as src:
                    if src.response.status_code >= 400:
                        src.response.read()
                        body = src.response.json()
                        raise ApiClientError(src.response.status_code, body.get("message", ""), body.get("errors"))
                    for ev in src.iter_sse():
                        data = ev.json()
                        if ev.event == "log" and ev.id:
                            offset = int(ev.id)
                        yield ev.event, data
                        if ev.event == "end":
                            return
            except httpx.TransportError:
                continue  # reconnect and resume from the last offset

    def outputs(self, task_id: int) -> bytes:
        return self._call("GET", f"/api/tasks/{int(task_id)}/outputs").content

    # code
    def has_code(self, digest: str) -> bool:
        try:
            self._call("HEAD", f"/api/code/{digest}")
            return True
        except ApiClientError as exc:
            if exc.status == 404:
                return False
            raise

    def upload_code(self, digest: str, data: bytes) -> dict[str, Any]:
        return dict(self._call("PUT", f"/api/code/{digest}", content=data,
                               headers={"Content-Type": "application/gzip"}).json())

    # cluster
    def cluster(self) -> dict[str, Any]:
        return dict(self._call("GET", "/api/cluster").json())

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/api/health").json())
