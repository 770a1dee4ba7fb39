"""The rest of tcloud against the real service: logs, cluster, ps filters, schema, errors."""

from __future__ import annotations

import json

from .conftest import Api, tcloud, write_task


def test_logs_ps_cluster_and_schema(service, tmp_path):
    d = write_task(tmp_path / "t", "name: echo\ncode: .\nentrypoint:\n  - for i in 1 2 3; do echo line-$i; done\n")
    res = tcloud(service, "ivan", "submit", str(d), "-f")
    assert res.returncode == 0, res.stderr
    tid = int(res.stdout.split("submitted task ")[1].split()[0])
    logs = tcloud(service, "ivan", "logs", str(tid))
    assert logs.stdout.split() == ["line-1", "line-2", "line-3"]
    tail = tcloud(service, "ivan", "logs", str(tid), "--offset", "7")
    assert tail.stdout.split() == ["line-2", "line-3"]

    ps = tcloud(service, "ivan", "ps")
    assert "echo" in ps.stdout and "succeeded" in ps.stdout
    only_running = json.loads(tcloud(service, "ivan", "ps", "-s", "running", "--json").stdout)
    assert all(t["status"] == "running" for t in only_running["tasks"])

    cl = json.loads(tcloud(service, "ivan", "cluster", "--json").stdout)
    assert cl["gpus"] == 2 and cl["nodes"][0]["name"] == "localhost"
    assert "GPUs free" in tcloud(service, "ivan", "cluster").stdout

    schema = json.loads(tcloud(service, "ivan", "schema").stdout)
    assert {"name", "entrypoint", "resources", "runtime"} <= set(schema["properties"])


def test_cli_reports_field_errors_and_unreachable_service(service, tmp_path):
    d = write_task(tmp_path / "bad", "name: ok\ncode: .\nentrypoint: [echo]\nresources: {gpus_per_node: 8}\n")
    res = tcloud(service, "ivan", "submit", str(d))
    assert res.returncode == 1 and "resources.gpus_per_node" in res.stderr
    res = tcloud(service, "ivan", "submit", str(d), "--gpus", "1", "--json")
    assert res.returncode == 0, res.stderr
    Api(service.url, service.token("ivan")).wait_status(json.loads(res.stdout)["id"], {"succeeded"})
    res = tcloud(service, "ivan", "--url", "http://127.0.0.1:9", "ps")
    assert res.returncode == 1 and "cannot reach" in res.stderr
