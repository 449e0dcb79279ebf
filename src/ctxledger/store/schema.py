"""The relational schema shared by SQLite and PostgreSQL (STYLE "Storage").

One set of SQLAlchemy Core tables serves both dialects, and one Alembic history
(``ctxledger/store/migrations``) creates it; a test compares the migrated database with these tables on
both dialects so the two can never drift.

* ``records``: one row per graph record, identified by ``(tenant_id, id)``: ids are unique per tenant, so
  two tenants may hold records (and conversations) with the same ids. The envelope fields the store
  filters on are columns; every other field is ``body``, the canonical JSON of the record's remaining
  fields (``ctxledger.store.codec``).
  ``blob_sha256`` copies a record's blob reference (a :class:`~ctxledger.records.ToolArtifact`'s ``sha256``)
  so that blob garbage collection is an indexed lookup instead of a scan of JSON bodies.
* ``conversation_heads``: one row per conversation with its highest ``seq``; appends lock it
  (``SELECT … FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) so concurrent appenders never
  assign the same ``seq``.
* ``token_counts``: the token-count cache keyed by (counter id, content hash).
* ``rung_memo``: the representation ladder's rungs of a unit (excerpts, extraction, memory, reference) by
  ``(tenant_id, memo_key)``, the key digesting the unit's turns, the ladder's inputs and the code that built
  them (``ctxledger.assemble.rung_memo``), with the conversation they came from (retention drops them).
* ``assemblies``: persisted manifests, identified by ``(tenant_id, id)``, with the usage the provider
  reported afterwards.

Times are ISO-8601 UTC strings with microseconds (``2024-05-01T12:00:00.000000+00:00``), so they sort
as text and round-trip exactly on both dialects.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

VERSION_TABLE = "ctxledger_alembic_version"
"""Name of Alembic's version table (prefixed so ctxledger can share a PostgreSQL database)."""

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

records = Table(
    "records",
    metadata,
    Column("id", String, nullable=False),
    Column("tenant_id", String, nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("branch_id", String, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("kind", String, nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("owner_participant_id", String, nullable=True),
    Column("owner_model_run_id", String, nullable=True),
    Column("visibility", String, nullable=False),
    Column("privacy_class", String, nullable=False),
    Column("trust", String, nullable=False),
    Column("external_id", String, nullable=True),
    Column("blob_sha256", String(64), nullable=True),
    Column("body", Text, nullable=False),
    PrimaryKeyConstraint("tenant_id", "id"),
    UniqueConstraint("tenant_id", "conversation_id", "seq"),
    Index(None, "tenant_id", "conversation_id", "branch_id", "seq"),
    Index(None, "blob_sha256"),
)

conversation_heads = Table(
    "conversation_heads",
    metadata,
    Column("tenant_id", String, nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("head_seq", BigInteger, nullable=False),
    Column("main_branch_id", String, nullable=False),
    Column("created_at", String(32), nullable=False),
    PrimaryKeyConstraint("tenant_id", "conversation_id"),
    Index(None, "tenant_id", "main_branch_id"),
)

token_counts = Table(
    "token_counts",
    metadata,
    Column("counter_id", String, nullable=False),
    Column("content_hash", String, nullable=False),
    Column("tokens", Integer, nullable=False),
    PrimaryKeyConstraint("counter_id", "content_hash"),
)

rung_memo = Table(
    "rung_memo",
    metadata,
    Column("tenant_id", String, nullable=False),
    Column("memo_key", String(64), nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("body", LargeBinary, nullable=False),
    PrimaryKeyConstraint("tenant_id", "memo_key"),
    Index(None, "tenant_id", "conversation_id"),
)

assemblies = Table(
    "assemblies",
    metadata,
    Column("id", String, nullable=False),
    Column("tenant_id", String, nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("branch_id", String, nullable=True),
    Column("snapshot_seq", BigInteger, nullable=True),
    Column("created_at", String(32), nullable=False),
    Column("payload_hash", String, nullable=True),
    Column("manifest", Text, nullable=False),
    Column("usage_input_tokens", Integer, nullable=True),
    Column("usage_output_tokens", Integer, nullable=True),
    Column("observed_at", String(32), nullable=True),
    PrimaryKeyConstraint("tenant_id", "id"),
    Index(None, "tenant_id", "conversation_id", "created_at"),
)

record_facts = Table(
    "record_facts",
    metadata,
    Column("tenant_id", String, nullable=False),
    Column("record_id", String, nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("branch_id", String, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("stamp", String, nullable=False),
    Column("body", Text, nullable=False),
    PrimaryKeyConstraint("tenant_id", "record_id"),
    Index(None, "tenant_id", "conversation_id", "seq"),
)
"""Write-path facts of each record (``ctxledger.facts``): one row per record, ``body`` their JSON, ``stamp``
the detector stamp that computed them. Written in the append's transaction; rewritten only when the
detectors changed (:meth:`~ctxledger.store.sql.SqlStore.put_facts`)."""

record_links = Table(
    "record_links",
    metadata,
    Column("tenant_id", String, nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("branch_id", String, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("source_id", String, nullable=False),
    Column("relation", String, nullable=False),
    Column("target_id", String, nullable=False),
    PrimaryKeyConstraint("tenant_id", "source_id", "relation", "target_id"),
    Index(None, "tenant_id", "target_id"),
    Index(None, "tenant_id", "conversation_id", "seq"),
)
"""Supersession, contradiction and derivation links, readable in both directions: ``source_id`` (the newer
record, at ``seq`` on ``branch_id``) ``relation`` (``supersedes``, ``conflicts_with``, ``derived_from``)
``target_id``; indexed by target, so "what supersedes X" is a lookup, not a scan."""

protected_state = Table(
    "protected_state",
    metadata,
    Column("tenant_id", String, nullable=False),
    Column("conversation_id", String, nullable=False),
    Column("record_id", String, nullable=False),
    Column("state", String, nullable=False),
    Column("branch_id", String, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("subject", String, nullable=False),
    Column("closed_by", String, nullable=True),
    Column("closed_branch_id", String, nullable=True),
    Column("closed_seq", BigInteger, nullable=True),
    PrimaryKeyConstraint("tenant_id", "record_id", "state"),
    Index(None, "tenant_id", "conversation_id", "closed_seq"),
)
"""The protected-state index, maintained on append (``ctxledger.store._index``): open and failed tool
calls, tagged records (constraints, approvals, pending operations …), checkpoints and instructions, each with
the record that closed it (a call's result, a later success of the same tool) once one was appended."""

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String, nullable=False),
    Column("tenant_id", String, nullable=False),
    Column("key_sha256", String(64), nullable=False),
    Column("name", String, nullable=True),
    Column("created_at", String(32), nullable=False),
    Column("revoked_at", String(32), nullable=True),
    PrimaryKeyConstraint("id"),
    UniqueConstraint("key_sha256"),
    Index(None, "tenant_id"),
)
"""Service API keys: only the sha256 of each key is stored; the tenant comes from the key."""

inspector_sessions = Table(
    "inspector_sessions",
    metadata,
    Column("token_sha256", String(64), nullable=False),
    Column("tenant_id", String, nullable=False),
    Column("key_id", String, nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("expires_at", String(32), nullable=False),
    PrimaryKeyConstraint("token_sha256"),
    Index(None, "key_id"),
    Index(None, "expires_at"),
)
"""Inspector browser sessions: the sha256 of each session token, the key it was opened with and its expiry."""

blobs = Table(
    "blobs",
    metadata,
    Column("sha256", String(64), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("created_at", String(32), nullable=False),
    PrimaryKeyConstraint("sha256"),
)
"""Blobs kept inside the database (:class:`~ctxledger.store.dbblobs.DatabaseBlobStore`): one row per blob."""

blob_chunks = Table(
    "blob_chunks",
    metadata,
    Column("sha256", String(64), nullable=False),
    Column("chunk", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    PrimaryKeyConstraint("sha256", "chunk"),
)
"""A database blob's bytes in chunks of at most 1 MiB, in order, so reads and writes stream."""

# -- retention (ctxledger.retention) -------------------------------------------------------------------
# * ``retention_audit``: one row per retention action (a rule applied to a record or an assembly, or a
#   forget request), with the content's sha256 before and after; rows are only ever added, and outlive
#   the records they describe (a deleted record's row is its tombstone);
# * ``retention_blob_queue``: blobs whose last reference a retention action may have removed, queued in the
#   action's transaction and collected after it commits (so a run killed in between collects them later).

retention_audit = Table(
    "retention_audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant_id", String, nullable=False),
    Column("conversation_id", String, nullable=True),
    Column("target", String, nullable=False),
    Column("ref", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("rule", String, nullable=False),
    Column("action", String, nullable=False),
    Column("at", String(32), nullable=False),
    Column("before_sha256", String(64), nullable=True),
    Column("after_sha256", String(64), nullable=True),
    Column("detail", Text, nullable=False),
    Index(None, "tenant_id", "ref"),
    Index(None, "tenant_id", "conversation_id"),
)

retention_blob_queue = Table(
    "retention_blob_queue",
    metadata,
    Column("sha256", String(64), nullable=False),
    Column("queued_at", String(32), nullable=False),
    PrimaryKeyConstraint("sha256"),
)
