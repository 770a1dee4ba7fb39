"""What the overload test and benchmarks/bench_hostile_load.py share: memory of the service, big bodies."""

from __future__ import annotations

import http.client
import os
from pathlib import Path

BIG = 200 * 1024 * 1024


def rss(pid: int, key: str = "VmRSS") -> int:
    """``key`` (VmRSS, VmHWM) of ``pid`` in bytes; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def workers(pid: int) -> list[int]:
    """Descendants of ``pid`` that are the service's own worker processes (multiprocessing), not tasks."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing" in cmd:
            out.append(p)
            todo += children.get(p, [])
    return out


def stream_body(url: str, method: str, path: str, size: int = BIG, headers: dict[str, str] | None = None) -> int | None:
    """Send ``size`` bytes as one body, 1 MiB at a time; the status, or None when the server just closed."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.putrequest(method, path)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(size))
        conn.endheaders()
        chunk = bytes(1024 * 1024)
        sent = 0
        try:
            while sent < size:
                conn.send(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server stopped reading and closed: correct for a body it will not take
        try:
            return conn.getresponse().status
        except (http.client.HTTPException, OSError):
            return None
    finally:
        conn.close()
