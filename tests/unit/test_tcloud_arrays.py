"""tcloud with arrays and pipelines, against a fake client answering canned JSON (the service's shapes).

ps groups an array's elements into one row (NAME[size], counts per state) and a pipeline into one row
(its steps' states); --expand lists elements with ARRAY = ID:INDEX; cancel/show/logs take ID:INDEX and
act on a whole array or pipeline by its id; submit prints an array's ids and a pipeline's steps, and
--array/--sweep replace a spec's array. Hostile text from the service reaches the terminal visibly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tacc_hub.client
from tacc_hub.cli import tcloud_arrays
from tacc_hub.cli.tcloud import cli
from tacc_hub.client import ApiClientError
from tacc_hub.schema.arrays import sweep_value

NOW = time.time()


def task(tid: int, status: str = "pending", *, name: str = "t", array: int | None = None, index: int | None = None,
         pipeline: int | None = None, reason: str | None = None) -> dict[str, Any]:
    return {"id": tid, "owner": "alice", "name": name, "status": status, "digest": "d" * 64, "reason": reason,
            "exit_code": 0 if status == "succeeded" else None, "submitted_at": NOW - 60, "gpus_requested": 1,
            "started_at": None, "finished_at": None, "placement": None, "cancel_requested": False, "queue": None,
            "array_id": array, "array_index": index, "pipeline_id": pipeline}


def array(aid: int, size: int, counts: dict[str, int], *, name: str = "sweep", status: str = "running",
          reason: str | None = None, max_running: int | None = None) -> dict[str, Any]:
    return {"id": aid, "owner": "alice", "name": name, "size": size, "max_running": max_running,
            "pipeline_id": None, "step": None, "created_at": NOW - 60, "status": status, "counts": counts,
            "running": counts.get("running", 0), "waiting": counts.get("pending", 0),
            "done": counts.get("succeeded", 0), "failed": counts.get("failed", 0), "reason": reason}


PIPE = {"id": 30, "owner": "alice", "name": "train-eval", "created_at": NOW - 30, "status": "running",
        "steps": [{"name": "prepare", "needs": [], "task_id": 30, "array_id": None, "status": "succeeded",
                   "reason": None},
                  {"name": "train", "needs": ["prepare"], "task_id": 31, "array_id": None, "status": "running",
                   "reason": None},
                  {"name": "evaluate", "needs": ["train"], "task_id": 32, "array_id": None, "status": "pending",
                   "reason": "Dependency: waits for task 31 (train) to succeed"}]}


class Fake:
    """Stands for TaccClient: canned answers, and every call recorded as (method, args, kwargs)."""

    tasks: list[dict[str, Any]] = []
    arrays_: dict[int, dict[str, Any]] = {}
    elements: dict[int, list[dict[str, Any]]] = {}
    pipes: dict[int, dict[str, Any]] = {}
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    submitted: dict[str, Any] = {}

    def __init__(self, url: str, token: str | None, **kw: Any) -> None:
        self.url, self.headers = url, {}

    def _rec(self, name: str, *args: Any, **kw: Any) -> None:
        Fake.calls.append((name, args, kw))

    def list(self, *, states: Any = None, limit: int = 50, before: int | None = None,
             all_users: bool = False) -> dict[str, Any]:
        self._rec("list", limit=limit, before=before)
        rows = sorted((t for t in Fake.tasks if before is None or t["id"] < before), key=lambda t: -t["id"])
        page = rows[:limit]
        return {"tasks": page, "total": len(Fake.tasks),
                "next_before": page[-1]["id"] if len(page) == limit and len(rows) > limit else None}

    def arrays(self, **kw: Any) -> dict[str, Any]:
        self._rec("arrays", **kw)
        return {"arrays": sorted(Fake.arrays_.values(), key=lambda a: -a["id"]), "next_before": None}

    def array(self, aid: int, *, states: Any = None, index: int | None = None, tasks: bool = True) -> dict[str, Any]:
        self._rec("array", aid, index=index, tasks=tasks)
        if aid not in Fake.arrays_:
            raise ApiClientError(404, f"no array {aid}")
        out = dict(Fake.arrays_[aid])
        if tasks:
            out["tasks"] = [t for t in Fake.elements.get(aid, []) if index is None or t["array_index"] == index]
        return out

    def pipelines(self, **kw: Any) -> dict[str, Any]:
        self._rec("pipelines", **kw)
        return {"pipelines": list(Fake.pipes.values()), "next_before": None}

    def pipeline(self, pid: int) -> dict[str, Any]:
        self._rec("pipeline", pid)
        if pid not in Fake.pipes:
            raise ApiClientError(404, f"no pipeline {pid}")
        return Fake.pipes[pid]

    def show(self, tid: int) -> dict[str, Any]:
        self._rec("show", tid)
        for t in Fake.tasks:
            if t["id"] == tid:
                return {**t, "spec": {"name": t["name"]}, "plan": {}}
        raise ApiClientError(404, f"no task {tid}")

    def cancel(self, tid: int) -> dict[str, Any]:
        self._rec("cancel", tid)
        return {**self.show(tid), "status": "cancelled"}

    def cancel_array(self, aid: int) -> dict[str, Any]:
        self._rec("cancel_array", aid)
        return {**Fake.arrays_[aid], "cancelled": 3}

    def cancel_pipeline(self, pid: int) -> dict[str, Any]:
        self._rec("cancel_pipeline", pid)
        return {**Fake.pipes[pid], "cancelled": 2}

    def logs(self, tid: int, offset: int = 0, limit: int = 0) -> dict[str, Any]:
        self._rec("logs", tid, offset)
        data = f"log of {tid}\n" if offset == 0 else ""
        return {"offset": offset, "next_offset": offset + len(data), "data": data, "eof": True, "status": "succeeded"}

    def attempts(self, tid: int) -> dict[str, Any]:
        return {"task_id": tid, "attempts": []}

    def usage(self, tid: int) -> dict[str, Any]:
        return {"samples": []}

    def whoami(self) -> dict[str, Any]:
        return {"user": "alice", "admin": False}

    def has_code(self, digest: str) -> bool:
        self._rec("has_code", digest)
        return False

    def upload_code(self, digest: str, data: bytes) -> dict[str, Any]:
        self._rec("upload_code", digest)
        return {"digest": digest, "size": len(data)}

    def submit(self, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        self._rec("submit", body)
        return Fake.submitted

    def submit_pipeline(self, body: dict[str, Any]) -> dict[str, Any]:
        self._rec("submit_pipeline", body)
        return PIPE


@pytest.fixture(autouse=True)
def fake(monkeypatch: pytest.MonkeyPatch) -> type[Fake]:
    monkeypatch.setattr(tacc_hub.client, "TaccClient", Fake)
    monkeypatch.setenv("TACC_CONFIG", "/nonexistent")
    elements = [task(12 + i, st, name="sweep", array=12, index=i)
                for i, st in enumerate(["succeeded", "succeeded", "running", "running", "pending"])]
    Fake.tasks = [*elements, task(20, "running", name="solo"),
                  task(30, "succeeded", name="prepare", pipeline=30), task(31, "running", name="train", pipeline=30),
                  task(32, "pending", name="evaluate", pipeline=30)]
    Fake.arrays_ = {12: array(12, 5, {"succeeded": 2, "running": 2, "pending": 1},
                              reason="2 of 5 running, 1 waiting: Priority")}
    Fake.elements = {12: elements}
    Fake.pipes = {30: PIPE}
    Fake.calls = []
    Fake.submitted = {}
    return Fake


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["--url", "http://svc.test", "--token", "t", *args], catch_exceptions=False)


def rows(out: str) -> dict[str, list[str]]:
    """Plain ps output as ID -> columns split on runs of 2+ spaces."""
    import re

    lines = out.strip().splitlines()
    return {re.split(r"\s{2,}", line)[0]: re.split(r"\s{2,}", line) for line in lines}


def test_ps_shows_an_array_and_a_pipeline_as_one_row_each() -> None:
    res = run("ps", "--plain")
    assert res.exit_code == 0, res.output
    table = rows(res.stdout)
    assert list(table) == ["ID", "30", "20", "12"]  # newest first, by the array's / pipeline's id
    assert table["ID"][:4] == ["ID", "NAME", "STATUS", "TASKS"]
    assert table["12"][:4] == ["12", "sweep[5]", "running", "2 running, 1 waiting, 2 succeeded"]
    assert table["12"][-1] == "2 of 5 running, 1 waiting: Priority"
    assert table["30"][:4] == ["30", "train-eval", "running",
                               "prepare succeeded, train running, evaluate pending"]
    assert table["30"][-1] == "evaluate: Dependency: waits for task 31 (train) to succeed"
    assert table["20"][:4] == ["20", "solo", "running", "-"]
    for eid in range(13, 17):
        assert str(eid) not in table


def test_ps_expand_lists_every_element_with_array_and_index() -> None:
    res = run("ps", "--plain", "--expand")
    assert res.exit_code == 0, res.output
    table = rows(res.stdout)
    assert table["ID"][:4] == ["ID", "ARRAY", "NAME", "STATUS"]
    assert table["14"][:4] == ["14", "12:2", "sweep", "running"]
    assert table["20"][1] == "-"
    assert len(table) == 1 + len(Fake.tasks)


def test_ps_without_arrays_is_unchanged_and_asks_for_no_groups(fake: type[Fake]) -> None:
    fake.tasks = [task(1, "running"), task(2, "pending")]
    res = run("ps", "--plain")
    assert res.exit_code == 0
    assert rows(res.stdout)["ID"][:4] == ["ID", "NAME", "STATUS", "GPUS"]
    assert [c[0] for c in fake.calls] == ["list"]


def test_ps_reads_more_pages_when_elements_fill_the_first(fake: type[Fake]) -> None:
    fake.tasks = [task(100 + i, "pending", name="sweep", array=100, index=i) for i in range(10)]
    fake.tasks += [task(5, "running", name="old")]
    fake.arrays_ = {100: array(100, 10, {"pending": 10}, status="pending")}
    res = run("ps", "--plain", "-n", "3")
    assert res.exit_code == 0, res.output
    table = rows(res.stdout)
    assert list(table) == ["ID", "100", "5"]
    assert ("list", (), {"limit": 500, "before": 100}) in fake.calls  # its top (109) seen: below the array


def test_ps_skips_the_rest_of_an_array_it_has_seen_the_top_of(fake: type[Fake]) -> None:
    fake.tasks = [task(100 + i, "pending", name="sweep", array=100, index=i) for i in range(2000)]
    fake.tasks += [task(99, "running", name="before"), task(5000, "running", name="after")]
    fake.arrays_ = {100: array(100, 2000, {"pending": 2000}, status="pending")}
    res = run("ps", "--plain", "-n", "3")
    assert res.exit_code == 0, res.output
    assert list(rows(res.stdout)) == ["ID", "5000", "100", "99"]
    assert [c[2]["before"] for c in fake.calls if c[0] == "list"] == [None, 100]  # one page of elements, no more


def test_ps_does_not_skip_what_may_not_be_the_arrays(fake: type[Fake]) -> None:
    # the array's last element (id 100 + size - 1) is not among those listed: no skip, every page read
    fake.tasks = [task(100 + i, "pending", name="sweep", array=100, index=i) for i in range(5)]
    fake.tasks += [task(103 + 1000, "running", name="interleaved")]
    fake.arrays_ = {100: array(100, 6, {"pending": 6}, status="pending")}
    res = run("ps", "--plain", "-n", "3")
    assert res.exit_code == 0, res.output
    assert list(rows(res.stdout)) == ["ID", "1103", "100"]
    assert [c[2]["before"] for c in fake.calls if c[0] == "list"] == [None, 103]


def test_ps_fetches_an_array_missing_from_the_listing_by_id(fake: type[Fake], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_list(self: Fake, **kw: Any) -> dict[str, Any]:
        return {"arrays": [], "next_before": None}

    monkeypatch.setattr(fake, "arrays", no_list)
    res = run("ps", "--plain")
    assert res.exit_code == 0
    assert rows(res.stdout)["12"][1] == "sweep[5]"
    assert ("array", (12,), {"index": None, "tasks": False}) in fake.calls


def test_hostile_text_from_the_service_is_written_visibly(fake: type[Fake]) -> None:
    fake.arrays_[12]["reason"] = "\x1b]52;c;cm0gLXJmIH4=\x07 waiting"
    fake.tasks[5]["reason"] = "\x1b[2J\x9bcleared"
    res = run("ps", "--plain")
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\x9b" not in res.stdout
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07 waiting" in res.stdout
    assert "\\x1b[2J\\x9bcleared" in res.stdout


@pytest.mark.parametrize(("ref", "called", "line"), [
    ("12", ("cancel_array", (12,)), "array 12 (sweep): 3 of 5 tasks cancelled"),
    ("12:3", ("cancel", (15,)), "task 15 (array 12:3): cancelled"),
    ("30", ("cancel_pipeline", (30,)), "pipeline 30 (train-eval): 2 task(s) cancelled"),
    ("20", ("cancel", (20,)), "task 20: cancelled"),
    ("13", ("cancel", (13,)), "task 13: cancelled"),  # an element's own id: that element only
])
def test_cancel_an_array_an_element_a_pipeline_or_a_task(fake: type[Fake], ref: str, called: tuple[Any, ...],
                                                         line: str) -> None:
    res = run("cancel", ref)
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == line
    assert called in [(c[0], c[1]) for c in fake.calls]
    others = {"cancel", "cancel_array", "cancel_pipeline"} - {called[0]}
    assert not [c for c in fake.calls if c[0] in others]


def test_an_element_that_is_not_there_is_named(fake: type[Fake]) -> None:
    res = run("cancel", "12:9")
    assert res.exit_code == 1
    assert "array 12 has no element 9" in res.stderr
    assert not [c for c in fake.calls if c[0].startswith("cancel")]


@pytest.mark.parametrize("bad", ["12:x", "x", "+1", "12:3:4", "1" * 19, "١٢"])
def test_a_bad_id_is_a_usage_error(bad: str) -> None:
    res = CliRunner().invoke(cli, ["--url", "http://svc.test", "cancel", bad])
    assert res.exit_code == 2
    assert "is not a task id (12) or an array element (12:7)" in res.output


def test_show_element_and_logs_element_resolve_the_index(fake: type[Fake]) -> None:
    res = run("show", "12:2")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("task 14 sweep  running")
    assert "array 12 element 2" in res.stdout
    res = run("logs", "12:4")
    assert res.exit_code == 0 and res.stdout == "log of 16\n"


def test_show_array_prints_its_summary_and_elements(fake: type[Fake]) -> None:
    res = run("show", "12", "--plain")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "array 12 sweep[5]  running"
    assert lines[1] == "reason: 2 of 5 running, 1 waiting: Priority"
    assert "2 running, 1 waiting, 2 succeeded" in lines
    table = rows("\n".join(lines[lines.index(next(x for x in lines if x.startswith("INDEX"))):]))
    assert table["INDEX"] == ["INDEX", "ID", "STATUS", "EXIT", "TIME", "REASON"]
    assert table["0"][:4] == ["0", "12", "succeeded", "0"] and table["4"][:3] == ["4", "16", "pending"]


def test_show_pipeline_prints_its_steps(fake: type[Fake]) -> None:
    res = run("show", "30", "--plain")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == "pipeline 30 train-eval  running"
    table = rows(res.stdout.split("\n", 2)[2])
    assert table["train"] == ["train", "prepare", "task 31", "running"]
    assert table["evaluate"][-1] == "Dependency: waits for task 31 (train) to succeed"


def test_show_json_of_an_array(fake: type[Fake]) -> None:
    res = run("show", "12", "--json")
    doc = json.loads(res.stdout)
    assert doc["size"] == 5 and len(doc["tasks"]) == 5


def _spec_dir(tmp_path: Path, extra: str = "") -> Path:
    d = tmp_path / "job"
    d.mkdir()
    (d / "train.py").write_text("print('hi')\n")
    (d / "tacc.yaml").write_text("name: sweep\nentrypoint: {argv: [python, train.py, '--lr={lr}']}\n" + extra)
    return d


def test_submit_an_array_prints_its_ids_and_limit(fake: type[Fake], tmp_path: Path) -> None:
    d = _spec_dir(tmp_path, "array: {grid: {lr: [0.1, 0.2]}, max_running: 4}\n")
    fake.submitted = {**task(12, name="sweep", array=12, index=0),
                      "array": array(12, 100, {"pending": 100}, max_running=4), "task_ids": list(range(12, 112))}
    res = run("submit", str(d))
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "submitted array 12: 100 tasks (12-111), at most 4 at once"
    body = next(c[1][0] for c in fake.calls if c[0] == "submit")
    assert body["array"]["grid"] == {"lr": [0.1, 0.2]} and body["array"]["max_running"] == 4


def test_submit_an_array_with_follow_is_refused_before_anything_is_sent(fake: type[Fake], tmp_path: Path) -> None:
    res = run("submit", str(_spec_dir(tmp_path, "array: 0-3\n")), "-f")
    assert res.exit_code == 1 and "tcloud logs -f ID:INDEX" in res.stderr
    assert not fake.calls


def test_submit_array_option_replaces_the_spec_array(fake: type[Fake], tmp_path: Path) -> None:
    fake.submitted = {**task(40, array=40, index=0), "array": array(40, 10, {"pending": 10}, max_running=2),
                      "task_ids": [40, 41, 42, 43, 44, 45, 46, 47, 48, 60]}
    res = run("submit", str(_spec_dir(tmp_path, "array: [a, b]\n")), "--array", "0-9%2", "--name", "x")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "submitted array 40: 10 tasks (40 to 60), at most 2 at once"
    body = next(c[1][0] for c in fake.calls if c[0] == "submit")
    assert body["array"]["range"] == "0-9" and body["array"]["max_running"] == 2 and body["name"] == "x"


def test_submit_sweep_options_make_the_grid(fake: type[Fake], tmp_path: Path) -> None:
    fake.submitted = {**task(50, array=50, index=0), "array": array(50, 4, {"pending": 4}),
                      "task_ids": [50, 51, 52, 53]}
    res = run("submit", str(_spec_dir(tmp_path)), "--sweep", "lr=1e-3,3e-4", "--sweep", "bs=32,64",
              "--sweep", "opt=adam,$(rm -rf ~)")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "submitted array 50: 4 tasks (50-53)"
    body = next(c[1][0] for c in fake.calls if c[0] == "submit")
    assert body["array"]["grid"] == {"lr": [0.001, 0.0003], "bs": [32, 64], "opt": ["adam", "$(rm -rf ~)"]}


@pytest.mark.parametrize(("args", "message"), [
    (["--sweep", "lr"], "bad option --sweep 'lr': write NAME=VALUE"),
    (["--sweep", "1x=3"], "bad option --sweep '1x=3'"),
    (["--sweep", "lr=1,,2"], "give at least one value"),
    (["--sweep", "lr=1", "--sweep", "lr=2"], "--sweep lr: given twice"),
    (["--sweep", "lr=1", "--array", "0-3"], "give --array or --sweep, not both"),
    (["--array", "0-99999999"], "--array 0-99999999"),
])
def test_bad_array_options_are_named(fake: type[Fake], tmp_path: Path, args: list[str], message: str) -> None:
    res = run("submit", str(_spec_dir(tmp_path)), *args)
    assert res.exit_code == 1
    assert message in res.stderr
    assert not [c for c in fake.calls if c[0] == "submit"]


def test_submit_a_pipeline_uploads_each_step_and_prints_its_steps(fake: type[Fake], tmp_path: Path) -> None:
    (tmp_path / "prep").mkdir()
    (tmp_path / "prep" / "prep.py").write_text("print('prep')\n")
    (tmp_path / "prep" / "tacc.yaml").write_text("name: prepare\nentrypoint: {argv: [python, prep.py]}\n")
    (tmp_path / "train.py").write_text("print('train')\n")
    (tmp_path / "pipeline.yaml").write_text(
        "name: train-eval\nsteps:\n"
        "  - {name: prepare, spec: prep/tacc.yaml}\n"
        "  - name: train\n    needs: [prepare]\n"
        "    spec: {entrypoint: {argv: [python, train.py]}, inputs: [{from: prepare, path: out}]}\n"
        "  - {name: evaluate, needs: [train], entrypoint: {argv: [python, train.py]}}\n")
    res = run("submit", str(tmp_path / "pipeline.yaml"))
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        "submitted pipeline 30 (train-eval): 3 steps",
        "  prepare   task 30: succeeded",
        "  train     task 31: running (needs prepare)",
        "  evaluate  task 32: pending (needs train)",
    ]
    body = next(c[1][0] for c in fake.calls if c[0] == "submit_pipeline")
    assert [s["name"] for s in body["steps"]] == ["prepare", "train", "evaluate"]
    codes = [s["spec"]["code"] for s in body["steps"]]
    assert all(c["kind"] == "snapshot" for c in codes)
    assert codes[1]["digest"] == codes[2]["digest"] != codes[0]["digest"]  # prep/ is its own snapshot
    uploads = [c[1][0] for c in fake.calls if c[0] == "upload_code"]
    assert set(uploads) == {codes[0]["digest"], codes[1]["digest"]}
    assert body["steps"][1]["spec"]["inputs"] == [{"from": "prepare", "path": "out", "to": None}] or \
        body["steps"][1]["spec"]["inputs"][0]["from"] == "prepare"


def test_a_bad_pipeline_file_is_named_and_nothing_is_sent(fake: type[Fake], tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n  - {name: a, needs: [b], entrypoint: {argv: [x]}}\n"
        "  - {name: b, needs: [a], entrypoint: {argv: [x]}}\n")
    res = run("submit", str(tmp_path / "p.yaml"))
    assert res.exit_code == 1
    assert f"the pipeline file {tmp_path / 'p.yaml'} is invalid" in res.stderr
    assert "steps[0].needs" in res.stderr and "cycle" in res.stderr
    assert not fake.calls


def test_a_pipeline_refuses_task_options(fake: type[Fake], tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: p\nsteps:\n  - {name: a, entrypoint: {argv: [x]}}\n")
    res = run("submit", str(tmp_path / "p.yaml"), "--gpus", "2")
    assert res.exit_code == 1 and "--gpus applies to one task file" in res.stderr
    assert not fake.calls


def test_counts_text_and_sweep_values() -> None:
    assert tcloud_arrays.counts_text({"starting": 1, "running": 2, "pending": 12, "succeeded": 85, "lost": 0}) == \
        "3 running, 12 waiting, 85 succeeded"
    assert tcloud_arrays.counts_text({}) == "no tasks"
    assert [sweep_value(v) for v in ("3", "-2", "1e-3", "0.5", "nan", "inf", "a b", "1e999")] == \
        [3, -2, 0.001, 0.5, "nan", "inf", "a b", "1e999"]
