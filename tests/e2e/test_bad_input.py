"""Bad and hostile input through the real API: clear 4xx errors, nothing executes, nothing half-written."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import pytest

from tacc_hub.snapshot import digest_of, pack

from .conftest import Api

HOSTILE = ["$(touch {m}/PWNED1)", "`touch {m}/PWNED2`", "; touch {m}/PWNED3", "a'b\"c && touch {m}/PWNED4",
           "| touch {m}/PWNED5", "\ntouch {m}/PWNED6\n"]


@pytest.fixture(scope="module")
def api(service):
    return Api(service.url, service.token("mallory"))


@pytest.fixture(scope="module")
def code(service, api, tmp_path_factory):
    d = tmp_path_factory.mktemp("code")
    (d / "hello.py").write_text("print('hello')\n")
    data = pack(d)
    digest = digest_of(data)
    status, _ = api.call("PUT", f"/api/code/{digest}", data, content_type="application/gzip")
    assert status == 201
    return {"kind": "snapshot", "digest": digest}


def _total(api) -> int:
    return api.call("GET", "/api/tasks?all=1&limit=1")[1]["total"]


BAD_SPECS = [
    ("name", {"name": "x; rm -rf /", "entrypoint": {"argv": ["true"]}}),
    ("name", {"name": "$(reboot)", "entrypoint": {"argv": ["true"]}}),
    ("resources.gpus_per_node", {"name": "t", "entrypoint": {"argv": ["true"]}, "resources": {"gpus_per_node": -1}}),
    ("resources.nodes", {"name": "t", "entrypoint": {"argv": ["true"]}, "resources": {"nodes": 10**9}}),
    ("resources.time_limit", {"name": "t", "entrypoint": {"argv": ["true"]}, "resources": {"time_limit": "forever"}}),
    ("bogus", {"name": "t", "entrypoint": {"argv": ["true"]}, "bogus": 1}),
    ("resources.bogus", {"name": "t", "entrypoint": {"argv": ["true"]}, "resources": {"bogus": 1}}),
    ("outputs.[0]", {"name": "t", "entrypoint": {"argv": ["true"]}, "outputs": ["../../etc"]}),
    ("outputs.[0]", {"name": "t", "entrypoint": {"argv": ["true"]}, "outputs": ["/etc/passwd"]}),
    ("workdir", {"name": "t", "entrypoint": {"argv": ["true"]}, "workdir": "../.."}),
    ("environment.variables", {"name": "t", "entrypoint": {"argv": ["true"]},
                               "environment": {"variables": {"A;B": "x"}}}),
    ("environment.requirements", {"name": "t", "entrypoint": {"argv": ["true"]},
                                  "environment": {"requirements": ["--index-url=http://evil"]}}),
    ("code.url", {"name": "t", "entrypoint": {"argv": ["true"]},
                  "code": {"kind": "git", "url": "--upload-pack=touch /tmp/x", "commit": "abcdef1"}}),
    ("gpus_per_node", {"name": "t", "entrypoint": {"argv": ["true"]}, "resources": {"gpus_per_node": 8}}),
    ("code", {"name": "t", "entrypoint": {"argv": ["true"]}, "code": {"kind": "local", "path": "/etc"}}),
]


@pytest.mark.parametrize(("field", "spec"), BAD_SPECS, ids=[f for f, _ in BAD_SPECS])
def test_bad_specs_get_422_naming_the_field(api, field, spec):
    before = _total(api)
    status, body = api.call("POST", "/api/tasks", spec)
    assert status == 422, body
    fields = " ".join(e["field"] for e in body["errors"]) + " " + body["message"]
    assert field.split(".[")[0].split(".")[-1] in fields, body
    assert _total(api) == before


@pytest.mark.parametrize(("body", "ctype", "expect"), [
    ("name: [unclosed", "application/yaml", "not valid YAML"),
    ("a: &a [1, 2]\nb: [*a, *a]\n", "application/yaml", "aliases"),
    ("lol: &l ['lol','lol']\nl2: &l2 [*l, *l, *l, *l, *l, *l, *l, *l, *l]\nl3: [*l2, *l2, *l2, *l2, *l2]\n",
     "application/yaml", "aliases"),
    ("---\nname: a\n---\nname: b\n", "application/yaml", "exactly one"),
    ("{not json", "application/json", "not valid JSON"),
    ("[1, 2]", "application/json", "mapping"),
])
def test_malformed_documents(api, body, ctype, expect):
    status, out = api.call("POST", "/api/tasks", body, content_type=ctype)
    assert status in (400, 422), out
    assert expect in out["message"], out


def test_unsafe_sbatch_options_in_a_tuxiv_body(api):
    for opt, word in (("nodes=2; rm -rf /", "another option"), ("uid=0", "not allowed"),
                      ("partition=$(reboot)", "partition"), ("wrap=id", "not allowed"), ("frobnicate=1", "unknown")):
        body = f"entrypoint: [echo hi]\njob:\n  general:\n    - {json.dumps(opt)}\n"
        status, out = api.call("POST", "/api/tasks?format=tuxiv", body, content_type="application/yaml")
        assert status == 422, out
        assert out["errors"][0]["field"] == "job.general[0]" and word in out["message"], out


def test_hostile_strings_are_passed_literally_and_nothing_executes(service, api, code, tmp_path):
    marker = tmp_path / "markers"
    marker.mkdir()
    values = [h.format(m=marker) for h in HOSTILE]
    spec = {
        "name": "hostile",
        "code": code,
        "entrypoint": {"argv": ["python", "-c",
                                "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], "
                                "'env': os.environ['HOSTILE']}))", *values]},
        "environment": {"variables": {"HOSTILE": values[0] + values[3]}},
        "workdir": f"sub dir/$(touch {marker}/PWNED7)",
        "log_file": f"logs/`touch {marker}/PWNED8`.log",
        "outputs": ["out dir/$(touch x)"],
    }
    status, t = api.call("POST", "/api/tasks", spec)
    assert status == 201, t
    done = api.wait_status(t["id"], {"succeeded", "failed"})
    _, logs = api.call("GET", f"/api/tasks/{t['id']}/logs")
    assert done["status"] == "succeeded", logs
    printed = json.loads(logs["data"].strip().splitlines()[-1])
    assert printed["argv"] == values
    assert printed["env"] == values[0] + values[3]
    assert list(marker.iterdir()) == []
    work = service.data_dir / "tasks" / str(t["id"]) / "work"
    assert (work / spec["workdir"]).is_dir()  # the directory has the literal name
    assert "argv" in (work / spec["log_file"]).read_text()  # the log copy too


def test_hostile_shell_lines_only_run_as_the_users_own_script(api, code, tmp_path):
    # Shell lines are the user's program; our launch script must not re-interpret them.
    spec = {"name": "lines", "code": code, "entrypoint": {"shell": ["echo 'EOF'", "echo \"$((6*7))\""]}}
    status, t = api.call("POST", "/api/tasks", spec)
    assert status == 201, t
    api.wait_status(t["id"], {"succeeded"})
    _, logs = api.call("GET", f"/api/tasks/{t['id']}/logs")
    assert logs["data"].split() == ["EOF", "42"]


def _tar(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


def test_code_uploads_are_checked(api):
    evil = _tar({"../../evil.sh": b"echo pwned"})
    status, out = api.call("PUT", f"/api/code/{digest_of(evil)}", evil, content_type="application/gzip")
    assert status == 422 and "leaves" in out["message"]
    absolute = _tar({"/etc/cron.d/x": b"x"})
    status, out = api.call("PUT", f"/api/code/{digest_of(absolute)}", absolute, content_type="application/gzip")
    assert status == 422
    good = _tar({"a.py": b"print(1)"})
    status, out = api.call("PUT", f"/api/code/{hashlib.sha256(b'other').hexdigest()}", good,
                           content_type="application/gzip")
    assert status == 422 and "digest" in out["message"]
    status, out = api.call("PUT", "/api/code/..%2F..%2Fetc", good, content_type="application/gzip")
    assert status in (400, 404)
    status, out = api.call("PUT", f"/api/code/{digest_of(b'not a tar')}", b"not a tar",
                           content_type="application/gzip")
    assert status == 422


def test_bad_query_parameters(api):
    for path, code_ in (("/api/tasks?limit=abc", 400), ("/api/tasks?limit=100000", 400),
                        ("/api/tasks?state=exploded", 400), ("/api/tasks/abc", 404),
                        ("/api/tasks/99999999", 404), ("/api/nothing", 404)):
        status, body = api.call("GET", path)
        assert status == code_, (path, status, body)
        assert "message" in body


def test_a_snapshot_nobody_uploaded_is_404_naming_code_digest(api):
    spec = {"name": "t", "entrypoint": {"argv": ["true"]}, "code": {"kind": "snapshot", "digest": "0" * 64}}
    before = _total(api)
    status, out = api.call("POST", "/api/tasks", spec)
    assert status == 404 and out["errors"][0]["field"] == "code.digest", out
    assert _total(api) == before


def test_oversized_spec_is_refused(api):
    status, out = api.call("POST", "/api/tasks", {"name": "big", "entrypoint": {"shell": ["x" * 60000] * 50}})
    assert status == 413 and "larger" in out["message"]
