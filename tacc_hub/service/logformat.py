"""The service's log lines: text for people, or one JSON object per line (``TaccHub.log_format``), with request ids.

One handler on the root logger writes every line to stderr: the service's own loggers, tornado's (the
access log included), the application's (``TaccHub``) and the libraries'. :class:`RequestIdFilter` gives
each record the id of the request it was logged in (:mod:`.requestid`), when there is one.

JSON lines come from python-json-logger: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``,
``request_id`` when in a request, ``exception`` (the traceback's text) when there is one, and any fields
passed in ``extra`` (the access log adds ``status``, ``method``, ``path``, ``remote_ip``, ``duration_ms``)::

    {"time": "2026-12-03T18:40:02.114+00:00", "level": "INFO", "logger": "tornado.access",
     "message": "403 GET /api/admin/audit (127.0.0.1) 1.92ms", "request_id": "5f0c2a9e41d7b386",
     "status": 403, "method": "GET", "path": "/api/admin/audit", "remote_ip": "127.0.0.1", "duration_ms": 1.92}

Text lines are as before, with the request id after the logger's name::

    2026-12-03 18:40:02,114 INFO tornado.access [5f0c2a9e41d7b386]: 403 GET /api/admin/audit (127.0.0.1) 1.92ms
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from .requestid import REQUEST_ID

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(request_tag)s: %(message)s"
FORMATS = ("text", "json")

_handler: logging.Handler | None = None  # the one this module put on the root logger


class RequestIdFilter(logging.Filter):
    """Sets ``record.request_id`` from the request being handled, unless the record has one already."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            rid = REQUEST_ID.get()
            if rid is not None:
                record.request_id = rid
        return True


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``: the request id in brackets after the logger's name, when there is one."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        rid = getattr(record, "request_id", None)
        return TEXT_FORMAT % {**record.__dict__, "request_tag": f" [{rid}]" if rid else ""}


class JsonLineFormatter(JsonFormatter):
    """One JSON object per record, ``time`` first (python-json-logger puts its timestamp last)."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s %(message)s", json_ensure_ascii=True,
                         rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception",
                                        "stack_info": "stack"})

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        log_data["time"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")
        super().add_fields(log_data, record, message_dict)


def formatter(kind: str) -> logging.Formatter:
    if kind not in FORMATS:
        raise ValueError(f"log format: one of {', '.join(FORMATS)}, not {kind!r}")
    return JsonLineFormatter() if kind == "json" else TextFormatter()


def configure(level: int | str, kind: str) -> logging.Handler:
    """Log every record of ``level`` and above to stderr in format ``kind`` (text or json), replacing the
    handler an earlier call put on the root logger (handlers that others put there are left alone)."""
    global _handler
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(kind))
    handler.addFilter(RequestIdFilter())
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(level)
    _handler = handler
    logging.captureWarnings(True)  # warnings.warn goes through the handler too (one format on stderr)
    return handler
