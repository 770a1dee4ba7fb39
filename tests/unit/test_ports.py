"""Which ports a task owns (``executors/ports.py``) and what the proxy passes on (``service/proxy_headers.py``).

/proc/net/tcp tables are parsed as a task could shape them (a task chooses its sockets' addresses and
ports, not the table's format, but the parser must not trust a single field); the header and cookie
rules are checked against what a hostile task would send back and what a careless caller would send.
"""

from __future__ import annotations

import os
import socket

from tornado.httputil import HTTPHeaders

from tacc_hub.executors.ports import Listener, candidates, local_listening, local_port_owned, parse_proc_net_tcp
from tacc_hub.executors.ports import served_ports as served
from tacc_hub.service.proxy_headers import (
    filter_cookie_header,
    query_without_token,
    request_headers,
    reserved_cookie,
    response_headers,
    rewrite_location,
    rewrite_set_cookie,
    same_origin,
)

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
V6_HEADER = ("  sl  local_address                         remote_address                        st tx_queue "
             "rx_queue tr tm->when retrnsmt   uid  timeout inode\n")


def line(n: int, local: str, state: str = "0A", uid: str = "1001", inode: str = "4242") -> str:
    return (f"  {n}: {local} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000  {uid}        0 {inode} 1 "
            "0000000000000000 100 0 0 10 0\n")


def test_listen_sockets_are_read_from_proc_net_tcp() -> None:
    text = HEADER + line(0, "0100007F:1F90") + line(1, "00000000:0050", uid="0", inode="7") + \
        line(2, "0100007F:1F91", state="01")  # an established connection is no listener
    assert parse_proc_net_tcp(text) == [Listener("127.0.0.1", 8080, 1001, 4242), Listener("0.0.0.0", 80, 0, 7)]


def test_ipv6_addresses_are_read_word_by_word() -> None:
    text = V6_HEADER + line(0, "00000000000000000000000000000000:1F90", inode="9") + \
        line(1, "0000000000000000FFFF00000100007F:1F91") + line(2, "00000000000000000000000001000000:1F92")
    assert [(s.address, s.port) for s in parse_proc_net_tcp(text)] == [
        ("::", 8080), ("::ffff:7f00:1", 8081), ("::1", 8082)]


def test_hostile_lines_are_skipped_not_trusted() -> None:
    hostile = [
        "garbage\n", "\n", " 0:\n", "  x: 0100007F:1F90 00000000:0000 0A 0 0 0 1001 0 4242\n",
        line(0, "0100007F:1F90", uid="-1"), line(1, "0100007F:1F90", uid="1e3"), line(2, "0100007F:1F90", inode="x"),
        line(3, "0100007F:FFFFF"), line(4, "0100007F:0000"), line(5, "ZZ00007F:1F90"), line(6, "0100007F1F90"),
        line(7, "0100007F:1F90", state="0A0"), line(8, "01000:1F90"), line(9, "0100007F:1F90", uid="٣"),
        line(10, "0100007F:1F90", uid="9" * 40), "  11: 0100007F:1F90 00000000:0000 0A\x00 0 0 0 1001 0 42\n",
    ]
    assert parse_proc_net_tcp(HEADER + "".join(hostile)) == []
    assert parse_proc_net_tcp("\x00" * 10000) == []


def test_a_connection_goes_to_the_exact_address_before_a_wildcard() -> None:
    bob, alice = 2001, 1001
    table = [Listener("127.0.0.1", 8000, bob, 1), Listener("::", 8000, alice, 2)]
    # alice's [::]:8000 (maybe IPV6_V6ONLY) beside bob's 127.0.0.1:8000: the connection reaches bob's
    assert [s.uid for s in candidates(table, "127.0.0.1", 8000)] == [bob]
    assert served(table, "127.0.0.1", lambda s: s.uid == alice) == []
    assert served(table, "127.0.0.1", lambda s: s.uid == bob) == [8000]
    # two wildcards of two users: either may take it, so neither owns it
    table = [Listener("0.0.0.0", 9000, bob, 3), Listener("::", 9000, alice, 4)]
    assert served(table, "127.0.0.1", lambda s: s.uid == alice) == []
    # a socket on another address is not reachable through this host, whoever holds it
    table = [Listener("10.1.2.3", 7000, alice, 5), Listener("::ffff:127.0.0.1", 7001, alice, 6)]
    assert served(table, "127.0.0.1", lambda s: s.uid == alice) == [7001]
    assert candidates(table, "10.1.2.3", 7000) == [table[0]]


class _Ex:
    """Just what local_port_owned needs of a LocalExecutor: the task's directory (owned by its account)."""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp

    def task_dir(self, task_id: int) -> str:
        return self.tmp


def test_a_real_socket_of_a_process_tree_is_found(tmp_path: object) -> None:
    """This very process plays the supervisor: its child listens, and only its ports count."""
    import subprocess
    import sys

    from tacc_hub.launcher.proctree import start_time

    code = ("import socket,sys,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\n"
            "print(s.getsockname()[1],flush=True)\ntime.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen()
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        state = {"pid": os.getpid(), "start_time": start_time(os.getpid())}
        ex = _Ex(str(tmp_path))
        assert local_port_owned(ex, 1, state, port)  # type: ignore[arg-type]
        assert port in local_listening(ex, 1, state)  # type: ignore[arg-type]
        # the test's own socket is held by the "supervisor", not by one of its descendants
        assert not local_port_owned(ex, 1, state, other.getsockname()[1])  # type: ignore[arg-type]
        # a supervisor whose start time changed (a recycled pid) owns nothing
        assert not local_port_owned(ex, 1, {**state, "start_time": -1}, port)  # type: ignore[arg-type]
        assert local_listening(ex, 1, {"pid": "1; rm -rf /"}) == []  # type: ignore[arg-type]
    finally:
        child.kill()
        child.wait()
        other.close()


def test_credentials_and_forwarding_headers_of_the_caller_are_dropped() -> None:
    client = HTTPHeaders()
    for k, v in [("Host", "hub.example"), ("Authorization", "token SECRET"), ("Cookie", "jupyterhub-session-id=S1"),
                 ("Cookie", "service-tacc=S2; mine=1; service-tacc-oauth-state=S3"), ("X-Forwarded-For", "6.6.6.6"),
                 ("X-Forwarded-Prefix", "/evil"), ("Forwarded", "for=x"), ("X-Real-IP", "6.6.6.6"),
                 ("Connection", "keep-alive, X-Secret"), ("X-Secret", "hop"), ("Keep-Alive", "5"), ("TE", "trailers"),
                 ("Proxy-Authorization", "Basic x"), ("Expect", "100-continue"), ("Origin", "http://hub.example"),
                 ("Accept", "text/html")]:
        client.add(k, v)
    out = request_headers(client, backend="127.0.0.1:8000",
                          drop_cookie=lambda n, v: reserved_cookie(n, "service-tacc"), forwarded_for="10.0.0.1",
                          forwarded_host="hub.example", forwarded_proto="https",
                          prefix="/services/tacc/tasks/5/proxy/8000")
    got = dict(out.get_all())
    assert got == {"Host": "127.0.0.1:8000", "Cookie": "mine=1", "X-Forwarded-For": "10.0.0.1",
                   "X-Forwarded-Host": "hub.example", "X-Forwarded-Proto": "https", "Accept": "text/html",
                   "X-Forwarded-Prefix": "/services/tacc/tasks/5/proxy/8000", "Origin": "http://127.0.0.1:8000"}
    client["Origin"] = "https://evil.example"  # a foreign origin is passed as it is: the task's server judges it
    assert request_headers(client, backend="b:1", drop_cookie=lambda n, v: False, forwarded_for="", forwarded_host="",
                           forwarded_proto="http", prefix=None)["Origin"] == "https://evil.example"


def test_cookie_and_query_filters() -> None:
    drop = lambda n, v: reserved_cookie(n, "__Host-service-tacc")  # noqa: E731
    assert filter_cookie_header("a=1; JupyterHub-x=2;service-tacc=3; __Host-service-tacc=4;b=5;junk", drop) == \
        "a=1; b=5"
    assert query_without_token("token=abc&a=1&%74oken=x&b=%20+&tok=2&token") == "a=1&b=%20+&tok=2"
    assert query_without_token("") == ""


def test_set_cookie_of_a_task_is_scoped_to_its_proxy_path() -> None:
    scope = "/services/tacc/tasks/5/proxy/8000/"
    assert rewrite_set_cookie("a=1; Path=/; Domain=.hub.example; Secure; HttpOnly", scope, "service-tacc") == \
        f"a=1; Path={scope}; Secure; HttpOnly"
    assert rewrite_set_cookie("a=1; path=/deep/x", scope, None) == f"a=1; Path={scope}deep/x"
    assert rewrite_set_cookie("a=1", scope, None) == f"a=1; Path={scope}"
    assert rewrite_set_cookie(f"a=1; Path={scope}kept", scope, None) == f"a=1; Path={scope}kept"
    for bad_path in ("/../../hub/", "relative", "/a,b", "/\u00e9", "/a\\b"):
        assert rewrite_set_cookie(f"a=1; Path={bad_path}", scope, None) == f"a=1; Path={scope}"
    for dropped in ("jupyterhub-hub-login=x; Path=/hub/", "JUPYTERHUB-session-id=x", "service-tacc=forged",
                    "service-tacc-oauth-state=x", "__Host-a=1; Path=/; Secure", "novalue", "=x"):
        assert rewrite_set_cookie(dropped, scope, "service-tacc") is None, dropped


def test_response_headers_of_a_task() -> None:
    up = HTTPHeaders()
    for k, v in [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"), ("Connection", "close, X-Hop"),
                 ("X-Hop", "1"), ("Keep-Alive", "timeout=5"), ("Set-Cookie", "a=1; Path=/"),
                 ("Set-Cookie", "jupyterhub-session-id=evil"), ("Service-Worker-Allowed", "/"),
                 ("Clear-Site-Data", '"cookies"'), ("Strict-Transport-Security", "max-age=1"), ("Location", "/next"),
                 ("Content-Length", "10")]:
        up.add(k, v)
    out = list(response_headers(up, scope="/p/", prefix="/p", backend="127.0.0.1:8000", service_cookie=None))
    assert out == [("Content-Type", "text/html"), ("Set-Cookie", "a=1; Path=/p/"), ("Location", "/p/next"),
                   ("Content-Length", "10")]


def test_redirects_of_a_task_stay_under_the_prefix() -> None:
    assert rewrite_location("/x?y=1", "/p", "127.0.0.1:8000") == "/p/x?y=1"
    assert rewrite_location("http://127.0.0.1:8000/x", "/p", "127.0.0.1:8000") == "/p/x"
    assert rewrite_location("https://elsewhere.example/x", "/p", "127.0.0.1:8000") == "https://elsewhere.example/x"
    assert rewrite_location("//evil.example/x", "/p", "127.0.0.1:8000") == "//evil.example/x"
    assert rewrite_location("rel/x", "/p", "b") == "rel/x"
    assert rewrite_location("/x", None, "b") == "/x"  # absolute mode: the task knows its prefix


def test_same_origin_rule_for_cookie_changes() -> None:
    def h(**kw: str) -> HTTPHeaders:
        out = HTTPHeaders({"Host": "hub.example"})
        for k, v in kw.items():
            out[k.replace("_", "-")] = v
        return out

    assert same_origin(h(Sec_Fetch_Site="same-origin"))
    assert not same_origin(h(Sec_Fetch_Site="cross-site", Origin="http://hub.example"))
    assert not same_origin(h(Sec_Fetch_Site="same-site"))
    assert same_origin(h(Origin="https://hub.example"))
    assert not same_origin(h(Origin="null"))  # a sandboxed page (an admin's view of a task)
    assert not same_origin(h(Origin="https://evil.example"))
    assert same_origin(h())  # no browser page sent it


def test_tcloud_open_picks_tensorboard_then_the_only_port() -> None:
    import click
    import pytest

    from tacc_hub.cli.tcloud_ports import _choose

    tb = {"port": 6006, "label": "TensorBoard", "declared": True, "listening": False}
    assert _choose(1, [{"port": 8000, "listening": True}, tb]) == 6006
    assert _choose(1, [{"port": 8000, "listening": True}, {"port": 9000, "declared": True}]) == 8000
    assert _choose(1, [{"port": 9000, "declared": True}]) == 9000
    with pytest.raises(SystemExit):
        with click.Context(click.Command("open")):
            _choose(1, [{"port": 8000, "listening": True}, {"port": 9000, "listening": True}])
    with pytest.raises(SystemExit):
        _choose(1, [])


def test_a_service_that_cannot_read_fds_goes_by_the_tasks_account(tmp_path: object, monkeypatch: object) -> None:
    """Non-root service (tasks run as their owners through sudo): /proc/PID/fd of the task is unreadable, so a
    socket is the task's when its uid is the task's account (the owner of its directory), never the service's."""
    import pathlib

    import pytest

    from tacc_hub.executors import ports

    def unreadable(pids: list[int]) -> set[int]:
        raise ports._Unreadable

    mp = monkeypatch
    assert isinstance(mp, pytest.MonkeyPatch)
    mp.setattr(ports, "_socket_inodes", unreadable)
    mp.setattr(ports, "_task_tree", lambda state: [12345])
    d = pathlib.Path(str(tmp_path)) / "task"
    d.mkdir()
    os.chown(d, 4321, 4321)
    table = [Listener("127.0.0.1", 8000, 4321, 1), Listener("127.0.0.1", 8001, 1234, 2),
             Listener("127.0.0.1", 8002, os.geteuid(), 3)]
    mp.setattr(ports, "read_tables", lambda root="/proc/net": table)
    ex = _Ex(str(d))
    assert local_listening(ex, 1, {}) == [8000]  # type: ignore[arg-type]
    assert local_port_owned(ex, 1, {}, 8000) and not local_port_owned(ex, 1, {}, 8001)  # type: ignore[arg-type]
    os.chown(d, os.geteuid(), os.getegid())  # a task of the service's own account: nothing is told apart
    assert local_listening(ex, 1, {}) == []  # type: ignore[arg-type]


async def test_concurrent_slurm_checks_of_a_task_share_one_step() -> None:
    """Many proxy requests at once for a Slurm task start one ``srun`` reading /proc/net/tcp, not one each."""
    import asyncio

    from tacc_hub.executors import ports
    from tacc_hub.scheduler.cluster import NodeSlots, Placement

    calls: list[list[str]] = []

    class FakeSlurm:
        submit_as = None

        def _argv(self, *args: str, user: str | None = None) -> list[str]:
            return [*args, f"as={user}"]

        def _uid(self, state: dict) -> int:
            return 1001

        async def _run(self, argv: list[str]) -> str:
            calls.append(argv)
            await asyncio.sleep(0.05)
            if argv[0] == "scontrol":
                return "NodeName=n1 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=localhost\n"
            return HEADER + line(0, "0100007F:1F90", uid="1001") + line(1, "0100007F:1F91", uid="2002")

    ex = FakeSlurm()
    state = {"job_id": "42", "uid": 1001, "user": "alice"}
    where = Placement(nodes=[NodeSlots(node="n1", gpus=[0])])
    owned = await asyncio.gather(*(ports.slurm_port_owned(ex, 7, state, where, p)  # type: ignore[arg-type]
                                   for p in (8080, 8080, 8081, 8080)))
    assert owned == [True, True, False, True]
    steps = [c for c in calls if c[0] == "srun"]
    assert len(steps) == 1, calls
    assert steps[0] == ["srun", "--jobid=42", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=n1", "--quiet",
                        "cat", "/proc/net/tcp", "/proc/net/tcp6", "as=alice"]
    assert ports.slurm_task_host(ex, 7, state, where) == "127.0.0.1"  # type: ignore[arg-type]
    assert await ports.slurm_listening(ex, 7, state, where) == [8080]  # type: ignore[arg-type]
    # a hostile node name from a placement is never passed to Slurm
    bad = Placement(nodes=[NodeSlots(node="n1,n2 --uid=0", gpus=[])])
    assert not await ports.slurm_port_owned(ex, 8, state, bad, 8080)  # type: ignore[arg-type]
