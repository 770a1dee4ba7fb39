"""Who may see and touch which task: owners, other users, admins, anonymous callers."""

from __future__ import annotations

import json

from .conftest import Api, tcloud, write_task


def test_users_see_and_cancel_only_their_own_tasks(service, tmp_path):
    d = write_task(tmp_path / "a", "name: private\ncode: .\nentrypoint: sleep 30\n")
    res = tcloud(service, "alice", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["id"]
    alice = Api(service.url, service.token("alice"))
    bob = Api(service.url, service.token("bob"))
    admin = Api(service.url, service.token("root", admin=True))
    alice.wait_status(tid, {"running"})

    for method, path in (("GET", f"/api/tasks/{tid}"), ("GET", f"/api/tasks/{tid}/logs"),
                         ("GET", f"/api/tasks/{tid}/outputs"), ("POST", f"/api/tasks/{tid}/cancel")):
        status, body = bob.call(method, path)
        assert status == 404, (method, path, status, body)
    _, listing = bob.call("GET", "/api/tasks?all=1")
    assert tid not in [t["id"] for t in listing["tasks"]]
    res = tcloud(service, "bob", "cancel", str(tid))
    assert res.returncode == 1 and "no task" in res.stderr
    _, t = alice.call("GET", f"/api/tasks/{tid}")
    assert t["status"] == "running"

    status, t = admin.call("GET", f"/api/tasks/{tid}")
    assert status == 200 and t["owner"] == "alice"
    _, listing = admin.call("GET", "/api/tasks?all=1&limit=500")
    assert tid in [t["id"] for t in listing["tasks"]]
    status, t = admin.call("POST", f"/api/tasks/{tid}/cancel")
    assert status == 200
    alice.wait_status(tid, {"cancelled"})


def test_requests_without_a_valid_token_are_refused(service):
    for token in (None, "not-a-token", "x" * 600):
        api = Api(service.url, token)
        for method, path in (("GET", "/api/tasks"), ("POST", "/api/tasks"), ("GET", "/api/cluster"),
                             ("GET", "/api/tasks/1")):
            status, body = api.call(method, path, body={})
            assert status == 401, (token, method, path)
            assert "token" in body["message"]
    status, doc = Api(service.url, None).call("GET", "/api/openapi.json")
    assert status == 200 and "/api/tasks" in doc["paths"]


def test_a_snapshot_is_only_its_uploaders(service, tmp_path):
    """Bob cannot probe, use or overwrite alice's snapshot; uploading the same bytes himself makes it his too."""
    import hashlib

    from tacc_hub.snapshot import digest_of, pack

    code = tmp_path / "code"
    code.mkdir()
    (code / "secret.py").write_text("print('alice-secret-' + 'xyz')\n")
    data = pack(code)
    digest = digest_of(data)
    alice = Api(service.url, service.token("alice"))
    bob = Api(service.url, service.token("bob"))
    assert alice.call("PUT", f"/api/code/{digest}", data, content_type="application/gzip")[0] == 201
    stored = service.state_dir / "code" / f"{digest}.tar.gz"
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == digest

    assert bob.call("HEAD", f"/api/code/{digest}")[0] == 404  # not even whether it exists
    assert bob.call("HEAD", f"/api/code/{'1' * 64}")[0] == 404  # the same answer as for none
    spec = {"name": "steal", "code": {"kind": "snapshot", "digest": digest},
            "entrypoint": {"argv": ["python", "secret.py"]}}
    before = bob.call("GET", "/api/tasks?limit=1")[1]["total"]
    status, out = bob.call("POST", "/api/tasks", spec)
    assert status == 404 and out["errors"][0]["field"] == "code.digest", out
    assert bob.call("GET", "/api/tasks?limit=1")[1]["total"] == before
    other = pack(tmp_path)  # other bytes under alice's digest: refused, her archive untouched
    status, out = bob.call("PUT", f"/api/code/{digest}", other, content_type="application/gzip")
    assert status == 422 and "digest" in out["message"], out
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == digest

    # A dry run compiles without the archive: it answers the same for alice's snapshot as for one nobody
    # uploaded (it tells bob nothing), and stores nothing.
    seen = bob.call("POST", "/api/tasks?dry_run=1", spec)
    unseen = bob.call("POST", "/api/tasks?dry_run=1", {**spec, "code": {"kind": "snapshot", "digest": "1" * 64}})
    assert seen[0] == unseen[0] == 200, (seen, unseen)
    texts = [json.dumps(r[1]["plan"]) for r in (seen, unseen)]  # the same but for the digests (and the spec's)
    spec_digests = [r[1]["plan"]["task_digest"] for r in (seen, unseen)]
    assert texts[0].replace(digest, "1" * 64).replace(spec_digests[0], spec_digests[1]) \
        .replace(spec_digests[0][:16], spec_digests[1][:16]) == texts[1]
    assert bob.call("GET", "/api/tasks?limit=1")[1]["total"] == before

    status, t = alice.call("POST", "/api/tasks", {**spec, "name": "mine"})
    assert status == 201, t
    assert alice.wait_status(t["id"], {"succeeded", "failed"})["status"] == "succeeded"
    assert "alice-secret-xyz" in alice.call("GET", f"/api/tasks/{t['id']}/logs")[1]["data"]

    assert bob.call("PUT", f"/api/code/{digest}", data, content_type="application/gzip")[0] == 201
    assert bob.call("HEAD", f"/api/code/{digest}")[0] == 200
