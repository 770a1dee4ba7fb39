"""load_json: request bodies with duplicate keys, deep nesting, NaN, bad UTF-8 are SpecErrors naming the place."""

from __future__ import annotations

import json
import time

import pytest

from tacc_hub.schema import SpecError
from tacc_hub.schema.jsonsafe import MAX_JSON_DEPTH, load_json

HOSTILE: list[tuple[str, str | bytes, str, str]] = [
    ("duplicate key", b'{"resources": {"nodes": 1, "nodes": 512}}', "resources.nodes", "duplicate key 'nodes'"),
    ("duplicate top key", '{"name": "a", "name": "b"}', "name", "duplicate key 'name'"),
    ("duplicate in a list", '[{"a": 1}, {"b": {"c": 1, "c": 2}}]', "[1].b.c", "duplicate key 'c'"),
    ("deep list", "[" * 100_000, "", "nested deeper than 64"),
    ("deep list, closed", "[" * 100_000 + "]" * 100_000, "", "nested deeper than 64"),
    ("deep in an object", '{"a": ' * 5000 + "1" + "}" * 5000, "", "nested deeper than 64"),
    ("deep inside a value", '{"env": ' + "[" * 5000 + "]" * 5000 + "}", "", "nested deeper than 64"),
    ("one level too deep", "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "", "nested deeper"),
    ("NaN", '{"x": NaN}', "x", "NaN"),
    ("Infinity", '{"x": Infinity}', "x", "Infinity"),
    ("-Infinity", "[-Infinity]", "[0]", "Infinity"),
    ("overflowing float", '{"x": 1e999}', "x", "too large"),
    ("overflowing float, short exponent", '{"a": {"x": ' + "9" * 299 + "e10}}", "a.x", "too large"),
    ("huge integer", '{"x": ' + "9" * 5000 + "}", "x", "cannot be read"),
    ("invalid UTF-8", b'{"name": "\xff\xfe"}', "", "not UTF-8"),
    ("overlong UTF-8", b'{"name": "\xc0\xaf"}', "", "not UTF-8"),
    ("UTF-16", '{"a": 1}'.encode("utf-16"), "", "not UTF-8"),
    ("BOM", b'\xef\xbb\xbf{"a": 1}', "", "BOM"),
    ("lone surrogate", '{"env": {"A": "x\\ud800y"}}', "env.A", "surrogate"),
    ("lone surrogate in a key", '{"env": {"\\udc00": "y"}}', "env", "surrogate"),
    ("not JSON", "{name: 1}", "", "not valid JSON"),
    ("trailing data", '{"a": 1} {"b": 2}', "", "not valid JSON"),
    ("empty", b"", "", "not valid JSON"),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("data", "field", "message"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_json_is_a_spec_error(data: str | bytes, field: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_json(data, "request body")
    assert exc.value.errors[0][0] == field, exc.value.errors
    assert message in exc.value.errors[0][1], exc.value.errors


def test_plain_json_is_read_as_the_stdlib_does() -> None:
    doc = {"name": "a", "n": [1, 2.5, True, None, "\u00e9\U0001f600"], "deep": [[[[{"k": "[[[[{{"}]]]]}
    text = json.dumps(doc)
    assert load_json(text) == doc
    assert load_json(text.encode()) == doc
    assert load_json(json.dumps(doc, ensure_ascii=True)) == doc  # a surrogate pair is fine
    nested: list[object] = []
    for _ in range(MAX_JSON_DEPTH - 1):
        nested = [nested]
    assert load_json(json.dumps(nested)) == nested  # exactly the limit
    # Brackets inside strings do not count towards the depth.
    many = {"s": "[" * 10_000, "t": "{" * 10_000 + '\\"'}
    assert load_json(json.dumps(many)) == many


def test_a_typical_body_is_fast() -> None:
    body = json.dumps({"name": "job", "entrypoint": {"shell": ["python train.py --lr 0.1"]},
                       "environment": {"requirements": ["torch==2.3.1"] * 10, "variables": {"A": "1", "B": "2"}},
                       "resources": {"nodes": 2, "gpus_per_node": 8, "memory": "64G", "time_limit": "2h"},
                       "qos": {"class": "normal"}, "outputs": ["out"]}, indent=1).encode()
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        load_json(body)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 500e-6, per_call  # measured ~35 us; generous for a loaded CI machine
