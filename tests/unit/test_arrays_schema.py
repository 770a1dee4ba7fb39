"""Arrays and sweeps in the schema (issue 20): shorthands, ranges, grids, placeholders, expansion.

What a user writes under ``array:`` and what each element's spec becomes; every value is hostile text
and must reach the program as exactly one argv item, literally.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tacc_hub.schema import SpecError, TaskSpec, spec_from_data
from tacc_hub.schema.arrays import MAX_INDEX, elements, expand, value_text
from tacc_hub.schema.groups import MAX_ARRAY, ArraySpec


def spec(array: Any, argv: list[str] | None = None, shell: list[str] | None = None) -> TaskSpec:
    ep = {"shell": shell} if shell is not None else {"argv": argv or ["python", "x.py"]}
    return spec_from_data({"name": "sweep", "entrypoint": ep, "array": array})


def field_error(exc: pytest.ExceptionInfo[SpecError]) -> dict[str, str]:
    return dict(exc.value.errors)


# --- shorthands and ranges -------------------------------------------------------------


@pytest.mark.parametrize(("written", "indices", "max_running"), [
    ("0-15%4", list(range(16)), 4),
    ("0-15", list(range(16)), None),
    ("0-15:4", [0, 4, 8, 12], None),
    ("1,3,8-10", [1, 3, 8, 9, 10], None),
    ("7", [7], None),
    ("10,2", [2, 10], None),  # Slurm's order: ascending
    ({"range": "0-3%2"}, [0, 1, 2, 3], 2),
    ({"range": "0-3", "max_running": 1}, [0, 1, 2, 3], 1),
])
def test_ranges(written: Any, indices: list[int], max_running: int | None) -> None:
    s = spec(written)
    assert s.array is not None and s.array.max_running == max_running
    assert "%" not in (s.array.range or "")
    assert [i for i, _ in elements(s.array)] == indices
    assert all(p == {} for _, p in elements(s.array))


@pytest.mark.parametrize(("written", "message"), [
    ("0-x", "is not N, A-B or A-B:S"),
    ("-1", "is not N, A-B or A-B:S"),
    ("0--3", "is not N, A-B or A-B:S"),
    ("1;rm -rf /", "is not N, A-B or A-B:S"),
    ("", "is empty"),
    ("5-2", "ends before it starts"),
    ("0-8:0", "step of 0"),
    ("0-15%", "is not N, A-B or A-B:S"),
    (f"0-{MAX_INDEX + 1}", "names an index over"),
])
def test_junk_ranges_are_refused_naming_array_range(written: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec(written)
    errors = field_error(exc)
    assert "array.range" in errors, errors
    assert message in errors["array.range"]


def test_too_many_elements_refused_before_building_them() -> None:
    t = time.perf_counter()
    with pytest.raises(SpecError) as exc:
        spec(f"0-{MAX_INDEX}")  # a billion numbers: counted, never built
    assert time.perf_counter() - t < 0.5
    assert f"at most {MAX_ARRAY}" in str(exc.value) and "array.range" in str(exc.value)
    with pytest.raises(SpecError, match="the product of its lists"):
        spec({f"p{i}": list(range(10)) for i in range(6)})  # 10**6
    with pytest.raises(SpecError):
        spec(list(range(MAX_ARRAY + 1)))
    assert len(elements(spec(f"0-{MAX_ARRAY - 1}").array)) == MAX_ARRAY  # type: ignore[arg-type]


def test_an_index_named_twice_is_refused() -> None:
    with pytest.raises(SpecError, match="index 3 twice"):
        spec("0-5,3")


def test_values_and_grid() -> None:
    v = spec(["a", 2, 0.5, True])
    assert v.array is not None and v.array.values == ["a", 2, 0.5, True]
    assert elements(v.array) == [(0, {"value": "a"}), (1, {"value": 2}), (2, {"value": 0.5}), (3, {"value": True})]
    named = spec({"values": [1, 2], "param": "seed"})
    assert named.array is not None and elements(named.array) == [(0, {"seed": 1}), (1, {"seed": 2})]
    # the product in the order written (first name slowest), not in sorted order
    g = spec({"lr": [1e-3, 3e-4], "bs": [32, 64], "max_running": 2})
    assert g.array is not None and g.array.max_running == 2
    assert elements(g.array) == [
        (0, {"lr": 1e-3, "bs": 32}), (1, {"lr": 1e-3, "bs": 64}),
        (2, {"lr": 3e-4, "bs": 32}), (3, {"lr": 3e-4, "bs": 64}),
    ]
    other = spec({"bs": [32, 64], "lr": [1e-3, 3e-4]})
    assert other.array is not None and elements(other.array)[1] == (1, {"bs": 32, "lr": 3e-4})
    # the stored form round-trips and keeps the order
    again = ArraySpec.model_validate(g.array.model_dump())
    assert elements(again) == elements(g.array)


@pytest.mark.parametrize(("written", "message"), [
    ({"lr": []}, "array.grid.lr has no values"),
    ({"lr": [1], "LR": [2]}, "both TACC_PARAM_LR"),
    ({"index": [1, 2]}, "'index' is the element's index"),
    ({"values": [1], "param": "index"}, "'index' is the element's index"),
    ({"range": "0-3", "param": "x"}, "array.param names the parameter of array.values"),
    ({"range": "0-3", "values": [1]}, "exactly one of"),
    ({"bad-name": [1]}, "should match pattern"),
    ({"lr": [{"x": 1}]}, ""),
    ([None], ""),
])
def test_bad_arrays(written: Any, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        spec(written)
    assert message in str(exc.value)
    assert all(f.startswith("array") for f, _ in exc.value.errors), exc.value.errors


def test_value_text() -> None:
    assert [value_text(v) for v in ("x y", True, False, 3, 0.1, 1e-3, 3e-4, 1.0, 1e20)] == [
        "x y", "true", "false", "3", "0.1", "0.001", "0.0003", "1.0", "1e+20"]


# --- expansion -------------------------------------------------------------------------


def test_expand_elements() -> None:
    s = spec({"lr": [1e-3, 3e-4], "bs": [32, 64]}, argv=["python", "train.py", "--lr={lr}", "{bs}", "i{index}",
                                                        "{{index}}", "{}", '{"a": 1}'])
    els = expand(s)
    assert len(els) == 4
    for e in els:
        assert e.array is None and e.array_element is not None and e.array_element.size == 4
    assert els[2].array_element is not None
    assert els[2].array_element.index == 2 and els[2].array_element.params == {"bs": 32, "lr": 3e-4}
    assert els[2].entrypoint.argv == ["python", "train.py", "--lr=0.0003", "32", "i2", "{index}", "{}", '{"a": 1}']
    assert len({e.digest for e in els}) == 4
    # the source spec is untouched; each element's digest survives its stored form (the service reloads it)
    assert s.entrypoint.argv is not None and s.entrypoint.argv[2] == "--lr={lr}"
    for e in els:
        again = spec_from_data(e.model_dump(mode="json", by_alias=True))
        assert again == e and again.digest == e.digest


def test_elements_of_a_range_differ_by_index_only() -> None:
    els = expand(spec("0-9:3", argv=["echo", "{index}"]))
    assert [e.array_element.index for e in els if e.array_element] == [0, 3, 6, 9]
    assert [e.entrypoint.argv for e in els] == [["echo", "0"], ["echo", "3"], ["echo", "6"], ["echo", "9"]]
    assert len({e.digest for e in els}) == 4


def test_a_spec_without_array_is_itself() -> None:
    s = spec_from_data({"name": "one", "entrypoint": {"argv": ["python", "{x}"]}})
    assert expand(s) == [s]


def test_unknown_placeholder_names_the_item() -> None:
    with pytest.raises(SpecError) as exc:
        expand(spec({"lr": [1, 2]}, argv=["python", "x.py", "--lr={lrr}"]))
    errors = field_error(exc)
    assert list(errors) == ["entrypoint.argv[2]"]
    assert "{lrr}" in errors["entrypoint.argv[2]"] and "{lr}" in errors["entrypoint.argv[2]"]
    assert "{index}" in errors["entrypoint.argv[2]"]


def test_shell_placeholders_are_refused() -> None:
    with pytest.raises(SpecError) as exc:
        expand(spec({"lr": [1, 2]}, shell=["cd src", "python x.py --lr {lr}"]))
    assert list(field_error(exc)) == ["entrypoint.shell[1]"]
    assert '"$TACC_PARAM_LR"' in str(exc.value)
    with pytest.raises(SpecError, match="TACC_ARRAY_INDEX"):
        expand(spec("0-3", shell=["echo {index}"]))
    # the shell's own braces are not placeholders
    ok = expand(spec({"lr": [1]}, shell=['echo "${lr}" {a,b} {other}', "f() { true; }"]))
    assert ok[0].entrypoint.shell == ['echo "${lr}" {a,b} {other}', "f() { true; }"]


HOSTILE = ["$(id)", ";rm -rf /", "`id`", "'\"", "a\nb", "{index}", "{{", "}", "--flag=x y", "$HOME", "-rf", "*"]


def test_hostile_values_come_out_literally() -> None:
    els = expand(spec({"values": HOSTILE, "param": "v"}, argv=["prog", "{v}", "x{v}y", "{index}"]))
    for i, (e, value) in enumerate(zip(els, HOSTILE, strict=True)):
        assert e.entrypoint.argv == ["prog", value, f"x{value}y", str(i)], value
        assert e.array_element is not None and e.array_element.params == {"v": value}


def test_an_item_too_long_once_filled_is_refused() -> None:
    with pytest.raises(SpecError, match="once its placeholders are filled in"):
        expand(spec({"v": ["x" * 4096]}, argv=["prog", "{v}" * 17]))


def test_expanding_a_thousand_elements_is_fast() -> None:
    s = spec({"lr": [1e-3, 3e-4, 1e-4, 3e-5] * 25, "seed": list(range(10))},
             argv=["python", "train.py", "--lr={lr}", "--seed={seed}", "--out=run-{index}"])
    expand(s)  # warm
    best = min(_timed(lambda: expand(s)) for _ in range(3))
    els = expand(s)
    assert len(els) == 1000 and len({e.digest for e in els}) == 1000
    assert best < 0.1, f"expanding 1,000 elements took {best * 1000:.0f} ms"


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t
