"""Make a task's log safe to write to a terminal: text and colours pass, every other control is made visible.

A task's output is written by its owner, and whoever reads it (an admin, a colleague) has it
interpreted by their terminal. Escape sequences there can write the reader's clipboard (OSC 52),
retitle the window, plant links (OSC 8), move the cursor to overwrite what was shown, or hide
text. :class:`TermSafe` keeps printable text, ``\\n``, ``\\t``, ``\\r`` (progress bars) and SGR
sequences (``ESC [ digits ; ... m``, colours and styles, less conceal: SGR 8 would hide text); every
other control character is written visibly instead (``\\x1b``, ``\\x07``, ``\\x9b``...), so an OSC,
DCS, APC/PM, a CSI other than SGR, a lone ESC or an 8-bit C1 (U+0080-U+009F) becomes plain text
that the terminal does not act on. Lone surrogates become U+FFFD.

It is a stream filter: a sequence split across two chunks is held (at most ``MAX_SGR`` characters)
until it can be told apart, so nothing slips through between chunks and memory stays bounded
however long a sequence is.
"""

from __future__ import annotations

import re

MAX_SGR = 64
"""Longest SGR sequence passed (ESC, '[', parameters, 'm'); a longer one is written visibly."""

# Everything that is not passed as it is: C0 but \t \n \r, DEL, C1, and lone surrogates.
_SPECIAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_SGR_PREFIX = re.compile(r"\x1b(?:\[[0-9;]*)?\Z")  # could still become an SGR with more input
_EXTENDED_COLOUR = {"38", "48", "58"}  # 38;5;N or 38;2;R;G;B: their arguments are not attributes
_CONCEAL = "8"


def visible(ch: str) -> str:
    """How a control character is written instead of being sent to the terminal."""
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"\\x{code:02x}"


def _sgr(params: str) -> str:
    """The SGR sequence with conceal (8) left out; '' if nothing is left of it."""
    if not params:
        return "\x1b[m"
    parts = params.split(";")
    kept: list[str] = []
    i = 0
    while i < len(parts):
        p = parts[i]
        if p.lstrip("0") in _EXTENDED_COLOUR and i + 1 < len(parts):
            n = {"5": 1, "2": 3}.get(parts[i + 1].lstrip("0"), 0)
            kept.extend(parts[i:i + 2 + n])
            i += 2 + n
            continue
        if p.lstrip("0") != _CONCEAL:
            kept.append(p)
        i += 1
    return f"\x1b[{';'.join(kept)}m" if kept else ""


class TermSafe:
    """Feed it chunks of a log in order; write what :meth:`feed` returns, and :meth:`flush` at the end."""

    def __init__(self) -> None:
        self._held = ""  # the start of what may be an SGR sequence, split at the end of the last chunk

    def feed(self, text: str) -> str:
        if self._held:
            text, self._held = self._held + text, ""
        out: list[str] = []
        pos = 0
        n = len(text)
        while pos < n:
            m = _SPECIAL.search(text, pos)
            if m is None:
                out.append(text[pos:])
                break
            at = m.start()
            if at > pos:
                out.append(text[pos:at])
            ch = text[at]
            if ch == "\x1b":
                sgr = _SGR.match(text, at, min(n, at + MAX_SGR))
                if sgr is not None:
                    out.append(_sgr(sgr.group(1)))
                    pos = sgr.end()
                    continue
                if n - at < MAX_SGR and _SGR_PREFIX.match(text, at):
                    self._held = text[at:]  # wait for the rest: it decides
                    break
            out.append(visible(ch))
            pos = at + 1
        return "".join(out)

    def flush(self) -> str:
        """What is still held (an unfinished sequence at the end of the log), written visibly."""
        held, self._held = self._held, ""
        return "".join(visible(c) if _SPECIAL.match(c) else c for c in held)


def sanitize(text: str) -> str:
    """One whole text made safe (see :class:`TermSafe`)."""
    t = TermSafe()
    return t.feed(text) + t.flush()
