"""Who a task runs as: a tacc user (hub name or a standalone token's user) mapped to a Unix account.

``Identity(mode="owner")``: each task runs as its owner's account, found by name in the system's
user database (``pwd``), after ``username_map`` (tacc name -> account name, for sites where they
differ, as JupyterHub's ``Authenticator.username_map``). An owner with no account, or one whose
uid is below ``min_uid`` (root and system accounts), gets ``IdentityError`` with the message the
API returns at submit ("no Unix account for 'carol' on this cluster"). ``mode="service"``: every
task runs as the service's own account (one person only; the service warns at every start).

Invariants: an account is always looked up again when a task launches (the API's check at submit
is advice; accounts come and go); a mapped name is never trusted to be a path or an option: it
must be a plain POSIX account name.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# POSIX portable user names (useradd's rule, plus the trailing '$' of machine accounts refused).
ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


class IdentityError(LookupError):
    """The tacc user cannot run tasks here; ``str()`` is the message shown to them."""


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str
    shell: str = "/bin/sh"


@dataclass(frozen=True, slots=True)
class Identity:
    mode: Literal["owner", "service"] = "service"
    username_map: Mapping[str, str] = field(default_factory=dict)
    min_uid: int = 1000

    def account_name(self, user: str) -> str:
        return str(self.username_map.get(user, user))

    def account(self, user: str) -> Account | None:
        """The account ``user``'s tasks run as; None in service mode (the service's own)."""
        if self.mode == "service":
            return None
        name = self.account_name(user)
        shown = f"'{user}'" if name == user else f"'{user}' (mapped to '{name[:64]}')"
        if not ACCOUNT_NAME.fullmatch(name):
            raise IdentityError(f"no Unix account for {shown} on this cluster: not a valid account name")
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            raise IdentityError(f"no Unix account for {shown} on this cluster") from None
        if pw.pw_uid < self.min_uid or pw.pw_uid == os.geteuid():
            raise IdentityError(f"the Unix account of {shown} (uid {pw.pw_uid}) may not run tasks: it is a system "
                                f"account or the service's own (uid < {self.min_uid} or uid {os.geteuid()})")
        return Account(name=pw.pw_name, uid=pw.pw_uid, gid=pw.pw_gid, home=pw.pw_dir, shell=pw.pw_shell)
