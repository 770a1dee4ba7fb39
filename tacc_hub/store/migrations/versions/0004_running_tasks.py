"""Working with running tasks: run attempts, time extensions, audit events, GPU samples.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

A frozen snapshot like 0001: columns are spelled out here, not imported from models.py.
Nothing existing changes; the tables start empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("nodes", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_task_attempts_task_id_attempt"), "task_attempts", ["task_id", "attempt"])
    op.create_table(
        "time_extensions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("by_user", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_time_extensions_task_id"), "time_extensions", ["task_id"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_audit_events_at"), "audit_events", ["at"])
    op.create_table(
        "gpu_samples",
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("util", sa.Double(), nullable=False),
        sa.Column("memory_mib", sa.Double(), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "at"),
    )


def downgrade() -> None:
    op.drop_table("gpu_samples")
    op.drop_index(op.f("ix_audit_events_at"), table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index(op.f("ix_time_extensions_task_id"), table_name="time_extensions")
    op.drop_table("time_extensions")
    op.drop_index(op.f("ix_task_attempts_task_id_attempt"), table_name="task_attempts")
    op.drop_table("task_attempts")
