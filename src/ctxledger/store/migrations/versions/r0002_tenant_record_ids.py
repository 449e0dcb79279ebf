"""Record and assembly ids are unique per tenant: primary keys become ``(tenant_id, id)``.

Before this revision ``records.id`` and ``assemblies.id`` were primary keys on their own, so a tenant
could not import a conversation whose ids another tenant already used, and the duplicate-id error told
it that the id existed somewhere. Every row is kept: a key unique on its own is unique with the tenant.

SQLite cannot alter a primary key, so the tables are copied in batch mode (``op.batch_alter_table``
recreates them and copies the rows); PostgreSQL drops and recreates the constraint in place.

Downgrading fails (and changes nothing) when two tenants share an id, since that is what it forbids.

Revision ID: 0002_tenant_record_ids
Revises: 0001_initial
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002_tenant_record_ids"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("records", "assemblies")


def _rekey(table: str, columns: list[str]) -> None:
    with op.batch_alter_table(table) as batch:
        batch.drop_constraint(f"pk_{table}", type_="primary")
        batch.create_primary_key(f"pk_{table}", columns)


def upgrade() -> None:
    """Make ``(tenant_id, id)`` the primary key of ``records`` and ``assemblies``."""
    for table in _TABLES:
        _rekey(table, ["tenant_id", "id"])


def downgrade() -> None:
    """Make ``id`` alone the primary key again (fails when two tenants share an id)."""
    for table in _TABLES:
        _rekey(table, ["id"])
