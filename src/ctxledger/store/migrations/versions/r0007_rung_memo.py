"""The representation ladder's rungs, kept so that a new process reads them instead of rebuilding them.

``rung_memo`` holds one row per unit and set of ladder inputs: the sha256 key of those inputs and of the code
that built the rungs (``ctxledger.assemble.rung_memo``), the conversation the unit belongs to (retention
drops a conversation's rows when it rewrites or removes one of its records) and the rungs as MessagePack.
An empty table is correct: rungs missing from it are built and added by the next assembly.

Revision ID: 0007_rung_memo
Revises: 0006_inspector_sessions
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_rung_memo"
down_revision: str | None = "0006_inspector_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``rung_memo`` with its index on the conversation."""
    op.create_table(
        "rung_memo",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("memo_key", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memo_key", name="pk_rung_memo"),
    )
    op.create_index("ix_rung_memo_tenant_id_conversation_id", "rung_memo", ["tenant_id", "conversation_id"])


def downgrade() -> None:
    """Drop the table (rungs are built again as needed)."""
    op.drop_index("ix_rung_memo_tenant_id_conversation_id", table_name="rung_memo")
    op.drop_table("rung_memo")
