"""Scheduling policies, plug-ins of ``policy.Policy``, by name.

``POLICIES`` maps a name (as given to ``tacc-hub simulate --policy``) to the
class; each class builds with no arguments (its defaults are documented on it).
A new policy is one module here and one line in ``POLICIES``.
"""

from __future__ import annotations

from ..policy import Policy
from .fifo import FifoGang
from .oracle import SrptOracle
from .slurm import SlurmMultifactor
from .tacc import Tacc
from .tiresias import Tiresias

POLICIES: dict[str, type[Policy]] = {
    "fifo": FifoGang,
    "slurm": SlurmMultifactor,
    "tiresias": Tiresias,
    "srpt-oracle": SrptOracle,
    "tacc": Tacc,
}


def make(name: str, **kwargs: object) -> Policy:
    """The policy ``name`` with its defaults, or with ``kwargs`` for its constructor (ablations)."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return cls(**kwargs)


__all__ = ["POLICIES", "FifoGang", "SlurmMultifactor", "SrptOracle", "Tacc", "Tiresias", "make"]
