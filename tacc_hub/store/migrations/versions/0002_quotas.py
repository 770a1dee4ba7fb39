"""Quotas: the quotas and memberships tables, tasks.gpus and runs (preempted runs) for GPU-hour accounting.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

A frozen snapshot like 0001: columns are spelled out here, not imported from models.py.
``tasks.gpus`` is added in place (``ALTER TABLE ... ADD COLUMN`` with a default, no table
copy on either database); existing tasks count as 0 GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("gpus", sa.Integer(), server_default=sa.text("0"), nullable=False))
    op.create_table(
        "quotas",
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("max_gpus", sa.Integer(), nullable=True),
        sa.Column("guaranteed_gpus", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("gpu_hours", sa.Double(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.CheckConstraint(sa.column("kind").in_(("user", "group")), name=op.f("ck_quotas_kind")),
        sa.PrimaryKeyConstraint("kind", "name"),
    )
    op.create_table(
        "memberships",
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("group", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("user"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_runs_finished_at"), "runs", ["finished_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_finished_at"), table_name="runs")
    op.drop_table("runs")
    op.drop_table("memberships")
    op.drop_table("quotas")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("gpus")
