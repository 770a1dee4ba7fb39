"""Initial schema: tasks and api_tokens.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

A migration is a frozen snapshot: it spells out its columns instead of importing models.py,
so later edits to the models never change what an old migration does.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUSES = ("pending", "starting", "running", "cancelling", "succeeded", "failed", "cancelled", "lost")


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("plan", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("submitted_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("placement", sa.Text(), nullable=True),
        sa.Column("executor_state", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.CheckConstraint(sa.column("status").in_(_STATUSES), name=op.f("ck_tasks_status")),
        sa.PrimaryKeyConstraint("id"),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_tasks_owner_id"), "tasks", ["owner", "id"])
    op.create_index(op.f("ix_tasks_status_id"), "tasks", ["status", "id"])

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("note", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("last_used_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_api_tokens_user"), "api_tokens", ["user"])
    op.create_index(op.f("ix_api_tokens_token_hash"), "api_tokens", ["token_hash"], unique=True)


def downgrade() -> None:
    op.drop_index(op.f("ix_api_tokens_token_hash"), table_name="api_tokens")
    op.drop_index(op.f("ix_api_tokens_user"), table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_index(op.f("ix_tasks_status_id"), table_name="tasks")
    op.drop_index(op.f("ix_tasks_owner_id"), table_name="tasks")
    op.drop_table("tasks")
