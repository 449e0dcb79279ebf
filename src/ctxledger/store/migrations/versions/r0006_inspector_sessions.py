"""Server-side sessions of the web inspector.

``inspector_sessions`` holds one row per browser session: the sha256 of its random token (the token itself
lives only in the browser's cookie), the tenant and the API key it was opened with, and when it expires.
Revoking the key deletes its sessions.

Revision ID: 0006_inspector_sessions
Revises: 0005_write_facts
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_inspector_sessions"
down_revision: str | None = "0005_write_facts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``inspector_sessions`` with its indexes on the key and the expiry."""
    op.create_table(
        "inspector_sessions",
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("expires_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("token_sha256", name="pk_inspector_sessions"),
    )
    op.create_index("ix_inspector_sessions_key_id", "inspector_sessions", ["key_id"])
    op.create_index("ix_inspector_sessions_expires_at", "inspector_sessions", ["expires_at"])


def downgrade() -> None:
    """Drop the table (every inspector session ends)."""
    op.drop_index("ix_inspector_sessions_expires_at", table_name="inspector_sessions")
    op.drop_index("ix_inspector_sessions_key_id", table_name="inspector_sessions")
    op.drop_table("inspector_sessions")
