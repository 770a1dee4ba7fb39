"""Running the cluster without babysitting it (issue 21): audit targets and before/after, notifications.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

A frozen snapshot like 0001: columns are spelled out here, not imported from models.py.
Existing audit rows get NULL target, before, after and request id (their detail keeps what they had).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.add_column(sa.Column("target", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("before", sa.Text(), nullable=True))
        batch.add_column(sa.Column("after", sa.Text(), nullable=True))
        batch.add_column(sa.Column("request_id", sa.String(length=32), nullable=True))
    op.create_index(op.f("ix_audit_events_target"), "audit_events", ["target"])
    op.create_table(
        "notify_settings",
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("user"),
    )
    op.create_table(
        "notify_outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.Double(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("sent_at", sa.Double(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_notify_outbox_status_next_at"), "notify_outbox", ["status", "next_at"])
    op.create_index(op.f("ix_notify_outbox_user_id"), "notify_outbox", ["user", "id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_notify_outbox_user_id"), table_name="notify_outbox")
    op.drop_index(op.f("ix_notify_outbox_status_next_at"), table_name="notify_outbox")
    op.drop_table("notify_outbox")
    op.drop_table("notify_settings")
    op.drop_index(op.f("ix_audit_events_target"), table_name="audit_events")
    with op.batch_alter_table("audit_events") as batch:
        batch.drop_column("request_id")
        batch.drop_column("after")
        batch.drop_column("before")
        batch.drop_column("target")
