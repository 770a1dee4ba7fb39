"""The demo's users' homes are never inside the project checkout (captures would see its git repo).

A checkout is a real git repository here, the state dir its ``./.tacc`` as start.sh makes it; a
user's directory is what the executors hand out (``TACC_USERDIR``, a server's root folder).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tacc_hub.executors.local import LocalExecutor
from tacc_hub.hub.config import demo_homes, hub_settings


def _settings(repo: Path, state: Path, env: dict[str, str]):
    return hub_settings(repo=repo, python="/venv/bin/python", hub_port=8000, service_port=8765, state_dir=state,
                        users="alice", admins="admin", password=None, executor="local", spawner="tacc",
                        homes=demo_homes(repo, state, env))


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _git_top(path: Path) -> str:
    r = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def test_a_users_folder_of_the_demo_is_not_in_the_checkouts_git_repo(tmp_path):
    repo = _checkout(tmp_path)
    state = repo / ".tacc"
    _settings(repo, state, {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")})
    alice = LocalExecutor(state).user_dir("alice")
    alice.mkdir(parents=True)
    assert _git_top(alice) == ""
    assert not alice.resolve().is_relative_to(repo.resolve())
    assert alice.resolve().is_relative_to((tmp_path / "data" / "tacc-hub" / "demo").resolve())


def test_tacc_demo_homes_wins_and_an_earlier_demos_files_move_there(tmp_path):
    repo = _checkout(tmp_path)
    state = repo / ".tacc"
    (state / "users" / "bob").mkdir(parents=True)
    (state / "users" / "bob" / "notes.txt").write_text("keep me")
    homes = tmp_path / "homes"
    _settings(repo, state, {"TACC_DEMO_HOMES": str(homes)})
    assert (state / "users").is_symlink()
    assert (homes / "bob" / "notes.txt").read_text() == "keep me"
    assert (state / "users" / "bob" / "notes.txt").read_text() == "keep me"
    _settings(repo, state, {"TACC_DEMO_HOMES": str(homes)})  # a restart: unchanged
    assert (state / "users").resolve() == homes.resolve()


def test_a_state_dir_outside_the_checkout_keeps_its_users_folder(tmp_path):
    repo = _checkout(tmp_path)
    state = tmp_path / "elsewhere"
    assert demo_homes(repo, state, {"HOME": str(tmp_path)}) is None
    _settings(repo, state, {"HOME": str(tmp_path)})
    assert not (state / "users").is_symlink()
