"""Quotas against the real service: the `tacc-hub quota` CLI, the REST routes, who may use them, usage."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from .conftest import BIN, ROOT, Api, ServiceProcess, tcloud, write_task


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A service of this module's own: quota rows set here must not leak into other tests."""
    s = ServiceProcess(tmp_path_factory.mktemp("quota-svc"), "--gpus=2").start()
    yield s
    s.stop()


def quota_cli(svc: ServiceProcess, *args: str, token: str | None = None,
              url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TACC_URL": url or svc.url, "TACC_TOKEN": token or svc.token("root", admin=True),
           "TACC_CONFIG": "/nonexistent"}
    return subprocess.run([str(BIN / "tacc-hub"), "quota", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60)


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, (res.stdout, res.stderr)
    return res.stdout


def test_admin_sets_quotas_and_groups_with_the_cli(svc: ServiceProcess):
    admin = Api(svc.url, svc.token("root", admin=True))
    out = ok(quota_cli(svc, "set", "--user", "alice", "--max-gpus", "8", "--gpu-hours", "100"))
    assert "user alice: max_gpus=8  guaranteed_gpus=0  gpu_hours=100" in out
    ok(quota_cli(svc, "set", "--group", "lab-a", "--max-gpus", "16", "--guaranteed-gpus", "4"))
    ok(quota_cli(svc, "set", "--user", "*", "--max-gpus", "2"))
    out = ok(quota_cli(svc, "group", "alice", "lab-a"))
    assert "user alice is in group lab-a" in out

    status, body = admin.call("GET", "/api/admin/quotas")
    assert status == 200
    rows = {(r["kind"], r["name"]): (r["max_gpus"], r["guaranteed_gpus"], r["gpu_hours"]) for r in body["quotas"]}
    assert rows[("user", "alice")] == (8, 0, 100.0)
    assert rows[("group", "lab-a")] == (16, 4, None)
    assert rows[("user", "*")] == (2, 0, None)
    assert admin.call("GET", "/api/admin/groups")[1]["memberships"]["alice"] == "lab-a"

    listing = ok(quota_cli(svc, "list"))
    assert "lab-a" in listing and "alice" in listing and "KIND" in listing
    as_json = json.loads(ok(quota_cli(svc, "list", "--json")))
    assert {"kind": "user", "name": "*"}.items() <= as_json["quotas"][0].items()

    # set keeps what it is not told to change; "none" clears a limit
    out = ok(quota_cli(svc, "set", "--user", "alice", "--gpu-hours", "none"))
    assert "max_gpus=8" in out and "gpu_hours=-" in out
    assert admin.call("GET", "/api/admin/quotas/user/alice")[1]["gpu_hours"] is None

    shown = ok(quota_cli(svc, "show", "--user", "alice"))
    assert "user alice: max_gpus=8" in shown and "group lab-a: max_gpus=16  guaranteed_gpus=4" in shown
    shown = ok(quota_cli(svc, "show", "--user", "zed"))
    assert "no quota of its own" in shown and "in force for user zed: max_gpus=2" in shown

    ok(quota_cli(svc, "delete", "--user", "alice"))
    assert admin.call("GET", "/api/admin/quotas/user/alice")[0] == 404
    res = quota_cli(svc, "delete", "--user", "alice")
    assert res.returncode == 1 and "no quota for user alice" in res.stderr
    ok(quota_cli(svc, "group", "alice", "--clear"))
    assert "alice" not in admin.call("GET", "/api/admin/groups")[1]["memberships"]
    # --url/--token on the command line win over the environment
    res = subprocess.run([str(BIN / "tacc-hub"), "quota", "--url", svc.url, "--token",
                          svc.token("root", admin=True), "list", "--json"], capture_output=True, text=True,
                         env={**os.environ, "TACC_URL": "http://127.0.0.1:9", "TACC_TOKEN": "bad",
                              "TACC_CONFIG": "/nonexistent"}, timeout=60)
    assert res.returncode == 0, res.stderr


def test_admin_rest_round_trip_and_default_rows(svc: ServiceProcess):
    admin = Api(svc.url, svc.token("root", admin=True))
    status, row = admin.call("PUT", "/api/admin/quotas/group/%2A", {"gpu_hours": 12.5})
    assert status == 200 and row == {**row, "kind": "group", "name": "*", "max_gpus": None, "gpu_hours": 12.5}
    assert admin.call("GET", "/api/admin/quotas/group/*")[1]["gpu_hours"] == 12.5
    status, row = admin.call("PUT", "/api/admin/users/dora/group", {"group": "lab-d"})
    assert status == 200 and row == {"user": "dora", "group": "lab-d"}
    status, mine = Api(svc.url, svc.token("dora")).call("GET", "/api/quota")
    assert status == 200 and mine["group"] == "lab-d" and mine["limits"]["group"]["gpu_hours"] == 12.5
    assert admin.call("DELETE", "/api/admin/quotas/group/*")[0] == 200
    assert admin.call("DELETE", "/api/admin/users/dora/group")[1] == {"user": "dora", "group": "default"}
    assert Api(svc.url, svc.token("dora")).call("GET", "/api/quota")[1]["group"] == "default"


def test_non_admins_get_403_and_see_their_own_quota(svc: ServiceProcess):
    bob = Api(svc.url, svc.token("bob"))
    for method, path, body in (("GET", "/api/admin/quotas", None), ("GET", "/api/admin/quotas/user/bob", None),
                               ("PUT", "/api/admin/quotas/user/bob", {"max_gpus": 100}),
                               ("DELETE", "/api/admin/quotas/user/bob", None), ("GET", "/api/admin/groups", None),
                               ("PUT", "/api/admin/users/bob/group", {"group": "lab-a"}),
                               ("DELETE", "/api/admin/users/bob/group", None),
                               ("GET", "/api/quota?user=alice", None)):
        status, err = bob.call(method, path, body)
        assert status == 403, (method, path, status, err)
        assert "admin" in err["message"]
    assert Api(svc.url, svc.token("root", admin=True)).call("GET", "/api/admin/quotas/user/bob")[0] == 404
    assert Api(svc.url, None).call("GET", "/api/quota")[0] == 401

    status, mine = bob.call("GET", "/api/quota")
    assert status == 200
    assert mine["user"] == "bob" and mine["group"] == "default" and mine["period"] == "month"
    assert mine["period_start"] < mine["period_end"]
    assert mine["used_gpu_hours"] == {"user": 0.0, "group": mine["used_gpu_hours"]["group"]}
    assert set(mine["limits"]) == {"user", "group"}

    res = quota_cli(svc, "list", token=svc.token("bob"))
    assert res.returncode == 1 and "admin" in res.stderr and "Traceback" not in res.stderr
    res = quota_cli(svc, "set", "--user", "bob", "--max-gpus", "99", token=svc.token("bob"))
    assert res.returncode == 1 and "HTTP 403" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("raw", ["a%20b", "%2E%2E", "x" * 65, "a%3Bdrop%20table%20quotas", "%C3%A9t%C3%A9",
                                 "a%0Ab", "-lead", "a%2Fb", "%2A%2A", "%27%3B--"])
def test_hostile_names_are_refused(svc: ServiceProcess, raw: str):
    admin = Api(svc.url, svc.token("root", admin=True))
    for kind in ("user", "group"):
        status, err = admin.call("PUT", f"/api/admin/quotas/{kind}/{raw}", {"max_gpus": 1})
        assert status == 400, (kind, raw, status, err)
        assert err["errors"][0]["field"] == "name"
    status, err = admin.call("PUT", f"/api/admin/users/{raw}/group", {"group": "lab-a"})
    assert status == 400 and err["errors"][0]["field"] == "user"
    status, err = admin.call("PUT", "/api/admin/users/eve/group", {"group": unquote(raw)})
    assert status == 400 and err["errors"][0]["field"] == "group"
    assert not any("%" in r["name"] or len(r["name"]) > 64 for r in admin.call("GET", "/api/admin/quotas")[1]["quotas"])
    assert "eve" not in admin.call("GET", "/api/admin/groups")[1]["memberships"]


@pytest.mark.parametrize(("body", "field"), [
    ({"max_gpus": -1}, "max_gpus"),
    ({"max_gpus": "8"}, "max_gpus"),
    ({"max_gpus": 2.5}, "max_gpus"),
    ({"guaranteed_gpus": None}, "guaranteed_gpus"),
    ({"gpu_hours": -3}, "gpu_hours"),
    ('{"gpu_hours": NaN}', "gpu_hours"),
    ({"max_gpus": 2, "guaranteed_gpus": 3}, "guaranteed_gpus"),
    ({"maxgpus": 2}, "maxgpus"),
    ("[1, 2]", ""),
])
def test_bad_quota_bodies_are_refused_with_the_field(svc: ServiceProcess, body: object, field: str):
    admin = Api(svc.url, svc.token("root", admin=True))
    status, err = admin.call("PUT", "/api/admin/quotas/user/frank", body)  # type: ignore[arg-type]
    assert status == 400, err
    assert field in [e["field"] for e in err["errors"]], err
    assert admin.call("GET", "/api/admin/quotas/user/frank")[0] == 404  # nothing written
    status, err = admin.call("PUT", "/api/admin/quotas/user/frank", "{not json")
    assert status == 400 and "JSON" in err["message"]


def test_cli_errors_are_one_line_not_tracebacks(svc: ServiceProcess):
    res = quota_cli(svc, "set", "--user", "a b", "--max-gpus", "1")
    assert res.returncode == 1 and "invalid user name" in res.stderr and "Traceback" not in res.stderr
    res = quota_cli(svc, "set", "--group", "lab-x", "--max-gpus", "2", "--guaranteed-gpus", "5")
    assert res.returncode == 1 and "guaranteed_gpus" in res.stderr
    res = quota_cli(svc, "set", "--user", "x", "--max-gpus", "lots")
    assert res.returncode == 2 and "'lots' is not a whole number or 'none'" in res.stderr
    res = quota_cli(svc, "set", "--user", "x", "--group", "y", "--max-gpus", "1")
    assert res.returncode == 1 and "exactly one of --user" in res.stderr
    res = quota_cli(svc, "list", url="http://127.0.0.1:9")
    assert res.returncode == 1 and "cannot reach" in res.stderr and "Traceback" not in res.stderr
    res = quota_cli(svc, "list", token="not-a-token")
    assert res.returncode == 1 and "401" in res.stderr


def test_usage_is_reflected_after_a_task_runs(svc: ServiceProcess, tmp_path: Path):
    admin = Api(svc.url, svc.token("root", admin=True))
    carol = Api(svc.url, svc.token("carol"))
    assert admin.call("PUT", "/api/admin/users/carol/group", {"group": "lab-u"})[0] == 200
    assert admin.call("PUT", "/api/admin/quotas/group/lab-u", {"gpu_hours": 1.0})[0] == 200
    before = carol.call("GET", "/api/quota")[1]
    assert before["used_gpu_hours"] == {"user": 0.0, "group": 0.0}
    assert before["remaining_gpu_hours"] == {"user": None, "group": 1.0}

    d = write_task(tmp_path / "g", "name: gpu\ncode: .\nentrypoint: sleep 1\n"
                   "resources: {nodes: 1, gpus_per_node: 2, time_limit: 60}\n")  # 2 x 60 s fits 1 GPU-hour
    res = tcloud(svc, "carol", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    task = carol.wait_status(json.loads(res.stdout)["id"], {"succeeded"})
    ran = task["finished_at"] - task["started_at"]
    assert ran >= 1.0

    status, after = carol.call("GET", "/api/quota")
    assert status == 200
    expected = 2 * ran / 3600.0  # 2 GPUs for the run
    assert after["used_gpu_hours"]["user"] == pytest.approx(expected, rel=1e-6)
    assert after["used_gpu_hours"]["group"] == pytest.approx(expected, rel=1e-6)
    assert after["remaining_gpu_hours"]["group"] == pytest.approx(1.0 - expected, rel=1e-6)
    # an admin sees the same through ?user= and the CLI
    assert admin.call("GET", "/api/quota?user=carol")[1]["used_gpu_hours"] == after["used_gpu_hours"]
    assert f"group {after['used_gpu_hours']['group']:.2f} used" in ok(quota_cli(svc, "show", "--user", "carol"))
