"""termsafe: a hostile task log cannot drive the reader's terminal; text, colours and progress bars pass."""

from __future__ import annotations

import random
import re

import pytest

from tacc_hub.cli.termsafe import MAX_SGR, TermSafe, sanitize

ESC = "\x1b"
# Anything a terminal could act on, other than the three kept controls and a complete SGR sequence.
SGR_OK = re.compile(r"\x1b\[[0-9;]*m")
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def assert_inert(out: str) -> None:
    """Nothing in ``out`` but text, \\n \\t \\r and SGR sequences without conceal."""
    rest = SGR_OK.sub("", out)
    assert not CONTROL.search(rest), repr(out)
    for m in SGR_OK.finditer(out):
        assert "8" not in _attributes(m.group()[2:-1]), repr(m.group())


def _attributes(params: str) -> list[str]:
    parts, out, i = params.split(";"), [], 0
    while i < len(parts):
        if parts[i] in ("38", "48", "58") and i + 1 < len(parts):
            i += {"5": 3, "2": 5}.get(parts[i + 1], 2)
            continue
        out.append(parts[i].lstrip("0") or "0")
        i += 1
    return out


def in_chunks(text: str, sizes: list[int]) -> str:
    t, out, pos = TermSafe(), [], 0
    for n in sizes:
        out.append(t.feed(text[pos:pos + n]))
        pos += n
    out.append(t.feed(text[pos:]))
    out.append(t.flush())
    return "".join(out)


def test_text_newlines_tabs_carriage_returns_and_colours_pass_unchanged():
    text = ("plain\ttab\n" "\x1b[1;31mred bold\x1b[0m \x1b[m \x1b[38;5;208morange\x1b[39m "
            "\x1b[48;2;10;20;30mtruecolour\x1b[49m\n" " 10%|#    |\r 50%|#####|\r100%|##########|\n"
            "unicode: héllo ☃ 日本\n")
    assert sanitize(text) == text


@pytest.mark.parametrize("attack", [
    "\x1b]52;c;ZXZpbCBjb21tYW5k\x07",  # OSC 52: write the reader's clipboard
    "\x1b]52;c;ZXZpbA==\x1b\\",  # the same, ended by ST
    "\x1b]0;you have been pwned\x07",  # window title
    "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1bP+q544e\x1b\\",  # DCS (XTGETTCAP)
    "\x1b_hidden APC\x1b\\", "\x1b^private PM\x1b\\", "\x1bXstring SOS\x1b\\",
    "\x1b[2J\x1b[H", "\x1b[1A\x1b[2K", "\x1b[?25l", "\x1b[6n", "\x1b[21t", "\x1b[?1049h",  # CSI but SGR
    "\x1b[>c", "\x1b[0 q", "\x1b[1;2'z",
    "\x1bc", "\x1b7\x1b8", "\x1b#8", "\x1b(0", "\x1b=",  # other escapes
    "\x1b", "\x1b\x1b[31m",  # lone ESC, ESC before an SGR
    "\x9b2J", "\x9d52;c;ZXZpbA==\x9c", "\x90q\x9c", "\x9f x \x9c", "\x9e x \x9c",  # 8-bit C1 as characters
    "\x07\x08\x0b\x0c\x00\x7f\x0e\x0f",  # other C0 and DEL
    "\x1b[8mhidden text\x1b[0m", "\x1b[1;8;31mconcealed\x1b[m",  # SGR conceal
    "\x1b[31:2::255:0:0m",  # colon sub-parameters: not the plain SGR form
])
def test_every_other_control_is_made_visible(attack):
    out = sanitize(f"before {attack} after")
    assert_inert(out)
    assert out.startswith("before ") and out.endswith(" after")


def test_osc52_payload_is_shown_not_sent():
    out = sanitize("\x1b]52;c;ZXZpbA==\x07")
    assert out == "\\x1b]52;c;ZXZpbA==\\x07"


def test_conceal_is_removed_but_the_colours_around_it_stay():
    assert sanitize("\x1b[1;8;31mx") == "\x1b[1;31mx"
    assert sanitize("\x1b[8mx") == "x"
    assert sanitize("\x1b[38;5;8mgrey\x1b[48;2;8;8;8mbg") == "\x1b[38;5;8mgrey\x1b[48;2;8;8;8mbg"  # 8: a colour


@pytest.mark.parametrize("text", [
    "\x1b]52;c;ZXZpbA==\x07", "\x1b[2J", "\x1b[31mred\x1b[0m", "\x1b[?25l", "a\x1b", "\x1b[", "\x1b[1;",
    "x\x9b2Jy", "\x1b[8mhide",
])
def test_a_sequence_split_anywhere_gives_the_same_as_whole(text):
    whole = sanitize(text)
    for cut in range(len(text) + 1):
        assert in_chunks(text, [cut]) == whole, cut
    assert in_chunks(text, [1] * len(text)) == whole  # one character at a time


def test_a_cursor_move_split_after_its_introducer_does_not_slip_through():
    t = TermSafe()
    first = t.feed("ok \x1b[")
    assert ESC not in first  # held: it could still be an SGR
    rest = t.feed("2J") + t.flush()
    assert_inert(first + rest)
    assert first + rest == "ok \\x1b[2J"


def test_random_hostile_chunks_never_leave_anything_active():
    rng = random.Random(18)
    alphabet = ["\x1b", "[", "]", "P", "_", "^", "\\", "\x07", "\x9b", "\x9d", "\x90", "m", "H", "J", ";",
                "0", "1", "3", "8", "52", "a", "\n", "\r", "\t", "\x00", "\x7f", "é", "\ud800"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        sizes = [rng.randint(0, 10) for _ in range(rng.randint(0, 8))]
        out = in_chunks(text, sizes)
        assert_inert(out)
        assert out == sanitize(text)  # chunking never changes the result


def test_lone_surrogates_become_replacement_characters():
    out = sanitize("a\ud800b\udfffc")
    assert out == "a\ufffdb\ufffdc"
    out.encode("utf-8")  # writable to a UTF-8 terminal


def test_very_long_sequences_keep_memory_bounded():
    t = TermSafe()
    t.feed("\x1b[")
    for _ in range(10_000):  # an SGR candidate that never ends
        out = t.feed("1;" * 50)
        assert len(t._held) <= MAX_SGR
        assert ESC not in out
    assert_inert(t.flush())
    t = TermSafe()
    huge_osc = "\x1b]52;c;" + "A" * 1_000_000 + "\x07"
    out = "".join(t.feed(huge_osc[i:i + 4096]) for i in range(0, len(huge_osc), 4096)) + t.flush()
    assert len(t._held) == 0
    assert_inert(out)
    assert len(out) <= len(huge_osc) + 8


def test_an_sgr_longer_than_the_limit_is_shown_not_sent():
    long_sgr = "\x1b[" + "1;" * MAX_SGR + "31m"
    assert_inert(sanitize(long_sgr))
    assert sanitize(long_sgr).startswith("\\x1b[")


def test_nested_and_interleaved_sequences():
    text = "\x1b]0;\x1b]52;c;QQ==\x07\x1b[2J\x07\x1b[31minside\x1b[0m"
    out = in_chunks(text, [3, 5, 2, 7])
    assert_inert(out)
    assert out.endswith("\x1b[31minside\x1b[0m")  # the colour after the hostile part still works
