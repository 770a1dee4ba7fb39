"""Table definitions (SQLAlchemy Core), the single source of the schema.

Invariants:

* The Alembic migrations in ``migrations/versions`` produce exactly this metadata; a test
  compares a migrated database against it (``alembic.autogenerate.compare_metadata``) on
  SQLite and PostgreSQL. Change the schema here *and* add a migration.
* JSON columns (``spec``, ``plan``, ``placement``, ``executor_state``) are plain ``TEXT``
  holding standard JSON written by the store, so both databases store the same bytes and no
  dialect-specific JSON type leaks into the schema.
* Task ids only grow and are never reused (``AUTOINCREMENT`` on SQLite, a sequence on
  PostgreSQL), so ``id`` order is submission order and keyset pagination is stable.
* Times are ``DOUBLE PRECISION`` seconds since the epoch (UTC), never local wall time.
* ``tasks.status`` only ever holds a :class:`~tacc_hub.store.status.TaskStatus` value; a CHECK
  constraint backs this up in the database.
* Indexes serve the hot queries: a user's tasks newest first ``(owner, id)``, tasks by status
  newest/oldest first ``(status, id)``. They also serve plain ``owner =`` / ``status =``
  filters (leftmost prefix), so there are no separate single-column indexes to maintain.
* ``quotas`` has one row per named user or group, and at most one default row per kind
  (``name = "*"``); ``memberships`` maps a user to one group (no row: group ``"default"``).
  Names are checked by the store before they are written (``store/quotas.py``).
"""

from __future__ import annotations

import sqlalchemy as sa

from .status import TaskStatus

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

NAME_LEN = 64
"""Longest owner, task name, digest, token user and token hash."""
STATUS_LEN = 16
NOTE_LEN = 255

STATUS_VALUES: tuple[str, ...] = tuple(s.value for s in TaskStatus)

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("owner", sa.String(NAME_LEN), nullable=False),
    sa.Column("name", sa.String(NAME_LEN), nullable=False),
    sa.Column("status", sa.String(STATUS_LEN), nullable=False),
    sa.Column("digest", sa.String(NAME_LEN), nullable=False),
    sa.Column("spec", sa.Text, nullable=False),  # JSON: the TaskSpec as submitted
    sa.Column("plan", sa.Text, nullable=False),  # JSON: the compiled ExecutionPlan (can be large)
    sa.Column("reason", sa.Text, nullable=True),  # why pending / failed / lost, for people
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("submitted_at", sa.Double, nullable=False),
    sa.Column("started_at", sa.Double, nullable=True),
    sa.Column("finished_at", sa.Double, nullable=True),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.Column("placement", sa.Text, nullable=True),  # JSON: {"node": "localhost", "gpus": [0, 1]}
    sa.Column("executor_state", sa.Text, nullable=True),  # JSON: {"pid": 123, "start_time": 456}
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("gpus", sa.Integer, nullable=False, server_default=sa.text("0")),  # nodes x gpus_per_node
    # Many tasks at once (issue 20, migration 0005): the array it is an element of (task_arrays.id, which is
    # its first element's task id), its index there, and the pipeline it is a step of (pipelines.id).
    sa.Column("array_id", sa.Integer, nullable=True),
    sa.Column("array_index", sa.Integer, nullable=True),
    sa.Column("pipeline_id", sa.Integer, nullable=True),
    sa.CheckConstraint(sa.column("status").in_(STATUS_VALUES), name="status"),
    sa.Index(None, "owner", "id"),
    sa.Index(None, "status", "id"),
    sa.Index(None, "array_id", "array_index"),
    sa.Index(None, "pipeline_id"),
    sqlite_autoincrement=True,  # ids are never reused, even after the newest row is deleted
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user", sa.String(NAME_LEN), nullable=False, index=True),
    sa.Column("admin", sa.Boolean, nullable=False),
    sa.Column("token_hash", sa.String(NAME_LEN), nullable=False, unique=True, index=True),
    sa.Column("note", sa.String(NOTE_LEN), nullable=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("last_used_at", sa.Double, nullable=True),
    sa.Column("expires_at", sa.Double, nullable=True),  # NULL: never expires
    sa.Column("revoked_at", sa.Double, nullable=True),  # set by a revoke; the row stays, for the record
)
"""API tokens, by the sha256 of the token only. A token is valid while ``revoked_at`` is NULL and
``expires_at`` is NULL or in the future."""

code_snapshots = sa.Table(
    "code_snapshots",
    metadata,
    sa.Column("digest", sa.String(NAME_LEN), primary_key=True),
    sa.Column("user", sa.String(NAME_LEN), primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("uploaded_at", sa.Double, nullable=False),
)
"""Who uploaded which code snapshot: a snapshot (the archive in the code store, by its sha256)
belongs to every user who uploaded its bytes; only they may name it in a task or ask about it."""

QUOTA_KINDS: tuple[str, ...] = ("user", "group")
KIND_LEN = 8

quotas = sa.Table(
    "quotas",
    metadata,
    sa.Column("kind", sa.String(KIND_LEN), primary_key=True),  # "user" | "group"
    sa.Column("name", sa.String(NAME_LEN), primary_key=True),  # "*": the default for everyone not named
    sa.Column("max_gpus", sa.Integer, nullable=True),  # GPUs held at once; NULL: no cap
    sa.Column("guaranteed_gpus", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("gpu_hours", sa.Double, nullable=True),  # budget per accounting period; NULL: no budget
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.CheckConstraint(sa.column("kind").in_(QUOTA_KINDS), name="kind"),
)

memberships = sa.Table(
    "memberships",
    metadata,
    sa.Column("user", sa.String(NAME_LEN), primary_key=True),
    sa.Column("group", sa.String(NAME_LEN), nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.Integer, nullable=False),
    sa.Column("owner", sa.String(NAME_LEN), nullable=False),
    sa.Column("gpus", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Double, nullable=False),
    sa.Column("finished_at", sa.Double, nullable=False),
    sa.Index(None, "finished_at"),
)
"""Earlier runs of tasks that were preempted (the task row keeps only its current run): charged
to the owner's GPU-hours like any run. Rows are only added."""


ATTEMPT_OUTCOME_LEN = 16

task_attempts = sa.Table(
    "task_attempts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),  # 0 for the first run (TACC_ATTEMPT)
    sa.Column("started_at", sa.Double, nullable=False),
    sa.Column("finished_at", sa.Double, nullable=False),
    sa.Column("outcome", sa.String(ATTEMPT_OUTCOME_LEN), nullable=False),  # succeeded, failed, preempted, ...
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("nodes", sa.Text, nullable=True),  # comma-separated node names of its placement
    sa.Index(None, "task_id", "attempt"),
)
"""Every ended run of a task, one row each (a task with retries or preemptions has several); only added."""

time_extensions = sa.Table(
    "time_extensions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.Integer, nullable=False, index=True),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("seconds", sa.Integer, nullable=False),
    sa.Column("by_user", sa.String(NAME_LEN), nullable=False),
)
"""Extensions of a running task's time limit: its limit is the plan's plus the sum of its rows."""

AUDIT_ACTION_LEN = 32
AUDIT_TARGET_LEN = 128
REQUEST_ID_LEN = 32

audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Double, nullable=False, index=True),
    sa.Column("actor", sa.String(NAME_LEN), nullable=False),
    sa.Column("action", sa.String(AUDIT_ACTION_LEN), nullable=False),  # exec, shell, extend, ...
    sa.Column("task_id", sa.Integer, nullable=True),
    sa.Column("detail", sa.Text, nullable=False),  # JSON: what was done (argv, seconds, ...)
    sa.Column("target", sa.String(AUDIT_TARGET_LEN), nullable=True, index=True),  # task:12, user:alice, token:3
    sa.Column("before", sa.Text, nullable=True),  # JSON: the object before the action (NULL: none / n.a.)
    sa.Column("after", sa.Text, nullable=True),  # JSON: the object after it
    sa.Column("request_id", sa.String(REQUEST_ID_LEN), nullable=True),  # the API request that did it
)
"""Who did what to what, when (admin actions, exec and shell sessions, extensions); rows are only added."""

gpu_samples = sa.Table(
    "gpu_samples",
    metadata,
    sa.Column("task_id", sa.Integer, primary_key=True),
    sa.Column("at", sa.Double, primary_key=True),
    sa.Column("util", sa.Double, nullable=False),  # mean GPU utilization over the task's GPUs, percent
    sa.Column("memory_mib", sa.Double, nullable=True),  # GPU memory used, summed over its GPUs
    sa.Column("gpus", sa.Integer, nullable=False),  # how many of its GPUs answered
)
"""GPU utilization of running tasks, sampled (``TaccHub.gpu_sample_interval``)."""


# --- many tasks at once (issue 20) ------------------------------------------------------------

GROUP_KIND_LEN = 8
WHEN_LEN = 16

task_arrays = sa.Table(
    "task_arrays",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),  # its first element's task id (as Slurm)
    sa.Column("owner", sa.String(NAME_LEN), nullable=False),
    sa.Column("name", sa.String(NAME_LEN), nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("max_running", sa.Integer, nullable=True),  # NULL: no cap of its own
    sa.Column("pipeline_id", sa.Integer, nullable=True),  # the pipeline it is a step of
    sa.Column("step", sa.String(NAME_LEN), nullable=True),  # that step's name
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Index(None, "owner", "id"),
)
"""Arrays: the elements are ``tasks`` rows with ``array_id`` = this id, inserted in the same transaction."""

pipelines = sa.Table(
    "pipelines",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),  # its first step's first task id
    sa.Column("owner", sa.String(NAME_LEN), nullable=False),
    sa.Column("name", sa.String(NAME_LEN), nullable=False),
    sa.Column("steps", sa.Text, nullable=False),  # JSON: [{"name", "needs": [...], "task_id" | "array_id"}]
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Index(None, "owner", "id"),
)
"""Pipelines: named steps (tasks or arrays) that wait for each other, submitted as one request."""

task_dependencies = sa.Table(
    "task_dependencies",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.Integer, nullable=False, index=True),  # the waiting task
    sa.Column("kind", sa.String(GROUP_KIND_LEN), nullable=False),  # "task" | "array"
    sa.Column("on_id", sa.Integer, nullable=False, index=True),  # the task or array waited on
    sa.Column("when", sa.String(WHEN_LEN), nullable=False),  # succeeded, finished, failed, all_succeeded, ...
)
"""What each task waits for (its spec's ``depends_on``, ids resolved); rows are only added."""


# --- notifications (issue 21) -------------------------------------------------------------------

CHANNEL_LEN = 16
EVENT_LEN = 16

notify_settings = sa.Table(
    "notify_settings",
    metadata,
    sa.Column("user", sa.String(NAME_LEN), primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),  # JSON: the user's channels and events, as validated
    sa.Column("updated_at", sa.Double, nullable=False),
)
"""Each user's notification settings (no row: none)."""

notify_outbox = sa.Table(
    "notify_outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user", sa.String(NAME_LEN), nullable=False),
    sa.Column("channel", sa.String(CHANNEL_LEN), nullable=False),  # email | webhook
    sa.Column("destination", sa.Text, nullable=False),  # the address or URL
    sa.Column("event", sa.String(EVENT_LEN), nullable=False),  # started, succeeded, failed, preempted, ...
    sa.Column("task_id", sa.Integer, nullable=True),
    sa.Column("payload", sa.Text, nullable=False),  # JSON: what is delivered
    sa.Column("status", sa.String(STATUS_LEN), nullable=False),  # pending | sent | failed
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_at", sa.Double, nullable=False),  # when the next try is due
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("sent_at", sa.Double, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Index(None, "status", "next_at"),
    sa.Index(None, "user", "id"),
)
"""Notifications to deliver and delivered: written before delivery, so a restart loses none."""
