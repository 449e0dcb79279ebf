"""Write-path facts, links and the protected-state index: tables, and every existing record's rows.

Adds ``record_facts`` (each record's secret findings, instruction-like phrase, lexical terms and inherited
restrictions, stamped with the detector that computed them), ``record_links`` (supersession, contradiction
and derivation links, indexed by target) and ``protected_state`` (open and failed tool calls, tagged records,
checkpoints, instructions, with the record that closed each). Then it fills them for the records already
stored, conversation by conversation in ``seq`` order, exactly as an append would have: a store upgraded
from an older revision reads the same facts as one written at this revision.

Tool results' raw text is read from the blob store the upgrade was given (``config.attributes["read_blob"]``,
passed by ``open_store`` and ``ctxledger.store.migrate``); a blob that cannot be read gets the facts of the
unavailable-bytes reference, marked ``raw_readable: false``, and readers recompute them once it is readable.

Revision ID: 0005_write_facts
Revises: 0004_retention
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import context, op

from ctxledger.errors import BlobNotFound
from ctxledger.facts import compute_facts, encode_facts
from ctxledger.records import Record
from ctxledger.store import _index
from ctxledger.store.codec import READ_COLUMNS, decode_row

revision: str = "0005_write_facts"
down_revision: str | None = "0004_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHUNK = 2_000
"""Records decoded and computed at a time during the backfill."""


def _create() -> None:
    op.create_table(
        "record_facts",
        sa.Column("tenant_id", sa.String, nullable=False),
        sa.Column("record_id", sa.String, nullable=False),
        sa.Column("conversation_id", sa.String, nullable=False),
        sa.Column("branch_id", sa.String, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("stamp", sa.String, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "record_id", name="pk_record_facts"),
    )
    op.create_index(
        "ix_record_facts_tenant_id_conversation_id_seq", "record_facts", ["tenant_id", "conversation_id", "seq"]
    )
    op.create_table(
        "record_links",
        sa.Column("tenant_id", sa.String, nullable=False),
        sa.Column("conversation_id", sa.String, nullable=False),
        sa.Column("branch_id", sa.String, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("source_id", sa.String, nullable=False),
        sa.Column("relation", sa.String, nullable=False),
        sa.Column("target_id", sa.String, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "source_id", "relation", "target_id", name="pk_record_links"),
    )
    op.create_index("ix_record_links_tenant_id_target_id", "record_links", ["tenant_id", "target_id"])
    op.create_index(
        "ix_record_links_tenant_id_conversation_id_seq", "record_links", ["tenant_id", "conversation_id", "seq"]
    )
    op.create_table(
        "protected_state",
        sa.Column("tenant_id", sa.String, nullable=False),
        sa.Column("conversation_id", sa.String, nullable=False),
        sa.Column("record_id", sa.String, nullable=False),
        sa.Column("state", sa.String, nullable=False),
        sa.Column("branch_id", sa.String, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("subject", sa.String, nullable=False),
        sa.Column("closed_by", sa.String, nullable=True),
        sa.Column("closed_branch_id", sa.String, nullable=True),
        sa.Column("closed_seq", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "record_id", "state", name="pk_protected_state"),
    )
    op.create_index(
        "ix_protected_state_tenant_id_conversation_id_closed_seq",
        "protected_state",
        ["tenant_id", "conversation_id", "closed_seq"],
    )


def _no_blobs(sha256: str) -> bytes:
    raise BlobNotFound(sha256, "no blob store given to the upgrade")


def _readable(read_blob: Callable[[str], bytes]) -> Callable[[str], bytes]:
    """``read_blob`` where any failure means "not readable now" (``BlobNotFound``).

    The backfill must not fail because blobs cannot be read during the upgrade (e.g. a blob table created in
    this same transaction); such results get their facts again on first read.
    """

    def read(sha256: str) -> bytes:
        try:
            return read_blob(sha256)
        except Exception as exc:
            raise BlobNotFound(sha256, "the blob store given to the upgrade") from exc

    return read


def _backfill(conn: sa.Connection, read_blob: Callable[[str], bytes]) -> None:
    meta = sa.MetaData()
    records = sa.Table("records", meta, autoload_with=conn)
    facts_t = sa.Table("record_facts", meta, autoload_with=conn)
    links_t = sa.Table("record_links", meta, autoload_with=conn)
    entries_t = sa.Table("protected_state", meta, autoload_with=conn)
    read = [records.c[name] for name in READ_COLUMNS]
    conversations = conn.execute(sa.select(records.c.tenant_id, records.c.conversation_id).distinct()).all()
    for tenant_id, conversation_id in conversations:

        def find(tenant_id: str, record_id: str) -> Record | None:
            row = conn.execute(
                sa.select(*read).where(records.c.tenant_id == tenant_id, records.c.id == record_id)
            ).first()
            return decode_row(row) if row is not None else None

        index = _index.OpenEntries()
        last = 0
        while True:
            rows = conn.execute(
                sa.select(*read)
                .where(
                    records.c.tenant_id == tenant_id,
                    records.c.conversation_id == conversation_id,
                    records.c.seq > last,
                )
                .order_by(records.c.seq)
                .limit(CHUNK)
            ).all()
            if not rows:
                break
            batch = [decode_row(row) for row in rows]
            last = batch[-1].seq
            computed = compute_facts(batch, read_blob, find)
            conn.execute(
                facts_t.insert(),
                [
                    {
                        "tenant_id": r.tenant_id,
                        "record_id": r.id,
                        "conversation_id": r.conversation_id,
                        "branch_id": r.branch_id,
                        "seq": r.seq,
                        "stamp": f.stamp,
                        "body": encode_facts(f).decode("utf-8"),
                    }
                    for r, f in zip(batch, computed, strict=True)
                ],
            )
            links = [
                {
                    "tenant_id": r.tenant_id,
                    "conversation_id": r.conversation_id,
                    "branch_id": link.branch_id,
                    "seq": link.seq,
                    "source_id": link.source_id,
                    "relation": link.relation,
                    "target_id": link.target_id,
                }
                for r in batch
                for link in _index.links_of(r)
            ]
            if links:
                conn.execute(links_t.insert(), links)
            for rec in batch:
                index.append(rec)
        entries = [
            {
                "tenant_id": rec.tenant_id,
                "conversation_id": rec.conversation_id,
                "record_id": e.record_id,
                "state": e.state,
                "branch_id": e.branch_id,
                "seq": e.seq,
                "subject": e.subject,
                "closed_by": e.closed_by,
                "closed_branch_id": e.closed_branch_id,
                "closed_seq": e.closed_seq,
            }
            for rec, e in index.new
        ]
        for start in range(0, len(entries), CHUNK):
            conn.execute(entries_t.insert(), entries[start : start + CHUNK])


def upgrade() -> None:
    """Create the three tables and fill them for every stored record."""
    _create()
    read_blob = context.config.attributes.get("read_blob") or _no_blobs
    _backfill(op.get_bind(), _readable(read_blob))


def downgrade() -> None:
    """Drop the three tables (the records themselves are untouched)."""
    for table in ("protected_state", "record_links", "record_facts"):
        op.drop_table(table)
