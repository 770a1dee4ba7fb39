"""The hostile corpus: requests an attacker can send, each with what the service must answer.

Generated from categories (shell metacharacters in every string field, path traversal, huge
numbers, deep and duplicate JSON, Unicode digits, booleans for numbers, smuggled sbatch options,
dangerous environment names, YAML bombs, bad Content-Types, malformed archives, hostile git code,
quota and token admin routes, other users' objects, bad tokens). Each :class:`Entry` is one
request and one expectation:

* ``expect="4xx"``: a status 400..499 (``statuses``, when given, narrows it) whose
  ``errors[].field`` or ``message`` names one of ``fields`` (none given: the status alone);
* ``expect="accepted"``: a 2xx, and ``probe`` (a path into the stored task's ``spec``, or into
  the response) holds the value exactly as sent; a task so accepted must run without executing
  any of it (nothing may appear in the canary directory).

Bodies and paths hold placeholders filled in by the runner (``tests/hostile/conftest.py``):
``@CANARY@`` (a directory task accounts can write to), ``@CODE@`` (the caller's uploaded
snapshot), ``@BOBCODE@`` / ``@BOBTASK@`` (another user's snapshot and finished task),
``@MYTASK@`` (a finished task of the caller), ``@TOKEN@`` (the caller's own valid token) and
``@DIGEST@`` in a path (the sha256 of the body). Large bodies are built lazily (``body`` may be
a callable) so that collecting the tests stays cheap.
"""

# ruff: noqa: RUF001
# (Unicode digits that look like ASCII ones are the point of some entries)

from __future__ import annotations

import gzip
import hashlib
import io
import json
import posixpath
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

MALLORY = "mallory"  # the attacker; every request is theirs unless ``user`` says otherwise
BOB = "bob"  # the victim: owns @BOBTASK@ and @BOBCODE@
ADMIN = "admin"  # an admin token
NO_ACCOUNT = "nosuch-tacc-user"  # a valid token user without a Unix account

Body = bytes | Callable[[], bytes] | None
Probe = tuple[Literal["spec", "response"], tuple[str | int, ...], Any]


@dataclass(frozen=True)
class Entry:
    id: str
    method: str
    path: str
    body: Body = None
    headers: dict[str, str] = field(default_factory=dict)
    user: str | None = MALLORY  # whose token goes in Authorization; None: no token
    expect: Literal["4xx", "accepted"] = "4xx"
    fields: tuple[str, ...] = ()  # for 4xx: one of these must be named (errors[].field or message)
    statuses: tuple[int, ...] = ()  # for 4xx: only these statuses
    probe: Probe | None = None  # for accepted: (where, path, value as sent)
    subst: bool = True  # fill placeholders in the body (off for binary archives)
    stream: bool = False  # text/event-stream answer (not JSON)


# --- building blocks ----------------------------------------------------------------------

SHELL: dict[str, str] = {
    "cmdsub": "$(touch @CANARY@/cmdsub)",
    "backtick": "`touch @CANARY@/backtick`",
    "semicolon": "x; touch @CANARY@/semicolon",
    "pipe": "x | touch @CANARY@/pipe",
    "and": "x && touch @CANARY@/and",
    "newline": "x\ntouch @CANARY@/newline\n",
    "crlf": "x\r\ntouch @CANARY@/crlf",
    "squote": "x' ; touch @CANARY@/squote ; '",
    "dquote": "x\" ; touch @CANARY@/dquote ; \"",
    "ifs": "$(touch${IFS}@CANARY@/ifs)",
    "redirect": "x > @CANARY@/redirect",
    "param": "${X:-$(touch @CANARY@/param)}",
}
NUL = "x\x00$(touch @CANARY@/nul)"
# A subset for the fields whose hostile values are accepted (each accepted value is one task that runs).
SHELL_FEW = ("cmdsub", "backtick", "semicolon", "newline", "squote", "ifs")

TRAVERSAL: dict[str, str] = {
    "dotdot": "../x",
    "dotdot2": "../../etc/passwd",
    "absolute": "/etc/passwd",
    "tilde": "~root/.ssh/authorized_keys",
    "inner": "a/../../x",
    "bare": "..",
    "backslash": "a\\..\\..\\x",
    "dot_dotdot": "./../x",
    "empty": "",
    "nul": "a/\x00/b",
}

DANGEROUS_ENV = ("BASH_ENV", "ENV", "LD_PRELOAD", "LD_AUDIT", "PYTHONHOME", "PYTHONSTARTUP", "PROMPT_COMMAND",
                 "IFS", "PS4", "SHELLOPTS", "GCONV_PATH", "BASH_FUNC_x%%")

HUGE_INTS: dict[str, int] = {"2p63": 2**63, "2p64": 2**64, "neg2p63": -(2**63), "1e30": 10**30}

JSON = "application/json"
YAML = "application/yaml"


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def spec(**over: Any) -> dict[str, Any]:
    """An ordinary task of the caller (exits at once) with ``over`` merged in (dotted keys set nested values)."""
    doc: dict[str, Any] = {"name": "hostile", "code": {"kind": "snapshot", "digest": "@CODE@"},
                           "entrypoint": {"argv": ["true"]}}
    for dotted, value in over.items():
        target = doc
        *parents, leaf = dotted.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = value
    return doc


def submit(id_: str, doc: Any, *fields: str, **kw: Any) -> Entry:
    return Entry(id_, "POST", "/api/tasks", dumps(doc), {"Content-Type": JSON}, fields=fields, **kw)


def accepted(id_: str, doc: Any, where: tuple[str | int, ...], value: Any) -> Entry:
    return Entry(id_, "POST", "/api/tasks", dumps(doc), {"Content-Type": JSON}, expect="accepted",
                 probe=("spec", where, value))


def tuxiv(id_: str, text: str, *fields: str, **kw: Any) -> Entry:
    return Entry(id_, "POST", "/api/tasks?format=tuxiv", text.encode(), {"Content-Type": YAML}, fields=fields, **kw)


def tuxiv_general(opt: str) -> str:
    return f"entrypoint: [\"true\"]\ncode: {{kind: snapshot, digest: \"@CODE@\"}}\njob:\n  name: t\n" \
           f"  general:\n    - {json.dumps(opt)}\n"


def tuxiv_doc(job: dict[str, Any], **top: Any) -> str:
    """A tuxiv.conf as JSON (a YAML subset), so any value can be written exactly."""
    doc = {"entrypoint": ["true"], "code": {"kind": "snapshot", "digest": "@CODE@"}, "job": {"name": "t", **job}, **top}
    return json.dumps(doc)


# --- archives -----------------------------------------------------------------------------


def tar_gz(members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info in members:
            content = (data or {}).get(info.name)
            if content is not None:
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return gzip.compress(raw.getvalue(), mtime=0)


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info


def gzip_bomb(size: int = 2**30, name: str = "zeros.bin") -> bytes:
    """A tar.gz holding one file of ``size`` zero bytes, in about size/1024 bytes (1 GiB -> ~1 MiB).

    Built from one deflate segment of 1 MiB of zeros repeated (each ends in a full flush, so it
    refers to nothing before it), so it costs a fraction of a second instead of compressing 1 GiB.
    """
    head = tarfile.TarInfo(name)
    head.size, head.mode = size, 0o644
    header = head.tobuf(format=tarfile.GNU_FORMAT)
    tail = bytes(1024 + (-size) % 512)  # padding of the member and the end-of-archive blocks

    def segment(data: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)

    chunk = bytes(1 << 20)
    zero_seg = segment(chunk)
    parts = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff", segment(header)]
    crc = zlib.crc32(header)
    left = size
    while left >= len(chunk):
        parts.append(zero_seg)
        crc = zlib.crc32(chunk, crc)
        left -= len(chunk)
    rest = bytes(left) + tail
    end = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts.append(end.compress(rest) + end.flush(zlib.Z_FINISH))
    crc = zlib.crc32(rest, crc)
    total = len(header) + size + len(tail)
    parts.append(crc.to_bytes(4, "little") + (total % 2**32).to_bytes(4, "little"))
    return b"".join(parts)


def many_files(n: int = 100_000) -> bytes:
    """A tar.gz of ``n`` one-byte files (a cheap archive that is costly to list and unpack)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("x")
        info.size = 1
        for i in range(n):
            info.name = f"d{i // 1000}/f{i}"
            tar.addfile(info, io.BytesIO(b"x"))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)


def yaml_many_keys(target: int = 1024 * 1024 - 64, prefix: str = "k") -> bytes:
    """A YAML mapping of many short keys, just under ``target`` bytes (the loader's size limit is 1 MiB)."""
    out: list[str] = []
    size = 0
    i = 0
    while True:
        line = f"{prefix}{i:06d}: {i}\n"
        if size + len(line) > target:
            break
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- the categories -------------------------------------------------------------------------


def _strings() -> list[Entry]:
    """Shell metacharacters and command substitution in every string field of a task."""
    out: list[Entry] = []
    refused: list[tuple[str, str, Callable[[str], dict[str, Any]]]] = [
        ("name", "name", lambda v: spec(name=v)),
        ("environment.requirements", "environment.requirements", lambda v: spec(**{
            "environment.requirements": [f"six==1.16.0{v}"]})),
        ("environment.python", "environment.python", lambda v: spec(**{"environment.python": f"3.11{v}"})),
        ("environment.modules", "environment.modules", lambda v: spec(**{"environment.modules": [v]})),
        ("environment.conda.name", "environment.conda", lambda v: spec(**{"environment.conda": {"name": v}})),
        ("environment.conda.channels", "environment.conda", lambda v: spec(**{"environment.conda": {
            "channels": [v]}})),
        ("environment.conda.dependencies", "environment.conda", lambda v: spec(**{"environment.conda": {
            "dependencies": [v]}})),
        ("environment.variables.key", "environment.variables", lambda v: spec(**{
            "environment.variables": {f"A{v}": "1"}})),
        ("resources.gpu_type", "resources.gpu_type", lambda v: spec(**{"resources.gpu_type": v})),
        ("resources.partition", "resources.partition", lambda v: spec(**{"resources.partition": v})),
        ("resources.memory", "resources.memory", lambda v: spec(**{"resources.memory": f"16G{v}"})),
        ("resources.time_limit", "resources.time_limit", lambda v: spec(**{"resources.time_limit": f"1h{v}"})),
        ("network.rdma", "network.rdma", lambda v: spec(**{"network.rdma": v})),
        ("qos.class", "qos.class", lambda v: spec(**{"qos.class": v})),
        ("runtime.kind", "runtime.kind", lambda v: spec(**{"runtime.kind": v})),
        ("runtime.options.key", "runtime.options", lambda v: spec(**{"runtime.options": {f"o{v}": "1"}})),
        ("datasets", "datasets", lambda v: spec(datasets=[v])),
        ("account", "account", lambda v: spec(account=v)),
        ("code.commit", "code.commit", lambda v: spec(code={"kind": "git", "url": "file:///nonexistent/repo",
                                                            "commit": f"abcdef1{v}"})),
        ("code.digest", "code.digest", lambda v: spec(code={"kind": "snapshot", "digest": v})),
        ("notify.email", "notify.email", lambda v: spec(notify={"email": f"{v} <a@example.org>"})),
    ]
    for tag, value in SHELL.items():
        for where, fld, make in refused:
            out.append(submit(f"shell-{tag}-in-{where}", make(value), fld))
    # NUL anywhere is refused, even in the free-text fields
    nul_fields: list[tuple[str, str, dict[str, Any]]] = [
        ("entrypoint.argv", "entrypoint.argv", spec(**{"entrypoint.argv": ["echo", NUL]})),
        ("entrypoint.shell", "entrypoint.shell", spec(entrypoint={"shell": [NUL]})),
        ("environment.variables.value", "environment.variables", spec(**{"environment.variables": {"H": NUL}})),
        ("workdir", "workdir", spec(workdir=NUL)),
        ("outputs", "outputs", spec(outputs=[NUL])),
        ("log_file", "log_file", spec(log_file=NUL)),
        ("user_log_file", "user_log_file", spec(user_log_file=NUL)),
        ("runtime.options.value", "runtime.options", spec(**{"runtime.options": {"o": NUL}})),
        ("code.url", "code.url", spec(code={"kind": "git", "url": f"file:///x{NUL}", "commit": "abcdef1"})),
        ("code.patch", "code.patch", spec(code={"kind": "git", "url": "file:///nonexistent/repo",
                                                "commit": "abcdef1", "patch": NUL})),
        ("name", "name", spec(name=NUL)),
    ]
    for where, fld, doc in nul_fields:
        out.append(submit(f"nul-in-{where}", doc, fld))

    # Free text: stored literally, passed as one argument / one value, never run.
    for tag, value in SHELL.items():
        out.append(accepted(f"shell-{tag}-in-argv", spec(**{"entrypoint.argv": ["echo", value]}),
                            ("entrypoint", "argv", 1), value))
        out.append(accepted(f"shell-{tag}-in-env-value", spec(
            entrypoint={"shell": ['printf "%s\\n" "$HOSTILE"']}, **{"environment.variables": {"HOSTILE": value}}),
            ("environment", "variables", "HOSTILE"), value))
    for tag in SHELL_FEW:
        value = SHELL[tag]
        out.append(accepted(f"shell-{tag}-as-argv0", spec(**{"entrypoint.argv": [value]}),
                            ("entrypoint", "argv", 0), value))
        for fld in ("workdir", "log_file", "user_log_file"):
            out.append(accepted(f"shell-{tag}-in-{fld}", spec(**{fld: value}), (fld,), posixpath.normpath(value)))
        out.append(accepted(f"shell-{tag}-in-outputs", spec(outputs=[value]), ("outputs", 0),
                            posixpath.normpath(value)))
    for tag in ("cmdsub", "backtick", "semicolon", "squote"):
        value = SHELL[tag]
        # the shipped runtimes have no free-text option: a string value is refused, never rendered
        out.append(submit(f"shell-{tag}-in-runtime-option", spec(**{"runtime.options": {"opt": value}}),
                          "runtime.options"))
    for tag, local in (("backtick", "`touch${IFS}@CANARY@/mail`"), ("param", "${IFS}`id`|x'")):
        value = f"{local}@example.org"
        out.append(accepted(f"shell-{tag}-in-notify.email-accepted", spec(notify={"email": value}), ("notify", "email"),
                            value))
    return out


def _paths() -> list[Entry]:
    """Path traversal in every path of a task, in dataset names and local code paths."""
    out: list[Entry] = []
    for tag, value in TRAVERSAL.items():
        out.append(submit(f"traversal-{tag}-in-workdir", spec(workdir=value), "workdir"))
        out.append(submit(f"traversal-{tag}-in-outputs", spec(outputs=[value]), "outputs"))
        out.append(submit(f"traversal-{tag}-in-log_file", spec(log_file=value), "log_file"))
        out.append(submit(f"traversal-{tag}-in-user_log_file", spec(user_log_file=value), "user_log_file"))
        out.append(submit(f"traversal-{tag}-in-datasets", spec(datasets=[value or "."]), "datasets"))
        out.append(submit(f"traversal-{tag}-in-code.path", spec(code={"kind": "local", "path": value}), "code"))
    out.append(submit("traversal-outputs-duplicates", spec(outputs=["a", "./a"]), "outputs"))
    return out


def _numbers() -> list[Entry]:
    """Huge values, booleans for numbers, non-finite floats, Unicode digits."""
    out: list[Entry] = []
    ints = ("resources.nodes", "resources.gpus_per_node", "resources.tasks_per_node", "resources.cpus_per_task",
            "resources.memory", "resources.time_limit", "qos.priority")
    for fld in ints:
        for tag, value in HUGE_INTS.items():
            out.append(submit(f"huge-{tag}-in-{fld}", spec(**{fld: value}), fld))
        out.append(submit(f"bool-true-in-{fld}", spec(**{fld: True}), fld))
    out.append(submit("bool-false-in-resources.gpus_per_node", spec(**{"resources.gpus_per_node": False}),
                      "resources.gpus_per_node"))
    for tag, value in HUGE_INTS.items():
        out.append(submit(f"huge-{tag}-in-code.size", spec(code={"kind": "snapshot", "digest": "@CODE@",
                                                                  "size": value}), "code.size"))
    out.append(submit("bool-true-in-code.size", spec(code={"kind": "snapshot", "digest": "@CODE@", "size": True}),
                      "code.size"))
    big = b'{"name": "t", "entrypoint": {"argv": ["true"]}, "resources": {"nodes": 1' + b"0" * 5000 + b"}}"
    out.append(Entry("huge-5000-digit-number", "POST", "/api/tasks", big, {"Content-Type": JSON},
                     fields=("body", "resources.nodes")))
    for tag, raw in (("nan", b"NaN"), ("infinity", b"Infinity"), ("1e400", b"1e400")):
        body = b'{"name": "t", "code": {"kind": "snapshot", "digest": "@CODE@"}, "entrypoint": {"argv": ["true"]},' \
               b' "resources": {"gpus_per_node": ' + raw + b"}}"
        out.append(Entry(f"nonfinite-{tag}-in-resources.gpus_per_node", "POST", "/api/tasks", body,
                         {"Content-Type": JSON}, fields=("resources.gpus_per_node", "body")))
    unicode_digits = [("arabic-16G", "resources.memory", "١٦G"), ("fullwidth-16G", "resources.memory", "１６G"),
                      ("arabic-90m", "resources.time_limit", "٩٠m"), ("devanagari-1h", "resources.time_limit", "१h"),
                      ("arabic-clock", "resources.time_limit", "١:٠٠:٠٠")]
    for tag, fld, text in unicode_digits:
        out.append(submit(f"unicode-digits-{tag}-in-{fld}", spec(**{fld: text}), fld))
    return out


def _json_shapes() -> list[Entry]:
    """Deep nesting, duplicate keys, wrong shapes."""
    deep_list = b"[" * 100_000 + b"]" * 100_000
    deep_obj = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    argv = b'{"name": "t", "code": {"kind": "snapshot", "digest": "@CODE@"}, "entrypoint": {"argv": ' \
           + b"[" * 5000 + b'"x"' + b"]" * 5000 + b"}}"
    env = b'{"name": "t", "entrypoint": {"argv": ["true"]}, "environment": {"variables": {"A": ' \
          + b"[" * 5000 + b"]" * 5000 + b"}}}"
    out = [
        Entry("deep-json-100k-lists", "POST", "/api/tasks", deep_list, {"Content-Type": JSON}, fields=("body",)),
        Entry("deep-json-100k-objects", "POST", "/api/tasks", deep_obj, {"Content-Type": JSON}, fields=("body",)),
        Entry("deep-json-5000-in-entrypoint.argv", "POST", "/api/tasks", argv, {"Content-Type": JSON},
              fields=("entrypoint.argv", "body")),
        Entry("deep-json-5000-in-environment.variables", "POST", "/api/tasks", env, {"Content-Type": JSON},
              fields=("environment.variables", "body")),
        Entry("deep-json-100k-dry-run", "POST", "/api/tasks?dry_run=1", deep_list, {"Content-Type": JSON},
              fields=("body",)),
        Entry("deep-yaml-100k-flow", "POST", "/api/tasks", b"[" * 100_000 + b"]" * 100_000,
              {"Content-Type": YAML}, fields=("body",)),
        Entry("deep-json-quota-body", "PUT", "/api/admin/quotas/user/quota-target", deep_obj,
              {"Content-Type": JSON}, user=ADMIN, fields=("body",)),
        Entry("deep-json-group-body", "PUT", "/api/admin/users/quota-target/group", deep_list,
              {"Content-Type": JSON}, user=ADMIN, fields=("body",)),
        Entry("deep-json-admin-tokens-body", "POST", "/api/admin/tokens", deep_obj, {"Content-Type": JSON},
              user=ADMIN),
    ]
    base = '"code": {"kind": "snapshot", "digest": "@CODE@"}, "entrypoint": {"argv": ["true"]}'
    dups = [
        ("name", '{"name": "a", "name": "b", ' + base + "}", "name"),
        ("entrypoint", '{"name": "t", "code": {"kind": "snapshot", "digest": "@CODE@"}, '
                       '"entrypoint": {"argv": ["true"]}, "entrypoint": {"argv": ["false"]}}', "entrypoint"),
        ("resources.gpus_per_node", '{"name": "t", ' + base + ', "resources": {"gpus_per_node": 0, '
                                    '"gpus_per_node": 1}}', "gpus_per_node"),
        ("environment.variables", '{"name": "t", ' + base + ', "environment": {"variables": {"A": "1", '
                                  '"A": "2"}}}', "A"),
        ("code", '{"name": "t", "code": {"kind": "snapshot", "digest": "@CODE@"}, "code": {"kind": "git", '
                 '"url": "file:///x", "commit": "abcdef1"}, "entrypoint": {"argv": ["true"]}}', "code"),
    ]
    for where, text, fld in dups:
        out.append(Entry(f"duplicate-key-{where}", "POST", "/api/tasks", text.encode(), {"Content-Type": JSON},
                         fields=(fld,)))
    out.append(Entry("duplicate-key-quota-max_gpus", "PUT", "/api/admin/quotas/user/quota-target",
                     b'{"max_gpus": 1, "max_gpus": 2}', {"Content-Type": JSON}, user=ADMIN, fields=("max_gpus",)))
    out.append(Entry("duplicate-key-group", "PUT", "/api/admin/users/quota-target/group",
                     b'{"group": "lab-a", "group": "lab-b"}', {"Content-Type": JSON}, user=ADMIN, fields=("group",)))
    shapes: list[tuple[str, bytes, tuple[str, ...]]] = [
        ("array", b"[1, 2]", ("body", "mapping")), ("string", b'"x"', ("body", "mapping")),
        ("null", b"null", ("body", "mapping")), ("empty", b"", ("body", "mapping")),
        ("number", b"1e999", ("body", "mapping")),
        ("invalid-utf8", b'{"name": "\xff\xfe"}', ("body",)),
        ("lone-surrogate", b'{"name": "t", "entrypoint": {"argv": ["\\ud800"]}}', ("entrypoint.argv", "body")),
        ("trailing-garbage", dumps(spec()) + b" {}", ("body",)),
    ]
    for tag, body, flds in shapes:
        out.append(Entry(f"json-shape-{tag}", "POST", "/api/tasks", body, {"Content-Type": JSON}, fields=flds))
    for tag, doc, fld in (("env-list", {"A": ["x"]}, "environment.variables"),
                          ("env-object", {"A": {"b": 1}}, "environment.variables"),
                          ("env-number", {"A": 1}, "environment.variables"),
                          ("env-null", {"A": None}, "environment.variables")):
        out.append(submit(f"non-scalar-{tag}", spec(**{"environment.variables": doc}), fld))
    out.append(submit("wrong-type-argv-string", spec(entrypoint={"argv": "true"}), "entrypoint.argv"))
    out.append(submit("wrong-type-outputs-object", spec(outputs={"a": 1}), "outputs"))
    out.append(submit("unknown-top-level-field", spec(__class__="x"), "__class__"))
    return out


def _big() -> list[Entry]:
    """10 MB strings and bodies over the limits."""
    ten = 10 * 1024 * 1024

    def big_name() -> bytes:
        return dumps(spec(name="n" * ten))

    def big_argv() -> bytes:
        return dumps(spec(**{"entrypoint.argv": ["echo", "a" * ten]}))

    def big_yaml() -> bytes:
        return b"name: t\nentrypoint: [true]\nx: " + b"y" * ten + b"\n"

    def big_quota() -> bytes:
        return dumps({"max_gpus": 1, "note": "y" * ten})

    def big_group() -> bytes:
        return dumps({"group": "g" * ten})

    return [
        Entry("big-10MB-name", "POST", "/api/tasks", big_name, {"Content-Type": JSON}, fields=("body", "name")),
        Entry("big-10MB-argv", "POST", "/api/tasks", big_argv, {"Content-Type": JSON},
              fields=("body", "entrypoint.argv")),
        Entry("big-10MB-yaml", "POST", "/api/tasks", big_yaml, {"Content-Type": YAML}, fields=("body",)),
        Entry("big-10MB-tuxiv", "POST", "/api/tasks?format=tuxiv", big_yaml, {"Content-Type": YAML},
              fields=("body",)),
        Entry("big-100KB-argv-item", "POST", "/api/tasks", dumps(spec(**{"entrypoint.argv": ["echo", "a" * 100_000]})),
              {"Content-Type": JSON}, fields=("entrypoint.argv",)),
        Entry("big-10MB-quota-body", "PUT", "/api/admin/quotas/user/quota-target", big_quota,
              {"Content-Type": JSON}, user=ADMIN, fields=("body", "note")),
        Entry("big-10MB-group-name", "PUT", "/api/admin/users/quota-target/group", big_group,
              {"Content-Type": JSON}, user=ADMIN, fields=("body", "group")),
        Entry("big-10MB-unauthenticated", "POST", "/api/tasks", big_name, {"Content-Type": JSON}, user=None,
              fields=("token", "body"), statuses=(401, 413)),
    ]


def _content_types() -> list[Entry]:
    ok = dumps(spec())
    out = [Entry(f"content-type-{tag}", "POST", "/api/tasks", ok, {"Content-Type": ctype},
                 fields=("Content-Type",), statuses=(415,))
           for tag, ctype in (("text-plain", "text/plain"), ("multipart", "multipart/form-data; boundary=x"),
                              ("form", "application/x-www-form-urlencoded"), ("xml", "application/xml"),
                              ("octet", "application/octet-stream"), ("long", "application/" + "x" * 10_000))]
    # control characters in the header: refused by the HTTP parser (a plain 400) or by the handler (415)
    out.append(Entry("content-type-control-chars", "POST", "/api/tasks", ok, {"Content-Type": "\x7f\x01;;;=="},
                     statuses=(400, 415)))
    utf16 = json.dumps(spec()).encode("utf-16")
    latin = json.dumps(spec(**{"entrypoint.argv": ["echo", "caf\u00e9"]}), ensure_ascii=False).encode("latin-1")
    out += [
        Entry("charset-utf16-declared", "POST", "/api/tasks", utf16,
              {"Content-Type": "application/json; charset=utf-16"}, fields=("Content-Type", "charset", "body")),
        Entry("charset-utf16-undeclared", "POST", "/api/tasks", utf16, {"Content-Type": JSON},
              fields=("body", "UTF-8", "Content-Type")),
        Entry("charset-latin1-declared", "POST", "/api/tasks", latin,
              {"Content-Type": "application/json; charset=iso-8859-1"}, fields=("Content-Type", "charset", "body")),
        Entry("charset-utf7", "POST", "/api/tasks", b"+AHsAfQ-", {"Content-Type": "application/json; charset=utf-7"},
              fields=("Content-Type", "charset", "body")),
        Entry("charset-yaml-utf16", "POST", "/api/tasks", "name: t\nentrypoint: [true]\n".encode("utf-16"),
              {"Content-Type": "application/yaml; charset=utf-16"}, fields=("Content-Type", "charset", "body")),
        Entry("content-type-json-body-yaml", "POST", "/api/tasks", b"name: t\nentrypoint: [true]\n",
              {"Content-Type": JSON}, fields=("body",)),
        Entry("format-hostile", "POST", "/api/tasks?format=$(touch%20@CANARY@/format)", ok, {"Content-Type": JSON},
              fields=("format",)),
        Entry("format-unknown-yaml", "POST", "/api/tasks?format=slurm", b"name: t\n", {"Content-Type": YAML},
              fields=("format",)),
        Entry("quota-body-as-yaml", "PUT", "/api/admin/quotas/user/quota-target", b"max_gpus: 1\n",
              {"Content-Type": YAML}, user=ADMIN, fields=("body", "Content-Type")),
    ]
    return out


def _yaml() -> list[Entry]:
    laughs = "a: &a [lol, lol]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b]\n" \
             "d: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    docs = {
        "billion-laughs": laughs,
        "alias": "name: &n t\nentrypoint: [*n]\n",
        "merge-key": "base: &b {gpus_per_node: 1}\nresources:\n  <<: *b\nname: t\nentrypoint: [true]\n",
        "python-object": f"name: t\nentrypoint: !!python/object/apply:os.system [\"touch {'@CANARY@'}/yaml\"]\n",
        "python-name": "name: !!python/name:os.system\nentrypoint: [true]\n",
        "multi-document": "name: a\nentrypoint: [true]\n---\nname: b\n",
        "huge-int": "name: t\nentrypoint: [true]\nresources: {nodes: " + "9" * 5000 + "}\n",
        "duplicate-key": "name: a\nname: b\nentrypoint: [true]\n",
        "unclosed": "name: [unclosed\n",
        "tab-indent": "name: t\n\tentrypoint: [true]\n",
        "binary-tag": "name: !!binary aGVsbG8=\nentrypoint: [true]\n",
        "set-tag": "name: t\nentrypoint: !!set {a, b}\n",
    }
    out = [Entry(f"yaml-{tag}", "POST", "/api/tasks", text.encode(), {"Content-Type": YAML}, fields=("body", "name",
                                                                                                       "entrypoint"))
           for tag, text in docs.items()]
    out += [Entry(f"tuxiv-yaml-{tag}", "POST", "/api/tasks?format=tuxiv", text.encode(), {"Content-Type": YAML},
                  fields=("body", "name", "entrypoint", "tuxiv"))
            for tag, text in docs.items() if tag in ("billion-laughs", "alias", "merge-key", "python-object")]
    out.append(Entry("yaml-60k-keys", "POST", "/api/tasks", lambda: yaml_many_keys(60_000 * 16, "k"),
                     {"Content-Type": YAML}, fields=("k000000", "body")))
    out.append(Entry("tuxiv-60k-keys", "POST", "/api/tasks?format=tuxiv", lambda: yaml_many_keys(60_000 * 16, "k"),
                     {"Content-Type": YAML}, fields=("k000000", "body")))
    return out


def _tuxiv() -> list[Entry]:
    """tuxiv.conf bodies: smuggled sbatch options, Unicode digits, non-scalar and dangerous env."""
    out: list[Entry] = []
    smuggled = {
        "wrap": 'nodes=1 --wrap="touch @CANARY@/wrap"',
        "uid": "nodes=1 --uid=0",
        "export": "time=10 --export=ALL,LD_PRELOAD=/tmp/x.so",
        "nodelist": "partition=gpu --nodelist=node1",
        "chdir": "job-name=x --chdir=/",
        "newline": "mem=16G\n#SBATCH --wrap=touch @CANARY@/nl",
        "semicolon": "nodes=1; touch @CANARY@/semi",
        "cmdsub": "job-name=$(touch @CANARY@/jn)",
        "prolog": "gres=gpu:0 --prolog=/tmp/x",
        "dashdash": "--nodes=1 --wrap=id",
        "output-abs": "output=/etc/cron.d/x",
        "output-up": "output=${TACC_USERDIR}/../../etc/x",
        "error-up": "error=../../x",  # (a log path: the error may name log_file, where it lands)
        "nul": "nodes=1\x00--wrap=id",
        "equals-twice": "nodes=1=2",
    }
    for tag, opt in smuggled.items():
        out.append(tuxiv(f"tuxiv-smuggled-{tag}", tuxiv_general(opt), "job.general[0]", "log_file",
                         "user_log_file"))
    digits = {"nodes-arabic": "nodes=٢", "gres-arabic": "gres=gpu:١", "mem-arabic": "mem=١٦G",
              "time-arabic": "time=١٠", "cpus-fullwidth": "cpus-per-task=３", "ntasks-devanagari": "ntasks-per-node=२"}
    for tag, opt in digits.items():
        out.append(tuxiv(f"tuxiv-unicode-digits-{tag}", tuxiv_general(opt), "job.general[0]"))
    for tag, env in (("list", {"A": [1, 2]}), ("mapping", {"A": {"b": "c"}}),
                     ("list-cmdsub", {"A": ["$(touch @CANARY@/envlist)"]}), ("nested-list", {"A": [[["x"]]]})):
        out.append(tuxiv(f"tuxiv-non-scalar-env-{tag}", tuxiv_doc({"env": env}), "job.env", "A"))
    out.append(tuxiv("tuxiv-non-scalar-env-in-list-form", tuxiv_doc({"env": ["A=1", {"B": 2}]}), "job.env"))
    for name in DANGEROUS_ENV:
        out.append(tuxiv(f"tuxiv-dangerous-env-{name}", tuxiv_doc({"env": {name: "/tmp/x"}}), name))
        out.append(submit(f"dangerous-env-{name}", spec(**{"environment.variables": {name: "/tmp/x"}}), name))
    for tag, value in SHELL.items():
        out.append(tuxiv(f"tuxiv-shell-{tag}-in-job.name", tuxiv_doc({"name": value}), "name", "job.name"))
        out.append(tuxiv(f"tuxiv-shell-{tag}-in-job.module", tuxiv_doc({"module": [value]}), "job.module",
                         "environment.modules"))
    for tag in ("cmdsub", "backtick", "semicolon", "newline"):
        value = SHELL[tag]
        out.append(Entry(f"tuxiv-shell-{tag}-in-job.env-value", "POST", "/api/tasks?format=tuxiv",
                         json.dumps({"entrypoint": ['printf "%s\\n" "$HOSTILE"'],
                                     "code": {"kind": "snapshot", "digest": "@CODE@"},
                                     "job": {"name": "t", "env": {"HOSTILE": value}}}).encode(),
                         {"Content-Type": YAML}, expect="accepted",
                         probe=("spec", ("environment", "variables", "HOSTILE"), value)))
    for tag, value in (("up", "../../x"), ("abs", "/etc/passwd"), ("userdir-up", "${TACC_USERDIR}/../../x"),
                       ("workdir-up", "${TACC_WORKDIR}/../x")):
        out.append(tuxiv(f"tuxiv-traversal-{tag}-in-job.log", tuxiv_doc({"log": value}), "job.log", "log_file",
                         "user_log_file"))
    for tag, value in TRAVERSAL.items():
        if value:
            out.append(tuxiv(f"tuxiv-traversal-{tag}-in-datasets", tuxiv_doc({}, datasets=[value]), "datasets"))
    out.append(tuxiv("tuxiv-unknown-section", tuxiv_doc({}, __import__="os"), "__import__"))
    out.append(tuxiv("tuxiv-conda-name-cmdsub", tuxiv_doc({}, environment={"name": SHELL["cmdsub"]}),
                     "environment"))
    out.append(tuxiv("tuxiv-entrypoint-mapping", json.dumps({"entrypoint": {"a": 1}, "job": {"name": "t"}}),
                     "entrypoint"))
    return out


def _git() -> list[Entry]:
    out: list[Entry] = []
    urls = {"upload-pack": "--upload-pack=touch @CANARY@/up", "dash-u": "-utouch @CANARY@/u",
            "ext": "ext::sh -c touch% @CANARY@/ext", "space-option": "https://example.org/r.git --upload-pack=x",
            "newline": "file:///tmp/x\n--upload-pack=touch", "empty": "", "fd": "fd::3",
            "plain-path": "/etc", "relative": "../../repo"}
    for tag, url in urls.items():
        out.append(submit(f"git-url-{tag}", spec(code={"kind": "git", "url": url, "commit": "abcdef1"}), "code.url"))
    for tag, commit in (("head", "HEAD"), ("option", "--output=/tmp/x"), ("newline", "abcdef1\n"),
                        ("branch", "main"), ("too-long", "a" * 41)):
        out.append(submit(f"git-commit-{tag}", spec(code={"kind": "git", "url": "file:///nonexistent/repo",
                                                          "commit": commit}), "code.commit"))
    patches = {
        "outside": "diff --git a/../outside b/../outside\nnew file mode 100644\n--- /dev/null\n+++ b/../outside\n"
                   "@@ -0,0 +1 @@\n+pwned\n",
        "git-hooks": "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n"
                     "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n"
                     "+touch @CANARY@/hook\n",
        "absolute": "diff --git a//etc/cron.d/x b//etc/cron.d/x\nnew file mode 100644\n--- /dev/null\n"
                    "+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+* * * * * root touch @CANARY@/cron\n",
        "rename-out": "diff --git a/x b/../../x\nsimilarity index 100%\nrename from x\nrename to ../../x\n",
        "symlink-out": "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n"
                       "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
        "gitdir-config": "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n"
                         "@@ -1 +1,2 @@\n [core]\n+\tfsmonitor = touch @CANARY@/fsmonitor\n",
    }
    for tag, patch in patches.items():
        out.append(submit(f"git-patch-{tag}", spec(code={"kind": "git", "url": "file:///nonexistent/repo",
                                                         "commit": "abcdef1", "patch": patch}), "code.patch"))
    for tag, url in (("cmdsub", "file:///nonexistent/$(touch${IFS}@CANARY@/gitcs)"),
                     ("backtick", "file:///nonexistent/`touch${IFS}@CANARY@/gitbt`")):
        out.append(accepted(f"git-url-{tag}-accepted", spec(code={"kind": "git", "url": url, "commit": "abcdef1"}),
                            ("code", "url"), url))
    return out


def _archives() -> list[Entry]:
    """Malformed code snapshots: PUT /api/code/<sha256 of the body>."""
    cases: dict[str, Callable[[], bytes]] = {
        "symlink-absolute": lambda: tar_gz([member("link", tarfile.SYMTYPE, "/etc/passwd")]),
        "symlink-up": lambda: tar_gz([member("link", tarfile.SYMTYPE, "../../../etc")]),
        "symlink-then-through": lambda: tar_gz([member("d", tarfile.SYMTYPE, "/tmp"), member("d/x")], {"d/x": b"x"}),
        "hardlink-absolute": lambda: tar_gz([member("h", tarfile.LNKTYPE, "/etc/shadow")]),
        "hardlink-up": lambda: tar_gz([member("h", tarfile.LNKTYPE, "../x")]),
        "char-device": lambda: tar_gz([member("null", tarfile.CHRTYPE)]),
        "block-device": lambda: tar_gz([member("sda", tarfile.BLKTYPE)]),
        "fifo": lambda: tar_gz([member("pipe", tarfile.FIFOTYPE)]),
        "hardlink-inside": lambda: tar_gz([member("a"), member("b", tarfile.LNKTYPE, "a")], {"a": b"x"}),
        "dotdot": lambda: tar_gz([member("../../evil.sh")], {"../../evil.sh": b"x"}),
        "absolute": lambda: tar_gz([member("/etc/cron.d/x")], {"/etc/cron.d/x": b"x"}),
        "inner-dotdot": lambda: tar_gz([member("a/../../x")], {"a/../../x": b"x"}),
        "gzip-bomb-1GiB": gzip_bomb,
        "not-gzip": lambda: b"not a tar at all",
        "truncated": lambda: tar_gz([member("a.py")], {"a.py": b"print(1)\n" * 1000})[:100],
        "empty": lambda: b"",
        "gzip-not-tar": lambda: gzip.compress(b"just text, not a tar archive" * 100),
    }
    out = [Entry(f"archive-{tag}", "PUT", "/api/code/@DIGEST@", make, {"Content-Type": "application/gzip"},
                 fields=("body", "archive", "member"), subst=False)
           for tag, make in cases.items()]
    good = tar_gz([member("a.py")], {"a.py": b"print(1)\n"})
    out += [
        Entry("archive-wrong-digest", "PUT", f"/api/code/{sha(b'other')}", good,
              {"Content-Type": "application/gzip"}, fields=("digest",), subst=False),
        Entry("archive-digest-uppercase", "PUT", f"/api/code/{sha(good).upper()}", good,
              {"Content-Type": "application/gzip"}, fields=("digest",), subst=False),
        Entry("archive-digest-short", "PUT", f"/api/code/{sha(good)[:63]}", good,
              {"Content-Type": "application/gzip"}, fields=("digest",), subst=False),
        Entry("archive-digest-traversal", "PUT", "/api/code/..%2F..%2Fetc%2Fpasswd", good,
              {"Content-Type": "application/gzip"}, fields=("digest",), subst=False),
        Entry("archive-head-traversal", "HEAD", "/api/code/..%2F..%2Fetc%2Fpasswd", statuses=(400, 404)),
        Entry("archive-unauthenticated", "PUT", "/api/code/@DIGEST@", good, {"Content-Type": "application/gzip"},
              user=None, fields=("token",), statuses=(401,), subst=False),
    ]
    return out


def _queries() -> list[Entry]:
    """Huge and malformed query parameters, task ids and Last-Event-ID."""
    out: list[Entry] = []
    bad_ints = {"2p63": str(2**63), "2p64": str(2**64), "neg": "-1", "underscore": "1_0", "arabic": "١٠",
                "float": "1.5", "exp": "1e3", "hex": "0x10", "nonnumeric": "abc"}
    for tag, value in bad_ints.items():
        out.append(Entry(f"query-limit-{tag}", "GET", f"/api/tasks?limit={value}", fields=("limit",)))
        out.append(Entry(f"query-before-{tag}", "GET", f"/api/tasks?before={value}", fields=("before",)))
        out.append(Entry(f"query-logs-offset-{tag}", "GET", f"/api/tasks/@MYTASK@/logs?offset={value}",
                         fields=("offset",)))
        out.append(Entry(f"query-stream-offset-{tag}", "GET", f"/api/tasks/@MYTASK@/logs/stream?offset={value}",
                         fields=("offset",)))
        out.append(Entry(f"query-usage-days-{tag}", "GET", f"/api/admin/usage?days={value}", user=ADMIN,
                         fields=("days",)))
        out.append(Entry(f"last-event-id-{tag}", "GET", "/api/tasks/@MYTASK@/logs/stream",
                         headers={"Last-Event-ID": value}, fields=("Last-Event-ID",)))
    out += [
        Entry("query-limit-zero", "GET", "/api/tasks?limit=0", fields=("limit",)),
        Entry("query-logs-limit-zero", "GET", "/api/tasks/@MYTASK@/logs?limit=0", fields=("limit",)),
        Entry("query-logs-limit-2p64", "GET", f"/api/tasks/@MYTASK@/logs?limit={2**64}", fields=("limit",)),
        Entry("query-logs-offset-2p62-plus-1", "GET", f"/api/tasks/@MYTASK@/logs?offset={2**62 + 1}",
              fields=("offset",)),
        Entry("last-event-id-minus-5", "GET", "/api/tasks/@MYTASK@/logs/stream", headers={"Last-Event-ID": "-5"},
              fields=("Last-Event-ID",)),
        Entry("query-usage-days-zero", "GET", "/api/admin/usage?days=0", user=ADMIN, fields=("days",)),
        Entry("query-state-hostile", "GET", "/api/tasks?state=$(touch%20@CANARY@/state)", fields=("state",)),
        Entry("query-owner-hostile-admin", "GET", "/api/tasks?owner=$(touch%20@CANARY@/owner)", user=ADMIN,
              fields=("owner",)),
        Entry("query-quota-user-hostile-admin", "GET", "/api/quota?user=..%2F..%2Fetc", user=ADMIN,
              fields=("user",)),
        Entry("query-quota-user-other-non-admin", "GET", "/api/quota?user=bob", fields=("admin",), statuses=(403,)),
        Entry("query-before-2p62", "GET", f"/api/tasks?before={2**62}", expect="accepted"),
        Entry("query-logs-offset-2p62", "GET", f"/api/tasks/@MYTASK@/logs?offset={2**62}", expect="accepted",
              probe=("response", ("data",), "")),
        Entry("query-owner-ignored-for-non-admin", "GET", "/api/tasks?owner=bob&all=1", expect="accepted",
              probe=("response", ("owners",), [MALLORY])),
        Entry("last-event-id-zero-finished-task", "GET", "/api/tasks/@MYTASK@/logs/stream",
              headers={"Last-Event-ID": "0"}, expect="accepted", stream=True),
    ]
    ids = {"2p63": str(2**63), "2p64": str(2**64), "1e30": str(10**30), "zero": "0", "leading-zeros": "0" * 30 + "1"}
    for tag, tid in ids.items():
        for method, suffix in (("GET", ""), ("POST", "/cancel"), ("GET", "/logs"), ("GET", "/logs/stream"),
                               ("GET", "/outputs")):
            out.append(Entry(f"task-id-{tag}-{method}{suffix.replace('/', '-')}", method, f"/api/tasks/{tid}{suffix}",
                             fields=("task",), statuses=(404,)))
    for path in ("/api/tasks/..%2F1", "/api/tasks/1%2F..%2F2/logs", "/api/tasks/%2E%2E/outputs",
                 "/api/tasks/-1", "/api/tasks/1.0"):
        out.append(Entry(f"route-traversal-{path}", "GET", path, statuses=(404,)))
    return out


def _quota_admin() -> list[Entry]:
    out: list[Entry] = []
    names = {**{f"shell-{t}": SHELL[t] for t in ("cmdsub", "backtick", "semicolon", "newline", "squote")},
             "dotdot": "..", "traversal": "../../etc/passwd", "slash": "a/b", "long": "x" * 65,
             "very-long": "x" * 30_000, "unicode": "\u00e9t\u00e9", "arabic-digits": "١٢", "nul": "a\x00b",
             "leading-dash": "-rf", "space": " a", "trailing-newline": "a\n", "empty-after-decode": "%"}
    for tag, name in names.items():
        enc = quote(name, safe="").replace(".", "%2E")  # "%2E%2E": a client would drop a literal ".." segment
        for kind in ("user", "group"):
            out.append(Entry(f"quota-name-{tag}-{kind}-put", "PUT", f"/api/admin/quotas/{kind}/{enc}",
                             dumps({"max_gpus": 1}), {"Content-Type": JSON}, user=ADMIN, fields=("name",)))
        out.append(Entry(f"quota-name-{tag}-get", "GET", f"/api/admin/quotas/user/{enc}", user=ADMIN,
                         fields=("name",)))
        out.append(Entry(f"quota-name-{tag}-delete", "DELETE", f"/api/admin/quotas/group/{enc}", user=ADMIN,
                         fields=("name",)))
        out.append(Entry(f"membership-user-{tag}-put", "PUT", f"/api/admin/users/{enc}/group",
                         dumps({"group": "lab-a"}), {"Content-Type": JSON}, user=ADMIN, fields=("user",)))
        out.append(Entry(f"membership-user-{tag}-delete", "DELETE", f"/api/admin/users/{enc}/group", user=ADMIN,
                         fields=("user",)))
        out.append(Entry(f"membership-group-{tag}", "PUT", "/api/admin/users/quota-target/group",
                         dumps({"group": name}), {"Content-Type": JSON}, user=ADMIN, fields=("group",)))
        out.append(Entry(f"quota-name-{tag}-non-admin", "PUT", f"/api/admin/quotas/user/{enc}",
                         dumps({"max_gpus": 1}), {"Content-Type": JSON}, fields=("admin",), statuses=(403,)))
    numbers: dict[str, bytes] = {
        "max_gpus-2p63": b'{"max_gpus": 9223372036854775808}', "max_gpus-neg": b'{"max_gpus": -1}',
        "max_gpus-true": b'{"max_gpus": true}', "max_gpus-float": b'{"max_gpus": 1.5}',
        "max_gpus-string": b'{"max_gpus": "1"}', "max_gpus-arabic": '{"max_gpus": "١"}'.encode(),
        "guaranteed_gpus-2p64": b'{"guaranteed_gpus": 18446744073709551616}',
        "guaranteed_gpus-true": b'{"guaranteed_gpus": true}',
        "guaranteed_gpus-over-max": b'{"max_gpus": 1, "guaranteed_gpus": 2}',
        "gpu_hours-1e309": b'{"gpu_hours": 1e309}', "gpu_hours-nan": b'{"gpu_hours": NaN}',
        "gpu_hours-neg": b'{"gpu_hours": -1}', "gpu_hours-true": b'{"gpu_hours": true}',
        "gpu_hours-string": b'{"gpu_hours": "1"}', "gpu_hours-huge": b'{"gpu_hours": 1e300}',
        "unknown-field": b'{"admin": true}', "body-array": b"[1]", "body-invalid": b"{",
    }
    for tag, body in numbers.items():
        fld = tag.split("-")[0]
        # NaN and 1e309 may be refused by the JSON reader before any field is known: "body" then
        flds = ("body",) if fld == "body" else ("admin",) if fld == "unknown" else (fld, "body")
        out.append(Entry(f"quota-number-{tag}", "PUT", "/api/admin/quotas/user/quota-target", body,
                         {"Content-Type": JSON}, user=ADMIN, fields=flds))
    out += [
        Entry("quota-kind-unknown", "PUT", "/api/admin/quotas/robot/x", dumps({"max_gpus": 1}),
              {"Content-Type": JSON}, user=ADMIN, statuses=(404,)),
        Entry("membership-group-number", "PUT", "/api/admin/users/quota-target/group", b'{"group": 5}',
              {"Content-Type": JSON}, user=ADMIN, fields=("group",)),
        Entry("membership-extra-field", "PUT", "/api/admin/users/quota-target/group",
              b'{"group": "lab-a", "user": "root"}', {"Content-Type": JSON}, user=ADMIN, fields=("user",)),
        Entry("membership-non-admin-self", "PUT", "/api/admin/users/mallory/group", b'{"group": "admins"}',
              {"Content-Type": JSON}, fields=("admin",), statuses=(403,)),
        Entry("groups-non-admin", "GET", "/api/admin/groups", fields=("admin",), statuses=(403,)),
        Entry("quotas-non-admin", "GET", "/api/admin/quotas", fields=("admin",), statuses=(403,)),
        Entry("usage-non-admin", "GET", "/api/admin/usage", fields=("admin",), statuses=(403,)),
        Entry("usage-non-admin-huge-days", "GET", f"/api/admin/usage?days={2**64}", statuses=(400, 403)),
    ]
    return out


def _tokens() -> list[Entry]:
    """The token routes (GET/POST/DELETE /api/admin/tokens, /api/tokens): hostile input gets a 4xx."""
    out: list[Entry] = []
    for tag, user in (("cmdsub", SHELL["cmdsub"]), ("traversal", "../../etc"), ("long", "x" * 10_000),
                      ("nul", "a\x00b"), ("empty", ""), ("number", 5), ("list", ["alice"]), ("null", None)):
        out.append(Entry(f"admin-tokens-post-user-{tag}", "POST", "/api/admin/tokens", dumps({"user": user}),
                         {"Content-Type": JSON}, user=ADMIN, fields=("user",)))
    bodies = {
        "admin-string": {"user": "alice", "admin": "yes"},
        "note-long": {"user": "alice", "note": "n" * 100_000},
        "note-nul": {"user": "alice", "note": "a\x00b"},
        "expires-2p64": {"user": "alice", "expires_in": 2**64},
        "expires-negative": {"user": "alice", "expires_in": -5},
        "expires-nan-string": {"user": "alice", "expires_in": "NaN"},
        "unknown-field": {"user": "alice", "token_hash": "0" * 64},
    }
    for tag, body in bodies.items():
        out.append(Entry(f"admin-tokens-post-{tag}", "POST", "/api/admin/tokens", dumps(body),
                         {"Content-Type": JSON}, user=ADMIN))
    out += [
        Entry("admin-tokens-post-non-admin", "POST", "/api/admin/tokens", dumps({"user": MALLORY, "admin": True}),
              {"Content-Type": JSON}, statuses=(403,)),
        Entry("admin-tokens-get-non-admin", "GET", "/api/admin/tokens", statuses=(403,)),
        Entry("admin-tokens-get-user-hostile", "GET", "/api/admin/tokens?user=$(touch%20@CANARY@/tok)", user=ADMIN),
        Entry("admin-tokens-delete-2p64", "DELETE", f"/api/admin/tokens/{2**64}", user=ADMIN),
        Entry("admin-tokens-delete-nonnumeric", "DELETE", "/api/admin/tokens/abc", user=ADMIN),
        Entry("admin-tokens-delete-traversal", "DELETE", "/api/admin/tokens/..%2F1", user=ADMIN),
        Entry("admin-tokens-delete-non-admin", "DELETE", "/api/admin/tokens/1", statuses=(403, 404)),
        Entry("tokens-post-self-admin", "POST", "/api/tokens", dumps({"admin": True}), {"Content-Type": JSON}),
        Entry("tokens-post-other-user", "POST", "/api/tokens", dumps({"user": BOB}), {"Content-Type": JSON}),
        Entry("tokens-delete-2p64", "DELETE", f"/api/tokens/{2**64}"),
        Entry("tokens-delete-other-users-token", "DELETE", "/api/tokens/1", statuses=(403, 404)),
        Entry("tokens-get-user-other-ignored", "GET", "/api/tokens?user=bob&all=1", expect="accepted",
              probe=("response", ("token_users",), [MALLORY])),
    ]
    return out


NON_PUBLIC = [("GET", "/api/whoami"), ("GET", "/api/tasks"), ("POST", "/api/tasks"), ("GET", "/api/tasks/@MYTASK@"),
              ("POST", "/api/tasks/@MYTASK@/cancel"), ("GET", "/api/tasks/@MYTASK@/logs"),
              ("GET", "/api/tasks/@MYTASK@/logs/stream"), ("GET", "/api/tasks/@MYTASK@/outputs"),
              ("PUT", "/api/code/@CODE@"), ("HEAD", "/api/code/@CODE@"), ("GET", "/api/cluster"), ("GET", "/api/quota"),
              ("GET", "/api/admin/quotas"), ("GET", "/api/admin/quotas/user/alice"),
              ("PUT", "/api/admin/quotas/user/alice"), ("DELETE", "/api/admin/quotas/user/alice"),
              ("GET", "/api/admin/groups"), ("GET", "/api/admin/usage"), ("PUT", "/api/admin/users/alice/group"),
              ("DELETE", "/api/admin/users/alice/group"), ("GET", "/api/admin/tokens"), ("POST", "/api/admin/tokens"),
              ("DELETE", "/api/admin/tokens/1"), ("GET", "/api/tokens"), ("POST", "/api/tokens"),
              ("DELETE", "/api/tokens/1")]


def _auth() -> list[Entry]:
    """Missing and bad tokens, tokens in the URL, other users' objects."""
    out: list[Entry] = []
    for method, path in NON_PUBLIC:
        slug = f"{method}{path}".replace("/", "-").replace("@", "")
        body = dumps(spec()) if method in ("POST", "PUT") else None
        flds = () if method == "HEAD" else ("token",)
        out.append(Entry(f"no-token-{slug}", method, path, body, {"Content-Type": JSON}, user=None, fields=flds,
                         statuses=(401,)))
        if path != "/api/tasks/@MYTASK@/logs/stream":  # the one route a browser's EventSource reaches
            out.append(Entry(f"url-token-{slug}", method, path + ("&" if "?" in path else "?") + "token=@TOKEN@",
                             body, {"Content-Type": JSON}, user=None, fields=flds, statuses=(401,)))
    bad = {"garbage": "token not-a-token", "long": "token " + "x" * 600, "very-long": "token " + "x" * 30_000,
           "bearer-empty": "Bearer", "basic": "Basic YWxpY2U6eA==", "token-empty": "token ", "two-words": "token a b",
           "valid-plus-suffix": "token @TOKEN@x", "valid-prefix": "token @TOKENHALF@", "latin1": "token caf\u00e9",
           "sql": "token ' OR '1'='1", "cmdsub": "token $(touch @CANARY@/tok)", "scheme-only": "token"}
    for tag, value in bad.items():
        out.append(Entry(f"bad-token-{tag}", "GET", "/api/whoami", headers={"Authorization": value}, user=None,
                         fields=("token",), statuses=(401,)))
        out.append(Entry(f"bad-token-{tag}-submit", "POST", "/api/tasks", dumps(spec()),
                         {"Content-Type": JSON, "Authorization": value}, user=None, fields=("token",),
                         statuses=(401,)))
    out.append(Entry("url-token-bad-on-stream", "GET", "/api/tasks/@MYTASK@/logs/stream?token=nope", user=None,
                     fields=("token",), statuses=(401,)))
    out.append(Entry("url-token-on-stream-accepted", "GET", "/api/tasks/@MYTASK@/logs/stream?token=@TOKEN@",
                     user=None, expect="accepted", stream=True))
    for method, suffix in (("GET", ""), ("POST", "/cancel"), ("GET", "/logs"), ("GET", "/logs/stream"),
                           ("GET", "/outputs")):
        out.append(Entry(f"other-users-task-{method}{suffix.replace('/', '-')}", method,
                         f"/api/tasks/@BOBTASK@{suffix}", fields=("task",), statuses=(404,)))
    out += [
        Entry("other-users-snapshot-head", "HEAD", "/api/code/@BOBCODE@", statuses=(404,)),
        submit("other-users-snapshot-submit", spec(code={"kind": "snapshot", "digest": "@BOBCODE@"}), "code.digest",
               statuses=(403, 404, 422)),
        # A dry run naming another's snapshot: tests/e2e/test_authz.py (it must answer as for none at all).
        submit("no-unix-account-submit", spec(), "owner", statuses=(403,), user=NO_ACCOUNT),
        submit("account-other-group", spec(account="admins"), "account", statuses=(403,)),
    ]
    return out


def entries() -> list[Entry]:
    out = [*_strings(), *_paths(), *_numbers(), *_json_shapes(), *_big(), *_content_types(), *_yaml(), *_tuxiv(),
           *_git(), *_archives(), *_queries(), *_quota_admin(), *_tokens(), *_auth()]
    seen: set[str] = set()
    for e in out:
        if e.id in seen:
            raise AssertionError(f"duplicate corpus id {e.id}")
        seen.add(e.id)
    return out


CORPUS = entries()
