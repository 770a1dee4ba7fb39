"""What a notification says, in each shape: the generic JSON message, Slack, Teams and e-mail (pure functions).

:func:`message` builds the generic message (the ``json`` format, documented in docs/notifications.md) from
a task and an event; every other shape is made from it. Task names and reasons are user text: Slack's
mrkdwn gets ``& < >`` escaped (so a name cannot mention ``<!channel>`` or forge a link), Teams' text the
same, and e-mail headers never carry a control character (CR/LF would start a new header).
"""

from __future__ import annotations

import html
import re
import time
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

SCHEMA_VERSION = 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")
TITLES = {"started": "started", "ended": "succeeded", "failed": "failed", "preempted": "was preempted",
          "near_limit": "is near its time limit", "cancelled": "was cancelled", "test": "test notification"}


def one_line(text: str, limit: int = 200) -> str:
    """``text`` with every control character (CR, LF, tab, ...) turned into a space, cut to ``limit``."""
    return _CONTROL.sub(" ", text).strip()[:limit]


def message(event: str, kind: str, at: float, task: dict[str, Any] | None, *, link: str | None = None,
            note: str | None = None) -> dict[str, Any]:
    """The generic message of ``event`` (user event; ``kind``: the controller's) about ``task``.

    ``task``: ``{"id", "name", "owner", "state", "reason", "exit_code", "submitted_at", "started_at",
    "finished_at"}`` (None for a test notification)."""
    if task is None:
        text = "tacc: test notification: your notification settings work"
    else:
        what = TITLES.get(event, event)
        if event == "failed" and kind in ("lost", "timeout"):
            what = "hit its time limit" if kind == "timeout" else "was lost"
        elif event == "preempted" and kind == "requeued":
            what = "was requeued"
        text = f"tacc: task {task['id']} ({one_line(str(task.get('name') or ''), 100)}) {what}"
    out: dict[str, Any] = {"version": SCHEMA_VERSION, "event": event, "kind": kind, "at": at, "text": text,
                           "task": None if task is None else {**task, "url": link}, "note": note}
    return out


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _facts(msg: dict[str, Any]) -> list[tuple[str, str]]:
    task = msg.get("task")
    if task is None:
        return []
    facts = [("Task", f"{task['id']} ({one_line(str(task.get('name') or ''), 100)})"), ("State", str(task["state"]))]
    if task.get("reason"):
        facts.append(("Reason", one_line(str(task["reason"]), 500)))
    if task.get("exit_code") is not None:
        facts.append(("Exit code", str(task["exit_code"])))
    facts += [("Started", _when(task.get("started_at"))), ("Ended", _when(task.get("finished_at")))]
    return facts


def mrkdwn(text: str) -> str:
    """Slack's escaping of user text: ``&``, ``<`` and ``>`` (nothing else is a control sequence there)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(msg: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook body: ``text`` (the fallback) and ``blocks`` (a section with the facts)."""
    lines = [f"*{mrkdwn(msg['text'])}*"]
    lines += [f"*{k}:* {mrkdwn(v)}" for k, v in _facts(msg)]
    if msg.get("note"):
        lines.append(f"_{mrkdwn(msg['note'])}_")
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}]
    url = (msg.get("task") or {}).get("url")
    if url:
        blocks.append({"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Open task"}, "url": url}]})
    return {"text": mrkdwn(msg["text"]), "blocks": blocks}


def teams(msg: dict[str, Any]) -> dict[str, Any]:
    """A Microsoft Teams (Office 365 connector / Workflows) MessageCard."""
    esc = html.escape
    color = {"failed": "D70000", "ended": "2E7D32", "preempted": "F9A825", "near_limit": "F9A825"}
    card: dict[str, Any] = {
        "@type": "MessageCard", "@context": "https://schema.org/extensions",
        "summary": esc(msg["text"]), "themeColor": color.get(msg["event"], "0078D7"), "title": esc(msg["text"]),
        "sections": [{"facts": [{"name": k, "value": esc(v)} for k, v in _facts(msg)],
                      **({"text": esc(msg["note"])} if msg.get("note") else {})}],
    }
    url = (msg.get("task") or {}).get("url")
    if url:
        card["potentialAction"] = [{"@type": "OpenUri", "name": "Open task",
                                    "targets": [{"os": "default", "uri": url}]}]
    return card


def webhook_body(fmt: str, msg: dict[str, Any]) -> dict[str, Any]:
    return slack(msg) if fmt == "slack" else teams(msg) if fmt == "teams" else msg


def email(msg: dict[str, Any], *, sender: str, to: str) -> EmailMessage:
    """The e-mail of ``msg``: the subject is one line of the text (no CR/LF can reach a header)."""
    mail = EmailMessage()
    mail["Subject"] = one_line(msg["text"], 200)
    mail["From"] = sender
    mail["To"] = to
    mail["Date"] = formatdate(msg["at"], usegmt=True)
    mail["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    mail["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to us
    body = [msg["text"], ""]
    body += [f"{k}: {v}" for k, v in _facts(msg)]
    url = (msg.get("task") or {}).get("url")
    if url:
        body += ["", url]
    if msg.get("note"):
        body += ["", msg["note"]]
    body += ["", "You get this because of your tacc notification settings (tcloud notify)."]
    mail.set_content("\n".join(body) + "\n")
    return mail
