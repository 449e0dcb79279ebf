"""Retention: the audit trail of retention actions and the queue of blobs to collect.

``retention_audit`` records every retention action (rule, record or assembly, time, sha256 before and
after); ``retention_blob_queue`` holds blobs whose last reference an action may have removed, until they
are collected. Both are new tables: no existing row changes.

Revision ID: 0004_retention
Revises: 0003_keys_blobs
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_retention"
down_revision: str | None = "0003_keys_blobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``retention_audit`` and ``retention_blob_queue``."""
    op.create_table(
        "retention_audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("ref", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("rule", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Column("before_sha256", sa.String(64), nullable=True),
        sa.Column("after_sha256", sa.String(64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_retention_audit"),
    )
    op.create_index("ix_retention_audit_tenant_id_ref", "retention_audit", ["tenant_id", "ref"])
    op.create_index(
        "ix_retention_audit_tenant_id_conversation_id", "retention_audit", ["tenant_id", "conversation_id"]
    )
    op.create_table(
        "retention_blob_queue",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("queued_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_retention_blob_queue"),
    )


def downgrade() -> None:
    """Drop both tables (the audit trail is lost)."""
    op.drop_table("retention_blob_queue")
    op.drop_index("ix_retention_audit_tenant_id_conversation_id", table_name="retention_audit")
    op.drop_index("ix_retention_audit_tenant_id_ref", table_name="retention_audit")
    op.drop_table("retention_audit")
