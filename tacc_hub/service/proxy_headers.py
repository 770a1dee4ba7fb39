"""Header and cookie rewriting of the web-port proxy (``proxy.py``): pure functions, no I/O.

Invariants (each a rule against a hostile task or a careless caller):
- Nothing that authenticates the caller to the service or the hub reaches the task: no
  ``Authorization``, no cookie named ``jupyterhub*`` or the service's own (its OAuth cookie and
  state cookies; the service's signed ``_xsrf``), no ``token=`` query parameter, and none of the
  caller's ``X-Forwarded-*``/``Forwarded``/``X-Real-IP`` (the proxy sets its own).
- Hop-by-hop headers (RFC 7230 6.1: ``Connection`` and the names it lists, ``Keep-Alive``,
  ``TE``, ``Trailer``, ``Transfer-Encoding``, ``Upgrade``, ``Proxy-*``) end at the proxy, both ways.
- A cookie the task sets lives only under its proxy path: ``Path`` forced under the prefix,
  ``Domain`` removed, cookies named ``jupyterhub*``, the service's own name, or ``__Host-*`` (which
  cannot be re-scoped) dropped. A task cannot widen a service worker's scope
  (``Service-Worker-Allowed``), clear the hub's site data (``Clear-Site-Data``) or pin the hub's
  transport (``Strict-Transport-Security``, ``Alt-Svc``): those headers are dropped.
- A task's TensorBoard serves only under a secret path prefix (``hidden``, from the task's state; see
  ``compiler/render.py``), which the proxy adds in front of every path it sends: the caller never sees it.
  A redirect or cookie path under it is given back without it; any other header holding it is dropped.
  A JSON body (TensorBoard's ``data/environment`` and ``data/plugins_listing`` name their absolute
  paths) is read whole, up to ``REWRITE_MAX`` bytes, and ``/<secret>`` in it becomes the caller's prefix
  (``HiddenRewrite``); any other body that holds it is cut off (``SecretGuard``). The request asks for
  gzip or no encoding, so that both can read the body.
"""

from __future__ import annotations

import re
import urllib.parse
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from tornado.httputil import HTTPHeaders

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade"})
CLIENT_ONLY = frozenset({"authorization", "host", "expect", "forwarded", "x-real-ip", "x-scheme", "cookie"})
WEBSOCKET_OWN = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                           "sec-websocket-protocol", "sec-websocket-accept"})
TASK_MAY_NOT_SET = frozenset({"service-worker-allowed", "clear-site-data", "strict-transport-security", "alt-svc",
                              "set-cookie2"})
RESERVED_COOKIE_PREFIXES = ("jupyterhub",)
SECRET = re.compile(r"[A-Za-z0-9_-]{16,128}")  # a TensorBoard secret as the executors make it (token_urlsafe)
GUARD_PIECE = 64 * 1024  # the most decompressed bytes SecretGuard holds at once
REWRITE_MAX = 32 * 1024 * 1024  # the largest (decoded) JSON body of a hidden TensorBoard read whole and rewritten
DECODABLE = ("", "identity", "gzip", "x-gzip", "deflate")


def tensorboard_prefix(state: dict[str, object] | None, port: int) -> str | None:
    """``/<secret>`` when ``port`` is the task's TensorBoard and its state has a secret path for it (a task
    started before secrets existed has none: its TensorBoard serves at the root), else None."""
    state = state or {}
    tb, secret = state.get("tensorboard_port"), state.get("tensorboard_secret")
    if type(tb) is not int or tb != port or not isinstance(secret, str) or not SECRET.fullmatch(secret):
        return None
    return "/" + secret


def unhide(path: str, hidden: str | None) -> str:
    """``path`` as the caller must see it: the hidden prefix taken off (``/<secret>/x`` -> ``/x``)."""
    if hidden and (path == hidden or path.startswith(hidden + "/")):
        return path[len(hidden):] or "/"
    return path


def tensorboard_accept_encoding(client: HTTPHeaders) -> str | None:
    """What a request to a hidden TensorBoard may accept: gzip if the caller takes it, else no encoding."""
    accepted = ",".join(client.get_list("Accept-Encoding")).lower()
    return "gzip" if "gzip" in accepted else None


def _inflater(content_encoding: str) -> tuple[bool, Any]:
    """(readable, decompressor or None) for a body in ``content_encoding``."""
    enc = content_encoding.strip().lower()
    return enc in DECODABLE, zlib.decompressobj(wbits=47) if enc in ("gzip", "x-gzip", "deflate") else None


def rewritable(headers: HTTPHeaders, method: str, status: int) -> bool:
    """Whether a hidden TensorBoard's response is JSON to read whole and rewrite (not a HEAD, with a body)."""
    media = headers.get("Content-Type", "").partition(";")[0].strip().lower()
    json_type = media == "application/json" or media.endswith("+json")
    return json_type and method != "HEAD" and status not in (204, 304) and \
        _inflater(headers.get("Content-Encoding", ""))[0]


class HiddenRewrite:
    """A JSON body read whole (decoded) with ``hidden`` (``/<secret>``) replaced by ``public`` (the caller's
    prefix, no trailing slash). ``feed`` says False for a body over ``limit`` or one that does not decode;
    ``result`` is None when the secret is still in it after the rewrite."""

    def __init__(self, hidden: str, public: str, content_encoding: str, limit: int = REWRITE_MAX) -> None:
        self.hidden, self.public, self.limit = hidden.encode("ascii"), public.encode(), limit
        _, self.inflate = _inflater(content_encoding)
        self.parts: list[bytes] = []
        self.size = 0

    def _add(self, piece: bytes) -> bool:
        self.size += len(piece)
        self.parts.append(piece)
        return self.size <= self.limit

    def feed(self, chunk: bytes) -> bool:
        if self.inflate is None:
            return self._add(chunk)
        try:
            while chunk:
                if not self._add(self.inflate.decompress(chunk, GUARD_PIECE)):
                    return False
                chunk = self.inflate.unconsumed_tail
        except zlib.error:
            return False
        return True

    def result(self) -> bytes | None:
        body = b"".join(self.parts).replace(self.hidden, self.public)
        return None if self.hidden.lstrip(b"/") in body else body


class SecretGuard:
    """Tells whether a response body holds the hidden secret, chunk by chunk (a match may span chunks), reading
    through gzip/zlib; a body in another encoding, or one that does not decode, counts as holding it."""

    def __init__(self, secret: str, content_encoding: str) -> None:
        self.secret = secret.encode("ascii")
        self.tail = b""
        readable, self.inflate = _inflater(content_encoding)
        self.opaque = not readable

    def _seen(self, data: bytes) -> bool:
        data = self.tail + data
        if self.secret in data:
            return True
        self.tail = data[-(len(self.secret) - 1):]
        return False

    def leaks(self, chunk: bytes) -> bool:
        if self.opaque:
            return True
        if self.inflate is None:
            return self._seen(chunk)
        try:
            while chunk:  # at most GUARD_PIECE decompressed bytes at a time, whatever the ratio
                piece = self.inflate.decompress(chunk, GUARD_PIECE)
                if self._seen(piece):
                    return True
                chunk = self.inflate.unconsumed_tail
        except zlib.error:
            return True
        return False


def hop_by_hop(headers: HTTPHeaders) -> set[str]:
    """Lower-case names that end at this hop: the fixed list and every name ``Connection`` lists."""
    names = set(HOP_BY_HOP)
    for value in headers.get_list("Connection"):
        names.update(t.strip().lower() for t in value.split(",") if t.strip())
    return names


def reserved_cookie(name: str, service_cookie: str | None) -> bool:
    """A cookie name the task never sees nor sets: the hub's, the service's own (and its state cookies)."""
    low = name.strip().lower()
    if low.startswith(RESERVED_COOKIE_PREFIXES):
        return True
    if service_cookie:
        own = service_cookie.lower()
        bare = own.removeprefix("__host-")
        if low.startswith(own) or low.startswith(bare) or low.startswith("__host-" + bare):
            return True
    return False


def filter_cookie_header(value: str, drop: Callable[[str, str], bool]) -> str:
    """A ``Cookie`` request header without the pairs ``drop(name, value)`` refuses (order kept)."""
    kept = []
    for part in value.split(";"):
        if not part.strip():
            continue
        name, eq, val = part.strip().partition("=")
        if not eq or drop(name.strip(), val.strip()):
            continue
        kept.append(part.strip())
    return "; ".join(kept)


def query_without_token(query: str) -> str:
    """The raw query string without ``token`` parameters (the other pairs kept byte for byte)."""
    if not query:
        return ""
    kept = [p for p in query.split("&") if urllib.parse.unquote_plus(p.partition("=")[0]).strip() != "token"]
    return "&".join(kept)


def same_origin(headers: HTTPHeaders) -> bool:
    """Whether a browser request comes from a page of this very origin (tornado's cross-origin algorithm):
    ``Sec-Fetch-Site`` same-origin or none; without it, an ``Origin`` whose host is the request's
    ``Host``; a request with neither comes from no browser page."""
    site = headers.get("Sec-Fetch-Site")
    origin = headers.get("Origin")
    if site is not None:
        return site in ("same-origin", "none")
    if origin is None:
        return True
    return urllib.parse.urlsplit(origin).netloc.lower() == headers.get("Host", "").lower() != ""


def request_headers(client: HTTPHeaders, *, backend: str, drop_cookie: Callable[[str, str], bool],
                    forwarded_for: str, forwarded_host: str, forwarded_proto: str, prefix: str | None,
                    websocket: bool = False) -> HTTPHeaders:
    """What the task's server gets: the client's headers less hop-by-hop ones and the caller's credentials,
    ``Host`` set to ``backend``, and the proxy's own ``X-Forwarded-*`` (``X-Forwarded-Prefix`` when the
    prefix is stripped). An ``Origin`` of this very origin becomes the backend's (so that a server
    checking Origin against Host accepts its own pages); another origin is passed as it is."""
    drop = hop_by_hop(client) | CLIENT_ONLY | (WEBSOCKET_OWN if websocket else frozenset())
    out = HTTPHeaders()
    for name, value in client.get_all():
        low = name.lower()
        if low in drop or low.startswith("x-forwarded-") or (websocket and low == "content-length"):
            continue
        if low == "origin" and urllib.parse.urlsplit(value).netloc.lower() == client.get("Host", "").lower():
            value = f"http://{backend}"
        out.add(name, value)
    cookies = "; ".join(v for v in client.get_list("Cookie"))
    if cookies:
        kept = filter_cookie_header(cookies, drop_cookie)
        if kept:
            out["Cookie"] = kept
    out["Host"] = backend
    out["X-Forwarded-For"] = forwarded_for
    out["X-Forwarded-Host"] = forwarded_host
    out["X-Forwarded-Proto"] = forwarded_proto
    if prefix is not None:
        out["X-Forwarded-Prefix"] = prefix.rstrip("/")
    return out


def rewrite_set_cookie(value: str, scope: str, service_cookie: str | None) -> str | None:
    """A task's ``Set-Cookie`` re-scoped under ``scope`` (the proxy path, ending in ``/``), or None to drop it.

    ``scope`` is the prefix the browser sees; the task's own ``Path`` is kept beneath it (stripped mode
    passes its paths relative to the prefix: ``/x`` becomes ``<scope>x``; absolute mode keeps a path
    already under ``scope``)."""
    pair, _, rest = value.partition(";")
    name, eq, _ = pair.partition("=")
    name = name.strip()
    if not eq or not name or reserved_cookie(name, service_cookie) or name.lower().startswith("__host-"):
        return None
    attrs: list[str] = []
    path = None
    for attr in rest.split(";"):
        key, _, val = attr.strip().partition("=")
        low = key.strip().lower()
        if not low or low == "domain":
            continue
        if low == "path":
            path = val.strip()
            continue
        attrs.append(attr.strip())
    attrs.insert(0, f"Path={scoped_path(path, scope)}")
    return "; ".join([pair.strip(), *attrs])


def scoped_path(path: str | None, scope: str) -> str:
    """The cookie ``Path`` under ``scope``: a path already under it stays, ``/x`` becomes ``<scope>x``."""
    if not path or not path.startswith("/") or ".." in path or any(c in path for c in ";,\\") \
            or not path.isascii() or not path.isprintable():
        return scope
    if path.startswith(scope) or path + "/" == scope:
        return path
    return scope + path.lstrip("/")


def rewrite_location(value: str, prefix: str | None, backend: str, hidden: str | None = None) -> str:
    """A redirect of the task's server, seen through the proxy: in stripped mode (``prefix`` set), a path
    ``/x`` (or ``http://<backend>/x``; ``/<hidden>/x`` for a hidden TensorBoard) becomes ``<prefix>/x``;
    anything else is left as it is."""
    if prefix is None:
        return value
    parts = urllib.parse.urlsplit(value)
    if parts.scheme in ("http", "https") and parts.netloc.lower() == backend.lower():
        value = urllib.parse.urlunsplit(("", "", unhide(parts.path or "/", hidden), parts.query, parts.fragment))
    elif parts.scheme or parts.netloc:
        return value
    elif hidden:
        value = urllib.parse.urlunsplit(("", "", unhide(parts.path, hidden), parts.query, parts.fragment))
    if value.startswith("/") and not value.startswith("//"):
        return prefix.rstrip("/") + value
    return value


def _unhide_cookie_path(value: str, hidden: str) -> str:
    """A ``Set-Cookie`` whose ``Path`` lies under the hidden prefix, with the prefix taken off."""
    pair, sep, rest = value.partition(";")
    attrs = []
    for attr in rest.split(";") if sep else []:
        key, eq, val = attr.strip().partition("=")
        attrs.append(f"{key}={unhide(val.strip(), hidden)}" if eq and key.strip().lower() == "path" else attr)
    return ";".join([pair, *attrs])


def response_headers(upstream: HTTPHeaders, *, scope: str, prefix: str | None, backend: str,
                     service_cookie: str | None, hidden: str | None = None) -> Iterable[tuple[str, str]]:
    """The task's response headers as the caller gets them (see the module's invariants); ``hidden``: the secret
    prefix of a task's TensorBoard, never shown."""
    drop = hop_by_hop(upstream) | TASK_MAY_NOT_SET
    secret = hidden.lstrip("/") if hidden else None
    for name, value in upstream.get_all():
        low = name.lower()
        if low in drop:
            continue
        if low == "set-cookie":
            cookie = rewrite_set_cookie(_unhide_cookie_path(value, hidden) if hidden else value, scope,
                                        service_cookie)
            if cookie is not None and not (secret and secret in cookie):
                yield name, cookie
            continue
        if low in ("location", "content-location"):
            value = rewrite_location(value, prefix, backend, hidden)
        if secret and secret in value:
            continue  # a header that would show the secret (a Link, a Refresh, an absolute URL left as it was)
        yield name, value
