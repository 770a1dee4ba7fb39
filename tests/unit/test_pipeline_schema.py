"""Pipelines in the schema (issue 20): steps, needs, order, inputs from earlier steps, the client's loader."""

from __future__ import annotations

from typing import Any

import pytest

from tacc_hub.schema import (
    PipelineSpec,
    SpecError,
    is_pipeline,
    load_pipeline,
    load_tacc_yaml,
    load_yaml,
    pipeline_from_data,
)

PIPELINE = """
name: prep-train-eval
steps:
  - name: prepare
    spec: steps/prepare.yaml
  - name: train
    needs: [prepare]
    spec:
      entrypoint: {argv: [python, train.py, "--lr={lr}"]}
      array: {lr: [0.1, 0.01]}
      inputs: [{from: prepare, path: outputs/data}]
  - name: evaluate
    needs: [train]
    entrypoint: python eval.py
    inputs: [{from: prepare, path: outputs/data, to: data}, {from: train, path: outputs/model}]
  - name: report
    needs: [evaluate]
    spec: report/tuxiv.conf
"""
FILES = {
    "proj/steps/prepare.yaml": "name: prep\ncode: .\nentrypoint: python prep.py\n",
    "proj/report/tuxiv.conf": "entrypoint: [python report.py]\njob:\n  name: report\n",
}


def read(path: str) -> str:
    try:
        return FILES[path]
    except KeyError:
        raise FileNotFoundError(2, "No such file or directory", path) from None


def load(doc: Any) -> PipelineSpec:
    return load_pipeline(doc, base_dir="proj", read=read)


def test_load_a_pipeline_file() -> None:
    doc = load_yaml(PIPELINE)
    assert is_pipeline(doc) and not is_pipeline({"steps": [], "entrypoint": "x"}) and not is_pipeline([])
    p = load(doc)
    assert p.name == "prep-train-eval"
    assert [s.name for s in p.order()] == ["prepare", "train", "evaluate", "report"]
    prepare, train, evaluate, report = p.steps
    assert prepare.spec.name == "prep" and prepare.spec.entrypoint.shell == ["python prep.py"]
    assert prepare.spec.code.kind == "local" and prepare.spec.code.path == "steps"  # relative to the pipeline file
    assert train.spec.name == "train" and train.spec.array is not None  # a sweep step; name from the step
    assert evaluate.spec.name == "evaluate" and evaluate.needs == ["train"]
    assert [(i.from_, i.path, i.to) for i in evaluate.spec.inputs] == [
        ("prepare", "outputs/data", "data"), ("train", "outputs/model", None)]
    assert report.spec.name == "report" and report.spec.code.path == "report"
    # what the client sends, the service reads back as the same pipeline
    sent = p.model_dump(mode="json", by_alias=True)
    assert sent["steps"][2]["spec"]["inputs"][0]["from"] == "prepare"
    assert PipelineSpec.model_validate(sent) == p == pipeline_from_data(sent)


def test_order_is_topological_and_stable() -> None:
    steps = [{"name": n, "needs": needs, "entrypoint": "true"} for n, needs in [
        ("d", ["b", "c"]), ("c", ["a"]), ("b", ["a"]), ("a", []), ("e", [])]]
    p = load({"name": "p", "steps": steps})
    order = [s.name for s in p.order()]
    assert order == ["a", "e", "c", "b", "d"]
    assert p.ancestors()["d"] == {"a", "b", "c"} and p.ancestors()["a"] == set()


@pytest.mark.parametrize(("steps", "field", "message"), [
    ([("a", ["b"]), ("b", ["a"])], "steps[0].needs", "cycle: a -> b -> a"),
    ([("a", []), ("b", ["c"]), ("c", ["d"]), ("d", ["b"])], "steps[1].needs", "cycle: b -> c -> d -> b"),
    ([("a", ["a"])], "steps[0].needs", "needs itself"),
    ([("a", ["zz"])], "steps[0].needs", "no step is named 'zz'"),
    ([("a", []), ("b", ["a", "a"])], "steps[1].needs", "names a step twice"),
    ([("a", []), ("a", [])], "steps[1].name", "named twice"),
])
def test_bad_needs(steps: list[tuple[str, list[str]]], field: str, message: str) -> None:
    doc = {"name": "p", "steps": [{"name": n, "needs": needs, "entrypoint": "true"} for n, needs in steps]}
    for attempt in (lambda: load(doc), lambda: pipeline_from_data(load_pipeline_inline(doc))):
        with pytest.raises(SpecError) as exc:
            attempt()
        assert exc.value.errors[0][0] == field, exc.value.errors
        assert message in exc.value.errors[0][1]


def load_pipeline_inline(doc: dict[str, Any]) -> dict[str, Any]:
    """The same steps as the service would get them (inline specs, no validation yet)."""
    return {"name": doc["name"], "steps": [
        {"name": s["name"], "needs": s["needs"], "spec": {"name": s["name"], "entrypoint": {"shell": ["true"]}}}
        for s in doc["steps"]]}


def test_input_from_must_be_needed() -> None:
    steps = [{"name": "a", "entrypoint": "true"}, {"name": "b", "entrypoint": "true"},
             {"name": "c", "needs": ["b"], "entrypoint": "true", "inputs": [{"from": "a", "path": "out"}]}]
    with pytest.raises(SpecError) as exc:
        load({"name": "p", "steps": steps})
    assert exc.value.errors[0][0] == "steps[2].spec.inputs[0].from"
    assert "does not need 'a'" in exc.value.errors[0][1]
    # through another step it is fine
    steps[1]["needs"] = ["a"]
    assert load({"name": "p", "steps": steps}).steps[2].spec.inputs[0].from_ == "a"


@pytest.mark.parametrize(("doc", "field"), [
    ({"name": "p", "steps": [{"name": "a", "entrypoint": "x", "resources": {"gpus_per_node": 99}}]},
     "steps[0].spec.resources.gpus_per_node"),
    ({"name": "p", "steps": [{"name": "a", "spec": "missing.yaml"}]}, "steps[0].spec"),
    ({"name": "p", "steps": [{"name": "a", "spec": {"entrypoint": "x"}, "gpus": 1}]}, "steps[0].gpus"),
    ({"name": "p", "steps": []}, "steps"),
    ({"name": "p", "steps": ["a.yaml"]}, "steps[0]"),
    ({"name": "p", "steps": [{"name": "a", "entrypoint": "x"}], "extra": 1}, "extra"),
    ({"name": "bad name", "steps": [{"name": "a", "entrypoint": "x"}]}, "name"),
    ({"steps": [{"name": "a/..", "entrypoint": "x"}]}, "steps[0].name"),
    ({"steps": [{"name": "a", "entrypoint": "x", "inputs": [{"from": "a", "path": "../etc"}]}]},
     "steps[0].spec.inputs[0].path"),
])
def test_errors_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as exc:
        load(doc)
    assert exc.value.errors[0][0] == field, exc.value.errors


def test_a_bad_step_file_is_named() -> None:
    FILES["proj/bad.yaml"] = "name: x\nentrypoint: python x\nresources: {nodes: 0}\n"
    try:
        with pytest.raises(SpecError) as exc:
            load({"steps": [{"name": "a", "spec": "bad.yaml"}]})
    finally:
        del FILES["proj/bad.yaml"]
    assert exc.value.errors[0][0] == "steps[0].spec.resources.nodes"
    assert exc.value.errors[0][1].startswith("bad.yaml: ")
    with pytest.raises(SpecError) as exc:
        load({"steps": [{"name": "a", "spec": "steps/prepare.yaml"}, {"name": "b", "spec": "missing.yaml"}]})
    assert exc.value.errors == [("steps[1].spec", "cannot read 'missing.yaml': No such file or directory")]


def test_no_reader_no_files() -> None:
    with pytest.raises(SpecError, match="give it inline"):
        load_pipeline({"steps": [{"name": "a", "spec": "a.yaml"}]})
    assert load_pipeline({"steps": [{"name": "a", "entrypoint": "true"}]}).name == "pipeline"


def test_a_pipeline_file_read_as_one_task_says_what_it_is() -> None:
    with pytest.raises(SpecError) as exc:
        load_tacc_yaml(PIPELINE)
    assert exc.value.errors[0][0] == "steps" and "pipeline file" in exc.value.errors[0][1]
