"""The spawner's HTTP layer to the tacc service: the seven calls it makes, on tornado's AsyncHTTPClient.

The spawner runs inside the hub's process, often on another host than the service, so it talks
to the service over its REST API only (no tacc_hub import: the hub's environment needs only
JupyterHub, which brings tornado). Every request runs on the hub's event loop without blocking
it; each uses a client of its own (``force_instance``), so the spawner's requests never queue
behind the hub's own on tornado's shared client (at most 10 at a time), and a request cannot
outlive the loop it started on.

Errors, as ``tacc_hub.client.TaccClient`` reports them: every non-2xx answer is ``ApiClientError``
with the status, the service's ``message`` and its per-field ``errors``; a service that cannot
be reached in time (refused, no route, timed out) is ``ApiClientError`` with status 0 and a
message naming the URL; an answer that is not the tacc API's (a redirect, which the API never
sends, or a body that is not JSON) is ``ApiClientError`` with its status, naming the URL and
what a right one looks like.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode, urlsplit

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse

URL_HINT = ("the URL should be the tacc_hub service's: http://HOST:8000/services/tacc under JupyterHub, "
            "http://HOST:8765 for the service alone")


class ApiClientError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.status = status
        self.message = message
        self.errors = errors or []
        super().__init__(f"{status}: {message}" if status else message)


def _describe(resp: HTTPResponse) -> str:
    """What a non-API answer was, in a few words: an HTML page and its title, a redirect, some text."""
    if 300 <= resp.code < 400:
        return f"HTTP {resp.code}, a redirect to {(resp.headers.get('Location') or '(nowhere)')[:200]}"
    data = resp.body or b""
    text = data[:4096].decode(errors="replace")
    if "html" in (resp.headers.get("Content-Type") or "").lower() or text.lstrip()[:1] == "<":
        m = re.search(r"<title[^>]*>([^<]{0,200})", text, re.IGNORECASE)
        title = " ".join(m.group(1).split()) if m else ""
        return f"HTTP {resp.code} with an HTML page" + (f" titled {title!r}" if title else "")
    if not data:
        return f"HTTP {resp.code} with an empty body"
    return f"HTTP {resp.code} with {' '.join(text[:80].split())!r}"


class ServiceClient:
    """One user's view of the tacc service: ``url`` (its base, e.g. http://hub:8000/services/tacc) and ``token``."""

    def __init__(self, url: str, token: str | None, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiClientError(0, f"not an http(s) URL: {url!r}; {URL_HINT}")
        self.headers = {"Authorization": f"token {token}"} if token else {}
        self.timeout = timeout

    async def _json(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: bytes | None = None,
                    content_type: str | None = None) -> dict[str, Any]:
        target = path + (("?" + urlencode(params)) if params else "")
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        # tornado refuses a POST or PUT without a body
        if body is None and method in ("POST", "PUT"):
            body = b""
        request = HTTPRequest(self.url + target, method=method, headers=headers, body=body,
                              connect_timeout=self.timeout, request_timeout=self.timeout, follow_redirects=False,
                              decompress_response=True)
        client = AsyncHTTPClient(force_instance=True)
        try:
            resp = await client.fetch(request, raise_error=False)
        except HTTPClientError as exc:  # 599: timed out, or the connection broke before an answer
            raise self._unreachable(exc.message or str(exc)) from None
        except OSError as exc:  # refused, no route, no such host
            why = "connection refused (is the service running there?)" if isinstance(exc, ConnectionRefusedError) \
                else (str(exc) or type(exc).__name__)
            raise self._unreachable(why) from None
        finally:
            client.close()
        if resp.code == 599:
            raise self._unreachable(str(resp.error or "no answer"))
        if 300 <= resp.code < 400:  # the API never redirects: the hub (or a login page) does
            raise self._wrong_url(resp, method, target, _describe(resp))
        try:
            doc = json.loads(resp.body or b"")
            if not isinstance(doc, dict):
                raise ValueError
        except ValueError:
            if resp.code < 400:
                raise self._wrong_url(resp, method, target, _describe(resp) + " instead of JSON") from None
            text = (resp.body or b"")[:500].decode(errors="replace")
            raise ApiClientError(resp.code, text or resp.reason or f"HTTP {resp.code}") from None
        if resp.code >= 400:
            errors = doc.get("errors")
            raise ApiClientError(resp.code, str(doc.get("message", resp.reason or "")),
                                 errors if isinstance(errors, list) else None)
        return doc

    def _unreachable(self, why: str) -> ApiClientError:
        return ApiClientError(0, f"cannot reach the tacc_hub service at {self.url}: {why}; {URL_HINT}")

    def _wrong_url(self, resp: HTTPResponse, method: str, target: str, what: str) -> ApiClientError:
        return ApiClientError(resp.code, f"{self.url} does not answer as the tacc_hub API: {method} {target} got "
                              f"{what}; {URL_HINT}")

    # the calls TaccSpawner makes (the service's REST API, docs/api.md)
    async def cluster(self) -> dict[str, Any]:
        return await self._json("GET", "/api/cluster")

    async def my_quota(self) -> dict[str, Any]:
        return await self._json("GET", "/api/quota")

    async def submit(self, spec: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return await self._json("POST", "/api/tasks", params={"dry_run": "1"} if dry_run else None,
                                body=json.dumps(spec).encode(), content_type="application/json")

    async def upload_code(self, digest: str, data: bytes) -> dict[str, Any]:
        return await self._json("PUT", f"/api/code/{digest}", body=data, content_type="application/gzip")

    async def show(self, task_id: int) -> dict[str, Any]:
        return await self._json("GET", f"/api/tasks/{int(task_id)}")

    async def logs(self, task_id: int, offset: int = 0, limit: int = 1024 * 1024) -> dict[str, Any]:
        return await self._json("GET", f"/api/tasks/{int(task_id)}/logs", params={"offset": offset, "limit": limit})

    async def cancel(self, task_id: int) -> dict[str, Any]:
        return await self._json("POST", f"/api/tasks/{int(task_id)}/cancel")
