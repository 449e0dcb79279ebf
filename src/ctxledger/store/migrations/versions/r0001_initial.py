"""Initial schema: records, conversation_heads, token_counts, assemblies.

Written out table by table (not imported from ``ctxledger.store.schema``) so that this revision stays
what it was when later revisions change the schema; ``tests/store/test_migrations.py`` checks that the
migrated database equals ``ctxledger.store.schema.metadata`` on SQLite and PostgreSQL.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _records() -> None:
    op.create_table(
        "records",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("branch_id", sa.String(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("owner_participant_id", sa.String(), nullable=True),
        sa.Column("owner_model_run_id", sa.String(), nullable=True),
        sa.Column("visibility", sa.String(), nullable=False),
        sa.Column("privacy_class", sa.String(), nullable=False),
        sa.Column("trust", sa.String(), nullable=False),
        sa.Column("external_id", sa.String(), nullable=True),
        sa.Column("blob_sha256", sa.String(64), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_records"),
        sa.UniqueConstraint(
            "tenant_id", "conversation_id", "seq", name="uq_records_tenant_id_conversation_id_seq"
        ),
    )
    op.create_index(
        "ix_records_tenant_id_conversation_id_branch_id_seq",
        "records",
        ["tenant_id", "conversation_id", "branch_id", "seq"],
    )
    op.create_index("ix_records_blob_sha256", "records", ["blob_sha256"])


def _conversation_heads() -> None:
    op.create_table(
        "conversation_heads",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("head_seq", sa.BigInteger(), nullable=False),
        sa.Column("main_branch_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "conversation_id", name="pk_conversation_heads"),
    )
    op.create_index(
        "ix_conversation_heads_tenant_id_main_branch_id",
        "conversation_heads",
        ["tenant_id", "main_branch_id"],
    )


def _token_counts() -> None:
    op.create_table(
        "token_counts",
        sa.Column("counter_id", sa.String(), nullable=False),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("counter_id", "content_hash", name="pk_token_counts"),
    )


def _assemblies() -> None:
    op.create_table(
        "assemblies",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("branch_id", sa.String(), nullable=True),
        sa.Column("snapshot_seq", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("payload_hash", sa.String(), nullable=True),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("usage_input_tokens", sa.Integer(), nullable=True),
        sa.Column("usage_output_tokens", sa.Integer(), nullable=True),
        sa.Column("observed_at", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_assemblies"),
    )
    op.create_index(
        "ix_assemblies_tenant_id_conversation_id_created_at",
        "assemblies",
        ["tenant_id", "conversation_id", "created_at"],
    )


def upgrade() -> None:
    """Create the four tables and their indexes."""
    _records()
    _conversation_heads()
    _token_counts()
    _assemblies()


def downgrade() -> None:
    """Drop everything ``upgrade`` created."""
    for table in ("assemblies", "token_counts", "conversation_heads", "records"):
        op.drop_table(table)
