"""The REST API of arrays and pipelines (issue 20) against the real shared service, and tcloud on it.

What is checked: a 5-element array is one request (201, Location, the first element with ``array`` and
``task_ids``), ``GET /api/arrays/ID`` counts its elements, ``GET /api/tasks?array=ID`` lists them, and
tcloud shows it as one row; another user gets 404 for the array and the pipeline, on GET and cancel,
and cancels nothing; hostile bodies (ranges too big or malformed, a grid of 10^5, max_running 0, a
dependency on another user's task, a pipeline cycle, an input from a step not needed, 65 steps) are
4xx naming the field, and store nothing (the caller's task count is the same after); hostile ids and
query parameters are 400/404, never 500. Every task a test starts has ended before it returns.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .conftest import Api, tcloud, write_task
from .groups_util import TERMINAL, cancel_and_wait, upload_code, wait_ended


def _sleeper(code: dict[str, str], name: str, seconds: int = 60, **extra: Any) -> dict[str, Any]:
    return {"name": name, "code": code, "entrypoint": {"argv": ["sleep", str(seconds)]},
            "resources": {"gpus_per_node": 0}, **extra}


def _total(api: Api) -> int:
    status, body = api.call("GET", "/api/tasks?limit=1")
    assert status == 200, body
    return int(body["total"])


def _fields(body: dict[str, Any]) -> list[str]:
    return [str(e.get("field")) for e in body.get("errors", [])]


def test_an_array_is_one_request_counted_listed_and_cancelled(service):
    api = Api(service.url, service.token("alice"))
    code = upload_code(api, {"x.txt": "x"})
    status, body = api.call("POST", "/api/tasks", _sleeper(code, "five", array={"range": "0-4", "max_running": 2}))
    assert status == 201, body
    aid = body["array"]["id"]
    ids = body["task_ids"]
    try:
        assert body["id"] == aid == ids[0] and len(ids) == 5 and body["array_index"] == 0
        assert body["array_id"] == aid and body["pipeline_id"] is None
        arr = body["array"]
        assert arr["size"] == 5 and arr["max_running"] == 2 and arr["owner"] == "alice" and arr["name"] == "five"
        assert sum(arr["counts"].values()) == 5, arr

        status, one = api.call("GET", f"/api/arrays/{aid}")
        assert status == 200, one
        assert sum(one["counts"].values()) == 5 and one["running"] + one["waiting"] + one["done"] + one["failed"] <= 5
        assert [t["array_index"] for t in one["tasks"]] == [0, 1, 2, 3, 4]
        assert [t["id"] for t in one["tasks"]] == ids and all("spec" not in t or t["spec"] is None
                                                               for t in one["tasks"])
        status, only = api.call("GET", f"/api/arrays/{aid}?index=3")
        assert status == 200 and [t["array_index"] for t in only["tasks"]] == [3]
        status, bare = api.call("GET", f"/api/arrays/{aid}?tasks=0")
        assert status == 200 and "tasks" not in bare and bare["size"] == 5

        status, listed = api.call("GET", f"/api/tasks?array={aid}")
        assert status == 200 and listed["total"] == 5
        assert sorted(t["id"] for t in listed["tasks"]) == ids
        status, mine = api.call("GET", "/api/arrays")
        assert status == 200 and aid in [a["id"] for a in mine["arrays"]]
        shown = api.call("GET", f"/api/tasks/{ids[2]}")[1]
        assert shown["array_id"] == aid and shown["array_index"] == 2

        ps = tcloud(service, "alice", "ps", "--plain")
        assert ps.returncode == 0, ps.stderr
        row = next(line for line in ps.stdout.splitlines() if line.startswith(f"{aid} "))
        assert re.match(rf"{aid}\s+five\[5\]\s+(running|pending)\s+", row), row
        assert not any(line.startswith(f"{ids[1]} ") for line in ps.stdout.splitlines()), ps.stdout
        print("tcloud ps with an array:\n" + ps.stdout)
        expanded = tcloud(service, "alice", "ps", "--plain", "--expand")
        assert re.search(rf"^{ids[3]}\s+{aid}:3\s+five\s", expanded.stdout, re.M), expanded.stdout

        res = tcloud(service, "alice", "cancel", f"{aid}:4")
        assert res.returncode == 0 and res.stdout.strip() == f"task {ids[4]} (array {aid}:4): cancelled", res
        status, out = api.call("POST", f"/api/arrays/{aid}/cancel")
        assert status == 200 and out["id"] == aid and out["cancelled"] == 4, out
        ended = wait_ended(api, ids)
        assert {t["status"] for t in ended.values()} == {"cancelled"}
        final = api.call("GET", f"/api/arrays/{aid}")[1]
        assert final["status"] == "cancelled" and final["counts"] == {"cancelled": 5}, final
        status, again = api.call("POST", f"/api/arrays/{aid}/cancel")
        assert status == 200 and again["cancelled"] == 0
    finally:
        cancel_and_wait(api, ids, [aid])


def test_others_arrays_and_pipelines_are_404_and_untouched(service):
    alice = Api(service.url, service.token("alice"))
    bob = Api(service.url, service.token("bob"))
    code = upload_code(alice, {"x.txt": "x"})
    status, body = alice.call("POST", "/api/tasks", _sleeper(code, "mine", array="0-1"))
    assert status == 201, body
    aid, ids = body["array"]["id"], body["task_ids"]
    status, pipe = alice.call("POST", "/api/pipelines", {"name": "pipe", "steps": [
        {"name": "a", "spec": _sleeper(code, "a")},
        {"name": "b", "needs": ["a"], "spec": _sleeper(code, "b")}]})
    assert status == 201, pipe
    pid = pipe["id"]
    step_ids = [s["task_id"] for s in pipe["steps"]]
    try:
        assert [s["name"] for s in pipe["steps"]] == ["a", "b"] and pipe["steps"][1]["needs"] == ["a"]
        assert alice.call("GET", f"/api/tasks/{step_ids[1]}")[1]["pipeline_id"] == pid
        for method, path in (("GET", f"/api/arrays/{aid}"), ("POST", f"/api/arrays/{aid}/cancel"),
                             ("GET", f"/api/tasks?array={aid}"), ("GET", f"/api/pipelines/{pid}"),
                             ("POST", f"/api/pipelines/{pid}/cancel")):
            status, out = bob.call(method, path)
            assert status == 404, (method, path, status, out)
        assert aid not in [a["id"] for a in bob.call("GET", "/api/arrays?all=1")[1]["arrays"]]
        assert pid not in [p["id"] for p in bob.call("GET", "/api/pipelines?all=1")[1]["pipelines"]]
        res = tcloud(service, "bob", "cancel", str(aid))
        assert res.returncode == 1 and "no task" in res.stderr, res
        res = tcloud(service, "bob", "show", f"{aid}:1")
        assert res.returncode == 1 and f"no array {aid}" in res.stderr, res
        # a dependency on alice's array or pipeline task is as one on nothing: 404, nothing stored
        before = _total(bob)
        bcode = upload_code(bob, {"x.txt": "x"})
        for dep in ({"task": step_ids[0]}, {"array": aid}):
            status, out = bob.call("POST", "/api/tasks", _sleeper(bcode, "sneaky", depends_on=[dep]))
            assert status == 404, (dep, status, out)
        assert _total(bob) == before
        assert {t["status"] for t in alice.call("GET", f"/api/arrays/{aid}")[1]["tasks"]} <= {
            "pending", "starting", "running"}
        status, p = alice.call("GET", f"/api/pipelines/{pid}")
        assert status == 200 and p["status"] not in TERMINAL, p
        status, out = alice.call("POST", f"/api/pipelines/{pid}/cancel")
        assert status == 200 and out["cancelled"] == 2, out
        wait_ended(alice, step_ids)
        assert alice.call("GET", f"/api/pipelines/{pid}")[1]["status"] == "cancelled"
    finally:
        cancel_and_wait(alice, [*ids, *step_ids], [aid])


GRID_10E5 = {"grid": {n: list(range(10)) for n in ("a", "b", "c", "d", "e")}}


@pytest.mark.parametrize(("array", "words"), [
    ("0-99999999", "10000"),
    ("1-2:0", "range"),
    ({"range": "0-99999999"}, "array.range"),
    (GRID_10E5, "100000"),
    ({"range": "0-3", "max_running": 0}, "max_running"),
    ("0-3%0", ""),
    ({"values": []}, "values"),
    ({"range": "0-3", "values": [1]}, "exactly one"),
])
def test_hostile_arrays_are_refused_naming_the_field_and_store_nothing(service, array, words):
    api = Api(service.url, service.token("alice"))
    code = upload_code(api, {"x.txt": "x"})
    before, arrays_before = _total(api), len(api.call("GET", "/api/arrays?limit=500")[1]["arrays"])
    status, body = api.call("POST", "/api/tasks", _sleeper(code, "hostile", array=array))
    assert status == 422, (status, body)
    assert any(f == "array" or f.startswith("array.") for f in _fields(body)), body
    assert words in json.dumps(body), (words, body)
    assert _total(api) == before
    assert len(api.call("GET", "/api/arrays?limit=500")[1]["arrays"]) == arrays_before


def test_hostile_dependencies_and_pipelines_are_refused_and_store_nothing(service):
    alice = Api(service.url, service.token("alice"))
    carol = Api(service.url, service.token("carol"))
    code = upload_code(alice, {"x.txt": "x"})
    ccode = upload_code(carol, {"x.txt": "x"})
    status, theirs = carol.call("POST", "/api/tasks", _sleeper(ccode, "carols"))
    assert status == 201, theirs
    try:
        before = _total(alice)
        pipes_before = len(alice.call("GET", "/api/pipelines?limit=500")[1]["pipelines"])
        status, body = alice.call("POST", "/api/tasks", _sleeper(code, "dep", depends_on=[{"task": theirs["id"]}]))
        assert status == 404, body
        status, body = alice.call("POST", "/api/tasks", _sleeper(code, "dep", array="0-2",
                                                                  depends_on=[{"task": theirs["id"]}]))
        assert status == 404, body
        status, body = alice.call("POST", "/api/pipelines", {"name": "p", "steps": [
            {"name": "a", "spec": _sleeper(code, "a", depends_on=[{"task": theirs["id"]}])}]})
        assert status == 404, body
        status, body = alice.call("POST", "/api/tasks", _sleeper(code, "dep", depends_on=[{"task": 2**62}]))
        assert status == 404, body

        cases: list[tuple[Any, str, str]] = [
            ({"name": "cyc", "steps": [{"name": "a", "needs": ["b"], "spec": _sleeper(code, "a")},
                                       {"name": "b", "needs": ["a"], "spec": _sleeper(code, "b")}]},
             "steps[0].needs", "cycle"),
            ({"name": "self", "steps": [{"name": "a", "needs": ["a"], "spec": _sleeper(code, "a")}]},
             "steps[0].needs", "itself"),
            ({"name": "unk", "steps": [{"name": "a", "needs": ["zz"], "spec": _sleeper(code, "a")}]},
             "steps[0].needs", "zz"),
            ({"name": "inp", "steps": [
                {"name": "a", "spec": _sleeper(code, "a")},
                {"name": "b", "spec": _sleeper(code, "b", inputs=[{"from": "a", "path": "out"}])}]},
             "steps[1].spec.inputs[0].from", "does not need"),
            ({"name": "big", "steps": [{"name": f"s{i}", "spec": _sleeper(code, f"s{i}")} for i in range(65)]},
             "steps", "64"),
            ({"name": "bad", "steps": [{"name": "a", "spec": {**_sleeper(code, "a"), "resources": {
                "gpus_per_node": 99999}}}]}, "steps[0].spec.resources", ""),
            ({"name": "arr", "steps": [{"name": "a", "spec": _sleeper(code, "a", array="0-99999999")}]},
             "steps[0].spec.array", ""),
            ({"name": "path", "steps": [{"name": "a", "spec": "other/tacc.yaml"}]}, "steps[0].spec", ""),
            ({"steps": "nope"}, "", ""),
            (["not", "a", "mapping"], "", ""),
        ]
        for doc, field, words in cases:
            status, body = alice.call("POST", "/api/pipelines", doc)
            assert status == 422, (doc if len(json.dumps(doc)) < 400 else field, status, body)
            assert any(f == field or f.startswith(field) for f in _fields(body)) or (
                not field and body.get("errors") is not None), (field, body)
            assert words in json.dumps(body), (words, body)
        for raw, ctype in ((b"{not json", "application/json"), (b'{"a": 1, "a": 2}', "application/json"),
                           (b"steps: [&x a, *x]", "application/yaml")):
            status, body = alice.call("POST", "/api/pipelines", raw, content_type=ctype)
            assert status in (400, 422), (raw, status, body)
        status, body = alice.call("POST", "/api/pipelines", b"steps: []", content_type="text/plain")
        assert status == 415, body
        assert _total(alice) == before
        assert len(alice.call("GET", "/api/pipelines?limit=500")[1]["pipelines"]) == pipes_before
    finally:
        cancel_and_wait(carol, [theirs["id"]])


def test_a_yaml_pipeline_and_tcloud_submit_of_a_pipeline_file(service, tmp_path):
    api = Api(service.url, service.token("alice"))
    code = upload_code(api, {"x.txt": "x"})
    yaml_body = (f"name: yp\nsteps:\n  - name: one\n    spec: {{name: one, code: {{kind: snapshot, digest: "
                 f"{code['digest']}}}, entrypoint: {{argv: [sleep, '60']}}}}\n")
    status, p = api.call("POST", "/api/pipelines", yaml_body, content_type="application/yaml")
    assert status == 201, p
    ids = [s["task_id"] for s in p["steps"]]
    d = write_task(tmp_path / "prep", "name: prep\ncode: .\nentrypoint: sleep 60\n")
    (tmp_path / "pipeline.yaml").write_text(
        "name: twostep\nsteps:\n  - {name: prep, spec: prep/tacc.yaml}\n"
        "  - {name: use, needs: [prep], code: prep, entrypoint: sleep 1}\n")
    try:
        res = tcloud(service, "alice", "submit", str(tmp_path / "pipeline.yaml"))
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        m = re.fullmatch(r"submitted pipeline (\d+) \(twostep\): 2 steps", lines[0])
        assert m, res.stdout
        pid = int(m.group(1))
        assert re.fullmatch(rf"  prep  task {pid}: \w+", lines[1]), lines
        assert re.fullmatch(r"  use   task \d+: \w+ \(needs prep\)", lines[2]), lines
        out = api.call("GET", f"/api/pipelines/{pid}")[1]
        ids += [s["task_id"] for s in out["steps"]]
        show = tcloud(service, "alice", "show", str(pid), "--plain")
        assert show.returncode == 0 and show.stdout.startswith(f"pipeline {pid} twostep  "), show
        res = tcloud(service, "alice", "cancel", str(pid))
        assert res.returncode == 0 and res.stdout.strip() == f"pipeline {pid} (twostep): 2 task(s) cancelled", res
        assert d.exists()
    finally:
        cancel_and_wait(api, ids)


@pytest.mark.parametrize("path", [
    "/api/arrays/0", "/api/arrays/99999999999999999999", "/api/arrays/4611686018427387905",
    "/api/arrays/%D9%A1%D9%A2", "/api/pipelines/0", "/api/pipelines/99999999999999999999",
    "/api/arrays/12abc", "/api/pipelines/%00",
])
def test_hostile_ids_are_404(service, path):
    api = Api(service.url, service.token("alice"))
    for method in ("GET", "POST"):
        p = path if method == "GET" else path + "/cancel"
        status, body = api.call(method, p)
        assert status == 404, (method, p, status, body)


@pytest.mark.parametrize("query", [
    "/api/tasks?array=abc", "/api/tasks?array=-1", "/api/tasks?array=%D9%A1", "/api/tasks?array=99999999999999999999",
    "/api/arrays?limit=0", "/api/arrays?limit=x", "/api/arrays?before=-5", "/api/pipelines?limit=501",
    "/api/arrays/1?state=bogus",
])
def test_hostile_query_parameters_are_400(service, query):
    api = Api(service.url, service.token("alice"))
    status, body = api.call("GET", query)
    assert status == 400, (query, status, body)
    assert body.get("errors"), body


def test_hostile_parameters_of_one_array_are_400(service):
    api = Api(service.url, service.token("alice"))
    code = upload_code(api, {"x.txt": "x"})
    status, body = api.call("POST", "/api/tasks", _sleeper(code, "q", array=[1]))
    assert status == 201, body
    aid = body["array"]["id"]
    try:
        for q in ("index=x", "index=-1", "index=99999999999", "tasks=maybe", "state=bogus"):
            status, out = api.call("GET", f"/api/arrays/{aid}?{q}")
            assert status == 400, (q, status, out)
        assert api.call("GET", f"/api/arrays/{aid}?index=7")[1]["tasks"] == []
    finally:
        cancel_and_wait(api, body["task_ids"], [aid])


def test_tuxiv_bodies_with_array_and_dependency(service):
    """format=tuxiv: array= is an array (201, Location, task_ids), dependency=afterok on one's own task waits,
    on another user's task 404 with nothing stored; dry_run of an array shows its first element's plan."""
    alice = Api(service.url, service.token("alice"))
    dave = Api(service.url, service.token("dave"))
    code = upload_code(alice, {"x.txt": "x"})
    status, first = alice.call("POST", "/api/tasks", _sleeper(code, "first"))
    assert status == 201, first
    body = ("entrypoint: [sleep 60]\ncode: {{kind: snapshot, digest: {d}}}\n"
            "job:\n  name: tux\n  general:\n    - array=0-2%1\n    - dependency=afterok:{t}\n")
    ids: list[int] = [first["id"]]
    try:
        status, out = alice.call("POST", "/api/tasks?format=tuxiv&dry_run=1",
                                 body.format(d=code["digest"], t=first["id"]), content_type="application/yaml")
        assert status == 200 and "TACC_ARRAY_INDEX" in json.dumps(out["plan"]), out
        status, out = alice.call("POST", "/api/tasks?format=tuxiv", body.format(d=code["digest"], t=first["id"]),
                                 content_type="application/yaml")
        assert status == 201, out
        ids += out["task_ids"]
        assert out["array"]["size"] == 3 and out["array"]["max_running"] == 1 and out["status"] == "pending"
        shown = alice.call("GET", f"/api/tasks/{out['id']}")[1]
        assert shown["queue"] and shown["queue"]["reason"] == "Dependency", shown
        before = _total(dave)
        dcode = upload_code(dave, {"x.txt": "x"})
        status, out = dave.call("POST", "/api/tasks?format=tuxiv", body.format(d=dcode["digest"], t=first["id"]),
                                content_type="application/yaml")
        assert status == 404, out
        assert _total(dave) == before
    finally:
        cancel_and_wait(alice, ids)
