"""tuxiv.conf's (and sbatch's) ``array=`` and ``dependency=`` (issue 20), and the tacc_hub extensions
``array``, ``depends_on`` and ``inputs`` beside a tuxiv.conf's four parts."""

from __future__ import annotations

from typing import Any

import pytest

from tacc_hub.schema import SpecError, load_tuxiv, parse_sbatch, spec_from_tuxiv
from tacc_hub.schema.arrays import elements, expand


def tuxiv(general: list[str], **extra: Any) -> dict[str, Any]:
    return {"entrypoint": ["python x.py --i $TACC_ARRAY_INDEX"], "job": {"name": "t", "general": general}, **extra}


def deps(spec: Any) -> list[tuple[int | None, int | None, str | None]]:
    return [(d.task, d.array, d.when) for d in spec.depends_on]


def test_array_with_max_running() -> None:
    spec = spec_from_tuxiv(tuxiv(["nodes=1", "array=0-15%4"]))
    assert spec.array is not None and (spec.array.range, spec.array.max_running) == ("0-15", 4)
    assert [i for i, _ in elements(spec.array)] == list(range(16))
    els = expand(spec)  # the shell line is left alone; the element reads $TACC_ARRAY_INDEX
    assert len(els) == 16 and els[3].entrypoint.shell == ["python x.py --i $TACC_ARRAY_INDEX"]
    assert parse_sbatch(["--array=1,3,8-10:2"]) == {"array": {"range": "1,3,8-10:2"}}


def test_dependency_types() -> None:
    spec = spec_from_tuxiv(tuxiv(["dependency=afterok:12:13,afterany:14,afternotok:15", "--dependency=afterok:12:16"]))
    assert deps(spec) == [(12, None, "succeeded"), (13, None, "succeeded"), (14, None, "finished"),
                          (15, None, "failed"), (16, None, "succeeded")]
    assert spec.array is None


@pytest.mark.parametrize(("option", "named"), [
    ("array=0-x", "is not N, A-B or A-B:S"),
    ("array=-3", "is not N, A-B or A-B:S"),
    ("array=0-20000", "at most 10000"),
    ("array=0-3:0", "step of 0"),
    ("array=0-3%0", "max_running"),
    ("array=0-3 --uid=0", "uid"),
    ("array=$(id)", "is not N, A-B or A-B:S"),
    ("dependency=singleton", "singleton is not supported"),
    ("dependency=aftercorr:12", "aftercorr is not supported"),
    ("dependency=afterburstbuffer:12", "afterburstbuffer is not supported"),
    ("dependency=after:12", "after is not supported"),
    ("dependency=afterok:12?afterany:13", "'?' (any of) is not supported"),
    ("dependency=afterok:12_3", "depends_on: [{array: ID}]"),
    ("dependency=afterok:12+5", "delay"),
    ("dependency=afterok", "needs task ids"),
    ("dependency=afterok:", "needs task ids"),
    ("dependency=afterok:12:", "is not a task id"),
    ("dependency=afterok:0", "is not a task id"),
    ("dependency=afterok:$(id)", "is not a task id"),
    ("dependency=expand:12", "not a dependency type"),
])
def test_bad_array_and_dependency_name_the_entry(option: str, named: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv(tuxiv(["nodes=1", option]))
    [(field, message)] = exc.value.errors
    assert field == "job.general[1]"
    assert named in message, message


def test_errors_give_the_line() -> None:
    text = "entrypoint: [python x.py]\njob:\n  general:\n    - nodes=1\n    - dependency=singleton\n"
    with pytest.raises(SpecError, match=r"tuxiv\.conf line 5: dependency: singleton"):
        load_tuxiv(text)


def test_extensions_array_depends_on_inputs() -> None:
    spec = spec_from_tuxiv(tuxiv([], array={"lr": [0.1, 0.01], "bs": [32]},
                                 depends_on=[{"array": 5}], inputs=[{"task": 4, "path": "outputs/data"}]))
    assert spec.array is not None and spec.array.grid == {"lr": [0.1, 0.01], "bs": [32]}
    assert deps(spec) == [(None, 5, "all_succeeded")]
    assert [(i.task, i.path, i.to) for i in spec.inputs] == [(4, "outputs/data", None)]
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv(tuxiv(["array=0-3"], array="0-4"))
    assert exc.value.errors[0][0] == "job.general[0]" and "give array once" in exc.value.errors[0][1]
    with pytest.raises(SpecError) as exc:
        spec_from_tuxiv(tuxiv([], inputs=[{"task": 4, "path": "/etc/passwd"}]))
    assert exc.value.errors[0][0] == "inputs[0].path"
