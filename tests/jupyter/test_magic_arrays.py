"""``%tacc submit --array`` and ``--sweep``: what the spec carries, what the magic prints, and a real array run.

The first tests drive the magic's own code (its parser, the spec it builds, what it sends) with a client
that records what it is given instead of a service; the last one runs a small array from a real IPython
kernel against the real service, each element printing what it saw.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from tacc_hub.jupyter import magic
from tacc_hub.jupyter.capture import capture
from tacc_hub.jupyter.magic import TaccMagics, array_of, parser, with_array
from tacc_hub.schema.arrays import expand
from tests.e2e.conftest import Api

from .conftest import wait_for


def _array(*argv: str) -> dict[str, Any] | None:
    return array_of(parser().parse_args(["submit", "x.py", *argv]))


def test_array_and_sweep_options_become_the_specs_array():
    assert _array() is None
    assert _array("--array", "0-9") == {"range": "0-9"}
    assert _array("--array", "0-15%4") == {"range": "0-15", "max_running": 4}
    assert _array("--array", "1,3,8-10", "--max-running", "2") == {"range": "1,3,8-10", "max_running": 2}
    # the grid, in the order written; numbers where they read as one, text as typed otherwise
    assert _array("--sweep", "lr=1e-3,3e-4", "--sweep", "bs=32,64", "--sweep", "opt=adam,sgd") == {
        "grid": {"lr": [0.001, 0.0003], "bs": [32, 64], "opt": ["adam", "sgd"]}}
    for argv, says in [(("--array", "0-3", "--sweep", "a=1"), "not both"),
                       (("--max-running", "2",), "is for an array"),
                       (("--sweep", "lr"), "NAME=VALUE"),
                       (("--sweep", "=1,2"), "NAME=VALUE"),
                       (("--sweep", "a=1", "--sweep", "a=2"), "given twice"),
                       (("--array", "0-3%x",), "how many run at once")]:
        with pytest.raises(UsageError, match=says):
            _array(*argv)


def _captured(tmp_path: Path, args: list[str]) -> Any:
    (tmp_path / "train.py").write_text("import sys\nprint(sys.argv)\n")
    return capture("train.py", root_dir=tmp_path, args=args, pin_packages=False, resources={})


def test_a_sweep_expands_to_the_grid_with_hostile_values_kept_literal(tmp_path: Path):
    cap = _captured(tmp_path, ["--lr", "{lr}", "--tag", "{tag}"])
    hostile = "$(touch /tmp/pwned);`id`|x>y"
    spec = with_array(cap.spec, _array("--sweep", "lr=1e-3,3e-4", "--sweep", f"tag={hostile},plain"))
    elements = expand(spec)
    assert len(elements) == 4
    assert [e.array_element.index for e in elements] == [0, 1, 2, 3]
    assert elements[1].array_element.params == {"lr": 0.001, "tag": "plain"}
    argv = elements[0].entrypoint.argv
    assert argv[-4:] == ["--lr", "0.001", "--tag", hostile]  # one argv item, as typed: no shell saw it
    assert len({e.digest for e in elements}) == 4


def test_an_invalid_array_is_a_usage_error_naming_the_field(tmp_path: Path):
    cap = _captured(tmp_path, [])
    with pytest.raises(UsageError, match=r"array\.range: .*ends before it starts"):
        with_array(cap.spec, _array("--array", "5-1"))
    with pytest.raises(UsageError, match="at most 10000"):
        with_array(cap.spec, _array("--array", "0-20000"))
    with pytest.raises(UsageError, match="a parameter name"):  # read as tcloud --sweep reads it
        with_array(cap.spec, _array("--sweep", "bad-name=1,2"))
    with pytest.raises(UsageError, match=r"array\.grid"):  # a name that upper-cases like another
        with_array(cap.spec, _array("--sweep", "lr=1,2", "--sweep", "LR=3"))


class RecordingClient:
    """Stands in for the service: keeps what the magic sends, answers as POST /api/tasks does for an array."""

    sent: list[dict[str, Any]] = []

    def __enter__(self) -> RecordingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def has_code(self, digest: str) -> bool:
        return True

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(json.loads(json.dumps(spec)))
        size = len(expand(magic.TaskSpec.model_validate(spec)))
        array = {"id": 40, "owner": "u", "name": spec["name"], "size": size, "max_running": 2, "status": "pending",
                 "counts": {"pending": size}, "running": 0, "waiting": size, "done": 0, "failed": 0}
        return {"id": 40, "name": spec["name"], "status": "pending", "digest": "d" * 64, "array": array,
                "task_ids": list(range(40, 40 + size))}


def test_the_magic_sends_the_array_and_says_how_to_follow_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]):
    (tmp_path / "train.py").write_text("print('x')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TACC_CAPTURE_PACKAGES", "0")
    monkeypatch.setattr(magic, "client_from_env", RecordingClient)
    monkeypatch.setattr(magic, "find_server", lambda: None)
    RecordingClient.sent = []
    out = TaccMagics(shell=None).tacc("submit train.py --name sweep --array 0-9%2 -- --seed {index}")
    assert out is None  # no live monitor for an array: it prints how to follow it
    [spec] = RecordingClient.sent
    given = {k: v for k, v in spec["array"].items() if v is not None and k != "param"}  # param: its default
    assert given == {"range": "0-9", "max_running": 2}
    assert spec["entrypoint"]["argv"][-2:] == ["--seed", "{index}"]  # substituted per element by the service
    printed = capsys.readouterr().out
    assert "submitted array 40 (sweep[10], tasks 40..49, at most 2 at once)" in printed
    assert "%tacc array 40" in printed and "%tacc logs 40 -f" in printed


def test_a_small_array_runs_from_the_kernel_and_each_element_sees_its_parameters(kernel, service):
    api = Api(service.url, service.token("magicuser"))
    (kernel.cwd / "sweep.py").write_text(
        "import os, sys\n"
        "print('element', os.environ['TACC_ARRAY_INDEX'], 'of', os.environ['TACC_ARRAY_ID'],\n"
        "      'opt=' + os.environ['TACC_PARAM_OPT'], 'argv', sys.argv[1:])\n")
    assert kernel.run("%load_ext tacc_hub")["status"] == "ok"
    out = kernel.run("%tacc submit sweep.py --name magic-sweep --no-monitor --sweep 'opt=adam,$(id)' -- {opt}")
    assert out["status"] == "ok" and not out["error"], out
    m = re.search(r"submitted array (\d+) \(magic-sweep\[2\], tasks (\d+)\.\.(\d+)\)", out["stdout"])
    assert m, out
    array_id, first, last = (int(x) for x in m.groups())
    assert last - first == 1
    for tid in (first, last):
        assert api.wait_status(tid, {"succeeded", "failed", "cancelled"}, timeout=180)["status"] == "succeeded"

    def logs_of(tid: int) -> str:
        o = kernel.run(f"%tacc logs {tid}")
        return o["stdout"] if "element" in o["stdout"] else ""

    assert f"element 0 of {array_id} opt=adam argv ['adam']" in wait_for(lambda: logs_of(first), timeout=30)
    assert f"element 1 of {array_id} opt=$(id) argv ['$(id)']" in wait_for(lambda: logs_of(last), timeout=30)

    shown = kernel.run(f"%tacc array {array_id}")
    assert re.search(rf"array {array_id} magic-sweep\[2\]: succeeded; 2 done, 0 running, 0 waiting, 0 failed",
                     shown["stdout"]), shown
    assert re.search(rf"^\s+1\s+{last}\s+succeeded", shown["stdout"], re.M), shown
