"""Webhook URLs and where they may lead: the service must not be a way into its own network (SSRF).

Rules (docs/notifications.md, "Webhooks and SSRF"):

* the URL's form: ``http`` or ``https`` only, a host, no ``user:password@``, a port in 1..65535;
* its host must resolve only to public addresses: never loopback, link-local (169.254.169.254, the cloud
  metadata service), private, shared (100.64/10), multicast, reserved or unspecified, nor one of the
  service's own addresses;
* a site may exempt hosts from the address rule (``notify_webhook_hosts``: ``host`` or ``host:port``
  patterns, ``*`` wildcards), and may accept only those (``notify_webhook_hosts_only``).

The address rule is checked when the settings are saved and again at every delivery, by the resolver
the delivery's HTTP client connects through (:class:`GuardedResolver`), so that a name that resolved to a
public address then and to 127.0.0.1 now (DNS rebinding) reaches nothing.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tornado.netutil import DefaultLoopResolver

if TYPE_CHECKING:
    from .settings import SitePolicy

SHARED = ipaddress.ip_network("100.64.0.0/10")
RESOLVE_TIMEOUT = 5.0  # seconds a webhook's host may take to resolve when settings are saved


class Refused(ValueError):
    """A URL or address the rules refuse; the message says which rule."""


def split_host(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (parts.hostname or "").lower(), port


def exempt(host: str, port: int, site: SitePolicy) -> bool:
    """Whether ``host`` (lower case) on ``port`` matches one of the site's ``webhook_hosts`` patterns."""
    for pattern in site.webhook_hosts:
        p = pattern.strip().lower()
        if ":" in p and not p.startswith("["):
            p_host, _, p_port = p.rpartition(":")
            if p_port.isdigit() and int(p_port) != port:
                continue
            p = p_host
        if fnmatch.fnmatchcase(host, p.strip("[]")):
            return True
    return False


def check_url_form(url: str, site: SitePolicy) -> str:
    """``url`` if its form is allowed (scheme, host, no userinfo, port; the site's host list), else Refused."""
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise Refused("no spaces or control characters in a URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused(f"only http and https URLs, not {parts.scheme[:20]!r}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise Refused("no user or password in the URL (put a secret in its path or query)")
    host = (parts.hostname or "").lower()
    if not host:
        raise Refused("the URL has no host")
    if port == 0:
        raise Refused("port 0")
    port = port or (443 if parts.scheme == "https" else 80)
    if exempt(host, port, site):
        return url
    if site.webhook_hosts_only:
        raise Refused(f"this site accepts webhooks only to {', '.join(site.webhook_hosts)}")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return url  # a name: judged by where it resolves to (check_url_target, GuardedResolver)
    check_address(literal, site)
    return url


def check_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, site: SitePolicy) -> None:
    """Refused unless ``ip`` is a public address that is not the service's own."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    what = ("loopback" if ip.is_loopback else "link-local" if ip.is_link_local else
            "private" if ip.is_private or (ip.version == 4 and ip in SHARED) else
            "multicast" if ip.is_multicast else "reserved" if ip.is_reserved else
            "unspecified" if ip.is_unspecified else "the service's own" if str(ip) in site.own_addresses else "")
    if what:
        raise Refused(f"webhooks may not reach {what} addresses ({ip})")


async def check_url_target(url: str, site: SitePolicy) -> None:
    """Resolve the URL's host and refuse it when any of its addresses is not allowed (at save time)."""
    host, port = split_host(url)
    if exempt(host, port, site):
        return
    try:
        infos = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM),
                                       timeout=RESOLVE_TIMEOUT)
    except TimeoutError:
        raise Refused(f"{host[:100]} did not resolve in {RESOLVE_TIMEOUT:g} s") from None
    except OSError as exc:
        raise Refused(f"{host[:100]} does not resolve ({exc.strerror or exc})") from None
    for info in infos:
        check_address(ipaddress.ip_address(str(info[4][0]).split("%")[0]), site)


def own_addresses(listen_ip: str) -> frozenset[str]:
    """The service's own addresses (its listening address and those of its host name), as far as known."""
    out = {listen_ip} if listen_ip else set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            out.add(str(info[4][0]).split("%")[0])
    except OSError:
        pass
    return frozenset(out)


class GuardedResolver(DefaultLoopResolver):
    """tornado's resolver, keeping only the addresses :func:`check_address` allows (exempt hosts: all)."""

    def initialize(self, site: SitePolicy) -> None:
        self.site = site

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
                      ) -> list[tuple[int, Any]]:
        found = await super().resolve(host, port, family)
        if exempt(host.lower(), port, self.site):
            return found
        kept = []
        refused = ""
        for fam, addr in found:
            try:
                check_address(ipaddress.ip_address(str(addr[0]).split("%")[0]), self.site)
                kept.append((fam, addr))
            except Refused as exc:
                refused = str(exc)
        if not kept:
            raise Refused(refused or f"{host} has no address")
        return kept
