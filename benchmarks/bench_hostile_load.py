"""/api/health and an ordinary submit under hostile load (target: health p99 <= 100 ms under load).

One client (mallory) sends, one request after another for ``--seconds``: a gzip bomb (1 MiB of
gzip, 1 GiB inside) and an archive of 100,000 files to ``PUT /api/code/<sha>``, a YAML body of
just under 1 MiB with ~70,000 keys to ``POST /api/tasks``, and unauthenticated 200 MB bodies
streamed to both routes (the server may close early). Meanwhile another client (alice) sends
``GET /api/health`` every 20 ms and submits an ordinary JSON task every 200 ms, each timed from
send to answer (60 s timeout: a blocked request is a slow sample, not a crash).

Baseline, same run, same service, before the load: the same health and submit probes alone.
Memory: the service process's peak RSS (VmHWM) and the peak of the sampled sum over it and its
request-worker processes (task processes not counted).

Usage: python benchmarks/bench_hostile_load.py [--seconds 10] [--idle 300]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import urllib3
from _common import Api, Service, header, ms, pct, ratio, verdict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.hostile.corpus import gzip_bomb, many_files, yaml_many_keys  # noqa: E402  (the test's bodies)
from tests.hostile.load import rss, stream_body, workers  # noqa: E402

TARGET_P99 = 0.100


class Probe:
    """Health every ``every`` s and a submit every 10th time, timed, until ``stop``."""

    def __init__(self, url: str, token: str, code: dict[str, str], every: float = 0.02) -> None:
        self.url, self.every = url, every
        self.http = urllib3.PoolManager(maxsize=2)
        self.headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
        self.spec = json.dumps({"name": "ordinary", "code": code, "entrypoint": {"argv": ["true"]}}).encode()
        self.health: list[float] = []
        self.submit: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def _one(self, method: str, path: str, body: bytes | None, into: list[float], ok: int) -> None:
        t0 = time.perf_counter()
        try:
            r = self.http.request(method, self.url + path, body=body, headers=self.headers, retries=False, timeout=60)
            if r.status != ok:
                self.errors.append(f"{method} {path}: {r.status}")
        except urllib3.exceptions.HTTPError as exc:
            self.errors.append(f"{method} {path}: {type(exc).__name__}")
        into.append(time.perf_counter() - t0)

    def run(self, count: int | None = None) -> None:
        n = 0
        while not self.stop.is_set() and (count is None or len(self.health) < count):
            self._one("GET", "/api/health", None, self.health, 200)
            if n % 10 == 0:
                self._one("POST", "/api/tasks", self.spec, self.submit, 201)
            n += 1
            time.sleep(self.every)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the hostile client sends")
    ap.add_argument("--idle", type=int, default=300, help="health samples of the idle baseline")
    args = ap.parse_args()

    header("health and submit under hostile load (gzip bombs, 100k-file archives, 1 MB YAML, 200 MB bodies)")
    t0 = time.perf_counter()
    bomb, files, yaml = gzip_bomb(), many_files(), yaml_many_keys()
    print(f"bodies: bomb {len(bomb) / 2**20:.1f} MiB -> 1 GiB, 100k files {len(files) / 2**20:.1f} MiB, "
          f"YAML {len(yaml) / 2**20:.2f} MiB ({yaml.count(b':')} keys), built in {time.perf_counter() - t0:.1f} s")
    with Service("--gpus=0", "--TaccHub.max_running_per_user=1000", name="hostile") as svc:
        svc.token("alice")
        svc.token("mallory")
        svc.start()
        assert svc.proc is not None
        pid = svc.proc.pid
        alice = Api(svc.url, svc.token("alice"))
        code = alice.upload_code()

        idle = Probe(svc.url, svc.token("alice"), code)
        idle.run(count=args.idle)
        idle_rss = rss(pid) + sum(rss(p) for p in workers(pid))

        load = Probe(svc.url, svc.token("alice"), code)
        peak = [idle_rss]
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.wait(0.05):
                peak[0] = max(peak[0], rss(pid) + sum(rss(p) for p in workers(pid)))

        hostile_http = urllib3.PoolManager(maxsize=1)
        auth = {"Authorization": f"token {svc.token('mallory')}"}

        def put(data: bytes) -> Callable[[], int | None]:
            digest = hashlib.sha256(data).hexdigest()
            return lambda: hostile_http.request("PUT", f"{svc.url}/api/code/{digest}", body=data, retries=False,
                                                headers={**auth, "Content-Type": "application/gzip"},
                                                timeout=300).status

        kinds: list[tuple[str, Callable[[], int | None]]] = [
            ("gzip-bomb", put(bomb)), ("100k-files", put(files)),
            ("yaml-1MB", lambda: hostile_http.request("POST", f"{svc.url}/api/tasks", body=yaml, retries=False,
                                                      headers={**auth, "Content-Type": "application/yaml"},
                                                      timeout=300).status),
            ("unauth-200MB-upload", lambda: stream_body(svc.url, "PUT", "/api/code/" + "0" * 64)),
            ("unauth-200MB-submit", lambda: stream_body(svc.url, "POST", "/api/tasks")),
        ]
        threads = [threading.Thread(target=load.run, daemon=True), threading.Thread(target=sample, daemon=True)]
        for t in threads:
            t.start()
        results: dict[str, list[int | None]] = {k: [] for k, _ in kinds}
        deadline = time.monotonic() + args.seconds
        i = 0
        load_t0 = time.perf_counter()
        while (time.monotonic() < deadline or i < len(kinds)) and i < 60:
            name, go = kinds[i % len(kinds)]
            try:
                results[name].append(go())
            except urllib3.exceptions.HTTPError:
                results[name].append(None)
            i += 1
        load_s = time.perf_counter() - load_t0
        load.stop.set()
        stop_sampling.set()
        for t in threads:
            t.join(120)
        hwm = rss(pid, "VmHWM")

    h50, h99 = pct(idle.health, 50), pct(idle.health, 99)
    l50, l99 = pct(load.health, 50), pct(load.health, 99)
    print(f"hostile requests ({load_s:.1f} s): " + ", ".join(f"{k} x{len(v)} -> {sorted(set(map(str, v)))}"
                                                       for k, v in results.items()))
    print(f"health idle:       p50 {ms(h50)}  p99 {ms(h99)}  max {ms(max(idle.health))}  ({len(idle.health)} samples)")
    print(f"health under load: p50 {ms(l50)}  p99 {ms(l99)}  max {ms(max(load.health))}  ({len(load.health)} samples)")
    print(f"ratio under load / idle: p50 {ratio(l50, h50)}  p99 {ratio(l99, h99)}")
    print(f"submit idle:       p50 {ms(pct(idle.submit, 50))}  p99 {ms(pct(idle.submit, 99))}  "
          f"({len(idle.submit)} samples)")
    print(f"submit under load: p50 {ms(pct(load.submit, 50))}  p99 {ms(pct(load.submit, 99))}  "
          f"max {ms(max(load.submit))}  ({len(load.submit)} samples); ratio p99 "
          f"{ratio(pct(load.submit, 99), pct(idle.submit, 99))}")
    print(f"probe errors under load: {len(load.errors)} {load.errors[:5]}")
    print(f"service RSS: idle {idle_rss / 2**20:.0f} MB (with workers); peak VmHWM {hwm / 2**20:.0f} MB (service "
          f"process); peak sampled with workers {peak[0] / 2**20:.0f} MB; ratio {ratio(peak[0], idle_rss)}")
    verdict(l99 <= TARGET_P99, f"health p99 under load {ms(l99)} <= {ms(TARGET_P99)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
