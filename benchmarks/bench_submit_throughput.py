"""Service submissions with 50 concurrent clients (target: >= 1,000 tasks/s sustained, p99 <= 50 ms).

``wrk -c 50 -t 2 -d 15s --latency`` POSTs a JSON TaskSpec (with its Authorization header)
to /api/tasks. So that the machine is not flooded with processes, the service has one
GPU and a blocker task (``sleep 600``, 1 GPU) holds it; every load task asks for 1 GPU
and queues FIFO behind it. Lua hooks count the requests sent and the 201s
received. wrk stops at its deadline with up to one request per connection in flight (sent,
and stored by the service, but its answer not counted), so the check is: 0 non-2xx, 0
socket errors, and 201s <= tasks stored <= requests sent, with stored - 201s <= connections.

Baseline, same run, same wrk settings: GET /api/health (the HTTP + tornado floor).

Needs ``wrk`` (Debian: ``apt-get install -y wrk``).

The service runs with its default settings (INFO: one access-log line per request, to a file).

Usage: python benchmarks/bench_submit_throughput.py [--duration 15] [--connections 50] [--threads 2]
       [--service-arg=--log-level=WARN]
       add --profile to run the load a second time under py-spy (if installed) and print its top frames.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Api, Service, header, ratio, verdict

TARGET_RPS = 1000.0
TARGET_P99 = 0.050

LUA = r"""
local body = __BODY__
local token = __TOKEN__
local method = __METHOD__
local threads = {}
counts = {}  -- globals: thread:get() reads globals
sent = 0
local req = nil

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = method
  if method == "POST" then
    wrk.body = body
    wrk.headers["Content-Type"] = "application/json"
  end
  wrk.headers["Authorization"] = "token " .. token
  counts = {}
  sent = 0
  req = wrk.format()
end

function request()
  sent = sent + 1
  return req
end

function response(status, headers, body)
  local k = tostring(status)
  counts[k] = (counts[k] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  local nsent = 0
  for _, t in ipairs(threads) do
    nsent = nsent + t:get("sent")
    local c = t:get("counts")
    for k, v in pairs(c) do total[k] = (total[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(total) do table.insert(parts, string.format('"%s": %d', k, v)) end
  io.write(string.format(
    'WRKJSON {"sent": %d, "requests": %d, "duration_us": %d, "status": {%s}, "errors": {"connect": %d, "read": %d, '
    .. '"write": %d, "status": %d, "timeout": %d}, "p50_us": %d, "p90_us": %d, "p95_us": %d, "p99_us": %d, '
    .. '"max_us": %d}\n',
    nsent, summary.requests, summary.duration, table.concat(parts, ", "), summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(95), latency:percentile(99), latency.max))
end
"""


def lua_str(s: str) -> str:
    return json.dumps(s)  # a JSON string literal is a valid Lua string literal for this ASCII content


def run_wrk(wrk: str, url: str, script: Path, args: argparse.Namespace, svc: Service | None = None) -> dict:
    cmd = [wrk, "-c", str(args.connections), "-t", str(args.threads), "-d", f"{args.duration}s", "--latency",
           "--timeout", "10s", "-s", str(script), url]
    cpu0 = svc.cpu_seconds() if svc else 0.0
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 60, check=False)
    cpu1 = svc.cpu_seconds() if svc else 0.0
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary:\n{out.stdout}\n{out.stderr}")
    res = json.loads(line[len("WRKJSON "):])
    res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
    res["cpu_us"] = (cpu1 - cpu0) * 1e6 / max(1, res["sent"])  # service CPU per request (less noisy than req/s)
    res["cpu_busy"] = (cpu1 - cpu0) / (res["duration_us"] / 1e6)
    res["non2xx"] = sum(v for k, v in res["status"].items() if not k.startswith("2"))
    res["socket_errors"] = sum(v for k, v in res["errors"].items() if k != "status")
    return res


def show(label: str, r: dict) -> None:
    print(f"{label}: {r['rps']:.0f} req/s  p50 {r['p50_us'] / 1000:.1f} ms  p90 {r['p90_us'] / 1000:.1f} ms  "
          f"p95 {r['p95_us'] / 1000:.1f} ms  p99 {r['p99_us'] / 1000:.1f} ms  max {r['max_us'] / 1000:.1f} ms  "
          f"requests {r['requests']}  "
          f"status {r['status']}  socket errors {r['socket_errors']}", flush=True)
    print(f"{label}: service CPU {r['cpu_us']:.0f} us/request, service busy {100 * r['cpu_busy']:.0f}% of one core",
          flush=True)


def write_script(path: Path, method: str, body: str, token: str) -> Path:
    path.write_text(LUA.replace("__BODY__", lua_str(body)).replace("__TOKEN__", lua_str(token))
                    .replace("__METHOD__", lua_str(method)))
    return path


def profile(svc: Service, wrk: str, post_lua: Path, args: argparse.Namespace) -> None:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists():
        print("profile: py-spy not installed (pip install py-spy); skipped")
        return
    assert svc.proc is not None
    out = svc.tmp / "pyspy.txt"
    spy = subprocess.Popen([pyspy, "record", "--pid", str(svc.proc.pid), "--format", "raw", "--rate", "200",
                            "--duration", str(int(args.duration)), "--output", str(out), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    r = run_wrk(wrk, f"{svc.url}/api/tasks", post_lua, args, svc)
    show("submit under py-spy", r)
    spy.wait(args.duration + 30)
    if not out.exists():
        print("profile: py-spy wrote nothing (ptrace not permitted?)")
        return
    self_t: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        k = int(n)
        total += k
        self_t[frames[-1]] = self_t.get(frames[-1], 0) + k
        for f in set(frames):
            incl[f] = incl.get(f, 0) + k
    print(f"profile ({total} samples): top self time")
    for f, k in sorted(self_t.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {100 * k / total:5.1f}%  {f}")
    print("profile: top inclusive time (tacc_hub frames)")
    for f, k in sorted(((f, k) for f, k in incl.items() if "tacc_hub" in f), key=lambda kv: -kv[1])[:25]:
        print(f"  {100 * k / total:5.1f}%  {f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--service-arg", action="append", default=[],
                    help="extra setting for the service, e.g. --service-arg=--log-level=WARN (no access log)")
    args = ap.parse_args()

    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed: apt-get install -y wrk", file=sys.stderr)
        return 2

    header(f"submit throughput (wrk -c {args.connections} -t {args.threads} -d {args.duration}s)")
    with Service("--gpus=1", *args.service_arg, name="tput") as svc, tempfile.TemporaryDirectory() as tmp:
        token = svc.token("alice")
        svc.start()
        api = Api(svc.url, token)
        code = api.upload_code()
        status, blocker = api.call("POST", "/api/tasks", {
            "name": "blocker", "code": code, "entrypoint": {"shell": ["sleep 600"]},
            "resources": {"gpus_per_node": 1}})
        if status != 201:
            raise RuntimeError(f"blocker submit failed: {status} {blocker}")
        api.wait_status(blocker["id"], {"running"}, timeout=30)

        load = json.dumps({"name": "load", "code": code, "entrypoint": {"shell": ["echo hi"]},
                           "resources": {"gpus_per_node": 1}}, separators=(",", ":"))
        health_lua = write_script(Path(tmp) / "health.lua", "GET", "", token)
        post_lua = write_script(Path(tmp) / "post.lua", "POST", load, token)

        h = run_wrk(wrk, f"{svc.url}/api/health", health_lua, args, svc)
        show("baseline GET /api/health", h)
        _, before = api.call("GET", "/api/tasks?limit=1")
        s = run_wrk(wrk, f"{svc.url}/api/tasks", post_lua, args, svc)
        show("POST /api/tasks (submit)", s)
        _, after = api.call("GET", "/api/tasks?limit=1")
        created = s["status"].get("201", 0)
        stored = after["total"] - before["total"]
        _, blk = api.call("GET", f"/api/tasks/{blocker['id']}")
        _, pending = api.call("GET", "/api/tasks?limit=1&state=pending")
        print(f"tasks stored during the run: {stored}; requests sent: {s['sent']}; 201s counted: {created} "
              f"(+{stored - created} answered after wrk's deadline); non-2xx: {s['non2xx']}; "
              f"pending now: {pending['total']}; blocker still {blk['status']}")
        if args.profile:
            profile(svc, wrk, post_lua, args)

    print(f"ratio submit/health: throughput {ratio(s['rps'], h['rps'])}, "
          f"service CPU per request {ratio(s['cpu_us'], h['cpu_us'])}, "
          f"p50 latency {ratio(s['p50_us'], h['p50_us'])}, p99 latency {ratio(s['p99_us'], h['p99_us'])}")
    ok_count = (s["non2xx"] == 0 and s["socket_errors"] == 0 and created <= stored <= s["sent"]
                and stored - created <= args.connections)
    verdict(ok_count, f"every answer a 201 and every 201 stored (201s {created} <= stored {stored} <= sent "
            f"{s['sent']}, in flight at the end {stored - created} <= {args.connections}, non-2xx {s['non2xx']}, "
            f"socket errors {s['socket_errors']})")
    verdict(s["rps"] >= TARGET_RPS, f"throughput {s['rps']:.0f} tasks/s >= {TARGET_RPS:.0f}")
    verdict(s["p99_us"] / 1e6 <= TARGET_P99, f"p99 {s['p99_us'] / 1000:.1f} ms <= {TARGET_P99 * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
