"""What tcloud prints, in a pipe (stdout not a terminal, COLUMNS unset), against the real service.

Machine-readable output (launch.sh, the spec) is never cut or folded at 80 columns; human lines
(the digest) stay whole; a task that has not started says so; options are named in their errors
and win over the file's values; an error is reported once.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import yaml

from .conftest import BIN, ROOT, Api, tcloud, write_task

LONG = "echo " + "-".join(f"word{i}" for i in range(40))  # a 240-character shell line


def piped(service, user: str, *args: str, admin: bool = False) -> subprocess.CompletedProcess[str]:
    """tcloud with stdout a pipe and no COLUMNS, as in `tcloud ... > file` or `| less`."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update({"TACC_URL": service.url, "TACC_TOKEN": service.token(user, admin=admin), "TACC_CONFIG": "/nonexistent"})
    return subprocess.run([str(BIN / "tcloud"), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def submitted_id(res: subprocess.CompletedProcess[str]) -> int:
    assert res.returncode == 0, res.stderr
    return int(res.stdout.split("submitted task ")[1].split()[0])


def test_dry_run_and_show_are_never_cut_in_a_pipe(service, tmp_path):
    d = write_task(tmp_path / "wide", f"name: wide\ncode: .\nentrypoint:\n  - {LONG}\n"
                   f"environment:\n  variables:\n    WIDE: {'x' * 150}\n")
    plan = json.loads(piped(service, "pia", "submit", str(d), "--dry-run", "--json").stdout)["plan"]
    res = piped(service, "pia", "submit", str(d), "--dry-run")
    assert res.returncode == 0, res.stderr
    assert plan["script"] in res.stdout  # launch.sh byte for byte: a saved copy runs
    for content in plan.get("files", {}).values():
        assert content in res.stdout
    assert f"digest {json.loads(piped(service, 'pia', 'spec', str(d)).stdout)['digest']}" in res.stdout

    tid = submitted_id(piped(service, "pia", "submit", str(d), "-f"))
    full = json.loads(piped(service, "pia", "show", str(tid), "--json").stdout)
    out = piped(service, "pia", "show", str(tid)).stdout
    assert f"digest: {full['digest']}\n" in out  # one line, not broken after "digest:"
    assert yaml.safe_load(out.split("\nspec\n", 1)[1]) == full["spec"]  # the spec as it is, no folded strings
    assert LONG in out
    assert "placement: localhost (no GPUs)" in out and "localhost[]" not in out
    for args in (["ps"], ["ps", "-a"], ["cluster"], ["logs", str(tid)], ["quota"]):
        res = piped(service, "pia", *args)
        assert res.returncode == 0 and "\u2026" not in res.stdout, res.stdout  # no ellipsis: nothing cropped
    assert LONG.replace("echo ", "") in piped(service, "pia", "logs", str(tid)).stdout


def test_a_pending_task_shows_what_it_asked_for_and_that_it_waits(service, tmp_path):
    api = Api(service.url, service.token("quinn"))
    blocker = submitted_id(piped(service, "quinn", "submit", str(write_task(
        tmp_path / "b", "name: blocker\ncode: .\nentrypoint: sleep 60\nresources: {gpus_per_node: 2}\n"))))
    api.wait_status(blocker, {"running"})
    waiter = submitted_id(piped(service, "quinn", "submit", str(write_task(
        tmp_path / "w", "name: waiter\ncode: .\nentrypoint: echo waited-and-ran\nresources: {gpus_per_node: 2}\n"))))
    try:
        row = next(line.split() for line in piped(service, "quinn", "ps").stdout.splitlines()
                   if line.split()[:1] == [str(waiter)])
        assert row[1:4] == ["waiter", "pending", "2"], row  # GPUS: the 2 it asked for, not "-"
        assert "asks for: 2 GPU(s)" in piped(service, "quinn", "show", str(waiter)).stdout

        res = piped(service, "quinn", "logs", str(waiter))
        assert res.returncode == 0 and res.stdout == ""
        assert f"task {waiter} is waiting to start (position 1 in the queue" in res.stderr, res.stderr
        assert "no output yet" in res.stderr

        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        env.update({"TACC_URL": service.url, "TACC_TOKEN": service.token("quinn"), "TACC_CONFIG": "/nonexistent"})
        follow = subprocess.Popen([str(BIN / "tcloud"), "logs", "-f", str(waiter)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        assert follow.stderr is not None
        first = follow.stderr.readline()
        assert f"task {waiter} is waiting to start" in first and "following its output once it starts" in first
        assert follow.poll() is None  # still waiting
        api.call("POST", f"/api/tasks/{blocker}/cancel")
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 0 and "waited-and-ran" in out and f"task {waiter} succeeded" in err
    finally:
        api.call("POST", f"/api/tasks/{blocker}/cancel")
        api.call("POST", f"/api/tasks/{waiter}/cancel")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and api.call("GET", f"/api/tasks/{blocker}")[1]["status"] != "cancelled":
        time.sleep(0.1)


def test_all_users_without_admin_rights_says_so(service):
    res = piped(service, "rosa", "ps", "-a")
    assert res.returncode == 0 and "only admins see every user's tasks (-a); these are yours (rosa)" in res.stderr
    res = piped(service, "root", "ps", "-a", admin=True)
    assert res.returncode == 0 and "only admins" not in res.stderr


def test_option_errors_name_the_option_and_options_win_over_the_file(service, tmp_path):
    ok = write_task(tmp_path / "ok", "name: ok\ncode: .\nentrypoint: echo hi\n")
    res = tcloud(service, "sam", "submit", str(ok), "--time", "5x", "--dry-run")
    assert res.returncode == 1 and "bad option --time 5x: '5x' is not a time limit" in res.stderr, res.stderr
    assert "task file" not in res.stderr

    bad = write_task(tmp_path / "bad", "name: bad\ncode: .\nentrypoint: echo hi\nresources: {gpus_per_node: 99}\n")
    res = tcloud(service, "sam", "submit", str(bad), "--dry-run")
    assert res.returncode == 1 and f"the task file {bad} is invalid" in res.stderr
    assert "resources.gpus_per_node" in res.stderr
    res = tcloud(service, "sam", "submit", str(bad), "--gpus", "1", "--dry-run", "--json")
    assert res.returncode == 0, res.stderr  # the override wins over the file's 99...
    assert json.loads(res.stdout)["plan"]["resources"]["gpus_per_node"] == 1
    res = tcloud(service, "sam", "spec", str(bad), "--gpus", "40")
    assert res.returncode == 1 and "bad option --gpus 40: " in res.stderr  # ... and is checked like the file

    conf = tmp_path / "tx" / "tuxiv.conf"  # the same for a tuxiv.conf: the file's error names its line
    conf.parent.mkdir()
    conf.write_text("entrypoint:\n  - echo hi\njob:\n  name: tx\n  general:\n    - gpus-per-node=99\n")
    res = tcloud(service, "sam", "spec", str(conf))
    assert res.returncode == 1 and "resources.gpus_per_node" in res.stderr and "line 6" in res.stderr, res.stderr
    res = tcloud(service, "sam", "spec", str(conf), "--gpus", "1")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["spec"]["resources"]["gpus_per_node"] == 1
    res = tcloud(service, "sam", "spec", str(conf), "--time", "5x")
    assert "bad option --time 5x" in res.stderr and f"the task file {conf} is invalid too" in res.stderr


def test_a_refused_task_is_reported_once(service, tmp_path):
    d = write_task(tmp_path / "t", "name: t\ncode: .\nentrypoint: echo hi\n")
    res = tcloud(service, "sam", "submit", str(d), "--runtime", "no-such-runtime", "--dry-run")
    assert res.returncode == 1, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == "error: the service refused the task (HTTP 422):", res.stderr
    assert len(lines) == 2 and lines[1].startswith("  runtime.kind (--runtime no-such-runtime): "), res.stderr


EVIL = r'''import sys, time
w = sys.stdout.write
w("start\n")
w("\x1b]52;c;ZXZpbA==\x07")  # OSC 52: set the reader's clipboard
w("\x1b]0;pwned\x07\x1b[2J\x1b[H\u009b6n\x1b[8mhidden\x1b[0m\n")  # title, clear, home, 8-bit CSI, conceal
w("\x1b[31mred\x1b[0m\n")
w(" 50%|##   |\r100%|#####|\n")
w("split \x1b]5")
sys.stdout.flush()
time.sleep(1.5)  # the rest of the sequence comes in a later chunk of the log
w("2;c;QQ==\x07 done\n")
'''


def assert_terminal_safe(out: str) -> None:
    import re

    rest = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", rest), repr(out)
    assert "\\x1b]52;c;ZXZpbA==\\x07" in out  # shown, not acted on
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H\\x9b6nhidden" in out  # conceal dropped: the text shows
    assert "\x1b[31mred\x1b[0m\n" in out  # colours kept
    assert " 50%|##   |\r100%|#####|\n" in out  # progress bars kept
    assert "split \\x1b]52;c;QQ==\\x07 done\n" in out  # split across chunks: still caught


def logs_bytes(service, user: str, *args: str) -> tuple[int, str]:
    """``tcloud logs ARGS`` in a pipe, read as bytes (text mode would turn progress bars' \\r into \\n)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update({"TACC_URL": service.url, "TACC_TOKEN": service.token(user), "TACC_CONFIG": "/nonexistent"})
    res = subprocess.run([str(BIN / "tcloud"), "logs", *args], capture_output=True, env=env, cwd=ROOT, timeout=120)
    return res.returncode, res.stdout.decode("utf-8")


def test_logs_make_a_hostile_tasks_escapes_visible_and_raw_passes_them(service, tmp_path):
    d = write_task(tmp_path / "evil", "name: evil\ncode: .\nentrypoint: python evil.py\n", {"evil.py": EVIL})
    tid = submitted_id(piped(service, "tessa", "submit", str(d)))
    rc, follow = logs_bytes(service, "tessa", "-f", str(tid))  # follows while the task prints: the split is live
    assert rc == 0
    assert_terminal_safe(follow)

    rc, chunks = logs_bytes(service, "tessa", str(tid))
    assert rc == 0
    assert_terminal_safe(chunks)
    assert chunks == follow  # the same text whichever way it was read

    rc, raw = logs_bytes(service, "tessa", "--raw", str(tid))
    assert rc == 0 and "\x1b]52;c;ZXZpbA==\x07" in raw and "split \x1b]52;c;QQ==\x07 done" in raw
    assert "\u009b6n" in raw and " 50%|##   |\r100%" in raw
    rc, raw_follow = logs_bytes(service, "tessa", "-f", "--raw", str(tid))
    assert rc == 0 and raw_follow == raw
