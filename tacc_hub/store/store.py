"""The task store: the one object through which the service reads and writes state.

Invariants:

* Every status change is a *guarded update*: ``UPDATE tasks SET status = :to ... WHERE id = :id
  AND status IN (:expected)``, applied only when each ``expected -> to`` is listed in
  :data:`~tacc_hub.store.status.TRANSITIONS` (checked before the database is touched, else
  :class:`~tacc_hub.store.status.IllegalTransition`). When the row moved on underneath, nothing
  is written and the caller gets ``None``/``False`` and re-reads; there is no blind write.
* Only the fields named in :class:`TaskFields` can be set after insert; an unknown name is a
  ``TypeError``. ``owner``, ``name``, ``digest``, ``spec``, ``plan`` and ``submitted_at`` never
  change once written.
* Every write bumps ``updated_at``; all times are seconds since the epoch, from the caller or
  from the store's clock (``time.time`` unless a test passes another).
* A batch insert is one transaction: all rows or none, ids returned in input order.
* Values are checked and encoded before a transaction opens, so a bad value never leaves a
  half-written batch.
* Records handed out are immutable snapshots (:class:`~tacc_hub.store.records.TaskRecord`).

Databases: ``sqlite:///path`` (WAL, ``synchronous=NORMAL``, ``busy_timeout=5000``,
``foreign_keys=ON``; transactions are real ``BEGIN``/``COMMIT`` so a read sees one snapshot
and a migration is atomic) or ``postgresql+psycopg://...`` (``postgresql://`` is taken to
mean psycopg 3). ``sqlite://`` / ``sqlite:///:memory:`` give one shared in-memory database,
for tests only. A SQLite database file is private to the service: created 0600 before SQLite
opens it (whatever the umask), and an existing one, with its ``-wal``/``-shm``, is set to 0600 if
the service owns it (SQLite gives the ``-wal``/``-shm`` files it creates the database's mode).

Calls are synchronous and short (single indexed statements); the service may call them from
its event loop thread. Bulk submits go through :class:`~tacc_hub.store.batcher.InsertBatcher`.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, Unpack

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import RowMapping
from sqlalchemy.pool import StaticPool

from .groups import GroupStore
from .models import tasks
from .notify import NotifyStore
from .quotas import QuotaStore
from .records import NewTask, TaskRecord
from .running import RunningStore
from .stats import StatsStore
from .status import ACTIVE, TaskStatus, check_move
from .tokens import CodeOwnerStore, TokenStore

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
"""Alembic's script directory, shipped inside the package."""



class TaskFields(TypedDict, total=False):
    """The task columns that may change after insert (besides ``status``/``updated_at``)."""

    reason: str | None
    exit_code: int | None
    started_at: float | None
    finished_at: float | None
    placement: dict[str, Any] | None
    executor_state: dict[str, Any] | None
    cancel_requested: bool


# field -> accepted Python types (None is allowed for every nullable column).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "reason": (str, type(None)),
    "exit_code": (int, type(None)),
    "started_at": (float, int, type(None)),
    "finished_at": (float, int, type(None)),
    "placement": (dict, type(None)),
    "executor_state": (dict, type(None)),
    "cancel_requested": (bool,),
}
assert set(_FIELD_TYPES) == set(TaskFields.__annotations__)

_JSON_FIELDS = frozenset({"spec", "plan", "placement", "executor_state"})

_LIST_COLUMNS = tuple(c for c in tasks.c if c.key != "plan")


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for the packaged migrations; no ``alembic.ini`` needed.

    ``Store.migrate`` hands Alembic its own connection; ``url`` is for the command line
    (``alembic`` API calls such as ``command.history``) and offline SQL generation.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


class Store(QuotaStore, TokenStore, CodeOwnerStore, RunningStore, GroupStore, StatsStore, NotifyStore):
    """Tasks, API tokens, quotas and memberships in SQLite or PostgreSQL; see the module docstring.

    Quota, membership and usage methods come from :class:`~tacc_hub.store.quotas.QuotaStore`; tokens and
    snapshot owners from :mod:`~tacc_hub.store.tokens`.
    """

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time, echo: bool = False) -> None:
        self.url = url
        self._clock = clock
        self._engine = _make_engine(url, echo=echo)

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (tests and admin tools; the service should not need it)."""
        return self._engine

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engine.dialect.name

    # -- lifecycle ---------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the newest migration (``alembic upgrade head``), atomically."""
        cfg = alembic_config()
        with self._engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def integrity_problems(self) -> list[str]:
        """Inconsistencies in the store, one line each (empty: consistent); see :mod:`.integrity`."""
        from .integrity import integrity_problems

        return integrity_problems(self._engine)

    def close(self) -> None:
        """Close every pooled connection; the store must not be used afterwards."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- tasks: writes -----------------------------------------------------------------

    def insert_tasks(self, rows: Sequence[NewTask]) -> list[TaskRecord]:
        """Insert ``rows`` in one transaction; return their records, ids in input order."""
        if not rows:
            return []
        now = self._clock()
        params = self._task_params(rows, now)
        with self._engine.begin() as conn:
            ids = self._insert_task_params(conn, params)
        return [self._new_record(task_id, row, p) for task_id, row, p in zip(ids, rows, params, strict=True)]

    @staticmethod
    def _task_params(rows: Sequence[NewTask], now: float) -> list[dict[str, Any]]:
        """The ``tasks`` columns of each row, checked and JSON-encoded (before any transaction opens)."""
        params: list[dict[str, Any]] = []
        for row in rows:
            if not isinstance(row, NewTask):
                raise TypeError(f"insert_tasks takes NewTask objects, not {type(row).__name__}")
            params.append(
                {
                    "owner": row.owner,
                    "name": row.name,
                    "status": TaskStatus(row.status).value,
                    "digest": row.digest,
                    "spec": _dumps(row.spec, "spec"),
                    "plan": _dumps(row.plan, "plan"),
                    "reason": row.reason,
                    "submitted_at": float(row.submitted_at),
                    "updated_at": now,
                    "cancel_requested": False,
                    "gpus": row.gpus,
                    "array_id": None,
                    "array_index": row.array_index,
                    "pipeline_id": None,
                }
            )
        return params

    def _insert_task_params(self, conn: sa.Connection, params: list[dict[str, Any]]) -> list[int]:
        """Insert encoded rows inside the caller's transaction; their ids, in input order."""
        if not params:
            return []
        if self.dialect == "sqlite" and len(params) > 1:
            ids = self._insert_sqlite_batch(conn, params)
        else:
            stmt = sa.insert(tasks).returning(tasks.c.id, sort_by_parameter_order=True)
            ids = [r[0] for r in conn.execute(stmt, params)]
        if len(ids) != len(params):  # pragma: no cover - a driver bug, not a user error
            raise RuntimeError(f"inserted {len(params)} tasks but got {len(ids)} ids back")
        return ids

    @staticmethod
    def _new_record(task_id: int, row: NewTask, p: Mapping[str, Any]) -> TaskRecord:
        """The record of a row just inserted with the encoded columns ``p``."""
        return TaskRecord(
            id=task_id,
            owner=row.owner,
            name=row.name,
            status=TaskStatus(row.status),
            digest=row.digest,
            spec=row.spec,
            plan=row.plan,
            reason=row.reason,
            exit_code=None,
            submitted_at=p["submitted_at"],
            started_at=None,
            finished_at=None,
            updated_at=p["updated_at"],
            placement=None,
            executor_state=None,
            cancel_requested=False,
            array_id=p.get("array_id"),
            array_index=p.get("array_index"),
            pipeline_id=p.get("pipeline_id"),
        )

    @staticmethod
    def _insert_sqlite_batch(conn: sa.Connection, params: list[dict[str, Any]]) -> list[int]:
        """Many rows at SQLite speed: one INSERT ... RETURNING for the first id, then executemany.

        SQLAlchemy sends one statement per row for an ordered RETURNING on SQLite. Here the
        first insert takes the write lock, which this transaction keeps, and AUTOINCREMENT
        hands out max+1, so the batch's ids are consecutive; checked, not assumed.
        """
        first = conn.execute(sa.insert(tasks).returning(tasks.c.id), params[0]).scalar_one()
        conn.execute(sa.insert(tasks), params[1:])
        last = conn.execute(sa.select(sa.func.max(tasks.c.id))).scalar_one()
        if last != first + len(params) - 1:  # pragma: no cover - would mean another writer interleaved
            raise RuntimeError("task ids of a batch are not consecutive; refusing to guess them")
        return list(range(first, last + 1))

    def transition(
        self,
        task_id: int,
        to: TaskStatus,
        *,
        expected: TaskStatus | Collection[TaskStatus],
        **fields: Unpack[TaskFields],
    ) -> TaskRecord | None:
        """Move task ``task_id`` to ``to`` if it is in one of ``expected``; set ``fields`` too.

        Raises :class:`IllegalTransition` (database untouched) when some ``expected -> to``
        is not a legal move, ``TypeError`` for a field that cannot be set. Returns the
        updated record, or ``None`` when no row matched (no such task, or its status is no
        longer one of ``expected``); then nothing was written.
        """
        to = TaskStatus(to)
        allowed = _expected(expected)
        for frm in allowed:
            check_move(task_id, frm, to)
        values = _encode_fields(fields)
        values["status"] = to.value
        values["updated_at"] = self._clock()
        stmt = (
            sa.update(tasks)
            .where(tasks.c.id == task_id, tasks.c.status.in_([s.value for s in allowed]))
            .values(values)
            .returning(*tasks.c)
        )
        with self._engine.begin() as conn:
            row = conn.execute(stmt).mappings().first()
        return None if row is None else _record(row)

    def update(
        self,
        task_id: int,
        *,
        expected: TaskStatus | Collection[TaskStatus],
        **fields: Unpack[TaskFields],
    ) -> bool:
        """Set ``fields`` on task ``task_id`` if its status is one of ``expected``.

        The status does not change. Returns whether a row was written.
        """
        allowed = _expected(expected)
        values = _encode_fields(fields)
        values["updated_at"] = self._clock()
        stmt = (
            sa.update(tasks).where(tasks.c.id == task_id, tasks.c.status.in_([s.value for s in allowed])).values(values)
        )
        with self._engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1

    # -- tasks: reads ------------------------------------------------------------------

    def get(self, task_id: int) -> TaskRecord | None:
        """The task with this id, plan included; ``None`` when there is none."""
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(tasks).where(tasks.c.id == task_id)).mappings().first()
        return None if row is None else _record(row)

    def list_tasks(
        self,
        owner: str | None = None,
        statuses: Iterable[TaskStatus] | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> tuple[list[TaskRecord], int]:
        """A page of tasks, newest first, and how many tasks match the filter in all.

        ``owner``/``statuses`` filter (``None``: any). ``before_id`` is the keyset cursor:
        pass the last id of the previous page to get the next one. The total ignores the
        cursor. Records come without their plan (``plan is None``).
        """
        if limit < 0:
            raise ValueError("limit: must not be negative")
        conds: list[sa.ColumnElement[bool]] = []
        if owner is not None:
            conds.append(tasks.c.owner == owner)
        if statuses is not None:
            values = sorted({TaskStatus(s).value for s in statuses})
            if not values:
                return [], 0
            conds.append(tasks.c.status.in_(values))
        page_conds = [*conds, tasks.c.id < before_id] if before_id is not None else conds
        page = sa.select(*_LIST_COLUMNS).where(*page_conds).order_by(tasks.c.id.desc()).limit(limit)
        count = sa.select(sa.func.count()).select_from(tasks).where(*conds)
        with self._engine.connect() as conn:
            rows = conn.execute(page).mappings().all() if limit else []
            total = conn.execute(count).scalar_one()
        return [_record(r) for r in rows], int(total)

    def active(self) -> list[TaskRecord]:
        """Every task that is not terminal, oldest first, plans included."""
        stmt = sa.select(tasks).where(tasks.c.status.in_(sorted(s.value for s in ACTIVE))).order_by(tasks.c.id)
        with self._engine.connect() as conn:
            return [_record(r) for r in conn.execute(stmt).mappings()]

    def counts_by_status(self, owner: str | None = None) -> dict[TaskStatus, int]:
        """How many tasks are in each status (every status present, zero included)."""
        stmt = sa.select(tasks.c.status, sa.func.count()).group_by(tasks.c.status)
        if owner is not None:
            stmt = stmt.where(tasks.c.owner == owner)
        out = dict.fromkeys(TaskStatus, 0)
        with self._engine.connect() as conn:
            for status, n in conn.execute(stmt):
                out[TaskStatus(status)] = int(n)
        return out


# -- helpers ---------------------------------------------------------------------------


def _make_engine(url: str, *, echo: bool) -> sa.Engine:
    u = sa.make_url(url)
    backend = u.get_backend_name()
    if backend == "sqlite":
        if u.get_driver_name() != "pysqlite":
            raise ValueError(f"unsupported SQLite driver {u.get_driver_name()!r}; use sqlite:///path")
        kwargs: dict[str, Any] = {}
        if u.database in (None, "", ":memory:"):
            kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        elif not u.database.startswith("file:"):  # a path (a file: URI is the caller's own business)
            _private_db_file(Path(u.database))
        engine = sa.create_engine(u, echo=echo, **kwargs)
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if backend == "postgresql":
        if u.drivername == "postgresql":
            u = u.set(drivername="postgresql+psycopg")
        if u.get_driver_name() != "psycopg":
            raise ValueError(f"unsupported PostgreSQL driver {u.get_driver_name()!r}; use postgresql+psycopg://")
        return sa.create_engine(u, echo=echo, pool_pre_ping=True)
    raise ValueError(f"unsupported database URL {u.render_as_string(hide_password=True)!r}: use sqlite or postgresql")


def _private_db_file(path: Path) -> None:
    """Create the SQLite file 0600 if missing; make it and its -wal/-shm 0600 if they are the service's."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
    except OSError:
        return  # e.g. its directory does not exist: SQLite reports that itself, in its own words
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(name, stat.S_IMODE(st.st_mode) & 0o600)


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Take transaction control away from pysqlite (which would open transactions lazily and
    # commit before DDL); _sqlite_on_begin emits BEGIN ourselves. PRAGMAs run outside any
    # transaction, as journal_mode requires.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=5000")
        cur.execute("PRAGMA foreign_keys=ON")
    finally:
        cur.close()


def _sqlite_on_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql("BEGIN")


def _expected(expected: TaskStatus | Collection[TaskStatus]) -> list[TaskStatus]:
    # A TaskStatus is a str, and a str is a Collection: test for it first.
    if isinstance(expected, str):
        return [TaskStatus(expected)]
    out = sorted({TaskStatus(s) for s in expected})
    if not out:
        raise ValueError("expected: give at least one status")
    return out


def _type_ok(value: object, types: tuple[type, ...]) -> bool:
    # bool is an int, but True is no exit code and no timestamp.
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _encode_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in fields.items():
        types = _FIELD_TYPES.get(key)
        if types is None:
            raise TypeError(f"task field {key!r} cannot be set; settable: {', '.join(sorted(_FIELD_TYPES))}")
        if not _type_ok(value, types):
            raise TypeError(f"task field {key!r}: {type(value).__name__} is not allowed")
        if key in _JSON_FIELDS:
            values[key] = None if value is None else _dumps(value, key)
        elif key in ("started_at", "finished_at") and value is not None:
            values[key] = float(value)
        else:
            values[key] = value
    return values


# Compact, standard JSON (NaN and Infinity refused); one encoder, not one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _dumps(value: Any, field: str) -> str:
    if not isinstance(value, dict):
        raise TypeError(f"{field}: must be a dict, not {type(value).__name__}")
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{field}: not JSON-serialisable: {exc}") from exc


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _float(value: float | None) -> float | None:
    # SQLite hands back a whole REAL as an int from UPDATE ... RETURNING.
    return None if value is None else float(value)


def _record(row: RowMapping) -> TaskRecord:
    """A record from a row; ``plan`` is ``None`` when the row was selected without it."""
    return TaskRecord(
        id=row["id"],
        owner=row["owner"],
        name=row["name"],
        status=TaskStatus(row["status"]),
        digest=row["digest"],
        spec=json.loads(row["spec"]),
        plan=_loads(row["plan"]) if "plan" in row else None,
        reason=row["reason"],
        exit_code=row["exit_code"],
        submitted_at=float(row["submitted_at"]),
        started_at=_float(row["started_at"]),
        finished_at=_float(row["finished_at"]),
        updated_at=float(row["updated_at"]),
        placement=_loads(row["placement"]),
        executor_state=_loads(row["executor_state"]),
        cancel_requested=bool(row["cancel_requested"]),
        array_id=row.get("array_id"),
        array_index=row.get("array_index"),
        pipeline_id=row.get("pipeline_id"),
    )
