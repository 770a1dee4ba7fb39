"""What the service's proxy to a task's web port costs (issue 19): latency, throughput, time to first byte.

A real ``tacc-hub serve`` (local executor, tasks as their owners) runs one task as alice: a small
threaded HTTP server on a declared port, answering ``/small`` (1 KiB), ``/big`` (64 MiB, streamed in
1 MiB chunks) and ``/slow`` (a first chunk at once, the rest 1 s later). Each figure is measured
twice in the same run, alternating: direct to 127.0.0.1:PORT (the baseline: what the task's own
user would see on the node) and through ``/tasks/ID/proxy/PORT/`` with alice's token (the port
ownership check, header rewriting, streaming). Printed: per-request latency p50/p99 (keep-alive,
sequential), requests/s with 8 concurrent clients, MB/s for the 64 MiB body, and the time to the
first byte of ``/slow`` (the proxy must stream, not buffer: about the same as direct, far below 1 s).

Must run as root (it creates the account alice if missing).
Usage: python benchmarks/bench_proxy.py [--requests 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import time

import urllib3
from _common import Api, Service, free_port, header, ms, pct, ratio, verdict

SERVER = r"""
import http.server, socketserver, sys, time
BIG = b"x" * (1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # headers and body in one write (unbuffered, delayed ACKs add 40 ms to each answer)
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/small":
            body = b"s" * 1024
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        elif self.path == "/big":
            self.send_response(200); self.send_header("Content-Length", str(64 * len(BIG))); self.end_headers()
            for _ in range(64):
                self.wfile.write(BIG)
        elif self.path == "/slow":
            self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
            self.wfile.write(b"a"); self.wfile.flush(); time.sleep(1.0); self.wfile.write(b"b")
        else:
            self.send_error(404)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def latencies(http: urllib3.PoolManager, url: str, headers: dict[str, str], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = http.request("GET", url, headers=headers, retries=False, timeout=30)
        assert r.status == 200 and len(r.data) == 1024, (r.status, r.data[:200])
        out.append(time.perf_counter() - t0)
    return out


def concurrent_rate(url: str, headers: dict[str, str], n: int, clients: int = 8) -> float:
    http = urllib3.PoolManager(maxsize=clients)

    def one(_: int) -> None:
        r = http.request("GET", url, headers=headers, retries=False, timeout=30)
        assert r.status == 200

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(n)))
    return n / (time.perf_counter() - t0)


def throughput(http: urllib3.PoolManager, url: str, headers: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = http.request("GET", url, headers=headers, retries=False, timeout=120, preload_content=False)
    got = sum(len(c) for c in r.stream(1 << 20))
    r.release_conn()
    assert r.status == 200 and got == 64 << 20, (r.status, got)
    return got / (time.perf_counter() - t0) / 1e6


def first_byte(http: urllib3.PoolManager, url: str, headers: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = http.request("GET", url, headers=headers, retries=False, timeout=30, preload_content=False)
    r.read(1)
    took = time.perf_counter() - t0
    r.read()
    r.release_conn()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    port = free_port()
    with Service("--gpus=0", name="proxy") as svc:
        svc.start()
        api = Api(svc.url, svc.token("alice"))
        code = api.upload_code({"server.py": SERVER})
        spec = {"name": "web", "code": code, "ports": [port],
                "entrypoint": {"argv": ["python3", "server.py", str(port)]}}
        status, task = api.call("POST", "/api/tasks", spec)
        assert status == 201, task
        tid = task["id"]
        api.wait_status(tid, {"running"})
        auth = {"Authorization": f"token {svc.token('alice')}"}
        ways = {"direct": (f"http://127.0.0.1:{port}", {}),
                "proxied": (f"{svc.url}/tasks/{tid}/proxy/{port}", auth)}
        http = urllib3.PoolManager(maxsize=4)
        deadline = time.monotonic() + 60
        last = ""
        while True:  # until the server listens (and the proxy sees it as the task's)
            try:
                r = http.request("GET", ways["proxied"][0] + "/small", headers=auth, retries=False, timeout=5)
                if r.status == 200:
                    break
                last = f"{r.status} {r.data[:300]!r}"
            except urllib3.exceptions.HTTPError as exc:
                last = str(exc)
            assert time.monotonic() < deadline, f"the task's server never answered through the proxy: {last}"
            time.sleep(0.2)
        lat: dict[str, list[float]] = {w: [] for w in ways}
        rate: dict[str, list[float]] = {w: [] for w in ways}
        mbs: dict[str, list[float]] = {w: [] for w in ways}
        ttfb: dict[str, list[float]] = {w: [] for w in ways}
        for _ in range(args.rounds):
            for way, (base, headers) in ways.items():
                lat[way] += latencies(http, base + "/small", headers, args.requests)
                rate[way].append(concurrent_rate(base + "/small", headers, args.requests))
                mbs[way].append(throughput(http, base + "/big", headers))
                ttfb[way].append(first_byte(http, base + "/slow", headers))
        api.call("POST", f"/api/tasks/{tid}/cancel")
    header(f"proxy to a task's web port ({args.rounds} rounds; {args.requests} requests each)")
    for way in ways:
        print(f"{way:8s} 1 KiB GET p50 {ms(pct(lat[way], 50))}  p99 {ms(pct(lat[way], 99))}  "
              f"8 clients {max(rate[way]):.0f} req/s  64 MiB {max(mbs[way]):.0f} MB/s  "
              f"first byte of /slow {ms(min(ttfb[way]))}")
    d, p = "direct", "proxied"
    print(f"ratio proxied/direct: p50 {ratio(pct(lat[p], 50), pct(lat[d], 50))}, "
          f"req/s {ratio(max(rate[p]), max(rate[d]))}, MB/s {ratio(max(mbs[p]), max(mbs[d]))}")
    verdict(max(ttfb[p]) < 0.5, f"the proxy streams: first byte of a slow answer in {ms(max(ttfb[p]))} "
                                "(buffering would take the server's 1 s)")


if __name__ == "__main__":
    main()
