"""Which TCP ports a running task listens on, and whether a port is the task's (for the web-port proxy).

The proxy (``service/proxy.py``) connects to ``task_host:PORT`` only when :func:`local_port_owned` /
:func:`slurm_port_owned` says a process of THIS task serves it: otherwise alice could reach bob's
task, the service or any other process on the node through her own task's proxy URL.

What "served by the task" means here: every LISTEN socket that could take a connection to
``(host, port)`` (``/proc/net/tcp`` and ``tcp6``; :func:`candidates`: a socket bound to that very
address, or its IPv4-mapped form, takes it before any wildcard, as Linux picks them; else any of
``0.0.0.0`` and ``::``) belongs to the task, and there is at least one. "Every", not "one": alice's
``[::]:8000`` (IPV6_V6ONLY) beside bob's ``0.0.0.0:8000`` must not count as hers, since the
connection goes to bob's (and so such a socket of alice's also stops bob's proxy to that port: the
safe side).

Belonging, on the local executor (:func:`local_port_owned`):
- a service that can read the task's ``/proc/PID/fd`` (root, or ``task_identity=service``): the
  socket's inode is held by a descendant of the task's supervisor (``state["pid"]``, whose start
  time must still be ``state["start_time"]``; the supervisor is the tree's subreaper, so every
  process of the task is one of its descendants);
- a service that cannot (non-root, tasks run as their owners through sudo): the socket's uid is the
  task's account (the owner of its task directory) and not the service's own uid; a task shares
  its uid with the owner's other processes on the machine, so this is per account, not per task.
On Slurm (:func:`slurm_port_owned`): one ``srun --jobid=J --overlap -w NODE cat /proc/net/tcp
/proc/net/tcp6`` step as the job's owner on the task's first node; a socket belongs when its uid is
the job's uid (never root's). The step runs as the owner: nodes should keep
``kernel.yama.ptrace_scope`` at 1 or more, so that the task cannot tamper with the step's output.
Its table is cached ``SLURM_CACHE_S`` seconds per task (a port not found in a table older than
``SLURM_RECHECK_S`` is read again).

Every line of ``/proc/net/tcp*`` is parsed defensively (:func:`parse_proc_net_tcp`): a malformed
line is skipped, never trusted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..launcher.proctree import descendants, start_time

if TYPE_CHECKING:
    from ..scheduler.cluster import Placement
    from .local import LocalExecutor
    from .slurm import SlurmExecutor

TCP_LISTEN = 0x0A
MAX_TABLE_BYTES = 8 * 1024 * 1024  # what is read of /proc/net/tcp* (or of the Slurm step's output)
SLURM_CACHE_S = 10.0
SLURM_RECHECK_S = 2.0
_HEX = re.compile(r"[0-9A-Fa-f]+")


@dataclass(frozen=True, slots=True)
class Listener:
    """One LISTEN socket: its local address (text, as ipaddress prints it), port, uid and inode."""

    address: str
    port: int
    uid: int
    inode: int


def _address(hex_addr: str) -> str | None:
    """The address of a ``/proc/net/tcp*`` ``local_address`` field (host byte order words), or None."""
    if not _HEX.fullmatch(hex_addr):
        return None
    raw = bytes.fromhex(hex_addr) if len(hex_addr) % 2 == 0 else b""
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    if len(raw) == 16:  # four 32-bit words, each in host (little-endian on the machines we run on) order
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        return str(ipaddress.IPv6Address(words))
    return None


def parse_proc_net_tcp(text: str) -> list[Listener]:
    """The LISTEN sockets of a ``/proc/net/tcp`` or ``tcp6`` table (header lines and junk skipped)."""
    out: list[Listener] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 10 or not fields[0].endswith(":") or not fields[0][:-1].isdigit():
            continue
        local, _, port_hex = fields[1].partition(":")
        state = fields[3]
        if not (_HEX.fullmatch(port_hex) and len(port_hex) <= 4 and _HEX.fullmatch(state) and len(state) <= 2):
            continue
        if int(state, 16) != TCP_LISTEN:
            continue
        addr = _address(local)
        uid_text, inode_text = fields[7], fields[9]
        if addr is None or not (uid_text.isascii() and uid_text.isdigit() and inode_text.isascii()
                                and inode_text.isdigit()) or len(uid_text) > 10 or len(inode_text) > 20:
            continue
        port = int(port_hex, 16)
        if not 0 < port < 65536:
            continue
        out.append(Listener(addr, port, int(uid_text), int(inode_text)))
    return out


def _exact(addr: str, host: str) -> bool:
    if addr == host:
        return True
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None and str(ip.ipv4_mapped) == host


def candidates(listeners: list[Listener], host: str, port: int) -> list[Listener]:
    """The LISTEN sockets that may take a TCP connection to the IPv4 ``host:port``, as Linux picks them: a
    socket bound to that very address wins over every wildcard; without one, any wildcard (``0.0.0.0``,
    or ``::``, which may or may not be IPV6_V6ONLY: /proc does not say, so it counts) may take it."""
    on_port = [s for s in listeners if s.port == port]
    exact = [s for s in on_port if _exact(s.address, host)]
    return exact or [s for s in on_port if s.address in ("0.0.0.0", "::")]


def served_ports(listeners: list[Listener], host: str, mine: Any) -> list[int]:
    """Ports every reachable socket of which is ``mine(listener)`` (at least one each), sorted."""
    ports = sorted({s.port for s in listeners})
    out = []
    for p in ports:
        found = candidates(listeners, host, p)
        if found and all(mine(s) for s in found):
            out.append(p)
    return out


def read_tables(root: str = "/proc/net") -> list[Listener]:
    out: list[Listener] = []
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(root, name), encoding="ascii", errors="replace") as fh:
                out += parse_proc_net_tcp(fh.read(MAX_TABLE_BYTES))
        except OSError:
            continue
    return out


# --- the local executor ---------------------------------------------------------------------

class _Unreadable(Exception):
    """The service may not read a process's fd table (another user's process, non-root service)."""


def _socket_inodes(pids: list[int]) -> set[int]:
    inodes: set[int] = set()
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except PermissionError as exc:
            raise _Unreadable from exc
        except OSError:
            continue  # gone meanwhile
        for fd in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target.endswith("]") and target[8:-1].isdigit():
                inodes.add(int(target[8:-1]))
    return inodes


def _task_tree(state: dict[str, Any]) -> list[int] | None:
    """The task's processes (its supervisor's descendants), or None when the supervisor is gone or recycled."""
    pid = state.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return None
    now = start_time(pid)
    if now is None or (state.get("start_time") is not None and now != state.get("start_time")):
        return None
    return descendants(pid)


def _local_owner(ex: LocalExecutor, task_id: int, state: dict[str, Any]) -> Any:
    """A predicate ``mine(listener)`` for the task, or None when it has no processes."""
    tree = _task_tree(state)
    if not tree:
        return None
    try:
        inodes = _socket_inodes(tree)
    except _Unreadable:
        try:
            uid = os.stat(ex.task_dir(task_id)).st_uid  # the launcher made it as the task's account
        except OSError:
            return None
        me = os.geteuid()
        if uid in (0, me):
            return None
        return lambda s: s.uid == uid
    return lambda s: s.inode in inodes


def local_port_owned(ex: LocalExecutor, task_id: int, state: dict[str, Any], port: int) -> bool:
    """Whether the task's processes (and only they) listen on ``127.0.0.1:port`` (blocking: run in a thread)."""
    mine = _local_owner(ex, task_id, state)
    if mine is None:
        return False
    found = candidates(read_tables(), "127.0.0.1", int(port))
    return bool(found) and all(mine(s) for s in found)


def local_listening(ex: LocalExecutor, task_id: int, state: dict[str, Any]) -> list[int]:
    """The ports on the loopback that the task's processes serve (blocking)."""
    mine = _local_owner(ex, task_id, state)
    return [] if mine is None else served_ports(read_tables(), "127.0.0.1", mine)


# --- the Slurm executor ---------------------------------------------------------------------

_ADDR_RE = re.compile(r"(?:^|\s)NodeAddr=(\S+)")
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _first_node(placement: Placement | None) -> str | None:
    if placement is None or not placement.nodes:
        return None
    node = placement.nodes[0].node
    return node if _NODE_NAME.fullmatch(node) else None


def _node_addrs(ex: SlurmExecutor) -> dict[str, str]:
    cache: dict[str, str] | None = getattr(ex, "_node_addrs", None)
    if cache is None:
        cache = {}
        ex._node_addrs = cache  # type: ignore[attr-defined]
    return cache


def _parse_node_addr(text: str) -> str | None:
    m = _ADDR_RE.search(text)
    return m.group(1) if m and _NODE_NAME.fullmatch(m.group(1)) else None


def _resolve(name: str) -> str:
    """The IPv4 address the service connects to for a node address (a name or an address)."""
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    return str(infos[0][4][0])


def slurm_task_host(ex: SlurmExecutor, task_id: int, state: dict[str, Any], placement: Placement | None) -> str:
    """The IPv4 address of the task's first node (Slurm's NodeAddr); cached per node for the service's life.

    :func:`slurm_port_owned` fills the cache without blocking; only a first call before it runs
    ``scontrol show node`` here."""
    from .base import ExecUnsupported

    node = _first_node(placement)
    if node is None:
        raise ExecUnsupported("the task has no node yet")
    cache = _node_addrs(ex)
    if node not in cache:
        import subprocess

        proc = subprocess.run(ex._argv("scontrol", "show", "node", "-o", node), env=ex._env(), capture_output=True,
                              text=True, timeout=ex.command_timeout, check=False)
        addr = _parse_node_addr(proc.stdout) if proc.returncode == 0 else None
        if addr is None:
            raise ExecUnsupported(f"Slurm gave no address for node {node}")
        cache[node] = _resolve(addr)
    return cache[node]


async def _node_host(ex: SlurmExecutor, node: str) -> str:
    cache = _node_addrs(ex)
    if node not in cache:
        out = await ex._run(ex._argv("scontrol", "show", "node", "-o", node))
        addr = _parse_node_addr(out)
        if addr is None:
            from .base import ExecUnsupported

            raise ExecUnsupported(f"Slurm gave no address for node {node}")
        cache[node] = await asyncio.to_thread(_resolve, addr)
    return cache[node]


def _tables(ex: SlurmExecutor) -> dict[int, tuple[float, str, list[Listener]]]:
    cache: dict[int, tuple[float, str, list[Listener]]] | None = getattr(ex, "_port_tables", None)
    if cache is None:
        cache = {}
        ex._port_tables = cache  # type: ignore[attr-defined]
    return cache


async def _slurm_table(ex: SlurmExecutor, task_id: int, state: dict[str, Any], node: str,
                       max_age: float) -> list[Listener]:
    """The node's LISTEN sockets, read by a step in the task's job as its owner (cached per task)."""
    job_id = str(state.get("job_id", ""))
    if not job_id.isdigit():
        return []
    cache = _tables(ex)
    hit = cache.get(task_id)
    now = time.monotonic()
    if hit is not None and hit[1] == job_id and 0 <= now - hit[0] < max_age:
        return hit[2]
    inflight: dict[int, asyncio.Future[list[Listener]]] | None = getattr(ex, "_port_reads", None)
    if inflight is None:
        inflight = {}
        ex._port_reads = inflight  # type: ignore[attr-defined]
    if task_id in inflight:  # one step at a time per task, however many requests ask
        return await asyncio.shield(inflight[task_id])
    user = state.get("user") if isinstance(state.get("user"), str) else None
    argv = ex._argv("srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
                    "--quiet", "cat", "/proc/net/tcp", "/proc/net/tcp6", user=user or ex.submit_as)
    future: asyncio.Future[list[Listener]] = asyncio.get_running_loop().create_future()
    inflight[task_id] = future
    try:
        out = await ex._run(argv)
        table = parse_proc_net_tcp(out[:MAX_TABLE_BYTES])
    except asyncio.CancelledError:
        future.cancel()
        raise
    except Exception as exc:
        future.set_exception(exc)
        future.exception()  # retrieved: a failure nobody else awaited is not logged
        raise
    finally:
        inflight.pop(task_id, None)
    future.set_result(table)
    if len(cache) > 10000:
        cache.clear()
    cache[task_id] = (time.monotonic(), job_id, table)
    return table


def _slurm_mine(ex: SlurmExecutor, state: dict[str, Any]) -> Any:
    uid = ex._uid(state)
    return None if uid == 0 else (lambda s: s.uid == uid)


async def slurm_port_owned(ex: SlurmExecutor, task_id: int, state: dict[str, Any], placement: Placement | None,
                           port: int) -> bool:
    """Whether only the job's account listens on ``port`` at the task's first node (as the proxy reaches it)."""
    node = _first_node(placement)
    mine = _slurm_mine(ex, state)
    if node is None or mine is None:
        return False
    host = await _node_host(ex, node)
    for max_age in (SLURM_CACHE_S, SLURM_RECHECK_S):
        found = candidates(await _slurm_table(ex, task_id, state, node, max_age), host, int(port))
        if found and all(mine(s) for s in found):
            return True
        if found:
            return False  # someone else's socket may take the connection: no re-read will change that soon
    return False


async def slurm_listening(ex: SlurmExecutor, task_id: int, state: dict[str, Any],
                          placement: Placement | None) -> list[int]:
    node = _first_node(placement)
    mine = _slurm_mine(ex, state)
    if node is None or mine is None:
        return []
    host = await _node_host(ex, node)
    return served_ports(await _slurm_table(ex, task_id, state, node, SLURM_RECHECK_S), host, mine)
