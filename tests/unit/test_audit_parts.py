"""The small parts of the audit trail and the logs: request ids, log formats, times, the CLI's rendering."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from tacc_hub.cli.audit import change, printable
from tacc_hub.service import logformat, requestid
from tacc_hub.service.audit import parse_when


@pytest.mark.parametrize("hostile", [None, "", "short", "x" * 33, "has space", "a;b;c;d;e", "-leading1",
                                     "caf\u00e9caf\u00e9", "abcdefgh\n", "abcdefgh\r\nX-Admin: 1", "../../../etc"])
def test_a_header_not_matching_the_pattern_is_replaced(hostile: str | None) -> None:
    rid = requestid.from_header(hostile)
    assert rid != hostile and len(rid) == 16 and int(rid, 16) >= 0


def test_a_well_formed_header_is_kept_and_fresh_ids_differ() -> None:
    assert requestid.from_header("trace-0123_ABC") == "trace-0123_ABC"
    assert len({requestid.new_id() for _ in range(1000)}) == 1000


def _record(msg: str = "hello %s", args: tuple = ("world",), exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            import sys

            exc_info = sys.exc_info()
    rec = logging.LogRecord("tacc_hub.api", logging.WARNING, __file__, 1, msg, args, exc_info)
    rec.__dict__.update(extra)
    return rec


def test_json_lines_have_time_level_logger_message_request_id_and_exception() -> None:
    fmt = logformat.formatter("json")
    rec = _record(exc=True)
    logformat.RequestIdFilter().filter(rec)  # outside a request: no id
    obj = json.loads(fmt.format(rec))
    assert list(obj)[:4] == ["time", "level", "logger", "message"]
    assert (obj["level"], obj["logger"], obj["message"]) == ("WARNING", "tacc_hub.api", "hello world")
    assert "request_id" not in obj and "RuntimeError: boom" in obj["exception"]

    async def in_request() -> logging.LogRecord:
        requestid.REQUEST_ID.set("0123456789abcdef")
        rec = _record("a \x1b[2J line\nwith \u202e", ())
        logformat.RequestIdFilter().filter(rec)
        return rec

    rec = asyncio.run(in_request())
    line = fmt.format(rec)
    assert "\n" not in line and "\x1b" not in line  # one line; control characters escaped by JSON
    obj = json.loads(line)
    assert obj["request_id"] == "0123456789abcdef" and obj["message"] == "a \x1b[2J line\nwith \u202e"
    assert requestid.current() is None  # the id stayed in that request's context


def test_text_lines_carry_the_request_id_after_the_logger() -> None:
    fmt = logformat.formatter("text")
    assert fmt.format(_record()).endswith(" WARNING tacc_hub.api: hello world")
    assert fmt.format(_record(request_id="0123456789abcdef")).endswith(
        " WARNING tacc_hub.api [0123456789abcdef]: hello world")
    with pytest.raises(ValueError, match="log format"):
        logformat.formatter("xml")


def test_times() -> None:
    assert parse_when("1764547200", "since") == 1764547200.0
    assert parse_when("1764547200.5", "since") == 1764547200.5
    assert parse_when("2026-12-01", "since") == 1796083200.0
    assert parse_when("2026-12-01T01:00+01:00", "since") == 1796083200.0
    assert parse_when("7d", "--since", now=1000000.0) == 1000000.0 - 7 * 86400
    assert parse_when("24h", "--since", now=1000000.0) == 1000000.0 - 86400
    for bad in ["7d", "yesterday", "", "1e400", "nan", "inf", "9" * 41, "2026-02-30", "\u0661\u0662"]:
        with pytest.raises(ValueError, match="since"):
            parse_when(bad, "since")


def test_the_cli_shows_changes_compactly_and_escapes_control_characters() -> None:
    assert change({"max_gpus": 4, "gpu_hours": None}, {"max_gpus": 8, "gpu_hours": None}) == "max_gpus 4->8"
    assert change(None, {"group": "nlp"}) == "+ group=nlp"
    assert change({"group": "nlp"}, None) == "- group=nlp"
    assert change({"a": 1}, {"a": 1}) == "(unchanged)"
    assert change(None, None) == ""
    shown = printable("a\x1b]52;c;eA==\x07b\u202ec\nd\u2028e\x9bf")
    assert shown == "a\\x1b]52;c;eA==\\x07b\\u202ec\\nd\\u2028e\\x9bf"
    assert printable("x" * 100, 10) == "xxxxxxx..."
