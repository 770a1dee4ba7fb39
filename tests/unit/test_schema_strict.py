"""Issue 18: the schema against hostile input. Unicode digits, booleans for numbers, smuggled sbatch options,
non-scalar tuxiv env values, environment variables that change how programs start, YAML node floods."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tacc_hub.schema.yamlsafe as yamlsafe
from tacc_hub.schema import SpecError, TaskSpec, load_tacc_yaml, load_tuxiv, load_yaml, parse_sbatch, spec_from_data
from tacc_hub.schema.envnames import user_env_name
from tacc_hub.schema.yamlsafe import MAX_YAML_NODES

BASE: dict[str, Any] = {"name": "job", "entrypoint": {"argv": ["python", "train.py"]}}
AR_16 = "\u0661\u0666"  # Arabic-Indic "16"
FULLWIDTH_2 = "\uff12"
DEVANAGARI_2 = "\u0968"


def refused(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as exc:
        spec_from_data({**BASE, **data})
    return exc.value.errors


def only_field(errors: list[tuple[str, str]]) -> str:
    assert len(errors) == 1, errors
    return errors[0][0]


# --- 1. ASCII digits only -------------------------------------------------------------------

UNICODE_DIGITS: list[tuple[str, dict[str, Any], str]] = [
    ("memory", {"resources": {"memory": AR_16 + "G"}}, "resources.memory"),
    ("memory bare", {"resources": {"memory": AR_16}}, "resources.memory"),
    ("memory unicode space", {"resources": {"memory": "16\u2003G"}}, "resources.memory"),
    ("time minutes", {"resources": {"time_limit": AR_16}}, "resources.time_limit"),
    ("time unit", {"resources": {"time_limit": AR_16 + "h"}}, "resources.time_limit"),
    ("time clock", {"resources": {"time_limit": "1:" + AR_16 + ":00"}}, "resources.time_limit"),
    ("time days", {"resources": {"time_limit": DEVANAGARI_2 + "-00"}}, "resources.time_limit"),
    ("nodes string", {"resources": {"nodes": FULLWIDTH_2}}, "resources.nodes"),
    ("gpus string", {"resources": {"gpus_per_node": DEVANAGARI_2}}, "resources.gpus_per_node"),
    ("priority string", {"qos": {"priority": "-" + AR_16}}, "qos.priority"),
    ("python version", {"environment": {"python": "3.\u0661\u0661"}}, "environment.python"),
    ("snapshot size", {"code": {"kind": "snapshot", "digest": "a" * 64, "size": AR_16}}, "code.size"),
]


@pytest.mark.parametrize(("data", "field"), [c[1:] for c in UNICODE_DIGITS], ids=[c[0] for c in UNICODE_DIGITS])
def test_unicode_digits_are_refused(data: dict[str, Any], field: str) -> None:
    assert only_field(refused(data)) == field


@pytest.mark.parametrize(
    "general",
    [["nodes=" + DEVANAGARI_2], ["ntasks-per-node=" + AR_16], ["cpus-per-task=" + FULLWIDTH_2],
     ["gres=gpu:" + DEVANAGARI_2], ["gres=gpu:a100:" + AR_16], ["gpus-per-node=" + AR_16], ["mem=" + AR_16 + "G"],
     ["time=" + AR_16 + ":00:00"], ["ntasks=" + AR_16]],
)
def test_unicode_digits_in_sbatch_options_are_refused(general: list[str]) -> None:
    with pytest.raises(SpecError) as exc:
        parse_sbatch(general)
    assert only_field(exc.value.errors) == "job.general[0]"


def test_ascii_numbers_still_work() -> None:
    spec = spec_from_data({**BASE, "resources": {"nodes": "2", "gpus_per_node": 4, "tasks_per_node": 4.0,
                                                 "memory": "16G", "time_limit": "1-00:00"}, "qos": {"priority": "-5"}})
    r = spec.resources
    assert (r.nodes, r.gpus_per_node, r.tasks_per_node, r.memory, r.time_limit) == (2, 4, 4, 16384, 86400)
    assert spec.qos.priority == -5
    assert parse_sbatch(["nodes=2", "gres=gpu:a100:8", "mem=64G"])["resources.gpus_per_node"] == 8


@pytest.mark.parametrize("text", [" 4", "4 ", "1_000", "4.0", "+4", "0x10", "4\n", ""])
def test_numeric_strings_are_plain_ascii_digits(text: str) -> None:
    assert only_field(refused({"resources": {"nodes": text}})) == "resources.nodes"


# --- 2. booleans are not numbers ----------------------------------------------------------

INT_FIELDS = [("resources", "nodes"), ("resources", "gpus_per_node"), ("resources", "tasks_per_node"),
              ("resources", "cpus_per_task"), ("resources", "memory"), ("resources", "time_limit"),
              ("qos", "priority")]


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize(("part", "name"), INT_FIELDS)
def test_booleans_are_refused_for_int_fields(part: str, name: str, value: bool) -> None:
    errors = refused({part: {name: value}})
    assert only_field(errors) == f"{part}.{name}"
    assert "whole number" in errors[0][1]


def test_booleans_are_refused_for_snapshot_size_and_from_yaml_and_json() -> None:
    assert only_field(refused({"code": {"kind": "snapshot", "digest": "a" * 64, "size": True}})) == "code.size"
    with pytest.raises(SpecError) as exc:
        load_tacc_yaml("name: j\nentrypoint: x\nresources: {gpus_per_node: yes}\n")
    assert only_field(exc.value.errors) == "resources.gpus_per_node"
    with pytest.raises(SpecError) as exc:
        spec_from_data(json.loads(json.dumps({**BASE, "resources": {"nodes": True}})))
    assert only_field(exc.value.errors) == "resources.nodes"


def test_booleans_are_refused_in_tuxiv() -> None:
    with pytest.raises(SpecError) as exc:
        load_tuxiv("entrypoint: [python x.py]\njob:\n  general: [nodes=true]\n")
    assert only_field(exc.value.errors) == "job.general[0]"
    # runtime, qos, ... pass through to the schema: a boolean there is refused by the schema.
    with pytest.raises(SpecError) as exc:
        load_tuxiv("entrypoint: [python x.py]\nqos: {priority: true}\n")
    assert only_field(exc.value.errors) == "qos.priority"


def test_json_schema_of_int_fields_is_still_integer() -> None:
    props = TaskSpec.model_json_schema()["$defs"]["Resources"]["properties"]
    assert props["nodes"] == {"default": 1, "maximum": 1024, "minimum": 1, "title": "Nodes", "type": "integer"}
    assert props["gpus_per_node"]["type"] == "integer"


# --- 3. tuxiv env values are scalars ------------------------------------------------------


@pytest.mark.parametrize("value", ["[1, 2]", "{a: 1}", "[]", "{}"])
def test_tuxiv_env_refuses_lists_and_mappings(value: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_tuxiv(f"entrypoint: [x]\njob:\n  env:\n    OK: yes\n    BAD: {value}\n")
    assert only_field(exc.value.errors) == "job.env.BAD"
    assert "BAD" in exc.value.errors[0][1] and "line 5" in exc.value.errors[0][1]


def test_tuxiv_env_scalars_are_read_as_written() -> None:
    spec = load_tuxiv("entrypoint: [x]\njob:\n  env: {A: 010, B: yes, C: 1.50, D: true, E: , F: text, G: 1}\n")
    assert spec.environment.variables == {"A": "010", "B": "yes", "C": "1.50", "D": "true", "E": "", "F": "text",
                                          "G": "1"}


def test_tuxiv_env_refuses_non_string_names() -> None:
    with pytest.raises(SpecError) as exc:
        load_tuxiv("entrypoint: [x]\njob:\n  env: {1: a}\n")
    assert only_field(exc.value.errors) == "job.env.1"


# --- 4. an sbatch option smuggled into a value ---------------------------------------------


@pytest.mark.parametrize(
    ("entry", "option", "why"),
    [('nodes=1 --wrap="id"', "--wrap", "not allowed"), ("nodes=--uid=0", "--uid", "another user"),
     ("time=1:00:00 --begin=now", "--begin", "not allowed"), ("partition=gpu -w node1", "-w", ""),
     ("job-name=x\t--export=ALL", "--export", "job.env"), ("mem=16G --nodes=99", "--nodes", ""),
     ("nodes=1\x00--wrap=id", "--wrap", "entrypoint"), ("nodes=1;--uid=0", "--uid", "another user"),
     ("output=--chdir=/", "--chdir", "working directory")],
)
def test_a_smuggled_option_is_named(entry: str, option: str, why: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_sbatch(["nodes=1", entry])
    assert only_field(exc.value.errors) == "job.general[1]"
    message = exc.value.errors[0][1]
    assert repr(option) in message and "one option per entry" in message and why in message


@pytest.mark.parametrize("entry", ["output=logs/run-%j.log", "job-name=a-b", "mail-user=x--y@example.org",
                                   "time=1-00:00:00", "mail-type=BEGIN,END", "constraint=a100-80g"])
def test_dashes_inside_values_are_not_options(entry: str) -> None:
    parse_sbatch([entry])


# --- 5. which variables a task may set -------------------------------------------------------

STARTUP = ["BASH_ENV", "ENV", "BASH_FUNC_ls", "BASHOPTS", "SHELLOPTS", "IFS", "PS4", "PROMPT_COMMAND", "CDPATH",
           "GLOBIGNORE", "POSIXLY_CORRECT", "LD_AUDIT", "LD_BIND_NOW", "DYLD_INSERT_LIBRARIES",
           "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONEXECUTABLE",
           "PYTHONSAFEPATH", "PYTHONPYCACHEPREFIX", "PYTHONNEWTHING", "GCONV_PATH", "LOCPATH", "NLSPATH",
           "HOSTALIASES", "RESOLV_HOST_CONF", "GLIBC_TUNABLES", "LUA_INIT", "LUA_PATH_5_4"]
RESERVED = ["PYTHONPATH", "LD_PRELOAD", "PATH", "HOME", "CUDA_VISIBLE_DEVICES", "TACC_WORKDIR",
            "SLURM_JOB_ID", "PET_NNODES", "RANK"]
ALLOWED = ["LD_LIBRARY_PATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONFAULTHANDLER", "PYTHONWARNINGS",
           "MALLOC_ARENA_MAX", "OMP_NUM_THREADS", "NCCL_DEBUG", "WANDB_MODE", "HF_HOME", "_private", "ld_preload",
           "CUDA_HOME", "TORCH_HOME"]


@pytest.mark.parametrize("name", STARTUP)
def test_startup_variables_are_refused_everywhere(name: str) -> None:
    errors = refused({"environment": {"variables": {name: "x"}}})
    assert only_field(errors) == f"environment.variables.{name}"
    assert "changes how programs start" in errors[0][1] and f"export {name}=" in errors[0][1]
    with pytest.raises(SpecError) as exc:
        load_tuxiv(f"entrypoint: [x]\njob:\n  env: {{{name}: x}}\n")
    assert only_field(exc.value.errors) == f"environment.variables.{name}"
    with pytest.raises(SpecError):
        load_tuxiv(f"entrypoint: [x]\njob:\n  env: [{name}=x]\n")


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_variables_are_refused(name: str) -> None:
    errors = refused({"environment": {"variables": {name: "x"}}})
    assert only_field(errors) == f"environment.variables.{name}" and "set by tacc_hub" in errors[0][1]


@pytest.mark.parametrize("name", ALLOWED)
def test_ordinary_variables_are_allowed(name: str) -> None:
    assert user_env_name(name) == name
    assert spec_from_data({**BASE, "environment": {"variables": {name: "1"}}}).environment.variables == {name: "1"}


@pytest.mark.parametrize("name", ["BASH_FUNC_x%%", "A-B", "1A", "A B", "A\n", "", "a" * 129, "\u0410"])
def test_malformed_names_are_refused(name: str) -> None:
    assert only_field(refused({"environment": {"variables": {name: "x"}}})) == f"environment.variables.{name}"
    with pytest.raises(ValueError, match="valid variable name"):
        user_env_name(name)


# --- 8. YAML: a cap on the number of nodes, with either parser ---------------------------------


@pytest.fixture(params=["python", "libyaml"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    loader = yamlsafe._StrictLoader if request.param == "python" else getattr(yamlsafe, "_StrictCLoader", None)
    if loader is None:
        pytest.fail("PyYAML is installed without libyaml")
    monkeypatch.setattr(yamlsafe, "_LOADER", loader)
    yield request.param


def largest_spec_yaml() -> str:
    """Every list and mapping at its max_length: the largest spec the schema allows (pip, not conda)."""
    return ("name: big\nentrypoint:\n  shell:\n" + "".join(f"    - echo {i}\n" for i in range(4096))
            + "environment:\n  requirements:\n" + "".join(f"    - p{i}==1.0\n" for i in range(2048))
            + "  variables:\n" + "".join(f"    V{i}: x\n" for i in range(1024))
            + "  modules:\n" + "".join(f"    - m{i}\n" for i in range(256))
            + "datasets:\n" + "".join(f"  - d{i}\n" for i in range(64))
            + "outputs:\n" + "".join(f"  - o{i}\n" for i in range(256))
            + "runtime:\n  kind: plain\n  options:\n" + "".join(f"    o{i}: 1\n" for i in range(64))
            + "resources: {nodes: 2, gpus_per_node: 8, memory: 64G, time_limit: 2h, partition: gpu}\n"
            + "notify: {email: a@b.org, events: [start, end, fail, preempt, time_limit]}\n")


def test_the_largest_spec_loads_under_the_node_cap(parser: str) -> None:
    spec = load_tacc_yaml(largest_spec_yaml())
    assert len(spec.entrypoint.shell or []) == 4096 and len(spec.environment.variables) == 1024


@pytest.mark.timeout(20)
def test_a_key_flood_stops_at_the_cap(parser: str) -> None:
    body = "".join(f"k{i:05d}: v{i:05d}\n" for i in range(60000))[:900_000]
    start = time.process_time()
    with pytest.raises(SpecError, match=f"more than {MAX_YAML_NODES} values"):
        load_yaml(body, "tacc.yaml")
    assert time.process_time() - start < 5
    flat = "[" + ", ".join("1" for _ in range(MAX_YAML_NODES)) + "]"  # the list itself makes one node more
    with pytest.raises(SpecError, match="more than"):
        load_yaml(flat)
    assert len(load_yaml("[" + ", ".join("1" for _ in range(MAX_YAML_NODES - 1)) + "]")) == MAX_YAML_NODES - 1


HOSTILE_YAML: list[tuple[str, str, str]] = [
    ("alias", "a: &x [1]\nb: *x\n", "aliases"),
    ("merge key", "a: {x: 1}\nb:\n  <<: {y: 2}\n", "merge keys"),
    ("duplicate key", "a: 1\na: 2\n", "duplicate key"),
    ("nested duplicate", "a: {b: 1, b: 2}\n", "duplicate key"),
    ("two documents", "a: 1\n---\nb: 2\n", "exactly one"),
    ("deep flow", "[" * 5000, "nested deeper than 64"),
    ("deep block", "".join("  " * i + "- \n" for i in range(100)), "nested deeper than 64"),
    ("python tag", "!!python/name:os.system\n", "not valid YAML"),
    ("control character", "a: \x07\n", "not valid YAML"),
    ("noncharacter", "a: \ufffe\n", "not valid YAML"),
    ("lone surrogate", "a: \ud800\n", "lone surrogate"),
    ("huge integer", "a: " + "9" * 5000 + "\n", "cannot be read"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in HOSTILE_YAML], ids=[c[0] for c in HOSTILE_YAML])
def test_every_refusal_holds_with_either_parser(parser: str, text: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_yaml(text, "tacc.yaml")
    assert message in str(exc.value)


def test_lines_are_the_same_with_either_parser(parser: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_tuxiv("entrypoint: [x]\njob:\n  general:\n    - nodes=1\n    - nodes=zero\n")
    assert exc.value.errors == [("job.general[1]", "tuxiv.conf line 5: nodes='zero': expected a whole number")]
    spec = load_tuxiv("entrypoint:\n  - python\n  - 010\njob:\n  env: {A: 0x1F}\n")
    assert spec.entrypoint.shell == ["python 010"] and spec.environment.variables == {"A": "0x1F"}
