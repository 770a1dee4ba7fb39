"""The spec digest: stable across processes, sensitive to every field, blind to mapping order.

The sensitivity test walks TaskSpec's pydantic fields recursively (into nested
models and into each member of a union of models), so a field added later
fails ``test_every_leaf_field_has_a_mutation`` until it gets an entry in
``MUTATIONS``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from tacc_hub.schema import TaskSpec, canonical_json, load_tuxiv, spec_from_data
from tacc_hub.schema.digest import spec_digest

GIT = {"kind": "git", "url": "https://example.org/lab/model.git", "commit": "0123456789abcdef", "patch": "diff --git"}
SNAP = {"kind": "snapshot", "digest": "cd" * 32, "size": 1234}
LOCAL = {"kind": "local", "path": "src"}

# Every field set to a non-default value. pip requirements and conda exclude each other,
# as do argv and shell and the code kinds, so there are three bases.
BASE_A: dict[str, Any] = {
    "name": "train-1",
    "code": GIT,
    "entrypoint": {"argv": ["python", "train.py", "--lr", "0.1"]},
    "workdir": "src",
    "environment": {
        "python": "3.12",
        "requirements": ["torch==2.3.1", "numpy==2.0.0"],
        "variables": {"A": "1", "B": "two", "C": "$(three)"},
        "modules": ["cuda/12.1", "gcc/12"],
    },
    "resources": {
        "nodes": 2, "gpus_per_node": 4, "gpu_type": "a100", "tasks_per_node": 4, "cpus_per_task": 8,
        "memory": "64G", "time_limit": "2h", "partition": "gpu",
    },
    "network": {"rdma": "required", "same_switch": True},
    "qos": {"class": "low", "preemptible": True, "priority": 5, "requeue": True, "max_restarts": 2,
            "restart_on": ["failure"], "warn_before": "10m"},
    "runtime": {"kind": "torchrun", "options": {"nproc_per_node": 4, "max_restarts": 1}},
    "datasets": ["imagenet", "mnist"],
    "outputs": ["ckpt", "logs"],
    "log_file": "logs/run.log",
    "user_log_file": "logs/run.log",
    "notify": {"email": "ada@example.org", "events": ["start", "end"]},
    "account": "lab",
    "ports": [6006],
    "tensorboard": {"logdir": "runs"},
    "array": {"range": "0-15", "max_running": 4},
    "depends_on": [{"task": 7}],
    "inputs": [{"task": 3, "path": "outputs/data"}],
}
BASE_B: dict[str, Any] = {
    **BASE_A,
    "code": SNAP,
    "entrypoint": {"shell": ["cd src", "python train.py"]},
    "environment": {"conda": {"name": "torch-env", "channels": ["pytorch"], "dependencies": ["pytorch=2.3"]}},
    "array": {"values": [1, "two"], "param": "seed"},
}
BASE_C: dict[str, Any] = {**BASE_A, "code": LOCAL, "array": {"grid": {"lr": [0.1, 0.01], "bs": [32]}}}
# An array's element (array and array_element exclude each other).
BASE_D: dict[str, Any] = {
    **{k: v for k, v in BASE_A.items() if k != "array"},
    "array_element": {"index": 3, "size": 16, "params": {"lr": 0.1}},
}
BASES = [BASE_A, BASE_B, BASE_C, BASE_D]
# Fields that by design are not in the digest (schema/digest.py).
NOT_DIGESTED = {"depends_on"}


class Switch:
    """Mutation of a discriminator: replace the whole value at ``parent`` by ``value``."""

    def __init__(self, parent: str, value: Any) -> None:
        self.parent, self.value = parent, value


# Leaf path (dotted, data keys; ``[kind]`` picks a union member) -> a different valid value.
MUTATIONS: dict[str, Any] = {
    "name": "train-2",
    "code[local].kind": Switch("code", SNAP),
    "code[local].path": "src2",
    "code[snapshot].kind": Switch("code", GIT),
    "code[snapshot].digest": "ef" * 32,
    "code[snapshot].size": 1235,
    "code[git].kind": Switch("code", LOCAL),
    "code[git].url": "https://example.org/lab/other.git",
    "code[git].commit": "0123456789abcdee",
    "code[git].patch": "diff --git a/x",
    "entrypoint.argv": ["python", "train.py", "--lr", "0.2"],
    "entrypoint.shell": ["cd src", "python train.py --fast"],
    "workdir": "src/sub",
    "environment.python": "3.11",
    "environment.requirements": ["torch==2.3.0", "numpy==2.0.0"],
    "environment.conda.name": "other-env",
    "environment.conda.channels": ["conda-forge"],
    "environment.conda.dependencies": ["pytorch=2.2"],
    "environment.variables": {"A": "1", "B": "two", "C": "$(four)"},
    "environment.modules": ["cuda/12.2", "gcc/12"],
    "resources.nodes": 3,
    "resources.gpus_per_node": 8,
    "resources.gpu_type": "v100",
    "resources.tasks_per_node": 2,
    "resources.cpus_per_task": 16,
    "resources.memory": "32G",
    "resources.time_limit": "3h",
    "resources.partition": "debug",
    "network.rdma": "off",
    "network.same_switch": False,
    "qos.class": "interactive",
    "qos.preemptible": False,
    "qos.priority": -5,
    "qos.requeue": False,
    "qos.max_restarts": 1,
    "qos.restart_on": ["failure", "preemption"],
    "qos.warn_before": "1m",
    "ports": [6007],
    "tensorboard.logdir": "tb",
    "runtime.kind": "plain",
    "runtime.options": {"nproc_per_node": 4, "max_restarts": 2},
    "datasets": ["imagenet"],
    "outputs": ["ckpt"],
    "log_file": "logs/other.log",
    "user_log_file": "logs/other.log",
    "notify.email": "bob@example.org",
    "notify.events": ["end"],
    "account": "other-lab",
    "array.range": "0-16",
    "array.values": [1, "three"],
    "array.param": "rng",
    "array.grid": {"lr": [0.1, 0.02], "bs": [32]},
    "array.max_running": 5,
    "array_element.index": 4,
    "array_element.size": 17,
    "array_element.params": {"lr": 0.2},
    "depends_on": [{"task": 8}],
    "inputs": [{"task": 3, "path": "outputs/other"}],
}


# --- walking the model ----------------------------------------------------------------


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _kind(model: type[BaseModel]) -> str:
    (value,) = get_args(model.model_fields["kind"].annotation)
    return str(value)


def leaf_fields(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> FieldInfo of every leaf (non-model) field, recursively."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        tp = _unwrap(info.annotation)
        members = [_unwrap(m) for m in get_args(tp)] if get_origin(tp) in (Union, types.UnionType) else []
        if members and all(_is_model(m) for m in members):
            for m in members:
                out.update(leaf_fields(m, f"{path}[{_kind(m)}]."))
        elif _is_model(tp):
            out.update(leaf_fields(tp, path + "."))
        else:
            out[path] = info
    return out


LEAVES = leaf_fields(TaskSpec)


def _steps(path: str) -> list[tuple[str, str | None]]:
    """'code[git].url' -> [('code', 'git'), ('url', None)]."""
    steps = []
    for part in path.split("."):
        key, _, kind = part.partition("[")
        steps.append((key, kind.rstrip("]") or None))
    return steps


def _get(data: dict[str, Any], path: str) -> Any:
    cur: Any = data
    for key, kind in _steps(path):
        if not isinstance(cur, dict) or key not in cur:
            raise KeyError(path)
        cur = cur[key]
        if kind is not None and (not isinstance(cur, dict) or cur.get("kind") != kind):
            raise KeyError(path)
    return cur


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    steps = _steps(path)
    cur = out
    for key, _ in steps[:-1]:
        cur = cur[key]
    cur[steps[-1][0]] = value
    return out


def _is_single_literal(info: Any) -> bool:
    return get_origin(info.annotation) is Literal and len(get_args(info.annotation)) == 1


def _pick_base(path: str, info: Any) -> dict[str, Any]:
    """The first base whose validated value at ``path`` is not the field's default."""
    default = info.get_default(call_default_factory=True)
    for base in BASES:
        dumped = spec_from_data(base).model_dump(mode="json", by_alias=True)
        try:
            value = _get(dumped, path)
        except KeyError:
            continue
        if _is_single_literal(info) or value != default:
            return base
    raise AssertionError(f"no base spec sets {path} to a non-default value; extend BASES")


# --- tests ----------------------------------------------------------------------------


def test_every_leaf_field_has_a_mutation() -> None:
    assert len(LEAVES) > 30  # the walk reached into the nested models
    missing = sorted(set(LEAVES) - set(MUTATIONS))
    stale = sorted(set(MUTATIONS) - set(LEAVES))
    assert not missing, f"add a mutation for the new field(s) {missing}"
    assert not stale, f"MUTATIONS names fields that no longer exist: {stale}"


@pytest.mark.parametrize("path", sorted(set(LEAVES) - NOT_DIGESTED))
def test_digest_changes_when_any_single_field_changes(path: str) -> None:
    base = _pick_base(path, LEAVES[path])
    mutation = MUTATIONS[path]
    if isinstance(mutation, Switch):
        changed = _set(base, mutation.parent, mutation.value)
    else:
        _get(base, path)  # the base really has this field
        changed = _set(base, path, mutation)
    a, b = spec_from_data(base), spec_from_data(changed)
    assert a.model_dump() != b.model_dump(), f"mutation of {path} did not change the spec"
    assert a.digest != b.digest, f"digest ignores {path}"


def test_variable_order_does_not_matter() -> None:
    env = BASE_A["environment"]
    reordered = {**BASE_A, "environment": {**env, "variables": dict(reversed(list(env["variables"].items())))}}
    assert list(reordered["environment"]["variables"]) != list(env["variables"])
    assert spec_from_data(reordered).digest == spec_from_data(BASE_A).digest


def test_tuxiv_env_list_order_does_not_matter() -> None:
    doc = "entrypoint: [python x.py]\njob:\n  name: t\n  env: [{}]\n"
    one = load_tuxiv(doc.format("A=1, B=2, C=3"))
    two = load_tuxiv(doc.format("C=3, A=1, B=2"))
    as_dict = load_tuxiv("entrypoint: [python x.py]\njob:\n  name: t\n  env: {B: '2', C: '3', A: '1'}\n")
    assert one.digest == two.digest == as_dict.digest


def test_entrypoint_line_order_matters() -> None:
    shell = {**BASE_B, "entrypoint": {"shell": ["python train.py", "cd src"]}}
    assert spec_from_data(shell).digest != spec_from_data(BASE_B).digest
    argv = {**BASE_A, "entrypoint": {"argv": ["python", "--lr", "train.py", "0.1"]}}
    assert spec_from_data(argv).digest != spec_from_data(BASE_A).digest


def test_option_value_types_are_distinguished() -> None:
    digests = {
        spec_from_data({**BASE_A, "runtime": {"kind": "torchrun", "options": {"x": v}}}).digest
        for v in (1, 1.0, "1", True)
    }
    assert len(digests) == 4


def test_equal_specs_written_differently_have_one_digest() -> None:
    a = spec_from_data({**BASE_A, "resources": {**BASE_A["resources"], "memory": "64G", "time_limit": "2h"}})
    b = spec_from_data({**BASE_A, "resources": {**BASE_A["resources"], "memory": 65536, "time_limit": 7200}})
    assert a.digest == b.digest


def test_digest_shape() -> None:
    spec = spec_from_data(BASE_A)
    assert len(spec.digest) == 64 and int(spec.digest, 16) >= 0
    body = json.loads(canonical_json(spec))
    assert body["schema"] == 1 and body["spec"]["name"] == "train-1"
    assert body["spec"]["qos"]["class"] == "low"  # aliases, as the file is written


_CHILD = """
import json, sys
from tacc_hub.schema import spec_from_data
print(spec_from_data(json.loads(sys.stdin.read())).digest)
"""


@pytest.mark.parametrize("base", [BASE_A, BASE_B], ids=["git-argv-pip", "snapshot-shell-conda"])
def test_digest_is_the_same_in_other_processes(base: dict[str, Any]) -> None:
    data = copy.deepcopy(base)
    if "variables" in data["environment"]:
        data["environment"]["variables"] = {f"V{i}": str(i) for i in range(50)}
    here = spec_from_data(data).digest
    seen = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD], input=json.dumps(data), env=env,
            capture_output=True, text=True, check=True, timeout=120,
        )
        seen.add(out.stdout.strip())
    assert seen == {here}


def test_specs_without_requeue_keep_their_digest() -> None:
    # qos.requeue came later; it is left out of the canonical form while False, so the digests of
    # specs that do not set it are the ones they had before (pinned here).
    plain = spec_from_data({"name": "t", "entrypoint": {"argv": ["python", "a.py"]}})
    off = spec_from_data({"name": "t", "entrypoint": {"argv": ["python", "a.py"]}, "qos": {"requeue": False}})
    assert '"requeue"' not in canonical_json(plain)
    assert spec_digest(plain) == spec_digest(off) == "94e5fafa25e5c07b9b5c39f98044134eada49b7521816f599a3c49b22a9ce9c5"
    on = spec_from_data({"name": "t", "entrypoint": {"argv": ["python", "a.py"]}, "qos": {"requeue": True}})
    assert spec_digest(on) != spec_digest(plain)
    assert spec_from_data(on.model_dump(mode="json", by_alias=True)).qos.requeue is True


def test_depends_on_is_not_in_the_digest() -> None:
    base = {k: v for k, v in BASE_A.items() if k != "depends_on"}
    without = spec_from_data(base)
    for deps in ([{"task": 7}], [{"task": 8, "when": "failed"}], [{"array": 9, "when": "any_finished"}]):
        with_deps = spec_from_data({**base, "depends_on": deps})
        assert with_deps.depends_on and with_deps.model_dump() != without.model_dump()
        assert with_deps.digest == without.digest
    assert '"depends_on"' not in canonical_json(spec_from_data({**base, "depends_on": [{"task": 7}]}))


def test_grid_order_as_written_is_in_the_digest() -> None:
    # the product's order follows the names as written, so two orders are two different arrays
    a = spec_from_data({**BASE_C, "array": {"grid": {"lr": [0.1], "bs": [32, 64]}}})
    b = spec_from_data({**BASE_C, "array": {"grid": {"bs": [32, 64], "lr": [0.1]}}})
    assert a.digest != b.digest


def test_array_elements_have_distinct_digests_that_survive_a_reload() -> None:
    from tacc_hub.schema.arrays import expand

    for base in (BASE_A, BASE_B, BASE_C):
        els = expand(spec_from_data(base))
        assert len(els) == len({e.digest for e in els}) > 1
        for e in els:
            assert spec_from_data(e.model_dump(mode="json", by_alias=True)).digest == e.digest
        assert spec_from_data(base).digest not in {e.digest for e in els}


def test_new_fields_left_out_keep_old_digests() -> None:
    plain = spec_from_data({"name": "t", "entrypoint": {"argv": ["python", "a.py"]}})
    empty = spec_from_data({"name": "t", "entrypoint": {"argv": ["python", "a.py"]}, "depends_on": [], "inputs": []})
    pinned = "94e5fafa25e5c07b9b5c39f98044134eada49b7521816f599a3c49b22a9ce9c5"
    assert spec_digest(plain) == spec_digest(empty) == pinned
