"""Reading Slurm's nodes: ``sinfo --json`` and ``scontrol show topology`` into the scheduler's ``Node`` list.

A node that cannot take work now (down, failed, drained, not responding) is left out of the list and
reported apart with its Slurm state (e.g. ``"idle+DRAIN"``): the service keeps the tasks running on it
and schedules nothing new there until it is back (``ClusterState.update_nodes``).
"""

from __future__ import annotations

import re
from typing import Any

from ..scheduler.cluster import Node

# Nodes that cannot take work now (sinfo --json "state" and "state_flags").
UNUSABLE_STATES = {"down", "fail", "future", "unknown"}
UNUSABLE_FLAGS = {"DRAIN", "DRAINED", "DRAINING", "FAIL", "NOT_RESPONDING"}


def expand_hostlist(expr: str) -> list[str]:
    """``n[1-3,7],gpu01`` -> ``[n1, n2, n3, n7, gpu01]`` (Slurm's hostlist syntax, one bracket level)."""
    names: list[str] = []
    for prefix, inner, plain in re.findall(r"([^,\[]*)\[([^\]]*)\]|([^,\[\]]+)", expr):
        if plain:
            names.append(plain)
            continue
        for part in inner.split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                names.append(prefix + lo)
                continue
            width = len(lo)
            names += [f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi) + 1)]
    return names


def parse_switches(topology: str) -> dict[str, str]:
    """Node -> its leaf switch, from ``scontrol show topology`` (no topology plugin: empty)."""
    switches: dict[str, str] = {}
    for line in topology.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if fields.get("Level") == "0" and "SwitchName" in fields:
            for host in expand_hostlist(fields.get("Nodes", "")):
                switches[host] = fields["SwitchName"]
    return switches


def parse_nodes(data: dict[str, Any], switches: dict[str, str],
                partition: str | None) -> tuple[list[Node], dict[str, str]]:
    """The usable nodes of ``partition`` (any when None) sorted by name, and the unusable ones -> Slurm state."""
    found: dict[str, Node] = {}
    unusable: dict[str, str] = {}
    for raw in data.get("nodes", []):
        name = str(raw.get("name", ""))
        state = str(raw.get("state", "")).lower()
        flags = {str(f).upper() for f in raw.get("state_flags") or []}
        if not name or state in UNUSABLE_STATES or flags & UNUSABLE_FLAGS:
            if name:
                unusable[name] = "+".join([state, *sorted(flags)])
            continue  # cannot take work now
        partitions = [str(p) for p in raw.get("partitions") or []]
        if partition and partition not in partitions:
            continue
        gpus, gpu_type = 0, None
        for gres in str(raw.get("gres") or "").split(","):
            parts = gres.split("(")[0].split(":")
            if parts[0] == "gpu" and parts[-1].isdigit():
                gpus += int(parts[-1])
                gpu_type = parts[1] if len(parts) == 3 else gpu_type
        found[name] = Node(name=name, gpus=gpus, gpu_type=gpu_type, switch=switches.get(name, "0"),
                           partition=partition or (partitions[0] if partitions else None))
    return [found[n] for n in sorted(found)], unusable
