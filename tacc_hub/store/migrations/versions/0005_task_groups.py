"""Many tasks at once: arrays, pipelines, dependencies (issue 20).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

A frozen snapshot like 0001: columns are spelled out here, not imported from models.py.
Existing tasks get NULL in the new columns (they are in no array and no pipeline).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("array_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("pipeline_id", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_tasks_array_id_array_index"), "tasks", ["array_id", "array_index"])
    op.create_index(op.f("ix_tasks_pipeline_id"), "tasks", ["pipeline_id"])
    op.create_table(
        "task_arrays",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("pipeline_id", sa.Integer(), nullable=True),
        sa.Column("step", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_task_arrays_owner_id"), "task_arrays", ["owner", "id"])
    op.create_table(
        "pipelines",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("steps", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_pipelines_owner_id"), "pipelines", ["owner", "id"])
    op.create_table(
        "task_dependencies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("on_id", sa.Integer(), nullable=False),
        sa.Column("when", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_task_dependencies_task_id"), "task_dependencies", ["task_id"])
    op.create_index(op.f("ix_task_dependencies_on_id"), "task_dependencies", ["on_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_task_dependencies_on_id"), table_name="task_dependencies")
    op.drop_index(op.f("ix_task_dependencies_task_id"), table_name="task_dependencies")
    op.drop_table("task_dependencies")
    op.drop_index(op.f("ix_pipelines_owner_id"), table_name="pipelines")
    op.drop_table("pipelines")
    op.drop_index(op.f("ix_task_arrays_owner_id"), table_name="task_arrays")
    op.drop_table("task_arrays")
    op.drop_index(op.f("ix_tasks_pipeline_id"), table_name="tasks")
    op.drop_index(op.f("ix_tasks_array_id_array_index"), table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("pipeline_id")
        batch.drop_column("array_index")
        batch.drop_column("array_id")
