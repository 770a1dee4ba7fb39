"""The array and pipeline routes (service/arrays.py, tasks.py) over real HTTP, on a real SQLite store, with a
stand-in controller: what each answer holds, who gets 404, and that hostile ids and parameters are 400/404.

The controller's own work (expanding, compiling, gating) is tested elsewhere; here it inserts through the
store's GroupStore as the contract says, so that the handlers' mapping (status codes, Location, fields,
filters, errors naming fields) is checked alone.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient
import tornado.httpserver
import tornado.web

from tacc_hub.schema import SpecError
from tacc_hub.schema.arrays import expand
from tacc_hub.service import groups
from tacc_hub.service.arrays import ROUTES
from tacc_hub.service.auth import Denied, Identity
from tacc_hub.service.base import ServiceContext
from tacc_hub.service.tasks import TaskHandler, TasksHandler
from tacc_hub.store import NewTask, Store, TaskStatus


class Auth:
    async def authenticate(self, handler: Any) -> Identity:
        header = handler.request.headers.get("Authorization", "")
        user = header.removeprefix("token ")
        if not user:
            raise Denied(401, "no token")
        return Identity(user=user.removesuffix("!"), admin=user.endswith("!"))


class Ident:
    mode = "service"

    def account(self, user: str) -> None:
        return None


class Executor:
    identity = Ident()


class Ctl:
    """Inserts as GroupsMixin would (no compile, no queue); a dependency on a task not the owner's: NotFound."""

    def __init__(self, store: Store) -> None:
        self.store, self.executor, self.cancelled = store, Executor(), 0

    async def _off(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def queue_info(self, rec: Any) -> None:
        return None

    def reason_for(self, rec: Any) -> str | None:
        return rec.reason

    def time_info(self, rec: Any) -> dict[str, Any]:
        return {}

    def _row(self, owner: str, spec: Any, index: int | None = None) -> NewTask:
        dumped = spec.model_dump(mode="json", by_alias=True)
        return NewTask(owner=owner, name=spec.name, digest=spec.digest, spec=dumped, plan={}, submitted_at=time.time(),
                       array_index=index)

    def _deps(self, owner: str, spec: Any) -> list[tuple[str, int, str]]:
        out = []
        for i, d in enumerate(spec.depends_on):
            rec = self.store.get(d.task) if d.task else None
            arr = self.store.get_array(d.array) if d.array else None
            if (rec or arr) is None or (rec or arr).owner != owner:  # type: ignore[union-attr]
                raise groups.NotFound(f"depends_on[{i}]", f"no task {d.task or d.array}")
            out.append(("task" if d.task else "array", d.task or d.array, d.when))
        return out

    async def submit(self, owner: str, spec: Any) -> Any:
        deps = self._deps(owner, spec)
        return self.store.insert_with_deps(self._row(owner, spec), deps)

    async def submit_array(self, owner: str, spec: Any) -> Any:
        deps = self._deps(owner, spec)
        rows = [self._row(owner, e, e.array_element.index) for e in expand(spec)]
        return self.store.insert_array(owner, spec.name, rows, max_running=spec.array.max_running, deps=deps)

    def array_summary(self, arr: Any) -> dict[str, Any]:
        counts = self.store.array_counts([arr.id]).get(arr.id, {})
        running = counts.get("running", 0)
        return {"counts": counts, "running": running, "waiting": counts.get("pending", 0),
                "done": counts.get("succeeded", 0), "failed": counts.get("failed", 0),
                "status": "pending" if counts.get("pending") else "cancelled",
                "reason": f"{running} of {arr.size} running"}

    async def cancel_array(self, array_id: int) -> int:
        n = 0
        for rec in self.store.array_tasks(array_id, [TaskStatus.PENDING]):
            if self.store.transition(rec.id, TaskStatus.CANCELLED, expected=TaskStatus.PENDING) is not None:
                n += 1
        return n

    async def submit_pipeline(self, owner: str, p: Any) -> Any:
        raise SpecError.one("steps[0].spec.resources", "this task can never run here: stand-in")

    def pipeline_summary(self, p: Any) -> dict[str, Any]:
        return {"status": "pending", "steps": p.steps}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    def __init__(self, url: str) -> None:
        self.url, self.http = url, tornado.httpclient.AsyncHTTPClient()

    async def call(self, method: str, path: str, user: str = "alice", body: Any = None,
                   ctype: str = "application/json") -> tuple[int, Any, Any]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        if data is None and method == "POST":
            data = b""
        resp = await self.http.fetch(self.url + path, method=method, body=data, raise_error=False,
                                     headers={"Authorization": f"token {user}", "Content-Type": ctype},
                                     request_timeout=10)
        try:
            return resp.code, json.loads(resp.body) if resp.body else None, resp.headers
        except ValueError:
            return resp.code, resp.body, resp.headers


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tacc.db'}")
    s.migrate()
    yield s


@contextlib.asynccontextmanager
async def serving(store: Store) -> AsyncIterator[Client]:
    ctx = ServiceContext(store=store, controller=Ctl(store), auth=Auth(), code_store=None,  # type: ignore[arg-type]
                         max_code_bytes=1 << 20, max_body_bytes=2 << 20, log_poll_interval=0.1)
    routes = [(r"/api/tasks", TasksHandler), (r"/api/tasks/(\d+)", TaskHandler), *ROUTES]
    app = tornado.web.Application([(p, h, {"ctx": ctx}) for p, h in routes])
    port = _free_port()
    server = tornado.httpserver.HTTPServer(app)
    server.listen(port, "127.0.0.1")
    try:
        yield Client(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


def spec(**extra: Any) -> dict[str, Any]:
    return {"name": "sw", "entrypoint": {"argv": ["echo", "{index}"]}, **extra}


async def test_an_array_submit_answers_its_first_element_and_the_array(store: Store) -> None:
    async with serving(store) as api:
        status, body, headers = await api.call("POST", "/api/tasks", body=spec(array="3-7%2"))
        assert status == 201, body
        aid = body["array"]["id"]
        assert headers["Location"] == f"/api/arrays/{aid}"
        assert body["id"] == aid and body["array_id"] == aid and body["array_index"] == 3
        assert body["pipeline_id"] is None
        assert body["array"]["size"] == 5 and body["array"]["max_running"] == 2 and body["array"]["counts"] == {
            "pending": 5}
        assert body["task_ids"] == list(range(aid, aid + 5))

        status, one, _ = await api.call("GET", f"/api/arrays/{aid}")
        assert status == 200 and [t["array_index"] for t in one["tasks"]] == [3, 4, 5, 6, 7]
        assert all(t.get("spec") is None for t in one["tasks"])
        assert (await api.call("GET", f"/api/arrays/{aid}?index=6"))[1]["tasks"][0]["id"] == aid + 3
        assert "tasks" not in (await api.call("GET", f"/api/arrays/{aid}?tasks=0"))[1]
        status, page, _ = await api.call("GET", f"/api/tasks?array={aid}&limit=2")
        assert status == 200 and page["total"] == 5 and [t["id"] for t in page["tasks"]] == [aid + 4, aid + 3]
        assert page["next_before"] == aid + 3
        status, listed, _ = await api.call("GET", "/api/arrays")
        assert [a["id"] for a in listed["arrays"]] == [aid]

        status, out, _ = await api.call("POST", f"/api/arrays/{aid}/cancel")
        assert status == 200 and out["cancelled"] == 5 and out["counts"] == {"cancelled": 5}
        status, out, _ = await api.call("GET", f"/api/arrays/{aid}?state=cancelled")
        assert len(out["tasks"]) == 5


async def test_others_arrays_are_404_and_admins_see_them(store: Store) -> None:
    async with serving(store) as api:
        _, body, _ = await api.call("POST", "/api/tasks", body=spec(array=[1, 2]))
        aid = body["array"]["id"]
        for method, path in (("GET", f"/api/arrays/{aid}"), ("POST", f"/api/arrays/{aid}/cancel"),
                             ("GET", f"/api/tasks?array={aid}")):
            status, out, _ = await api.call(method, path, user="bob")
            assert status == 404, (method, path, out)
        assert (await api.call("GET", "/api/arrays?all=1", user="bob"))[1]["arrays"] == []
        assert store.array_counts([aid])[aid] == {"pending": 2}
        status, out, _ = await api.call("GET", f"/api/arrays/{aid}", user="root!")
        assert status == 200 and out["owner"] == "alice"
        assert [a["id"] for a in (await api.call("GET", "/api/arrays?all=1", user="root!"))[1]["arrays"]] == [aid]
        assert (await api.call("GET", "/api/arrays", user="root!"))[1]["arrays"] == []  # an admin's own, by default
        # a dependency on alice's task, from bob: NotFound -> 404 naming the field; nothing stored
        before = store.list_tasks(None)[1]
        status, out, _ = await api.call("POST", "/api/tasks", user="bob", body=spec(depends_on=[{"task": aid}]))
        assert status == 404 and out["errors"][0]["field"] == "depends_on[0]", out
        status, out, _ = await api.call("POST", "/api/tasks", user="bob",
                                        body=spec(array="0-1", depends_on=[{"array": aid}]))
        assert status == 404, out
        assert store.list_tasks(None)[1] == before


@pytest.mark.parametrize(("body", "field"), [
    (spec(array="0-99999999"), "array"),
    (spec(array="1-2:0"), "array"),
    (spec(array={"grid": {n: list(range(10)) for n in "abcde"}}), "array"),
    (spec(array={"range": "0-3", "max_running": 0}), "array.max_running"),
    (spec(array="0-3", entrypoint={"argv": ["echo", "{nope}"]}), "entrypoint.argv[1]"),
    # the service's own mark on an element, written by the client
    (spec(array_element={"index": 0, "size": 1, "params": {"x": "$(id)"}}), "array_element"),
])
async def test_hostile_arrays_are_422_naming_the_field(store: Store, body: dict[str, Any], field: str) -> None:
    async with serving(store) as api:
        status, out, _ = await api.call("POST", "/api/tasks", body=body)
        assert status == 422, out
        assert any(str(e["field"]).startswith(field) for e in out["errors"]), out
        assert store.list_tasks(None)[1] == 0 and store.list_arrays(None) == []


@pytest.mark.parametrize(("body", "ctype", "status", "field"), [
    ({"name": "c", "steps": [{"name": "a", "needs": ["b"], "spec": spec()},
                             {"name": "b", "needs": ["a"], "spec": spec()}]},
     "application/json", 422, "steps[0].needs"),
    ({"name": "i", "steps": [{"name": "a", "spec": spec()},
                             {"name": "b", "spec": spec(inputs=[{"from": "a", "path": "o"}])}]},
     "application/json", 422, "steps[1].spec.inputs[0].from"),
    ({"name": "big", "steps": [{"name": f"s{i}", "spec": spec()} for i in range(65)]}, "application/json", 422,
     "steps"),
    ({"name": "ok", "steps": [{"name": "a", "spec": spec()}]}, "application/json", 422, "steps[0].spec.resources"),
    (b"name: y\nsteps:\n  - {name: a, spec: {name: a, entrypoint: {argv: [x]}}}\n", "application/yaml", 422,
     "steps[0].spec.resources"),
    (b"name: y\nsteps: [&a x, *a]\n", "application/yaml", 422, ""),
    (b"[1, 2]", "application/json", 422, ""),
    (b"{", "application/json", 422, ""),
    (b"steps: []", "text/plain", 415, "Content-Type"),
    ({"name": "e", "steps": [{"name": "a", "spec": spec(array_element={"index": 0, "size": 1})}]},
     "application/json", 422, "steps[0].spec.array_element"),
])
async def test_pipeline_bodies_refused_naming_the_field(store: Store, body: Any, ctype: str, status: int,
                                                        field: str) -> None:
    async with serving(store) as api:
        got, out, _ = await api.call("POST", "/api/pipelines", body=body, ctype=ctype)
        assert got == status, out
        assert any(str(e["field"]).startswith(field) for e in out["errors"]), out
        assert store.list_tasks(None)[1] == 0


@pytest.mark.parametrize("path", [
    "/api/arrays/0", "/api/arrays/99999999999999999999", "/api/arrays/4611686018427387905", "/api/arrays/77",
    "/api/pipelines/0", "/api/pipelines/99999999999999999999", "/api/pipelines/77",
])
async def test_hostile_or_unknown_ids_are_404(store: Store, path: str) -> None:
    async with serving(store) as api:
        for method, p in (("GET", path), ("POST", path + "/cancel")):
            status, out, _ = await api.call(method, p)
            assert status == 404, (method, p, out)


@pytest.mark.parametrize("query", [
    "/api/tasks?array=abc", "/api/tasks?array=-1", "/api/tasks?array=%D9%A1", "/api/tasks?array=99999999999999999999",
    "/api/arrays?limit=0", "/api/arrays?limit=x", "/api/arrays?before=-5", "/api/pipelines?limit=501",
    "/api/arrays?owner=a%20b",
])
async def test_hostile_query_parameters_are_400(store: Store, query: str) -> None:
    async with serving(store) as api:
        status, out, _ = await api.call("GET", query, user="root!")
        assert status == 400 and out["errors"], (query, out)


async def test_hostile_parameters_of_one_array_are_400(store: Store) -> None:
    async with serving(store) as api:
        _, body, _ = await api.call("POST", "/api/tasks", body=spec(array=[1]))
        aid = body["array"]["id"]
        for q in ("index=x", "index=-1", "index=99999999999", "tasks=maybe", "state=bogus"):
            status, out, _ = await api.call("GET", f"/api/arrays/{aid}?{q}")
            assert status == 400 and out["errors"], (q, out)
        assert (await api.call("GET", f"/api/arrays/{aid}?index=7"))[1]["tasks"] == []


@pytest.mark.parametrize(("array", "index", "position"), [
    ("3-7", 5, 2), ("0-20:5", 10, 2), ("1,3,8-10", 9, 3), ([5, 6, 7], 2, 2), ("2-4", 0, None), ("0-20:5", 3, None),
])
async def test_an_element_is_found_by_its_index(store: Store, array: Any, index: int, position: int | None) -> None:
    async with serving(store) as api:
        _, _other, _ = await api.call("POST", "/api/tasks", body=spec(array="0-2"))  # ids before, not of this array
        _, body, _ = await api.call("POST", "/api/tasks", body=spec(array=array))
        aid = body["array"]["id"]
        status, out, _ = await api.call("GET", f"/api/arrays/{aid}?index={index}")
        assert status == 200
        assert [t["id"] for t in out["tasks"]] == ([] if position is None else [body["task_ids"][position]])
        assert all(t["array_id"] == aid and t["array_index"] == index for t in out["tasks"])
        status, out, _ = await api.call("GET", f"/api/arrays/{aid}?index={index}&state=running")
        assert out["tasks"] == []


async def test_a_ten_thousand_element_array_is_one_request(store: Store) -> None:
    async with serving(store) as api:
        status, body, _ = await api.call("POST", "/api/tasks", body=spec(array={"range": "0-9999"}))
        assert status == 201, body
        assert body["array"]["size"] == 10_000 and len(body["task_ids"]) == 10_000
        status, out, _ = await api.call("GET", f"/api/arrays/{body['array']['id']}")
        assert status == 200 and len(out["tasks"]) == 10_000
        status, out, _ = await api.call("POST", "/api/tasks", body=spec(array={"range": "0-10000"}))
        assert status == 422 and out["errors"][0]["field"].startswith("array")
