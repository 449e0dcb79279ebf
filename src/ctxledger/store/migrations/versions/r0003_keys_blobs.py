"""Service API keys and blobs kept inside the database.

``api_keys`` holds the sha256 of each service key with its tenant (the key itself is shown once, never
stored). ``blobs`` and ``blob_chunks`` hold raw tool results inside the database, so several service
processes on several hosts share one blob store without a shared folder.

Revision ID: 0003_keys_blobs
Revises: 0002_tenant_record_ids
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_keys_blobs"
down_revision: str | None = "0002_tenant_record_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``api_keys``, ``blobs`` and ``blob_chunks``."""
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("key_sha256", sa.String(64), nullable=False),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("revoked_at", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("key_sha256", name="uq_api_keys_key_sha256"),
    )
    op.create_index("ix_api_keys_tenant_id", "api_keys", ["tenant_id"])
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_blobs"),
    )
    op.create_table(
        "blob_chunks",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("chunk", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", "chunk", name="pk_blob_chunks"),
    )


def downgrade() -> None:
    """Drop the three tables (database blobs and keys are lost)."""
    op.drop_table("blob_chunks")
    op.drop_table("blobs")
    op.drop_index("ix_api_keys_tenant_id", table_name="api_keys")
    op.drop_table("api_keys")
