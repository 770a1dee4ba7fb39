"""Quotas and group memberships in the store, and GPU-second accounting over ``tasks``.

:class:`QuotaStore` is a mixin of :class:`~tacc_hub.store.store.Store` (it uses the store's
engine and clock); the scheduler gets plain data from it (:meth:`QuotaStore.load_quotas`
returns a :class:`~tacc_hub.scheduler.policy.Quotas`).

Invariants:

* A quota row is ``(kind, name)`` with kind ``"user"`` or ``"group"``; ``name = "*"`` is the
  default of that kind (everyone not named). Values are checked before the database is
  touched: names match :data:`USER_RE` / :data:`GROUP_RE` (or are ``"*"``), numbers are
  whole (GPUs) or finite (hours) and never negative, and ``guaranteed_gpus <= max_gpus``
  when a cap is set. A bad value raises :class:`QuotaError` naming the field.
* ``set_quota`` is an upsert: the row afterwards holds exactly the values given.
* A user with no ``memberships`` row is in group :data:`DEFAULT_GROUP`; setting a user's
  group to ``None`` (or to ``"default"``) removes the row.
* ``gpu_seconds_by_owner`` is one SQL statement: a task counts ``gpus`` times the part of
  ``[started_at, finished_at or now]`` that lies inside ``[since, now]``; a task that has
  not started counts nothing, and earlier runs of preempted tasks (``runs``, written by
  ``record_run``) count the same way. Only owners with a run overlapping the window appear.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from tacc_hub.schema.fields import NAME_RE

from .models import QUOTA_KINDS, memberships, quotas, runs, tasks

if TYPE_CHECKING:
    from tacc_hub.scheduler.policy import Limits, Quotas

DEFAULT_NAME = "*"
"""The quota row that applies to every user (or group) without a row of its own."""
DEFAULT_GROUP = "default"
"""The group of a user with no membership row."""

GROUP_RE = re.compile(rf"^{NAME_RE}$")
"""Group names: the task schema's ``Name`` (letters, digits, '.', '_', '-'; at most 64)."""
USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
"""User names: as API tokens accept them (``Name`` plus '@', for e-mail-like hub names)."""

MAX_GPUS = 1_000_000
"""Largest GPU count accepted in a quota (a sanity bound, far above any cluster)."""
MAX_GPU_HOURS = 1e12


class QuotaError(ValueError):
    """A quota or membership value is refused; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One row of ``quotas``."""

    kind: str
    name: str
    max_gpus: int | None
    guaranteed_gpus: int
    gpu_hours: float | None
    updated_at: float

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "max_gpus": self.max_gpus,
                "guaranteed_gpus": self.guaranteed_gpus, "gpu_hours": self.gpu_hours, "updated_at": self.updated_at}


def check_kind(kind: str) -> str:
    if kind not in QUOTA_KINDS:
        raise QuotaError("kind", f"must be one of {', '.join(QUOTA_KINDS)}")
    return kind


def check_name(kind: str, name: object, *, default_ok: bool = True, field: str = "name") -> str:
    """``name`` if it is a valid user/group name (or ``"*"`` where ``default_ok``), else :class:`QuotaError`."""
    if not isinstance(name, str):
        raise QuotaError(field, "must be a string")
    if default_ok and name == DEFAULT_NAME:
        return name
    pattern = USER_RE if kind == "user" else GROUP_RE
    if not pattern.fullmatch(name):
        what = "letters, digits, '.', '_', '@', '-'" if kind == "user" else "letters, digits, '.', '_', '-'"
        shown = name[:64].encode("unicode_escape").decode("ascii")
        raise QuotaError(field, f"invalid {kind} name {shown!r}: {what}; starts with a letter or digit; at most 64")
    return name


def _check_gpus(field: str, value: object, *, nullable: bool) -> int | None:
    if value is None and nullable:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise QuotaError(field, "must be a whole number" + (" or null" if nullable else ""))
    if not 0 <= value <= MAX_GPUS:
        raise QuotaError(field, f"must be between 0 and {MAX_GPUS}")
    return value


def _check_hours(field: str, value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise QuotaError(field, "must be a number or null")
    if not math.isfinite(value) or not 0 <= value <= MAX_GPU_HOURS:
        raise QuotaError(field, f"must be a finite number between 0 and {MAX_GPU_HOURS:g}")
    return float(value)


def check_limits(max_gpus: object, guaranteed_gpus: object, gpu_hours: object) -> tuple[int | None, int, float | None]:
    """The limits, checked; :class:`QuotaError` names the first bad field."""
    cap = _check_gpus("max_gpus", max_gpus, nullable=True)
    guaranteed = _check_gpus("guaranteed_gpus", guaranteed_gpus, nullable=False)
    assert guaranteed is not None
    hours = _check_hours("gpu_hours", gpu_hours)
    if cap is not None and guaranteed > cap:
        raise QuotaError("guaranteed_gpus", f"{guaranteed} is more than max_gpus ({cap})")
    return cap, guaranteed, hours


def _row(r: Any) -> QuotaRow:
    return QuotaRow(kind=r.kind, name=r.name, max_gpus=r.max_gpus, guaranteed_gpus=int(r.guaranteed_gpus),
                    gpu_hours=None if r.gpu_hours is None else float(r.gpu_hours), updated_at=float(r.updated_at))


class QuotaStore:
    """Quota, membership and usage methods of :class:`~tacc_hub.store.store.Store`."""

    _engine: sa.Engine
    _clock: Callable[[], float]

    def _upsert(self, table: sa.Table, values: dict[str, Any], keys: list[str]) -> sa.Executable:
        ins: Any = (sqlite.insert if self._engine.dialect.name == "sqlite" else postgresql.insert)(table)
        ins = ins.values(values)
        return ins.on_conflict_do_update(index_elements=keys,
                                         set_={k: v for k, v in values.items() if k not in keys})

    # -- quotas --------------------------------------------------------------------------

    def set_quota(self, kind: str, name: str, *, max_gpus: int | None, guaranteed_gpus: int = 0,
                  gpu_hours: float | None) -> QuotaRow:
        """Create or replace the quota of user/group ``name`` (``"*"``: the default); returns the row."""
        check_kind(kind)
        check_name(kind, name)
        cap, guaranteed, hours = check_limits(max_gpus, guaranteed_gpus, gpu_hours)
        values = {"kind": kind, "name": name, "max_gpus": cap, "guaranteed_gpus": guaranteed,
                  "gpu_hours": hours, "updated_at": float(self._clock())}
        with self._engine.begin() as conn:
            conn.execute(self._upsert(quotas, values, ["kind", "name"]))
        return QuotaRow(**values)  # type: ignore[arg-type]

    def get_quota(self, kind: str, name: str) -> QuotaRow | None:
        """The row of user/group ``name`` itself (no default applied), or ``None``."""
        check_kind(kind)
        check_name(kind, name)
        stmt = sa.select(quotas).where(quotas.c.kind == kind, quotas.c.name == name)
        with self._engine.connect() as conn:
            r = conn.execute(stmt).first()
        return None if r is None else _row(r)

    def delete_quota(self, kind: str, name: str) -> bool:
        """Remove the row of user/group ``name``; whether there was one."""
        check_kind(kind)
        check_name(kind, name)
        with self._engine.begin() as conn:
            return conn.execute(sa.delete(quotas).where(quotas.c.kind == kind, quotas.c.name == name)).rowcount == 1

    def list_quotas(self) -> list[QuotaRow]:
        """Every quota row, users first, then groups, by name (``"*"`` first within a kind)."""
        stmt = sa.select(quotas).order_by(quotas.c.kind.desc(), quotas.c.name)
        with self._engine.connect() as conn:
            return [_row(r) for r in conn.execute(stmt)]

    def load_quotas(self) -> Quotas:
        """The quotas in force, for the scheduler (``exhausted`` is empty: the caller does accounting)."""
        from tacc_hub.scheduler.policy import Limits, Quotas

        by_kind: dict[str, dict[str, Limits]] = {"user": {}, "group": {}}
        for row in self.list_quotas():
            by_kind[row.kind][row.name] = Limits(max_gpus=row.max_gpus, guaranteed_gpus=row.guaranteed_gpus,
                                                 gpu_hours=row.gpu_hours)
        users, groups = by_kind["user"], by_kind["group"]
        return Quotas(users=users, groups=groups, default_user=users.pop(DEFAULT_NAME, Limits()),
                      default_group=groups.pop(DEFAULT_NAME, Limits()))

    # -- memberships ---------------------------------------------------------------------

    def set_group(self, user: str, group: str | None) -> None:
        """Put ``user`` in ``group``; ``None`` (or ``"default"``) puts it back in the default group."""
        check_name("user", user, default_ok=False, field="user")
        if group is None or group == DEFAULT_GROUP:
            with self._engine.begin() as conn:
                conn.execute(sa.delete(memberships).where(memberships.c.user == user))
            return
        check_name("group", group, default_ok=False, field="group")
        values = {"user": user, "group": group, "updated_at": float(self._clock())}
        with self._engine.begin() as conn:
            conn.execute(self._upsert(memberships, values, ["user"]))

    def group_of(self, user: str) -> str:
        """The group of ``user`` (:data:`DEFAULT_GROUP` when it has none)."""
        with self._engine.connect() as conn:
            group = conn.execute(sa.select(memberships.c.group).where(memberships.c.user == user)).scalar()
        return DEFAULT_GROUP if group is None else str(group)

    def memberships(self) -> dict[str, str]:
        """user -> group, for every user with a membership row."""
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(memberships.c.user, memberships.c.group).order_by(memberships.c.user))
            return {str(u): str(g) for u, g in rows}

    # -- accounting ----------------------------------------------------------------------

    def record_run(self, task_id: int, owner: str, gpus: int, started_at: float, finished_at: float) -> None:
        """Keep an earlier run of a task (it was preempted and waits again) for GPU-hour accounting."""
        if gpus <= 0 or finished_at <= started_at:
            return
        with self._engine.begin() as conn:
            conn.execute(runs.insert().values(task_id=task_id, owner=owner, gpus=gpus, started_at=started_at,
                                              finished_at=finished_at))

    def gpu_seconds_by_owner(self, since: float, now: float) -> dict[str, float]:
        """GPU-seconds each owner's tasks ran within ``[since, now]`` (running tasks up to ``now``)."""
        since, now = float(since), float(now)
        lo = sa.bindparam("since", since, type_=sa.Double)
        hi = sa.bindparam("now", now, type_=sa.Double)
        out: dict[str, float] = {}
        with self._engine.connect() as conn:
            for table in (tasks, runs):
                t = table.c
                start = sa.case((t.started_at > lo, t.started_at), else_=lo)
                end = sa.case((t.finished_at.is_(None), hi), (t.finished_at > hi, hi), else_=t.finished_at)
                charged = sa.case((end > start, t.gpus * (end - start)), else_=sa.literal(0.0, sa.Double))
                stmt = (
                    sa.select(t.owner, sa.func.sum(charged))
                    .where(t.gpus > 0, t.started_at.is_not(None), t.started_at < hi,
                           sa.or_(t.finished_at.is_(None), t.finished_at > lo))
                    .group_by(t.owner)
                )
                for owner, total in conn.execute(stmt):
                    if total:
                        out[str(owner)] = out.get(str(owner), 0.0) + float(total)
        return out
