"""Reading Slurm's nodes: ``sinfo --json`` and ``scontrol show topology`` into the scheduler's ``Node`` list.

A node that cannot take work now (down, failed, drained, not responding) is left out of the list and
reported apart with its Slurm state (e.g. ``"idle+DRAIN"``): the service keeps the tasks running on it
and schedules nothing new there until it is back (``ClusterState.update_nodes``).

A partition shared with jobs tacc did not submit (``foreign_gpus``): a node's GPUs that Slurm has
allocated (``sinfo --json`` ``gres_used``) less those of this service's own jobs there (``squeue``:
a job is ours only when its id is one the service submitted AND its name is ``tacc-<id>``; a user
may name a job ``tacc-5``) are held by jobs outside tacc: ``Node.foreign``, which the scheduler
never places on. The two commands are separate snapshots: a job starting or ending between them
may be miscounted until the next read.
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


def gres_gpus(text: str) -> tuple[int, str | None]:
    """GPUs in a gres string (``gpu:2``, ``gpu:a100:4(S:0-1)``, ``gpu:1(IDX:0),shard:0``) and their type."""
    gpus, gpu_type = 0, None
    for gres in re.split(r",(?![^(]*\))", text or ""):
        parts = gres.split("(")[0].split(":")
        if parts[0] in ("gpu", "gres/gpu") and parts[-1].isdigit():
            gpus += int(parts[-1])
            gpu_type = parts[1] if len(parts) == 3 else gpu_type
    return gpus, gpu_type


# Job states in which a job holds its allocation (squeue %T).
HOLDING = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "RESIZING"}
SQUEUE_HOLDERS = ("squeue", "--noheader", "--states=all", "--format=%i|%j|%T|%N|%b")


def foreign_gpus(data: dict[str, Any], squeue: str, ours: set[str]) -> dict[str, int]:
    """Node -> GPUs held there by jobs this service did not submit (see the module docstring)."""
    mine: dict[str, int] = {}
    for line in squeue.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        job_id, name, state, nodes, tres = fields
        if job_id not in ours or not re.fullmatch(r"tacc-\d+", name) or state.upper() not in HOLDING:
            continue
        per_node = gres_gpus(tres.replace("gres:", "").replace("gres/", ""))[0]
        for node in expand_hostlist(nodes):
            mine[node] = mine.get(node, 0) + per_node
    out: dict[str, int] = {}
    for raw in data.get("nodes", []):
        name = str(raw.get("name", ""))
        used = gres_gpus(str(raw.get("gres_used") or ""))[0]
        if name and used > mine.get(name, 0):
            out[name] = used - mine.get(name, 0)
    return out


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
        gpus, gpu_type = gres_gpus(str(raw.get("gres") or ""))
        found[name] = Node(name=name, gpus=gpus, gpu_type=gpu_type, switch=switches.get(name, "0"),
                           partition=partition or (partitions[0] if partitions else None))
    return [found[n] for n in sorted(found)], unusable
