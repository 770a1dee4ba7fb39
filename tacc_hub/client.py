"""The one typed HTTP client of the tacc_hub API (used by tcloud, the magic and tests).

Built on the standard library's ``http.client`` (one kept-alive connection) and
sseclient-py for the log stream. A third-party HTTP stack was measured to add
more than 100 ms of imports to every ``tcloud`` command on our machines; this
client needs nothing beyond what ``tcloud`` already loads.

Invariants: every non-2xx answer becomes ``ApiClientError`` carrying the
status, the service's message and its per-field errors; a service that cannot
be reached becomes ``ApiClientError`` with status 0 and a message naming the
URL; a URL that answers, but not as the tacc_hub API (a redirect, an HTML page,
a 404 where ``/api/health`` is not ours: a typo, a missing ``/services/tacc``)
becomes ``WrongUrlError``, naming the URL and what a right one looks like; a
kept-alive connection that the server closed is reopened once.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

RESTART_WAIT_S = 60.0  # how long a log stream waits for a restarting service


class ApiClientError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.status = status
        self.message = message
        self.errors = errors or []
        super().__init__(f"{status}: {message}" if status else message)


URL_HINT = ("the URL should be the tacc_hub service's: http://HOST:8000/services/tacc under JupyterHub, "
            "http://HOST:8765 for the service alone")


class WrongUrlError(ApiClientError):
    """The URL answers, but not as the tacc_hub API (the hub's page, a redirect, another server)."""


class _Response:
    def __init__(self, status: int, reason: str, data: bytes, headers: http.client.HTTPMessage | None = None) -> None:
        self.status, self.reason, self.data = status, reason, data
        self.content_type = (headers.get("Content-Type") or "") if headers is not None else ""
        self.location = (headers.get("Location") or "") if headers is not None else ""


def _describe(resp: _Response) -> str:
    """What a non-API answer was, in a few words: an HTML page and its title, a redirect, some text."""
    if 300 <= resp.status < 400:
        return f"HTTP {resp.status}, a redirect to {resp.location[:200] or '(nowhere)'}"
    text = resp.data[:4096].decode(errors="replace")
    if "html" in resp.content_type.lower() or text.lstrip()[:1] == "<":
        m = re.search(r"<title[^>]*>([^<]{0,200})", text, re.IGNORECASE)
        title = " ".join(m.group(1).split()) if m else ""
        return f"HTTP {resp.status} with an HTML page" + (f" titled {title!r}" if title else "")
    if not resp.data:
        return f"HTTP {resp.status} with an empty body"
    return f"HTTP {resp.status} with {' '.join(text[:80].split())!r}"


class TaccClient:
    def __init__(self, url: str, token: str | None, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiClientError(0, f"not an http(s) URL: {url!r}; {URL_HINT}")
        try:
            self._port = parts.port
        except ValueError:
            raise ApiClientError(0, f"not a valid port in the URL {url!r}; {URL_HINT}") from None
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._prefix = parts.path.rstrip("/")
        self.headers = {"Authorization": f"token {token}"} if token else {}
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._verified = False  # the URL answered once as the tacc_hub API

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
                    raise self._unreachable(exc) from None
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._unreachable(exc) from None
        if resp.will_close:
            self.close()
        out = _Response(resp.status, resp.reason, data, resp.headers)
        self._check(out, method, target)
        return out

    def _unreachable(self, exc: BaseException) -> ApiClientError:
        why = str(exc) or type(exc).__name__
        if isinstance(exc, ConnectionRefusedError):
            why = "connection refused (is the service running there?)"
        elif isinstance(exc, http.client.HTTPException):
            why = f"not an HTTP server ({type(exc).__name__})"
        return ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {why}; {URL_HINT}")

    def _wrong_url(self, resp: _Response, method: str, target: str, what: str | None = None) -> WrongUrlError:
        return WrongUrlError(resp.status, f"{self.url} does not answer as the tacc_hub API: {method} {target} got "
                             f"{what or _describe(resp)}; {URL_HINT}")

    def _check(self, resp: _Response, method: str, target: str) -> None:
        """Raise for an answer that is an error, or that is not the tacc_hub API's."""
        if 300 <= resp.status < 400:  # the API never redirects: the hub (or a login page) does
            raise self._wrong_url(resp, method, target)
        if resp.status < 400:
            return
        try:
            doc = json.loads(resp.data)
            if not isinstance(doc, dict):
                raise ValueError
            message, errors = str(doc.get("message", resp.reason or "")), doc.get("errors")
        except ValueError:
            if not self._verified and not self._is_tacc():
                raise self._wrong_url(resp, method, target) from None
            message, errors = resp.data[:500].decode(errors="replace") or str(resp.reason), None
        else:
            if resp.status == 404 and not self._verified and not self._is_tacc():
                raise self._wrong_url(resp, method, target, f"HTTP 404 ({message[:200]})")
        raise ApiClientError(resp.status, message, errors if isinstance(errors, list) else None)

    def _is_tacc(self) -> bool:
        """Whether ``/api/health`` under this URL answers as tacc_hub's does (asked once, on a doubtful answer)."""
        conn = self._connect(self.timeout)
        try:
            resp = self._send(conn, "GET", self._target("/api/health", None), None, None)
            doc = json.loads(resp.read())
            self._verified = resp.status == 200 and isinstance(doc, dict) and doc.get("status") == "ok" \
                and "version" in doc
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            conn.close()
        return self._verified

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        resp = self._request(method, path, **kw)
        try:
            doc = json.loads(resp.data)
            if not isinstance(doc, dict):
                raise ValueError
        except ValueError:
            raise self._wrong_url(resp, method, self._target(path, kw.get("params")),
                                  _describe(resp) + " instead of JSON") from None
        self._verified = True
        return doc

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
        streamed = False  # a stream was opened once: later failures are a restart, not a wrong URL
        while True:
            conn = self._connect(None)  # its own connection, no read timeout: the stream is long-lived
            try:
                target = self._target(f"/api/tasks/{int(task_id)}/logs/stream", {"offset": offset})
                resp = self._send(conn, "GET", target, None, None)
                if resp.status != 200 or "text/event-stream" not in (resp.headers.get("Content-Type") or ""):
                    got = _Response(resp.status, resp.reason, resp.read(), resp.headers)
                    self._check(got, "GET", target)
                    raise self._wrong_url(got, "GET", target, _describe(got) + " instead of an event stream")
                down_since = None
                streamed = self._verified = True
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
                    raise self._unreachable(exc) from None
                time.sleep(0.5)
            except (http.client.HTTPException, ConnectionError) as exc:
                if not streamed or (down_since is not None and time.monotonic() - down_since > RESTART_WAIT_S):
                    raise self._unreachable(exc) from None
                if down_since is None:
                    down_since = time.monotonic()
                continue  # the stream broke: reconnect and resume from the last offset
            except OSError as exc:  # no such host, no route, ...
                raise self._unreachable(exc) from None
            finally:
                conn.close()

    # arrays and pipelines
    def list_array(self, array_id: int, *, states: Sequence[str] | None = None, limit: int = 500,
                   before: int | None = None) -> dict[str, Any]:
        """A page of an array's elements, newest first, as :meth:`list` (``GET /api/tasks?array=ID``)."""
        params: dict[str, Any] = {"array": int(array_id), "limit": limit}
        if states:
            params["state"] = ",".join(states)
        if before:
            params["before"] = before
        return self._json("GET", "/api/tasks", params=params)

    def arrays(self, *, limit: int = 50, before: int | None = None, all_users: bool = False) -> dict[str, Any]:
        """Your arrays, newest first: ``{"arrays": [{id, name, size, status, counts, reason, ...}], "next_before"}``."""
        params: dict[str, Any] = {"limit": limit}
        if before:
            params["before"] = before
        if all_users:
            params["all"] = "1"
        return self._json("GET", "/api/arrays", params=params)

    def array(self, array_id: int, *, states: Sequence[str] | None = None, index: int | None = None,
              tasks: bool = True) -> dict[str, Any]:
        """One array and (unless ``tasks=False``) its elements in index order; ``index``: only that element."""
        params: dict[str, Any] = {}
        if states:
            params["state"] = ",".join(states)
        if index is not None:
            params["index"] = int(index)
        if not tasks:
            params["tasks"] = "0"
        return self._json("GET", f"/api/arrays/{int(array_id)}", params=params or None)

    def cancel_array(self, array_id: int) -> dict[str, Any]:
        """Cancel every element of the array not yet ended; the array, with ``cancelled`` (how many)."""
        return self._json("POST", f"/api/arrays/{int(array_id)}/cancel")

    def submit_pipeline(self, data: dict[str, Any]) -> dict[str, Any]:
        """Submit a pipeline (``{name, steps: [{name, needs, spec}]}``, every spec inline) -> the pipeline."""
        return self._json("POST", "/api/pipelines", body=json.dumps(data).encode(), content_type="application/json")

    def pipelines(self, *, limit: int = 50, before: int | None = None, all_users: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if before:
            params["before"] = before
        if all_users:
            params["all"] = "1"
        return self._json("GET", "/api/pipelines", params=params)

    def pipeline(self, pipeline_id: int) -> dict[str, Any]:
        return self._json("GET", f"/api/pipelines/{int(pipeline_id)}")

    def cancel_pipeline(self, pipeline_id: int) -> dict[str, Any]:
        return self._json("POST", f"/api/pipelines/{int(pipeline_id)}/cancel")

    def outputs(self, task_id: int) -> bytes:
        return self._request("GET", f"/api/tasks/{int(task_id)}/outputs").data

    # code
    def has_code(self, digest: str) -> bool:
        try:
            self._request("HEAD", f"/api/code/{digest}")
            return True
        except ApiClientError as exc:
            if exc.status == 404 and not isinstance(exc, WrongUrlError):
                return False
            raise

    def upload_code(self, digest: str, data: bytes) -> dict[str, Any]:
        return self._json("PUT", f"/api/code/{digest}", body=data, content_type="application/gzip")

    # cluster
    def extend(self, task_id: int, seconds: int) -> dict[str, Any]:
        """Extend a running task's time limit by ``seconds``; the task as the service now sees it."""
        body = json.dumps({"seconds": int(seconds)}).encode()
        return self._json("POST", f"/api/tasks/{int(task_id)}/extend", body=body)

    def attempts(self, task_id: int) -> dict[str, Any]:
        """The task's runs: ``{"attempts": [{"attempt", "started_at", "finished_at", "outcome", ...}]}``."""
        return self._json("GET", f"/api/tasks/{int(task_id)}/attempts")

    def usage(self, task_id: int) -> dict[str, Any]:
        """The task's sampled GPU utilization: ``{"samples": [...], "mean_util": ..., ...}``."""
        return self._json("GET", f"/api/tasks/{int(task_id)}/usage")

    def ports(self, task_id: int) -> dict[str, Any]:
        """The task's web ports: ``{"ports": [{"port", "declared", "listening", "label", "url"}]}``."""
        return self._json("GET", f"/api/tasks/{int(task_id)}/ports")

    def cluster(self) -> dict[str, Any]:
        return self._json("GET", "/api/cluster")

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/api/health")

    def whoami(self) -> dict[str, Any]:
        """The caller as the service sees them: user, admin, via."""
        return self._json("GET", "/api/whoami")

    # quotas (admin routes answer 403 to others)
    # notifications (docs/notifications.md)

    def notifications(self) -> dict[str, Any]:
        """Your notification settings and what the site allows: ``{"user", "settings", "site"}``."""
        return self._json("GET", "/api/notifications")

    def set_notifications(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Replace your notification settings (``{"email", "events", "webhooks"}``); as ``notifications()``."""
        return self._json("PUT", "/api/notifications", body=json.dumps(settings).encode(),
                          content_type="application/json")

    def test_notification(self) -> dict[str, Any]:
        """Queue a test notification to each of your channels: ``{"queued": N}``."""
        return self._json("POST", "/api/notifications/test")

    def notification_history(self, limit: int = 50) -> dict[str, Any]:
        """Your recent deliveries, newest first: ``{"deliveries": [{"channel", "status", "last_error", ...}]}``."""
        return self._json("GET", "/api/notifications/history", params={"limit": int(limit)})

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
