"""The time-limit warning's rule (``launcher.proctree.warn``): SIGUSR1 to the main process if it traps it, else
to its children that do; never to a process that would die of it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tacc_hub.launcher.proctree import catches, warn

TRAP = ("import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (open(sys.argv[1], 'a').write('usr1\\n')))\n"
        "open(sys.argv[1] + '.ready', 'w').close()\n"
        "time.sleep(30)\n")


def _ready(path: Path, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


def test_a_main_process_that_traps_it_gets_it_once(tmp_path: Path) -> None:
    out = tmp_path / "main"
    proc = subprocess.Popen([sys.executable, "-c", TRAP, str(out)])
    try:
        _ready(Path(f"{out}.ready"))
        assert catches(proc.pid, signal.SIGUSR1)
        assert warn(proc.pid, signal.SIGUSR1) == 1
        end = time.monotonic() + 10
        while not (out.exists() and out.read_text()):
            assert time.monotonic() < end
            time.sleep(0.02)
        assert out.read_text() == "usr1\n" and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_main_process_without_a_handler_is_spared_and_its_trapping_children_get_it(tmp_path: Path) -> None:
    # torchrun-like: the main process does not trap SIGUSR1, two workers: one traps it, one does not
    out = tmp_path / "w"
    parent = ("import subprocess, sys, time\n"
              f"a = subprocess.Popen([sys.executable, '-c', {TRAP!r}, sys.argv[1]])\n"
              "b = subprocess.Popen(['sleep', '30'])\n"
              "open(sys.argv[1] + '.kids', 'w').write(f'{a.pid} {b.pid}')\n"
              "time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", parent, str(out)])
    try:
        _ready(Path(f"{out}.ready"))
        _ready(Path(f"{out}.kids"))
        trapping, plain = (int(p) for p in Path(f"{out}.kids").read_text().split())
        assert not catches(proc.pid, signal.SIGUSR1) and not catches(plain, signal.SIGUSR1)
        assert warn(proc.pid, signal.SIGUSR1) == 1
        end = time.monotonic() + 10
        while not (out.exists() and out.read_text()):
            assert time.monotonic() < end
            time.sleep(0.02)
        time.sleep(0.3)  # had anything else been signalled, it would be dead by now
        assert proc.poll() is None, "the main process was killed by the warning"
        assert Path(f"/proc/{plain}").exists() and Path(f"/proc/{trapping}").exists()
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
        proc.kill()
        proc.wait()


def test_nothing_traps_it_nothing_is_sent() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        assert warn(proc.pid, signal.SIGUSR1) == 0
        time.sleep(0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
