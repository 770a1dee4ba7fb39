"""TaskSpec validation, tacc.yaml reading, safe YAML loading and the JSON Schema export."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tacc_hub.schema import (
    GitCode,
    SpecError,
    TaskSpec,
    json_schema,
    load_tacc_yaml,
    load_yaml,
    spec_from_data,
)
from tacc_hub.schema.yamlsafe import MAX_YAML_BYTES

BASE: dict[str, Any] = {"name": "job", "entrypoint": {"argv": ["python", "train.py"]}}


def with_(**fields: Any) -> dict[str, Any]:
    return {**BASE, **fields}


def fields_of(exc: pytest.ExceptionInfo[SpecError]) -> list[str]:
    return [f for f, _ in exc.value.errors]


# --- validation errors name the field ------------------------------------------------

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("negative gpus", with_(resources={"gpus_per_node": -1}), "resources.gpus_per_node"),
    ("zero nodes", with_(resources={"nodes": 0}), "resources.nodes"),
    ("absurd nodes", with_(resources={"nodes": 10**6}), "resources.nodes"),
    ("time forever", with_(resources={"time_limit": "forever"}), "resources.time_limit"),
    ("time over 90 days", with_(resources={"time_limit": "91d"}), "resources.time_limit"),
    ("memory lots", with_(resources={"memory": "lots"}), "resources.memory"),
    ("memory in bytes", with_(resources={"memory": "16B"}), "resources.memory"),
    ("memory digits flood", with_(resources={"memory": "9" * 5000}), "resources.memory"),
    ("unknown top-level field", with_(gpus=2), "gpus"),
    ("unknown nested field", with_(resources={"gpu": 2}), "resources.gpu"),
    ("unknown qos field", with_(qos={"klass": "low"}), "qos.klass"),
    ("name with rm", with_(name="x; rm -rf /"), "name"),
    ("name with $()", with_(name="$(reboot)"), "name"),
    ("name with trailing newline", with_(name="job\n"), "name"),
    ("name too long", with_(name="a" * 65), "name"),
    ("env name with dash", with_(environment={"variables": {"A-B": "1"}}), "environment.variables.A-B"),
    ("env name with newline", with_(environment={"variables": {"A\n": "1"}}), "environment.variables.A\n"),
    (
        "reserved env var",
        with_(environment={"variables": {"CUDA_VISIBLE_DEVICES": "0"}}),
        "environment.variables.CUDA_VISIBLE_DEVICES",
    ),
    (
        "reserved env prefix",
        with_(environment={"variables": {"TACC_WORKDIR": "/"}}),
        "environment.variables.TACC_WORKDIR",
    ),
    ("NUL in env value", with_(environment={"variables": {"A": "x\x00y"}}), "environment.variables.A"),
    (
        "unpinned requirement",
        with_(environment={"requirements": ["numpy==2.0", "torch"]}),
        "environment.requirements[1]",
    ),
    ("pip option", with_(environment={"requirements": ["--index-url=http://x"]}), "environment.requirements[0]"),
    (
        "pip option after a carriage return",
        with_(environment={"requirements": ["numpy==2.0 ; python_version>'3'\r--index-url http://x"]}),
        "environment.requirements[0]",
    ),
    ("bad python", with_(environment={"python": "2.7"}), "environment.python"),
    (
        "pip and conda",
        with_(environment={"requirements": ["numpy==2.0"], "conda": {"dependencies": ["numpy"]}}),
        "environment",
    ),
    (
        "bad conda dependency",
        with_(environment={"conda": {"dependencies": ["x; rm"]}}),
        "environment.conda.dependencies[0]",
    ),
    ("module with space", with_(environment={"modules": ["cuda 12"]}), "environment.modules[0]"),
    ("output leaves workdir", with_(outputs=["ok", "a/../../b"]), "outputs[1]"),
    ("absolute output", with_(outputs=["/etc/passwd"]), "outputs[0]"),
    ("workdir ..", with_(workdir=".."), "workdir"),
    ("absolute workdir", with_(workdir="/tmp"), "workdir"),
    ("home workdir", with_(workdir="~/x"), "workdir"),
    ("log_file ..", with_(log_file="../x.log"), "log_file"),
    ("absolute log_file", with_(log_file="/var/log/x"), "log_file"),
    ("duplicate outputs", with_(outputs=["a", "./a"]), "outputs"),
    ("duplicate datasets", with_(datasets=["mnist", "mnist"]), "datasets"),
    ("bad dataset name", with_(datasets=["../x"]), "datasets[0]"),
    ("git url option", with_(code={"kind": "git", "url": "-uexploit", "commit": "abcdef0"}), "code.url"),
    ("git url newline", with_(code={"kind": "git", "url": "https://h/r\n", "commit": "abcdef0"}), "code.url"),
    ("git ext transport", with_(code={"kind": "git", "url": "ext::sh -c x", "commit": "abcdef0"}), "code.url"),
    ("non-hex commit", with_(code={"kind": "git", "url": "https://h/r", "commit": "main"}), "code.commit"),
    ("snapshot digest", with_(code={"kind": "snapshot", "digest": "a" * 64 + "\n"}), "code.digest"),
    ("unknown code kind", with_(code={"kind": "svn"}), "code"),
    ("argv and shell", with_(entrypoint={"argv": ["a"], "shell": ["b"]}), "entrypoint"),
    ("neither argv nor shell", with_(entrypoint={}), "entrypoint"),
    ("empty argv", with_(entrypoint={"argv": []}), "entrypoint.argv"),
    ("NUL in argv", with_(entrypoint={"argv": ["a\x00b"]}), "entrypoint.argv[0]"),
    ("runtime name with a space", with_(runtime={"kind": "slurm run"}), "runtime.kind"),
    ("runtime name with a shell character", with_(runtime={"kind": "run;id"}), "runtime.kind"),
    ("option value not scalar", with_(runtime={"options": {"x": [1]}}), "runtime.options.x"),
    ("priority range", with_(qos={"priority": 1000}), "qos.priority"),
    ("qos class", with_(qos={"class": "urgent"}), "qos.class"),
    ("missing name", {"entrypoint": {"argv": ["a"]}}, "name"),
]


@pytest.mark.parametrize(("data", "field"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_spec_names_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_data(data)
    assert field in fields_of(exc), exc.value.errors
    assert all(msg for _, msg in exc.value.errors)


def test_spec_error_as_json_and_message() -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_data(with_(resources={"nodes": 0, "gpus_per_node": -1}))
    body = exc.value.as_json()
    assert {e["field"] for e in body} == {"resources.nodes", "resources.gpus_per_node"}
    assert "resources.nodes: " in str(exc.value)


def test_union_member_labels_stay_out_of_field_names() -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_data(with_(runtime={"options": {"x": {"a": 1}}}))
    assert set(fields_of(exc)) == {"runtime.options.x"}


# --- values that are allowed ------------------------------------------------------------

HOSTILE = ["$(touch PWNED)", "`touch PWNED2`", "; touch PWNED3", "a'b\"c", "x\ny", "${HOME}", "*", "-rf"]


def test_shell_metacharacters_are_allowed_in_argv_env_values_and_shell_lines() -> None:
    spec = spec_from_data(with_(entrypoint={"argv": HOSTILE}, environment={"variables": {"V": "$(reboot); `x`"}}))
    assert spec.entrypoint.argv == HOSTILE
    assert spec.environment.variables == {"V": "$(reboot); `x`"}
    shell = spec_from_data(with_(entrypoint={"shell": ["echo $(date) | tee x; rm -f y"]}))
    assert shell.entrypoint.shell == ["echo $(date) | tee x; rm -f y"]


def test_defaults() -> None:
    spec = spec_from_data(BASE)
    assert spec.code.kind == "local"
    assert spec.workdir == "."
    assert (spec.resources.nodes, spec.resources.gpus_per_node, spec.resources.time_limit) == (1, 0, 3600)
    assert spec.runtime.kind == "plain"
    assert spec.qos.qos_class == "normal"


@pytest.mark.parametrize(
    ("text", "mib"),
    [("512M", 512), ("16G", 16384), ("16GiB", 16384), ("16gb", 16384), ("1T", 1024 * 1024), ("2048", 2048),
     ("1536K", 2), ("1K", 1), (" 8 G ", 8192), (300, 300)],
)
def test_memory_sizes(text: object, mib: int) -> None:
    assert spec_from_data(with_(resources={"memory": text})).resources.memory == mib


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 5400), ("90s", 90), ("90m", 5400), ("2h", 7200), ("1d", 86400), ("10:30", 630),
     ("1:30:00", 5400), ("2-00", 172800), ("1-02:03", 93780), ("1-02:03:04", 93784), (45, 45)],
)
def test_time_limits(text: object, seconds: int) -> None:
    assert spec_from_data(with_(resources={"time_limit": text})).resources.time_limit == seconds


def test_paths_are_normalized() -> None:
    spec = spec_from_data(with_(workdir="./src//app/", outputs=["out/./ckpt"], log_file="logs/../run.log"))
    assert (spec.workdir, spec.outputs, spec.log_file) == ("src/app", ["out/ckpt"], "run.log")


@pytest.mark.parametrize(
    "req",
    ["torch==2.3.1", "torch === 2.3.1", "Flask[async]==3.0.0", "numpy==2.0; python_version>='3.10'",
     "pkg @ https://example.org/pkg-1.0.tar.gz"],
)
def test_pinned_requirements_are_accepted(req: str) -> None:
    assert spec_from_data(with_(environment={"requirements": [req]})).environment.requirements == [req]


def test_git_code_accepts_the_usual_url_forms() -> None:
    for url in ["https://github.com/a/b.git", "git@github.com:a/b.git", "ssh://git@h/r", "file:///srv/r"]:
        code = spec_from_data(with_(code={"kind": "git", "url": url, "commit": "0123abc"})).code
        assert isinstance(code, GitCode) and code.url == url


def test_qos_class_by_alias_and_by_name_is_the_same_spec() -> None:
    a = spec_from_data(with_(qos={"class": "low"}))
    b = spec_from_data(with_(qos={"qos_class": "low"}))
    assert a == b and a.digest == b.digest
    assert a.model_dump(by_alias=True)["qos"]["class"] == "low"


def test_spec_is_frozen() -> None:
    spec = spec_from_data(BASE)
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]


# --- tacc.yaml ---------------------------------------------------------------------------


def test_tacc_yaml_conveniences() -> None:
    spec = load_tacc_yaml(
        "name: demo\ncode: src\nentrypoint: python train.py --lr 0.1\n"
        "resources: {gpus_per_node: 2, time_limit: 2h, memory: 16G}\nqos: {class: interactive}\n"
    )
    assert spec.code.kind == "local" and spec.code.path == "src"
    assert spec.entrypoint.shell == ["python train.py --lr 0.1"] and spec.entrypoint.argv is None
    assert (spec.resources.gpus_per_node, spec.resources.time_limit, spec.resources.memory) == (2, 7200, 16384)
    assert spec.qos.qos_class == "interactive"
    lines = load_tacc_yaml("name: demo\nentrypoint: [cd x, make]\n")
    assert lines.entrypoint.shell == ["cd x", "make"]
    exact = load_tacc_yaml("name: demo\nentrypoint: {argv: [python, '-c', 'print(1)']}\n")
    assert exact.entrypoint.argv == ["python", "-c", "print(1)"]


def test_tacc_yaml_errors_name_the_field() -> None:
    with pytest.raises(SpecError) as exc:
        load_tacc_yaml("name: demo\nentrypoint: x\nresources:\n  nodes: many\n")
    assert fields_of(exc) == ["resources.nodes"]


@pytest.mark.parametrize("doc", ["- a\n- b\n", "just text\n", "42\n", "null\n"])
def test_tacc_yaml_must_be_a_mapping(doc: str) -> None:
    with pytest.raises(SpecError, match="mapping"):
        load_tacc_yaml(doc)


# --- hostile YAML --------------------------------------------------------------------------

BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)

BAD_YAML: list[tuple[str, str | bytes, str]] = [
    ("malformed", "name: [unclosed\n", "not valid YAML"),
    ("bad indentation", "a:\n  b: 1\n c: 2\n", "not valid YAML"),
    ("billion laughs", BILLION_LAUGHS, "aliases"),
    ("merge key", "base: &b {x: 1}\nother:\n  <<: *b\n", "aliases"),
    ("multiple documents", "name: a\n---\nname: b\n", "exactly one YAML document, found 2"),
    ("empty", "", "exactly one YAML document, found 0"),
    ("too large (str)", "x: " + "a" * MAX_YAML_BYTES + "\n", "larger than"),
    ("too large (bytes)", b"x: " + b"a" * MAX_YAML_BYTES, "larger than"),
    ("too large once encoded", "x: " + "\u00e9" * (MAX_YAML_BYTES // 2 + 1), "larger than"),
    ("not UTF-8", b"name: \xff\xfe\n", "not UTF-8"),
    ("deep nesting", "[" * 200_000, "nested deeper"),
    ("huge integer", "n: " + "9" * 100_000 + "\n", "cannot be read"),
    ("python tag", "!!python/object/apply:os.system ['touch PWNED']\n", "not valid YAML"),
    ("duplicate key", "name: a\nname: b\n", "duplicate key"),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_YAML], ids=[c[0] for c in BAD_YAML])
def test_hostile_yaml_is_refused_quickly(text: str | bytes, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_yaml(text, "tacc.yaml")
    assert message in str(exc.value)
    assert exc.value.errors[0][0] == ""  # about the whole document


def test_yaml_plain_data_is_read() -> None:
    assert load_yaml(b"a: {b: [1, 2.5, true, null]}\n") == {"a": {"b": [1, 2.5, True, None]}}
    nested: list[object] = []
    for _ in range(29):
        nested = [nested]
    assert load_yaml("k: " + "[" * 30 + "]" * 30) == {"k": nested}  # realistic nesting is fine


# --- JSON Schema ------------------------------------------------------------------------


def test_json_schema_export() -> None:
    schema = json.loads(json.dumps(json_schema()))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object"
    expected = {f.alias or name for name, f in TaskSpec.model_fields.items()}
    assert set(schema["properties"]) == expected
    assert {"name", "entrypoint", "resources", "environment", "code", "runtime"} <= expected
    assert set(schema["required"]) == {"name", "entrypoint"}
    assert schema.get("additionalProperties") is False
