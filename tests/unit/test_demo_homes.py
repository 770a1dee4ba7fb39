"""The demo's users' folders are never inside the project checkout (captures would see its git repo), and the
demo runs tasks as their owners only where every account can use the checkout (else: service, saying why).

A checkout is a real git repository here, the state dir its ``./.tacc`` as start.sh makes it; a
user's directory is what the executors hand out (``TACC_USERDIR``, a server's root folder).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tacc_hub.executors.local import LocalExecutor
from tacc_hub.hub.config import DEMO_ROOT, demo_data_dir, demo_identity, hub_settings, shared_problem
from tests import accounts

ROOT = Path(__file__).resolve().parents[2]


def _settings(repo: Path, state: Path, env: dict[str, str], identity: str = "service"):
    return hub_settings(repo=repo, python="/venv/bin/python", hub_port=8000, service_port=8765, state_dir=state,
                        users="alice", admins="admin", password=None, executor="local", spawner="tacc",
                        data_dir=demo_data_dir(repo, state, env, identity), task_identity=identity)


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _git_top(path: Path) -> str:
    r = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def _data_dir_of(settings) -> Path:
    (arg,) = [a for a in settings["JupyterHub"]["services"][0]["command"] if a.startswith("--TaccHub.data_dir=")]
    return Path(arg.split("=", 1)[1])


def test_a_users_folder_of_the_demo_is_not_in_the_checkouts_git_repo(tmp_path):
    repo = _checkout(tmp_path)
    state = repo / ".tacc"
    s = _settings(repo, state, {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")})
    data = _data_dir_of(s)
    alice = LocalExecutor(data, run_dir=state / "run").user_dir("alice")
    alice.mkdir(parents=True)
    assert _git_top(alice) == ""
    assert not alice.resolve().is_relative_to(repo.resolve())
    assert alice.resolve().is_relative_to((tmp_path / "data" / "tacc-hub" / "demo").resolve())
    assert state.stat().st_mode & 0o777 == 0o700 and data.stat().st_mode & 0o777 == 0o711


def test_as_owner_the_data_dir_is_one_every_account_can_reach(tmp_path):
    repo = _checkout(tmp_path)
    # ./.tacc of the checkout: never <checkout>/.tacc-data, and not root's ~/.local/share (others cannot enter)
    owner = demo_data_dir(repo, repo / ".tacc", {"HOME": "/root"}, "owner")
    assert owner.parent == DEMO_ROOT and owner.name.startswith("checkout-tacc-")
    # a state dir outside the checkout but out of the other accounts' reach (pytest's tmp is root's alone)
    hidden = tmp_path / "state"
    assert os.stat(tmp_path.parent.parent).st_mode & 0o001 == 0  # the premise: /tmp/pytest-of-root is 0700
    assert demo_data_dir(repo, hidden, {}, "owner").parent == DEMO_ROOT
    assert demo_data_dir(repo, hidden, {}, "service") == Path(f"{hidden.resolve()}-data")
    shared = accounts.data_dir("tacc-demo-state-")
    assert demo_data_dir(repo, shared, {}, "owner") == Path(f"{shared}-data")
    assert demo_data_dir(repo, hidden, {"TACC_DATA_DIR": str(shared)}, "owner") == shared


def test_an_earlier_demos_files_move_to_the_data_dir_and_become_their_owners(tmp_path):
    accounts.ensure_accounts(("bob",))
    repo = _checkout(tmp_path)
    state = repo / ".tacc"
    (state / "users" / "bob" / "sub").mkdir(parents=True)
    (state / "users" / "bob" / "sub" / "notes.txt").write_text("keep me")
    os.symlink("/etc/shadow", state / "users" / "bob" / "shadow")  # a link is moved, never followed
    data = accounts.data_dir("tacc-demo-data-")
    s = _settings(repo, state, {"TACC_DATA_DIR": str(data)}, identity="owner")
    assert _data_dir_of(s) == data
    assert not (state / "users").exists()
    bob = data / "users" / "bob"
    assert (bob / "sub" / "notes.txt").read_text() == "keep me"
    uid = pwd.getpwnam("bob").pw_uid
    assert [p.lstat().st_uid for p in (bob, bob / "sub", bob / "sub" / "notes.txt", bob / "shadow")] == [uid] * 4
    assert bob.stat().st_mode & 0o777 == 0o700
    assert os.stat("/etc/shadow").st_uid == 0
    _settings(repo, state, {"TACC_DATA_DIR": str(data)}, identity="owner")  # a restart: unchanged
    assert (bob / "sub" / "notes.txt").read_text() == "keep me"


def test_the_old_layouts_link_to_the_homes_moves_them_too(tmp_path):
    repo = _checkout(tmp_path)
    state = repo / ".tacc"
    homes = tmp_path / "old-homes"
    (homes / "carol").mkdir(parents=True)
    (homes / "carol" / "a.txt").write_text("a")
    state.mkdir()
    (state / "users").symlink_to(homes, target_is_directory=True)
    data = tmp_path / "data"
    _settings(repo, state, {"TACC_DATA_DIR": str(data)})
    assert not (state / "users").is_symlink()
    assert (data / "users" / "carol" / "a.txt").read_text() == "a"


def test_this_checkout_is_usable_by_other_accounts_and_a_private_one_is_not(tmp_path):
    assert shared_problem(ROOT, sys.executable) is None  # the suite's own premise (scripts/test.sh checks it)
    hidden = tmp_path / "hidden" / "checkout"
    (hidden / "tacc_hub").mkdir(parents=True)
    (tmp_path / "hidden").chmod(0o700)
    why = shared_problem(hidden, sys.executable)
    assert why and "is not searchable by other users" in why
    identity, reason = demo_identity(hidden, sys.executable, {})
    assert identity == "service" and reason and "other accounts cannot run this checkout's Python" in reason
    assert demo_identity(ROOT, sys.executable, {}) == ("owner", None)
    assert demo_identity(hidden, sys.executable, {"TACC_TASK_IDENTITY": "owner"}) == ("owner", None)
    with pytest.raises(ValueError, match="owner or service"):
        demo_identity(ROOT, sys.executable, {"TACC_TASK_IDENTITY": "root"})


def test_run_as_another_account_the_demo_falls_back_to_service_and_says_why(tmp_path):
    state = accounts.data_dir("tacc-demo-nobody-")
    runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin")
    assert runuser, "runuser (util-linux) is missing"
    got = subprocess.run([runuser, "-u", "nobody", "--", sys.executable, "-m", "tacc_hub.hub.config", "demo-env",
                          str(ROOT), str(state)], capture_output=True, text=True, cwd="/", timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    assert got.returncode == 0, got.stderr
    assert "TACC_TASK_IDENTITY=service" in got.stdout
    assert "not as root" in got.stdout and "run ./scripts/start.sh as root" in got.stdout
    assert "/srv or /opt" in got.stdout
