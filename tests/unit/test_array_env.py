"""What an array element sees (issue 20): TACC_ARRAY_* and TACC_PARAM_* variables, params.json, its argv.

Each element is compiled, its launch.sh run for real under bash, as an executor runs it (plan files in
TACC_TASKDIR, TACC_ARRAY_ID from the executor), and a program reports exactly what it got: hostile
values must reach it as written, and nothing of them may run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import PARAMS_FILE, ExecutionPlan, SiteProfile, compile_task
from tacc_hub.compiler.plan import InputPlan, with_array_inputs
from tacc_hub.executors.base import Launch
from tacc_hub.executors.prepare import task_env
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import SpecError, spec_from_data
from tacc_hub.schema.arrays import expand

SNAPSHOT = "ab" * 32


def make_spec(**fields: Any) -> Any:
    """A small valid spec (snapshot code, one argv) with ``fields`` replaced."""
    return spec_from_data({"name": "job", "code": {"kind": "snapshot", "digest": SNAPSHOT, "size": 10},
                           "entrypoint": {"argv": ["python", "train.py"]}, **fields})


HOSTILE = ["$(touch PWNED)", "`touch PWNED2`", "; touch PWNED3 #", "a'b\"c", "x\ny", "${HOME}", "*", "-n",
           "\\", "{index}", "{{", "ünï", "$TACC_TASK_ID"]

REPORT = """\
import json, os, sys
env = {k: v for k, v in os.environ.items() if k.startswith(("TACC_ARRAY_", "TACC_PARAM_"))}
with open(os.environ["TACC_PARAMS_FILE"]) as fh:
    params = json.load(fh)
print(json.dumps({"argv": sys.argv[1:], "env": env, "params": params,
                  "params_file": os.environ["TACC_PARAMS_FILE"]}))
"""


def run_plan(plan: ExecutionPlan, tmp_path: Path, array_id: int | None = 7) -> dict[str, Any]:
    """Run launch.sh with the executor's variables (``task_env``) and the plan's files in TACC_TASKDIR."""
    work, task, user = (tmp_path / d for d in ("work", "task", "user"))
    for d in (work, task, user):
        d.mkdir(parents=True, exist_ok=True)
    (work / "report.py").write_text(REPORT)
    for name, text in plan.files.items():
        (task / name).write_text(text)
    (task / "launch.sh").write_text(plan.script)
    launch = Launch(task_id=12, owner="ada", plan=plan, placement=Placement(nodes=[NodeSlots(node="n1", gpus=[0])]),
                    array_id=array_id)
    env = {"PATH": os.environ["PATH"], "HOME": str(user), **task_env(launch, task, user, 10.0),
           "TACC_WORKDIR": str(work), "TACC_NODE_RANK": "0", "TACC_NNODES": "1", "TACC_MASTER_ADDR": "127.0.0.1",
           "TACC_MASTER_PORT": "29500"}
    out = subprocess.run(["bash", str(task / "launch.sh")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert not list(tmp_path.rglob("PWNED*")), "a hostile value was executed"
    result: dict[str, Any] = json.loads(out.stdout)
    assert result["params_file"] == str(task / PARAMS_FILE)
    return result


def elements(array: Any, argv: list[str]) -> list[Any]:
    return expand(make_spec(entrypoint={"argv": argv}, array=array))


def test_grid_element_sees_its_index_and_parameters(site: SiteProfile, tmp_path: Path) -> None:
    els = elements({"lr": [1e-3, 3e-4], "bs": [32, 64], "fast": [True]},
                   [sys.executable, "report.py", "--lr={lr}", "--bs", "{bs}", "i={index}", "{fast}"])
    plan = compile_task(els[3], site)
    assert plan.array_env == {"TACC_ARRAY_INDEX": "3", "TACC_ARRAY_SIZE": "4", "TACC_PARAM_BS": "64",
                              "TACC_PARAM_FAST": "true", "TACC_PARAM_LR": "0.0003"}
    assert plan.files[PARAMS_FILE] == '{"index":3,"params":{"bs":64,"fast":true,"lr":0.0003},"size":4}\n'
    got = run_plan(plan, tmp_path)
    assert got["argv"] == ["--lr=0.0003", "--bs", "64", "i=3", "true"]
    assert got["env"] == {**plan.array_env, "TACC_ARRAY_ID": "7"}
    assert got["params"] == {"index": 3, "size": 4, "params": {"bs": 64, "fast": True, "lr": 3e-4}}


def test_hostile_values_reach_the_program_literally(site: SiteProfile, tmp_path: Path) -> None:
    els = elements({"values": HOSTILE, "param": "v"}, [sys.executable, "report.py", "{v}", "<{v}>"])
    for i, value in enumerate(HOSTILE):
        got = run_plan(compile_task(els[i], site), tmp_path / str(i))
        assert got["argv"] == [value, f"<{value}>"], value
        assert got["env"]["TACC_PARAM_V"] == value
        assert got["params"]["params"] == {"v": value}


def test_a_shell_entrypoint_reads_the_variables(site: SiteProfile, tmp_path: Path) -> None:
    [el] = expand(make_spec(entrypoint={"shell": [f'{sys.executable} report.py "$TACC_PARAM_V" "$TACC_ARRAY_INDEX"']},
                            array={"values": ["$(touch PWNED) x"], "param": "v"}))
    got = run_plan(compile_task(el, site), tmp_path)
    assert got["argv"] == ["$(touch PWNED) x", "0"]


def test_range_element_without_array_id(site: SiteProfile, tmp_path: Path) -> None:
    els = elements("4-8:2", [sys.executable, "report.py", "{index}"])
    got = run_plan(compile_task(els[1], site), tmp_path, array_id=None)
    assert got["argv"] == ["6"]
    assert got["env"] == {"TACC_ARRAY_INDEX": "6", "TACC_ARRAY_SIZE": "3"}
    assert got["params"] == {"index": 6, "size": 3, "params": {}}


def test_a_task_of_its_own_has_no_array_variables(site: SiteProfile) -> None:
    plan = compile_task(make_spec(), site)
    assert plan.array_env == {} and PARAMS_FILE not in plan.files and "TACC_PARAM" not in plan.script
    assert "array_env" not in plan.model_dump() or not plan.model_dump()["array_env"]
    assert "array_env" not in json.loads(plan.model_dump_json())  # plans (and goldens) without arrays unchanged


def test_an_unexpanded_array_is_refused(site: SiteProfile) -> None:
    with pytest.raises(SpecError) as exc:
        compile_task(make_spec(array="0-3"), site)
    assert exc.value.errors[0][0] == "array"


def test_parameters_that_are_one_variable_are_refused(site: SiteProfile) -> None:
    # the schema refuses such a grid; an element written by hand is refused by the compiler
    spec = make_spec(array_element={"index": 0, "size": 1, "params": {"lr": 1, "LR": 2}})
    with pytest.raises(SpecError, match="both TACC_PARAM_LR"):
        compile_task(spec, site)


def test_inputs_in_the_plan(site: SiteProfile) -> None:
    spec = make_spec(inputs=[{"task": 12, "path": "outputs/data"}, {"array": 20, "path": "out/./m.pt", "to": "models"}])
    plan = compile_task(spec, site)
    assert plan.inputs == [InputPlan(task=12, path="outputs/data", to="outputs/data"),
                           InputPlan(array=20, path="out/m.pt", to="models")]
    filled = with_array_inputs(plan, {20: [(1, 22), (0, 20)], 99: [(0, 99)]})
    assert filled.inputs[1].tasks == [(0, 20), (1, 22)] and filled.inputs[0] == plan.inputs[0]
    again = ExecutionPlan.model_validate_json(filled.model_dump_json())
    assert again == filled
    assert with_array_inputs(compile_task(make_spec(), site), {1: [(0, 1)]}) == compile_task(make_spec(), site)
    with pytest.raises(SpecError) as exc:
        compile_task(make_spec(inputs=[{"from": "prepare", "path": "x"}]), site)
    assert exc.value.errors[0][0] == "inputs[0].from"
    with pytest.raises(SpecError) as exc:
        compile_task(make_spec(inputs=[{"task": 3, "path": "x", "to": "a/.."}]), site)
    assert exc.value.errors[0][0] == "inputs[0].to"


@pytest.mark.parametrize("fields", [
    {"entrypoint": {"argv": ["python", "t.py", "--lr={lr}", "{index}"]}, "array": {"lr": [0.1, 0.2], "bs": [1, 2]}},
    {"entrypoint": {"argv": ["{prog}", "x.ipynb"]}, "array": {"values": ["python", "bash"], "param": "prog"}},
    {"entrypoint": {"argv": ["python", "t.py"]}, "array": "0-5:2", "runtime": {"kind": "torchrun"},
     "resources": {"gpus_per_node": 2, "tasks_per_node": 2}},
    {"entrypoint": {"shell": ['python t.py --lr "$TACC_PARAM_LR"']}, "array": {"lr": [1, 2, 3]},
     "environment": {"variables": {"A": "$(x)"}}, "datasets": ["mnist"], "inputs": [{"task": 3, "path": "o"}]},
])
def test_compile_elements_is_compile_task(site: SiteProfile, fields: dict[str, Any]) -> None:
    from tacc_hub.compiler import compile_elements

    els = expand(make_spec(**fields))
    fast = compile_elements(els, site)
    assert fast == [compile_task(e, site) for e in els]
    assert [p.model_dump_json() for p in fast] == [compile_task(e, site).model_dump_json() for e in els]
    assert len({p.task_digest for p in fast}) == len(els)
    # an element that shares less than expand's (changed by hand) is compiled in full
    odd = els[1].model_copy(update={"name": "other"})
    assert compile_elements([els[0], odd], site)[1] == compile_task(odd, site)
    assert compile_elements([], site) == []


def test_compiling_a_thousand_elements_is_fast(site: SiteProfile) -> None:
    import time

    from tacc_hub.compiler import compile_elements

    els = expand(make_spec(entrypoint={"argv": ["python", "t.py", "--lr={lr}", "--seed={seed}"]},
                           array={"lr": [1e-3, 3e-4, 1e-4, 3e-5] * 25, "seed": list(range(10))}))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        plans = compile_elements(els, site)
        best = min(best, time.perf_counter() - t)
    assert len(plans) == 1000
    assert best < 0.5, f"compiling 1,000 elements took {best * 1000:.0f} ms"
