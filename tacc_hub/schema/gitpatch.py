"""Checking a git patch (``GitCode.patch``) at spec load, before ``git apply`` runs it at launch.

Every file name the patch carries is read as ``git apply`` reads it: ``diff --git a/X b/Y``, ``--- a/X``,
``+++ b/Y`` (one leading component stripped, as ``-p1``; ``/dev/null`` allowed), ``rename from/to``,
``copy from/to``, ``rename old/new``; C-quoted names (``"a/\\303\\244"``) are decoded. Refused, with the
name in the error: absolute names, empty and ``..`` components, anything under ``.git`` (any case), and
symbolic links the patch creates or retargets (``new file mode 120000``, ``new mode 120000``,
``index X..Y 120000``) whose target, the hunk's ``+`` text, is absolute, leaves the tree lexically or
points into ``.git``. Hunks are skipped by their line counts, as git does, so a removed line ``-- x``
(``--- x``) is content, not a header; ``GIT binary patch`` data is skipped (a symlink written so is
refused). ``Binary files ... differ`` (a patch made without ``--binary``) is refused: git cannot apply it.

Pure and linear in the patch's size.
"""

from __future__ import annotations

import posixpath
import re

_HUNK_RE = re.compile(r"@@ -([0-9]+)(?:,([0-9]+))? \+([0-9]+)(?:,([0-9]+))? @@", re.ASCII)
_INDEX_LINK_RE = re.compile(r"index [0-9a-f]+\.\.[0-9a-f]+ 120000\Z", re.ASCII)
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_NAMED = ("rename from ", "rename to ", "copy from ", "copy to ", "rename old ", "rename new ")
_LINK_MODES = ("new file mode 120000", "new mode 120000")


class PatchError(ValueError):
    """A patch that would write outside the tree, or cannot be read; the message names the path."""


def _unquote(text: str) -> tuple[str, str]:
    """A C-quoted name at the start of ``text`` -> (name, rest after the closing quote)."""
    out = bytearray()
    i = 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape"), text[i + 1:]
        if c == "\\":
            i += 1
            if i >= len(text):
                break
            e = text[i]
            if e in "01234567":
                digits = re.match(r"[0-7]{1,3}", text[i:])
                assert digits is not None
                out.append(int(digits.group(0), 8) & 0xFF)
                i += len(digits.group(0))
                continue
            if e not in _ESCAPES:
                raise PatchError(f"bad escape \\{e} in the quoted name {text[:80]}")
            out.append(_ESCAPES[e])
        else:
            out += c.encode("utf-8", "surrogateescape")
        i += 1
    raise PatchError(f"unclosed quote in the name {text[:80]}")


def _strip_prefix(name: str) -> str:
    """``a/dir/x`` -> ``dir/x`` (git apply's -p1); a name without a '/' is left as it is (git refuses it)."""
    return name.split("/", 1)[1] if "/" in name else name


def _check_path(path: str, line: str) -> None:
    shown = repr(path[:200])
    if path.startswith("/"):
        raise PatchError(f"the patch writes to an absolute path {shown} ({line[:120]!r})")
    parts = path.split("/")
    for part in parts:
        if part == "..":
            raise PatchError(f"the patch writes outside the tree: {shown} has a '..' component")
        if part.lower() == ".git":
            raise PatchError(f"the patch writes into .git: {shown}")
        if part in ("", "."):
            raise PatchError(f"the patch names a path with an empty or '.' component: {shown}")
        if "\x00" in part:
            raise PatchError(f"the patch names a path with a NUL byte: {shown}")


def _name_after(rest: str, *, prefixed: bool, line: str) -> str:
    """The (one) name of a ``---``/``+++``/``rename from`` line, checked; '' for /dev/null."""
    if rest.startswith('"'):
        name, _ = _unquote(rest)
    else:
        name = rest.split("\t", 1)[0]  # GNU diff's "\tTIMESTAMP"
    if prefixed and name == "/dev/null":
        return ""
    path = _strip_prefix(name) if prefixed else name
    _check_path(path, line)
    return path


def _git_header_names(rest: str, line: str) -> list[str]:
    """The names of a ``diff --git`` line (quoted, unquoted, or ambiguous with spaces), each checked."""
    if rest.startswith('"'):
        first, after = _unquote(rest)
        names = [first, _unquote(after[1:])[0] if after.startswith(' "') else after[1:]]
    elif rest.endswith('"') and ' "' in rest:
        cut = rest.index(' "')
        names = [rest[:cut], _unquote(rest[cut + 1:])[0]]
    elif rest.count(" ") == 1:
        names = rest.split(" ")
    else:
        # Names with spaces: git takes the split where both halves name the same file; otherwise it relies
        # on the ---/+++ or rename lines (checked on their own). Check every component of the whole text.
        for i, c in enumerate(rest):
            if c == " " and _strip_prefix(rest[:i]) == _strip_prefix(rest[i + 1:]):
                names = [rest[:i], rest[i + 1:]]
                break
        else:
            for part in re.split(r"[/ ]", rest):
                if part == ".." or part.lower() == ".git":
                    raise PatchError(f"the patch names a path outside the tree or in .git: {rest[:200]!r}")
            if " /" in rest or "//" in rest:
                raise PatchError(f"the patch names an absolute path: {rest[:200]!r}")
            return []
    out = []
    for name in names:
        path = _strip_prefix(name)
        _check_path(path, line)
        out.append(path)
    return out


def _check_link(path: str, target: str) -> None:
    shown = repr(path[:200])
    if not target:
        raise PatchError(f"the symbolic link {shown} has no target in the patch")
    if target.startswith("/"):
        raise PatchError(f"the patch makes {shown} a symbolic link to an absolute path {target[:200]!r}")
    full = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if full == ".." or full.startswith("../"):
        raise PatchError(f"the patch makes {shown} a symbolic link out of the tree ({target[:200]!r})")
    if full.split("/")[0].lower() == ".git" or any(p.lower() == ".git" for p in target.split("/")):
        raise PatchError(f"the patch makes {shown} a symbolic link into .git ({target[:200]!r})")


def check_patch(patch: str) -> str:
    """``patch`` unchanged if every path it writes stays in the tree (see the module docstring)."""
    if "\x00" in patch:  # git writes binary changes as base85 text: a NUL is never part of a patch
        raise ValueError("the patch holds a NUL byte; git patches are text (binary changes: git diff --binary)")
    old_left = new_left = 0
    binary = False
    link: str | None = None  # the path of the symlink the current file makes, once known
    is_link = False
    link_text: list[str] = []
    link_binary = False
    path = ""

    def end_file() -> None:
        if is_link and link is not None:
            if link_binary:
                raise PatchError(f"the symbolic link {link[:200]!r} is written as binary data; write it as text")
            _check_link(link, "\n".join(link_text))

    lines = patch.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text after the last newline
    for line in lines:
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
                if is_link:
                    link_text.append(line[1:])
            elif tag != "\\":
                raise PatchError(f"a hunk of {path[:200]!r} is cut short or corrupt at {line[:80]!r}")
            if old_left < 0 or new_left < 0:
                raise PatchError(f"a hunk of {path[:200]!r} has more lines than its header says")
            continue
        if line.startswith("diff --git "):
            end_file()
            binary, is_link, link_text, link_binary = False, False, [], False
            names = _git_header_names(line[len("diff --git "):], line)
            link = names[-1] if names else None
            path = link or line[11:]
            continue
        if binary:
            continue  # base85 data: it never starts with "diff --git "
        if line.startswith("@@"):
            m = _HUNK_RE.match(line)
            if m is None:
                raise PatchError(f"a hunk header of {path[:200]!r} cannot be read: {line[:80]!r}")
            old_left = 1 if m.group(2) is None else int(m.group(2))
            new_left = 1 if m.group(4) is None else int(m.group(4))
        elif line.startswith("--- "):
            _name_after(line[4:], prefixed=True, line=line)
        elif line.startswith("+++ "):
            name = _name_after(line[4:], prefixed=True, line=line)
            if name:
                link = path = name
        elif line.startswith(_NAMED):
            key = next(k for k in _NAMED if line.startswith(k))
            name = _name_after(line[len(key):], prefixed=False, line=line)
            if key in ("rename to ", "copy to ", "rename new "):
                link = path = name
        elif line.startswith(_LINK_MODES) or _INDEX_LINK_RE.match(line):
            is_link = True
        elif line == "GIT binary patch":
            binary = True
            link_binary = is_link
        elif line.startswith("Binary files ") and line.endswith(" differ"):
            raise PatchError(f"{line[:200]!r}: the patch lacks the binary data; make it with git diff --binary")
    if old_left > 0 or new_left > 0:
        raise PatchError(f"the patch ends inside a hunk of {path[:200]!r}")
    end_file()
    return patch
