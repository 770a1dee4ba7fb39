"""Token expiry and revocation (api_tokens.expires_at, revoked_at); code snapshot owners (code_snapshots).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A frozen snapshot like 0001: columns are spelled out here, not imported from models.py.
Existing tokens never expire and are not revoked. Existing snapshots are given to the owners
of the tasks that name them (``code.kind == "snapshot"`` in the stored spec), so that a task
can be submitted again by whoever submitted it; a snapshot no task names has no owner and must
be uploaded again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("expires_at", sa.Double(), nullable=True))
    op.add_column("api_tokens", sa.Column("revoked_at", sa.Double(), nullable=True))
    owners = op.create_table(
        "code_snapshots",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("uploaded_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("digest", "user"),
    )
    tasks = sa.table("tasks", sa.column("owner", sa.String), sa.column("spec", sa.Text),
                     sa.column("submitted_at", sa.Double))
    conn = op.get_bind()
    seen: dict[tuple[str, str], dict[str, object]] = {}
    for owner, spec, submitted in conn.execute(sa.select(tasks.c.owner, tasks.c.spec, tasks.c.submitted_at)):
        try:
            code = (json.loads(spec) or {}).get("code") or {}
        except (ValueError, AttributeError):
            continue
        digest = code.get("digest") if isinstance(code, dict) and code.get("kind") == "snapshot" else None
        if isinstance(digest, str) and len(digest) == 64 and (digest, owner) not in seen:
            size = code.get("size")
            seen[(digest, owner)] = {"digest": digest, "user": owner, "uploaded_at": float(submitted),
                                     "size": size if isinstance(size, int) and size >= 0 else 0}
    if seen and owners is not None:
        op.bulk_insert(owners, list(seen.values()))


def downgrade() -> None:
    op.drop_table("code_snapshots")
    op.drop_column("api_tokens", "revoked_at")
    op.drop_column("api_tokens", "expires_at")
