"""The exec WebSocket's first frame (``service.execws.parse_start``) and the tcloud side's URL, as hostile input."""

from __future__ import annotations

import json

import pytest

from tacc_hub.client_ws import ExecFailed, exec_url
from tacc_hub.service.execws import MAX_ARGV_BYTES, MAX_ARGV_ITEMS, ExecError, _exit_code, parse_start


def test_a_command_and_a_shell() -> None:
    assert parse_start(json.dumps({"argv": ["ls", "-la"]})) == (["ls", "-la"], False, 24, 80)
    assert parse_start(json.dumps({"tty": True, "rows": 50, "cols": 132})) == ([], True, 50, 132)
    assert parse_start(json.dumps({"argv": None, "tty": True})) == ([], True, 24, 80)
    hostile = ["$(id)", ";rm -rf ~", "`x`", "a\nb", "é"]
    assert parse_start(json.dumps({"argv": hostile}))[0] == hostile  # kept as given: never through a shell


@pytest.mark.parametrize(("frame", "field"), [
    ({"argv": "ls"}, "argv"),
    ({"argv": [1]}, "argv"),
    ({"argv": ["a\0"]}, "argv"),
    ({"argv": ["x"] * (MAX_ARGV_ITEMS + 1)}, "argv"),
    ({"argv": ["x" * MAX_ARGV_BYTES]}, "argv"),
    ({"argv": []}, "argv"),
    ({"argv": [""]}, "argv"),
    ({"argv": ["id"], "tty": 1}, "tty"),
    ({"argv": ["id"], "rows": True}, "rows"),
    ({"argv": ["id"], "cols": 10**9}, "cols"),
    ({"argv": ["id"], "cwd": "/"}, "cwd"),
    ([], None),
])
def test_refused_naming_the_field(frame: object, field: str | None) -> None:
    with pytest.raises(ExecError) as exc:
        parse_start(json.dumps(frame))
    assert exc.value.field == field


@pytest.mark.parametrize("raw", [b'{"argv": ["id"]}', '{"argv": ["id"], "argv": ["x"]}', "{", "NaN",
                                 '{"argv": ["id"], "rows": NaN}'])
def test_not_json_text_or_duplicate_keys(raw: str | bytes) -> None:
    with pytest.raises(ExecError):
        parse_start(raw)


def test_exit_codes() -> None:
    assert [_exit_code(c) for c in (0, 7, -9, -15, None)] == [0, 7, 137, 143, 255]


def test_exec_url() -> None:
    assert exec_url("http://h:8080/services/tacc/", 5) == "ws://h:8080/services/tacc/api/tasks/5/exec"
    assert exec_url("https://h", 7) == "wss://h/api/tasks/7/exec"
    with pytest.raises(ExecFailed):
        exec_url("ftp://h", 1)
