"""The spawn options form: built from the site (``GET /api/cluster``) and the user's quota (``GET /api/quota``).

Pure functions, no I/O: ``render_form`` returns the HTML (every value from the service, the
profiles or the user goes through ``html.escape``), ``parse_form`` turns the posted form (a dict of
lists of strings, as JupyterHub hands it over) into ``user_options``, and ``check_options``
validates ``user_options`` (from the form or from the REST API) against the site and the quota.
The service checks again on submit (a dry run in ``options_from_form``, the real submit in
``start``): these checks give the user the message before anything is queued.

``user_options``: ``{"profile", "gpus", "gpu_type", "memory", "time_limit", "partition",
"python", "requirements"}``; memory and time as the task schema writes them ("16G", "8h").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Any

from .fields import check_pinned, parse_duration_s, parse_memory_mib


class OptionsError(ValueError):
    """The requested server cannot be had; the message names the field or the limit."""


@dataclass(frozen=True)
class Profile:
    """A named server configuration (like KubeSpawner's ``profile_list`` entries)."""

    slug: str
    display_name: str
    description: str = ""
    default: bool = False
    gpus: int = 0
    gpu_type: str | None = None
    memory: str | None = None
    time_limit: str = "8h"
    partition: str | None = None
    python: str | None = None
    requirements: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, raw: dict[str, Any]) -> Profile:
        known = {"slug", "display_name", "description", "default", "gpus", "gpu_type", "memory", "time_limit",
                 "partition", "python", "requirements"}
        extra = set(raw) - known
        if extra:
            raise ValueError(f"unknown profile keys {sorted(extra)} (known: {sorted(known)})")
        name = str(raw.get("display_name") or raw.get("slug") or "")
        slug = str(raw.get("slug") or name.lower().replace(" ", "-"))
        if not slug:
            raise ValueError("a profile needs a slug or a display_name")
        return cls(slug=slug, display_name=name or slug, description=str(raw.get("description", "")),
                   default=bool(raw.get("default", False)), gpus=int(raw.get("gpus", 0)),
                   gpu_type=raw.get("gpu_type") or None, memory=raw.get("memory") or None,
                   time_limit=str(raw.get("time_limit", "8h")), partition=raw.get("partition") or None,
                   python=raw.get("python") or None, requirements=[str(r) for r in raw.get("requirements", [])])


def profiles_from_config(raw: list[dict[str, Any]]) -> list[Profile]:
    out = [Profile.from_config(p) for p in raw]
    if len({p.slug for p in out}) != len(out):
        raise ValueError("profile slugs must be unique")
    return out


def default_profile(profiles: list[Profile]) -> Profile | None:
    return next((p for p in profiles if p.default), profiles[0] if profiles else None)


# --- what the site and the quota allow ---------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What one user may ask for, from the cluster view and their quota standing."""

    max_gpus_per_node: int = 0
    gpu_types: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    gpus_free: int | None = None
    cap: tuple[str, int] | None = None  # ("user alice", 4): the tightest GPU cap and whose it is
    budget_left: tuple[str, float] | None = None  # ("group lab-a", 12.5): GPU-hours left this period
    period: str = "month"
    max_time_s: int = 24 * 3600

    @classmethod
    def from_service(cls, cluster: dict[str, Any] | None, quota: dict[str, Any] | None,
                     max_time_s: int = 24 * 3600) -> Limits:
        nodes = [n for n in (cluster or {}).get("nodes", []) if n.get("schedulable", True)]
        types = sorted({str(n["gpu_type"]) for n in nodes if n.get("gpu_type")})
        parts = sorted({str(p) for p in (cluster or {}).get("partitions", [])})
        cap: tuple[str, int] | None = None
        budget: tuple[str, float] | None = None
        period = "month"
        if quota:
            period = str(quota.get("period", "month"))
            who = {"user": f"user {quota.get('user', '?')}", "group": f"group {quota.get('group', '?')}"}
            for kind in ("user", "group"):
                limit = ((quota.get("limits") or {}).get(kind) or {}).get("max_gpus")
                if limit is not None and (cap is None or int(limit) < cap[1]):
                    cap = (who[kind], int(limit))
                left = (quota.get("remaining_gpu_hours") or {}).get(kind)
                if left is not None and (budget is None or float(left) < budget[1]):
                    budget = (who[kind], float(left))
        return cls(max_gpus_per_node=max((int(n.get("gpus", 0)) for n in nodes), default=0),
                   gpu_types=tuple(types), partitions=tuple(parts),
                   gpus_free=(cluster or {}).get("gpus_free"), cap=cap, budget_left=budget, period=period,
                   max_time_s=max_time_s)

    @property
    def max_gpus(self) -> int:
        top = self.max_gpus_per_node
        return min(top, self.cap[1]) if self.cap is not None else top


def _num(x: float) -> str:
    return f"{x:.1f}"


def check_options(opts: dict[str, Any], limits: Limits) -> None:
    """Raise OptionsError when the site or the quota cannot give what ``opts`` asks for."""
    gpus = int(opts.get("gpus", 0))
    if gpus < 0:
        raise OptionsError("gpus: must be 0 or more")
    if gpus > limits.max_gpus_per_node:
        raise OptionsError(f"gpus: {gpus} GPUs requested; the largest node here has {limits.max_gpus_per_node}")
    if limits.cap is not None and gpus > limits.cap[1]:
        who, cap = limits.cap
        raise OptionsError(f"over quota: needs {gpus} GPU{'s' if gpus != 1 else ''}; {who} may hold at most {cap} "
                           f"({gpus - cap} over)")
    gpu_type = opts.get("gpu_type")
    if gpu_type and gpu_type not in limits.gpu_types:
        have = ", ".join(limits.gpu_types) or "none"
        raise OptionsError(f"gpu_type: unknown GPU type {gpu_type!r} (available: {have})")
    part = opts.get("partition")
    if part and limits.partitions and part not in limits.partitions:
        raise OptionsError(f"partition: unknown partition {part!r} (available: {', '.join(limits.partitions)})")
    seconds = int(opts.get("time_limit_s", 0))
    if seconds > limits.max_time_s:
        raise OptionsError(f"time_limit: at most {limits.max_time_s // 3600} h for a server")
    if gpus and limits.budget_left is not None:
        who, left = limits.budget_left
        need = gpus * seconds / 3600.0
        if need > left + 1e-9:
            raise OptionsError(f"over quota: needs {_num(need)} GPU-hours ({gpus} GPUs x {seconds / 3600:g} h); "
                               f"{who} has {_num(left)} GPU-hours left this {limits.period}")


# --- parsing --------------------------------------------------------------------------


def _one(form: dict[str, Any], key: str) -> str:
    raw = form.get(key)
    if isinstance(raw, list):
        raw = raw[0] if raw else ""
    return "" if raw is None else str(raw).strip()


def normalize_options(raw: dict[str, Any], profiles: list[Profile]) -> dict[str, Any]:
    """``user_options`` (from the form or the API; missing keys come from the profile) -> checked values.

    Adds ``time_limit_s`` and ``memory_mib``; raises OptionsError naming the field.
    """
    slug = raw.get("profile") or None
    prof = default_profile(profiles)
    if slug is not None:
        prof = next((p for p in profiles if p.slug == slug), None)
        if prof is None:
            raise OptionsError(f"profile: unknown profile {slug!r} (available: "
                               f"{', '.join(p.slug for p in profiles) or 'none'})")

    def pick(key: str, fallback: Any) -> Any:
        value = raw.get(key)
        return fallback if value in (None, "") else value

    try:
        gpus = int(pick("gpus", prof.gpus if prof else 0))
    except (TypeError, ValueError):
        raise OptionsError("gpus: must be a whole number") from None
    time_text = str(pick("time_limit", prof.time_limit if prof else "8h"))
    try:
        seconds = parse_duration_s(time_text)
    except ValueError:
        seconds = None
    if not isinstance(seconds, int) or seconds <= 0:
        raise OptionsError(f"time_limit: {time_text[:40]!r} is not a duration (e.g. 90m, 8h, 1-00:00:00)")
    memory = pick("memory", prof.memory if prof else None)
    memory_mib = None
    if memory is not None:
        try:
            memory_mib = parse_memory_mib(str(memory))
        except ValueError:
            memory_mib = None
        if not isinstance(memory_mib, int) or memory_mib <= 0:
            raise OptionsError(f"memory: {str(memory)[:40]!r} is not a size (e.g. 16G, 512M)")
    reqs = pick("requirements", prof.requirements if prof else [])
    if isinstance(reqs, str):
        reqs = [line.strip() for line in reqs.splitlines() if line.strip() and not line.strip().startswith("#")]
    check_requirements(reqs)
    python = pick("python", prof.python if prof else None)
    return {
        "profile": prof.slug if prof else None,
        "gpus": gpus,
        "gpu_type": pick("gpu_type", prof.gpu_type if prof else None),
        "memory": None if memory is None else str(memory),
        "memory_mib": memory_mib,
        "time_limit": time_text,
        "time_limit_s": seconds,
        "partition": pick("partition", prof.partition if prof else None),
        "python": None if python is None else str(python),
        "requirements": [str(r) for r in reqs],
    }


MAX_REQUIREMENTS = 200


def check_requirements(reqs: Any) -> None:
    """Extra packages as the task schema takes them (``NAME==VERSION``: no pip options, one per entry, printable),
    and, for a server, from the package index only (no URL or path: ``NAME @ file:///...``); else OptionsError
    naming the entry. They never reach a shell; they cannot replace the server's own packages (see ``server``)."""
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        raise OptionsError("requirements: give packages as NAME==VERSION, one per line")
    if len(reqs) > MAX_REQUIREMENTS:
        raise OptionsError(f"requirements: at most {MAX_REQUIREMENTS} packages")
    for i, req in enumerate(reqs):
        where = "requirements" if len(reqs) == 1 else f"requirements, line {i + 1}"
        try:
            check_pinned(req)
        except ValueError as exc:
            raise OptionsError(f"{where}: {exc}") from None
        if "@" in req or "://" in req:
            raise OptionsError(f"{where}: {req[:80]!r}: a server's extra packages come from the package index: "
                               "write NAME==VERSION (no URL or path)")


def parse_form(form: dict[str, Any]) -> dict[str, Any]:
    """The posted form (dict of lists of strings) -> raw ``user_options`` (normalized later)."""
    out: dict[str, Any] = {}
    for key in ("profile", "gpus", "gpu_type", "memory", "time_limit", "partition", "python"):
        value = _one(form, key)
        if value:
            out[key] = value
    reqs = _one(form, "requirements")
    if reqs:
        out["requirements"] = reqs
    return out


# --- rendering ------------------------------------------------------------------------


def _options(values: list[tuple[str, str]], selected: str | None) -> str:
    return "".join(
        f'<option value="{escape(v)}"{" selected" if v == (selected or "") else ""}>{escape(label)}</option>'
        for v, label in values)


def render_form(limits: Limits, profiles: list[Profile], quota: dict[str, Any] | None = None,
                notice: str | None = None) -> str:
    prof = default_profile(profiles)
    parts: list[str] = ['<div class="tacc-spawn-form">']
    if notice:
        parts.append(f'<div class="alert alert-warning">{escape(notice)}</div>')
    standing = []
    if limits.cap is not None:
        standing.append(f"{limits.cap[0]} may hold at most {limits.cap[1]} GPU{'' if limits.cap[1] == 1 else 's'}")
    if limits.budget_left is not None:
        standing.append(f"{limits.budget_left[0]} has {_num(limits.budget_left[1])} GPU-hours left this "
                        f"{limits.period}")
    if limits.gpus_free is not None:
        standing.append(f"{limits.gpus_free} GPUs free now")
    if standing:
        parts.append(f'<p class="tacc-quota">{escape("; ".join(standing))}.</p>')
    if profiles:
        parts.append('<div class="form-group"><label for="tacc-profile">Profile</label>'
                     '<select class="form-control" id="tacc-profile" name="profile">')
        parts.append(_options([(p.slug, p.display_name + (f": {p.description}" if p.description else ""))
                               for p in profiles], prof.slug if prof else None))
        parts.append("</select></div>")
    gpus = prof.gpus if prof else 0
    parts.append(f'<div class="form-group"><label for="tacc-gpus">GPUs (0 to {limits.max_gpus})</label>'
                 f'<input class="form-control" type="number" id="tacc-gpus" name="gpus" min="0" '
                 f'max="{limits.max_gpus}" value="{min(gpus, limits.max_gpus)}"></div>')
    if limits.gpu_types:
        parts.append('<div class="form-group"><label for="tacc-gpu-type">GPU type</label>'
                     '<select class="form-control" id="tacc-gpu-type" name="gpu_type">')
        parts.append(_options([("", "any"), *[(t, t) for t in limits.gpu_types]], prof.gpu_type if prof else None))
        parts.append("</select></div>")
    if limits.partitions:
        parts.append('<div class="form-group"><label for="tacc-partition">Partition</label>'
                     '<select class="form-control" id="tacc-partition" name="partition">')
        parts.append(_options([("", "default"), *[(p, p) for p in limits.partitions]],
                              prof.partition if prof else None))
        parts.append("</select></div>")
    mem = (prof.memory if prof else None) or ""
    tl = prof.time_limit if prof else "8h"
    parts.append('<div class="form-group"><label for="tacc-memory">Memory (e.g. 16G; empty: the default)</label>'
                 f'<input class="form-control" type="text" id="tacc-memory" name="memory" value="{escape(mem)}">'
                 "</div>")
    parts.append(f'<div class="form-group"><label for="tacc-time">Time limit (at most '
                 f'{math.floor(limits.max_time_s / 3600)} h; e.g. 90m, 8h)</label>'
                 f'<input class="form-control" type="text" id="tacc-time" name="time_limit" value="{escape(tl)}">'
                 "</div>")
    reqs = "\n".join(prof.requirements) if prof else ""
    parts.append('<div class="form-group"><label for="tacc-reqs">Extra Python packages, pinned, one per line '
                 "(e.g. numpy==2.1.0)</label>"
                 f'<textarea class="form-control" id="tacc-reqs" name="requirements" rows="3">{escape(reqs)}'
                 "</textarea></div>")
    parts.append("</div>")
    return "\n".join(parts)
