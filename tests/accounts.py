"""Real Unix accounts for the tests: tasks run as their owners (``TaccHub.task_identity = 'owner'``).

The tests' users (alice, bob, ...) get accounts of their own, created with ``useradd`` when missing
(the suite runs as root, in CI and in the fresh-machine check); a user who should have none
(``NO_ACCOUNT``) is checked to be absent. Nothing is removed afterwards: creating them again on the
next run would only cost time, and no test depends on an account being new.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from pathlib import Path

USERS = (
    "alice", "bob", "carol", "dave", "admin", "ann", "sam", "ivan", "u", "a", "b", "h", "h2", "cy", "dee", "dora",
    "erin", "frank", "gina", "grace", "gwen", "magicuser", "mallory", "nbuser", "plainuser", "quinn", "r1", "rita",
    "same", "tessa", "tim", "uma", "pia", "rosa", *(f"user{i}" for i in range(10)),
)
NO_ACCOUNT = "nosuch-tacc-user"


def ensure_accounts(names: tuple[str, ...] = USERS) -> None:
    """Create the accounts that are missing (as root), each with a home directory."""
    missing = [n for n in names if not _exists(n)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise RuntimeError(f"the tests need Unix accounts {', '.join(missing)}: run them as root (they create them)")
    for name in missing:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
    assert not _exists(NO_ACCOUNT), f"{NO_ACCOUNT} must not exist for the identity tests"


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def uid(name: str) -> int:
    return pwd.getpwnam(name).pw_uid


def data_dir(prefix: str = "tacc-data-") -> Path:
    """A data_dir every account can reach (pytest's own tmp dirs are private to root)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o711)
    return path
