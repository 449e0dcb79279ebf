"""Test helpers shipped with ctxledger: the store conformance suite and record builders.

The in-memory stores live in :mod:`ctxledger.store.memory` and are re-exported here for tests.

:class:`StoreConformance` is the suite every backend passes: subclass it in a test
module and provide a ``store`` fixture that yields a fresh, empty store::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            s = open_store(f"sqlite:///{tmp_path}/t.db")
            yield s
            s.close()
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ctxledger.errors import InputError, RecordNotFound, UsageAlreadyRecorded
from ctxledger.hashing import sha256_hex
from ctxledger.records import (
    RECORD_TYPES,
    Branch,
    Checkpoint,
    Compaction,
    Conversation,
    Freshness,
    Message,
    ModelRun,
    Participant,
    Record,
    Role,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    ToolStatus,
    Trust,
    Visibility,
)
from ctxledger.store.base import BlobRef, LineageHop
from ctxledger.store.memory import MemoryBlobStore, MemoryStore

__all__ = ["EVERY_RECORD_BLOB", "MemoryBlobStore", "MemoryStore", "StoreConformance", "every_record_type"]


# --------------------------------------------------------------------------------------------------
# The conformance suite
# --------------------------------------------------------------------------------------------------

_T0 = datetime(2024, 5, 1, 9, 30, 15, 123456, tzinfo=UTC)


def _env(tenant: str, conv: str, n: int, branch: str | None = None) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "conversation_id": conv,
        "branch_id": branch or f"{conv}/main",
        "created_at": _T0 + timedelta(seconds=n),
    }


def _artifact(tenant: str, conv: str, n: int, ref: BlobRef, name: str = "art") -> ToolArtifact:
    """A tool artifact ``<tenant>:<conv>/<name><n>`` at ``seq`` n naming blob ``ref`` (for the conformance tests)."""
    return ToolArtifact(
        id=f"{tenant}:{conv}/{name}{n}",
        sha256=ref.sha256,
        size_bytes=ref.size_bytes,
        media_type=ref.media_type,
        **_env(tenant, conv, n),
    )


def _start(tenant: str, conv: str) -> list[Record]:
    """A Conversation and its main Branch record."""
    return [
        Conversation(id=f"{tenant}:{conv}", title=conv, **_env(tenant, conv, 0)),
        Branch(id=f"{conv}/main", name="main", **_env(tenant, conv, 1)),
    ]


def _msg(tenant: str, conv: str, n: int, text: str, branch: str | None = None) -> Message:
    branch_id = branch or f"{conv}/main"
    return Message(id=f"{tenant}:{branch_id}/{n}", content=text, **_env(tenant, conv, n, branch_id))


EVERY_RECORD_BLOB = b'{"error": "upstream timeout", "flights": []}'
"""The raw output of :func:`every_record_type`'s tool artifact (put it into the blob store before appending)."""


def every_record_type(tenant: str, conv: str) -> list[Record]:
    """One record of every kind of ``RECORD_TYPES`` with every field set to a non-default value.

    The first two are the Conversation and its main Branch (so the list can be appended as is, once
    :data:`EVERY_RECORD_BLOB` is in the store's blobs); all records belong to conversation ``conv`` of
    ``tenant``.
    """
    common: dict[str, Any] = {
        "owner_participant_id": f"{conv}/p-assistant",
        "owner_model_run_id": f"{conv}/run-1",
        "visibility": Visibility.SHARED,
        "shared_with": (f"{conv}/p-assistant", f"{conv}/p-sub"),
        "privacy_class": "confidential",
        "trust": Trust.VERIFIED_INTERNAL,
        "meta": {"source": "conformance", "n": 3, "tags": ["a", "b"], "nested": {"x": None, "ok": True}},
        "scope": {"app": "travel", "user_id": "u-7", "session_id": "s-1"},
        "provider_scope": "google",
        "seq": 99,
    }
    return [
        Conversation(id=conv, title="Flight changes ✈", external_id="conv-ext", **common, **_env(tenant, conv, 0)),
        Branch(
            id=f"{conv}/main",
            name="main",
            parent_branch_id=f"{conv}/root",
            fork_seq=0,
            **common,
            external_id="br-ext",
            **_env(tenant, conv, 1),
        ),
        Participant(
            id=f"{conv}/p-sub",
            role="subagent",
            name="researcher",
            model="gpt-4o-mini",
            parent_participant_id=f"{conv}/p-assistant",
            external_id="p-ext",
            **common,
            **_env(tenant, conv, 2),
        ),
        ModelRun(
            id=f"{conv}/run-1",
            provider="openai",
            model="gpt-4o",
            assembly_id=f"{conv}/asm-1",
            usage={"prompt_tokens": 1234, "completion_tokens": 56},
            external_id="chatcmpl-1",
            **common,
            **_env(tenant, conv, 3),
        ),
        Message(
            id=f"{conv}/m-1",
            role=Role.ASSISTANT,
            name="agent",
            external_id="m4",
            supersedes=(f"{conv}/m-0",),
            **common,
            content=(
                {"type": "text", "text": "Here is the chart"},
                {"type": "image_url", "image_url": {"url": "https://x.test/c.png", "detail": "low"}},
            ),
            **_env(tenant, conv, 4),
        ),
        ToolCall(
            id=f"{conv}/call-1",
            message_id=f"{conv}/m-1",
            call_id="call_abc",
            name="search_flights",
            arguments='{"origin": "SFO", "dest": "JFK"}',
            index=1,
            status=ToolStatus.DEFERRED,
            external_id="call_abc",
            **common,
            **_env(tenant, conv, 5),
        ),
        ToolArtifact(
            id=f"{conv}/art-1",
            tool_call_id=f"{conv}/call-1",
            call_id="call_abc",
            name="search_flights",
            sha256=sha256_hex(EVERY_RECORD_BLOB),
            size_bytes=len(EVERY_RECORD_BLOB),
            media_type="application/json",
            tool_version="2.1",
            status=ToolStatus.FAILED,
            source_version="v7",
            external_id="a-ext",
            **common,
            **_env(tenant, conv, 6),
        ),
        ToolMemory(
            id=f"{conv}/mem-1",
            summary="3 flights SFO->JFK",
            fields={"cheapest": 212.5, "n": 3},
            confidence=0.75,
            trust_source="tool:search_flights",
            freshness=Freshness.VOLATILE,
            observed_at=_T0 + timedelta(minutes=5),
            stale_after=_T0 + timedelta(hours=1),
            revalidation_tool="search_flights",
            source_artifact_ids=(f"{conv}/art-1",),
            source_version="v7",
            locators=({"artifact_id": f"{conv}/art-1", "bytes": [0, 120]},),
            conflicts_with=(f"{conv}/mem-0",),
            supersedes=(f"{conv}/mem-old",),
            external_id="mem-ext",
            **common,
            **_env(tenant, conv, 7),
        ),
        SkillState(
            id=f"{conv}/skills-1",
            skills=("travel",),
            tool_profiles=("booking",),
            enabled_tools=("search_flights", "book"),
            external_id="s-ext",
            tool_schemas=({"type": "function", "function": {"name": "book", "parameters": {}}},),
            **common,
            **_env(tenant, conv, 8),
        ),
        Checkpoint(
            id=f"{conv}/ckpt-1",
            run_id="run-1",
            through_seq=6,
            state={"step": 4, "pending": ["book"]},
            external_id="ck-ext",
            **common,
            **_env(tenant, conv, 9),
        ),
        Compaction(
            id=f"{conv}/cmp-1",
            through_seq=6,
            source_ids=(f"{conv}/m-1",),
            policy_version="p-1.2",
            text="User wants SFO->JFK.",
            body={"goal": "book", "open_questions": []},
            external_id="cmp-ext",
            **common,
            **_env(tenant, conv, 10),
        ),
    ]


_E = TypeVar("_E", bound=Exception)


@contextmanager
def _raises(error: type[_E]) -> Iterator[list[_E]]:
    """Like ``pytest.raises`` without needing pytest at import time."""
    caught: list[_E] = []
    try:
        yield caught
    except error as exc:
        caught.append(exc)
        return
    raise AssertionError(f"{error.__name__} was not raised")


class StoreConformance:
    """The behaviour every :class:`~ctxledger.store.base.GraphStore` backend must have.

    Subclass it as ``TestXxx`` and provide a ``store`` fixture yielding a fresh, empty store. Tenants and
    conversation ids in the tests are unique per test, so a backend shared between tests also works.
    """

    def test_seq_is_assigned_per_conversation_in_input_order(self, store: Any) -> None:
        """``seq`` counts 1, 2, 3 … separately per conversation, continuing across appends."""
        batch = [*_start("t1", "a"), *_start("t1", "b"), _msg("t1", "a", 2, "a2"), _msg("t1", "b", 2, "b2")]
        out = store.append(batch)
        assert [(r.conversation_id, r.seq) for r in out] == [
            ("a", 1),
            ("a", 2),
            ("b", 1),
            ("b", 2),
            ("a", 3),
            ("b", 3),
        ]
        more = store.append([_msg("t1", "a", 3, "a3")])
        assert more[0].seq == 4 and store.head_seq("t1", "a") == 4 and store.head_seq("t1", "b") == 3
        assert store.head_seq("t1", "nope") == 0

    def test_reads_equal_what_append_returned(self, store: Any) -> None:
        """``get`` and ``records`` return records equal to the ones ``append`` returned."""
        out = store.append([*_start("t1", "c"), _msg("t1", "c", 2, "hello ünïcode ✓")])
        assert [store.get("t1", r.id) for r in out] == out
        assert store.records("t1", "c") == out

    def test_as_of_seq_is_inclusive_and_after_seq_exclusive(self, store: Any) -> None:
        """``records`` returns ``after_seq < seq <= as_of_seq`` in ``seq`` order."""
        store.append([*_start("t1", "c"), *[_msg("t1", "c", n, f"m{n}") for n in range(2, 8)]])
        assert [r.seq for r in store.records("t1", "c", as_of_seq=4)] == [1, 2, 3, 4]
        assert [r.seq for r in store.records("t1", "c", after_seq=4)] == [5, 6, 7, 8]
        assert [r.seq for r in store.records("t1", "c", after_seq=2, as_of_seq=5)] == [3, 4, 5]
        assert store.records("t1", "c", as_of_seq=0) == []

    def _forked(self, store: Any) -> None:
        """main: seq 1-4; ``alt`` forks main at 3; ``alt2`` forks alt at 6; ``sib`` forks main at 3."""
        store.append([*_start("t1", "c"), _msg("t1", "c", 2, "m3"), _msg("t1", "c", 3, "m4")])
        alt = Branch(id="c/alt", parent_branch_id="c/main", fork_seq=3, **_env("t1", "c", 4, "c/alt"))
        store.append([alt, _msg("t1", "c", 5, "alt6", "c/alt"), _msg("t1", "c", 6, "main7")])
        alt2 = Branch(id="c/alt2", parent_branch_id="c/alt", fork_seq=6, **_env("t1", "c", 7, "c/alt2"))
        sib = Branch(id="c/sib", parent_branch_id="c/main", fork_seq=3, **_env("t1", "c", 8, "c/sib"))
        store.append(
            [
                alt2,
                _msg("t1", "c", 9, "alt7", "c/alt"),
                _msg("t1", "c", 10, "alt2-12", "c/alt2"),
                sib,
                _msg("t1", "c", 11, "sib14", "c/sib"),
            ]
        )

    def test_lineage_walks_parents_with_inclusive_fork_points(self, store: Any) -> None:
        """A grandchild sees its parent up to its fork and the grandparent up to the smaller fork."""
        self._forked(store)
        assert store.lineage("t1", "c/alt2") == [
            LineageHop("c/alt2", None),
            LineageHop("c/alt", 6),
            LineageHop("c/main", 3),
        ]
        texts = [
            r.content for r in store.records("t1", "c", lineage=store.lineage("t1", "c/alt2")) if isinstance(r, Message)
        ]
        assert texts == ["m3", "alt6", "alt2-12"]
        assert store.lineage("t1", "c/main") == [LineageHop("c/main", None)]

    def test_sibling_branches_are_not_visible(self, store: Any) -> None:
        """Records of a sibling branch, and of the parent after the fork, are outside a lineage."""
        self._forked(store)
        seen = store.records("t1", "c", lineage=store.lineage("t1", "c/sib"))
        assert {r.branch_id for r in seen} == {"c/main", "c/sib"}
        assert [r.content for r in seen if isinstance(r, Message)] == ["m3", "sib14"]
        assert all(r.seq <= 3 for r in seen if r.branch_id == "c/main")
        as_of = store.records("t1", "c", lineage=store.lineage("t1", "c/alt"), as_of_seq=6)
        assert [r.content for r in as_of if isinstance(r, Message)] == ["m3", "alt6"]

    def test_lineage_of_main_branch_without_branch_record_and_unknown_branch(self, store: Any) -> None:
        """A main branch needs no Branch record; an unknown branch raises ``RecordNotFound``."""
        conv = Conversation(id="bare", **_env("t1", "bare", 0, "bare/trunk"))
        store.append([conv])
        assert store.lineage("t1", "bare/trunk") == [LineageHop("bare/trunk", None)]
        with _raises(RecordNotFound):
            store.lineage("t1", "no/such/branch")
        with _raises(RecordNotFound):
            store.branch("t1", "bare/trunk")
        with _raises(RecordNotFound):
            store.lineage("t2", "bare/trunk")

    def test_tenants_are_isolated(self, store: Any) -> None:
        """Nothing of one tenant is readable through another, even with the same conversation id."""
        store.append([*_start("ta", "c"), _msg("ta", "c", 2, "secret of a")])
        store.append(
            [
                Conversation(id="tb:c", **_env("tb", "c", 0)),
                Branch(id="tb/c/main", **_env("tb", "c", 1, "tb/c/main")),
            ]
        )
        assert store.head_seq("tb", "c") == 2 and store.head_seq("ta", "c") == 3
        assert all(r.tenant_id == "tb" for r in store.records("tb", "c"))
        assert store.conversations("ta") == ["c"] and store.conversations("tb") == ["c"]
        with _raises(RecordNotFound):
            store.get("tb", "ta:c/main/2")
        with _raises(RecordNotFound):
            store.branch("tb", "c/main")
        store.put_assembly({"id": "asm-a", "tenant_id": "ta", "conversation_id": "c"})
        with _raises(RecordNotFound):
            store.get_assembly("tb", "asm-a")
        with _raises(RecordNotFound):
            store.record_usage("tb", "asm-a", 1, 1)
        assert store.list_assemblies("tb") == []

    def test_artifacts_by_sha256_searches_every_conversation_of_one_tenant_only(self, store: Any) -> None:
        """A sha256 finds artifacts in every conversation of the tenant, by seq then id; never another tenant's."""
        same = store.blobs.put(b'{"pipeline_eur": 8100000, "deals": 64}', "application/json")
        other = store.blobs.put(b"something else", "text/plain")

        store.append([*_start("ta", "c1"), _artifact("ta", "c1", 2, other), _artifact("ta", "c1", 3, same)])
        store.append([*_start("ta", "c2"), _artifact("ta", "c2", 2, same, "b"), _artifact("ta", "c2", 3, same)])
        store.append([*_start("tb", "c3"), _artifact("tb", "c3", 2, same)])
        found = store.artifacts_by_sha256("ta", same.sha256)
        assert [a.id for a in found] == ["ta:c2/b2", "ta:c1/art3", "ta:c2/art3"]
        assert all(isinstance(a, ToolArtifact) and a.tenant_id == "ta" for a in found)
        assert found[1] == store.get("ta", "ta:c1/art3")
        assert [a.id for a in store.artifacts_by_sha256("tb", same.sha256)] == ["tb:c3/art2"]
        assert store.artifacts_by_sha256("tc", same.sha256) == []
        assert store.artifacts_by_sha256("ta", "0" * 64) == []
        for bad in ("sha256:" + same.sha256, same.sha256.upper(), "abc"):
            with _raises(InputError) as err:
                store.artifacts_by_sha256("ta", bad)
            assert err[0].field == "sha256"

    def test_two_tenants_import_one_trajectory_with_identical_ids(self, store: Any) -> None:
        """Two tenants import one real trajectory with identical ids; each keeps, assembles and explains its own.

        Record ids are unique per tenant: both imports succeed, reads, assemblies and explanations stay in
        their tenant, the payload hashes are equal (same content), and deleting one tenant leaves the other
        whole (records, assemblies, blobs).
        """
        from ctxledger.demo import DEMO_PREFIX, demo_source
        from ctxledger.ledger import Ledger

        ledger = Ledger(store)
        with demo_source() as path:
            a = ledger.import_file(path, "tau-bench", tenant_id="dup-a", conversation_id=DEMO_PREFIX)
            b = ledger.import_file(path, "tau-bench", tenant_id="dup-b", conversation_id=DEMO_PREFIX)
            with _raises(InputError) as again:
                ledger.import_file(path, "tau-bench", tenant_id="dup-b", conversation_id=DEMO_PREFIX)
        assert "'dup-b'" in str(again[0]) and "dup-a" not in str(again[0])
        (conv,) = a.conversation_ids
        assert b.conversation_ids == (conv,) and len(a.records) > 50
        assert [(r.id, r.seq) for r in a.records] == [(r.id, r.seq) for r in b.records]
        with _raises(InputError) as dup:
            store.append([b.records[3]])
        assert dup[0].field == "id" and "'dup-b'" in str(dup[0]) and "dup-a" not in str(dup[0])
        for tenant, result in (("dup-a", a), ("dup-b", b)):
            assert store.conversations(tenant) == [conv]
            assert store.records(tenant, conv) == result.records
            assert all(store.get(tenant, r.id) == r and r.tenant_id == tenant for r in result.records)
        artifacts = [r for r in b.records if isinstance(r, ToolArtifact)]
        assert artifacts and all(store.artifacts_by_sha256("dup-b", x.sha256) for x in artifacts)

        request: dict[str, Any] = {"window_tokens": 8000, "output_tokens": 1000, "now": b.records[-1].created_at}
        asm_a = ledger.assemble(conv, tenant_id="dup-a", **request)
        asm_b = ledger.assemble(conv, tenant_id="dup-b", **request)
        assert asm_a.id != asm_b.id and asm_a.payload_hash == asm_b.payload_hash
        assert store.get_assembly("dup-a", asm_a.id)["tenant_id"] == "dup-a"
        assert store.list_assemblies("dup-b", conv)[0]["id"] == asm_b.id
        with _raises(RecordNotFound):
            store.get_assembly("dup-b", asm_a.id)
        first = asm_b.turn_refs[1]
        assert ledger.explain(asm_b.id, first, tenant_id="dup-b")["ref"] == first
        with _raises(RecordNotFound):
            ledger.explain(asm_b.id, first, tenant_id="dup-a")

        assert store.delete_tenant("dup-a") == len(a.records)
        assert store.records("dup-a", conv) == [] and store.list_assemblies("dup-a") == []
        with _raises(RecordNotFound):
            store.get("dup-a", a.records[0].id)
        assert store.records("dup-b", conv) == b.records
        assert [m["id"] for m in store.list_assemblies("dup-b")] == [asm_b.id]
        assert all(store.blobs.exists(x.sha256) for x in artifacts)
        again_b = Ledger(store).assemble(conv, tenant_id="dup-b", persist=False, **request)
        assert again_b.payload_hash == asm_b.payload_hash

    def test_duplicate_id_is_rejected_and_nothing_is_written(self, store: Any) -> None:
        """An id already stored fails the whole batch with an ``InputError`` naming index and field."""
        store.append([*_start("t1", "c"), _msg("t1", "c", 2, "first")])
        batch = [_msg("t1", "c", 3, "new"), _msg("t1", "c", 2, "again")]
        with _raises(InputError) as caught:
            store.append(batch)
        error = caught[0]
        assert (error.index, error.field) == (1, "id") and "t1:c/main/2" in str(error)
        assert store.head_seq("t1", "c") == 3
        with _raises(RecordNotFound):
            store.get("t1", batch[0].id)
        with _raises(InputError) as twice:
            store.append([_msg("t1", "c", 7, "x"), _msg("t1", "c", 7, "x")])
        assert (twice[0].index, twice[0].field) == (1, "id")

    def test_unknown_conversation_and_bad_fields_are_rejected(self, store: Any) -> None:
        """Unknown conversations, repeated Conversation records and mistyped fields write nothing."""
        store.append(_start("t1", "c"))
        cases: list[tuple[list[Record], int, str]] = [
            ([_msg("t1", "c", 2, "ok"), _msg("t1", "ghost", 3, "?")], 1, "conversation_id"),
            (
                [_msg("t1", "c", 2, "ok"), Conversation(id="c-again", **_env("t1", "c", 0))],
                1,
                "conversation_id",
            ),
            (
                [
                    _msg("t1", "c", 2, "ok"),
                    dataclasses.replace(_msg("t1", "c", 3, "naive"), created_at=datetime(2024, 1, 1)),
                ],
                1,
                "created_at",
            ),
            ([ModelRun(id="r", usage={"prompt_tokens": 1.5}, **_env("t1", "c", 2))], 0, "usage"),  # type: ignore[dict-item]
            (
                [_msg("t1", "c", 2, "ok"), dataclasses.replace(_msg("t1", "c", 3, "x"), meta={"b": b"raw"})],
                1,
                "meta",
            ),
            (
                [_msg("t1", "c", 2, "ok"), dataclasses.replace(_msg("t1", "c", 3, "x"), tenant_id="")],
                1,
                "tenant_id",
            ),
        ]
        for batch, index, name in cases:
            with _raises(InputError) as caught:
                store.append(batch)
            assert (caught[0].index, caught[0].field) == (index, name), caught[0]
            assert store.head_seq("t1", "c") == 2
            with _raises(RecordNotFound):
                store.get("t1", batch[0].id)

    def test_an_artifact_whose_blob_is_not_stored_is_refused(self, store: Any) -> None:
        """A ToolArtifact must name stored bytes: a missing or malformed sha256 writes nothing and names it."""
        store.append(_start("t1", "c"))
        data = b"report: 3 rows"
        missing = sha256_hex(b"never stored")

        def art(n: int, sha256: str) -> ToolArtifact:
            return ToolArtifact(
                id=f"t1:c/art{n}",
                tool_call_id="t1:c/call",
                call_id="call_1",
                name="report",
                sha256=sha256,
                size_bytes=len(data),
                **_env("t1", "c", n),
            )

        for sha in (missing, "", "sha256:" + sha256_hex(data)):
            with _raises(InputError) as caught:
                store.append([_msg("t1", "c", 2, "ok"), art(3, sha)])
            assert (caught[0].index, caught[0].field) == (1, "sha256")
            assert "t1:c/art3" in str(caught[0])
            assert store.head_seq("t1", "c") == 2
        ref = store.blobs.put(data)
        assert store.append([art(4, ref.sha256)])[0].sha256 == ref.sha256

    def test_every_record_type_round_trips_with_all_fields_set(self, store: Any) -> None:
        """Each kind, every field non-default (incl. tuples, mappings, datetimes), reads back equal."""
        records = every_record_type("t1", "rt")
        assert {type(r) for r in records} == set(RECORD_TYPES.values())
        for record in records:
            unset = [
                f.name for f in dataclasses.fields(record) if f.name != "seq" and getattr(record, f.name) == _default(f)
            ]
            assert unset == [], f"{type(record).__name__} leaves {unset} at their defaults"
        store.blobs.put(EVERY_RECORD_BLOB)
        out = store.append(records)
        assert [r.seq for r in out] == list(range(1, len(records) + 1))
        assert [store.get("t1", r.id) for r in out] == out
        assert store.records("t1", "rt") == out
        message = store.get("t1", "rt/m-1")
        assert isinstance(message.content, tuple) and isinstance(message.shared_with, tuple)

    def test_token_count_cache(self, store: Any) -> None:
        """Counts are cached by (counter, hash), missing hashes are absent, and puts are idempotent."""
        counts = {f"sha256:{n:064x}": n for n in range(1200)}
        store.put_token_counts("tiktoken/o200k_base", counts)
        store.put_token_counts("tiktoken/o200k_base", {"sha256:" + "0" * 64: 777, "sha256:new": 5})
        wanted = [*counts, "sha256:new", "sha256:missing"]
        got = store.get_token_counts("tiktoken/o200k_base", wanted)
        assert got == {**counts, "sha256:new": 5}
        assert store.get_token_counts("other/counter", wanted) == {}
        assert store.get_token_counts("tiktoken/o200k_base", []) == {}

    def test_assemblies_put_get_list_and_usage(self, store: Any) -> None:
        """Manifests round-trip, list oldest first per conversation, and carry recorded usage."""
        base = {
            "tenant_id": "t1",
            "branch_id": "c/main",
            "payload_hash": "sha256:" + "1" * 64,
            "included": [{"ref": "m1", "tokens": 12}],
            "omitted": [{"ref": "m2", "reason": "budget"}],
        }
        second = {
            **base,
            "id": "asm-2",
            "conversation_id": "c",
            "snapshot_seq": 9,
            "created_at": "2024-05-02T00:00:00+00:00",
        }
        first = {
            **base,
            "id": "asm-1",
            "conversation_id": "c",
            "snapshot_seq": 4,
            "created_at": "2024-05-01T00:00:00+00:00",
        }
        other = {**base, "id": "asm-3", "conversation_id": "d", "created_at": "2024-05-03T00:00:00+00:00"}
        for manifest in (second, first, other):
            store.put_assembly(manifest)
        assert store.get_assembly("t1", "asm-1") == first
        assert [m["id"] for m in store.list_assemblies("t1", "c")] == ["asm-1", "asm-2"]
        assert [m["id"] for m in store.list_assemblies("t1")] == ["asm-1", "asm-2", "asm-3"]
        store.record_usage("t1", "asm-2", 1500, 42)
        usage = store.get_assembly("t1", "asm-2")["observed_usage"]
        assert (usage["input_tokens"], usage["output_tokens"]) == (1500, 42) and usage["observed_at"]
        with _raises(UsageAlreadyRecorded) as again:
            store.record_usage("t1", "asm-2", 1600, 50)
        assert (again[0].assembly_id, again[0].input_tokens, again[0].output_tokens) == ("asm-2", 1500, 42)
        assert store.get_assembly("t1", "asm-2")["observed_usage"]["input_tokens"] == 1500
        store.record_usage("t1", "asm-2", 1600, 50, overwrite=True)
        usage = store.get_assembly("t1", "asm-2")["observed_usage"]
        assert (usage["input_tokens"], usage["output_tokens"]) == (1600, 50)
        with _raises(RecordNotFound):
            store.record_usage("t1", "asm-none", 1, 1, overwrite=True)
        with _raises(InputError):
            store.put_assembly(first)
        with _raises(InputError) as missing:
            store.put_assembly({"id": "asm-x", "tenant_id": "t1"})
        assert missing[0].field == "conversation_id"
        with _raises(RecordNotFound):
            store.get_assembly("t1", "asm-none")

    def test_delete_tenant_removes_everything_and_collects_only_unreferenced_blobs(self, store: Any) -> None:
        """Deleting a tenant drops its records and assemblies, and blobs no other tenant references."""
        shared = store.blobs.put(b'{"flights": []}', "application/json")
        private = store.blobs.put(b"only tenant a saw this", "text/plain")

        store.append([*_start("ta", "c"), _artifact("ta", "c", 2, shared), _artifact("ta", "c", 3, private)])
        store.append([Conversation(id="tb:c", **_env("tb", "c", 0)), _artifact("tb", "c", 1, shared)])
        store.put_assembly({"id": "asm-a", "tenant_id": "ta", "conversation_id": "c"})
        assert store.delete_tenant("ta") == 4
        assert store.conversations("ta") == [] and store.records("ta", "c") == []
        assert store.list_assemblies("ta") == [] and store.head_seq("ta", "c") == 0
        assert not store.blobs.exists(private.sha256)
        assert store.blobs.get(shared.sha256) == b'{"flights": []}'
        assert len(store.records("tb", "c")) == 2
        assert store.delete_tenant("ta") == 0
        store.append(_start("ta", "c"))
        assert store.head_seq("ta", "c") == 2

    def test_conversations_are_listed_oldest_first(self, store: Any) -> None:
        """``conversations`` orders by the Conversation record's creation time."""
        late = Conversation(id="late", **{**_env("t1", "late", 0), "created_at": _T0 + timedelta(days=2)})
        early = Conversation(id="early", **_env("t1", "early", 0))
        store.append([late, early])
        assert store.conversations("t1") == ["early", "late"]

    def test_blobs_are_content_addressed_and_verified(self, store: Any) -> None:
        """The store's blob store returns exact bytes and ranges, and refuses malformed names."""
        data = "exit code 1\nFAILED tests/test_x.py::test_y - AssertionError ✗\n".encode()
        ref = store.blobs.put(data, "text/plain; charset=utf-8")
        assert ref == BlobRef(sha256_hex(data), len(data), "text/plain; charset=utf-8")
        assert store.blobs.put(data).sha256 == ref.sha256
        assert store.blobs.get(ref.sha256) == data
        assert store.blobs.get_range(ref.sha256, 12, 18) == data[12:18]
        assert store.blobs.get_range(ref.sha256, 50, 10_000) == data[50:]
        with _raises(RecordNotFound):
            store.blobs.get("0" * 64)
        with _raises(InputError):
            store.blobs.get("../../etc/passwd")
        store.blobs.delete(ref.sha256)
        assert not store.blobs.exists(ref.sha256)

    def test_concurrent_appends_never_share_a_seq(self, store: Any) -> None:
        """Threads appending to one conversation get distinct, gap-free ``seq`` values."""
        store.append(_start("t1", "busy"))
        errors: list[BaseException] = []

        def worker(w: int) -> None:
            try:
                for n in range(10):
                    store.append([_msg("t1", "busy", 100 * w + n, f"w{w}-{n}")])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert [r.seq for r in store.records("t1", "busy")] == list(range(1, 43))

    def test_racing_appends_of_one_id_let_exactly_one_win(self, store: Any) -> None:
        """Threads appending the same new conversation: one succeeds, the others get ``InputError``."""
        outcomes: list[str] = []
        barrier = threading.Barrier(3)

        def worker() -> None:
            barrier.wait()
            try:
                store.append(_start("t1", "race"))
                outcomes.append("ok")
            except InputError as exc:
                outcomes.append(f"input:{exc.field}")
            except BaseException as exc:  # pragma: no cover - reported below
                outcomes.append(repr(exc))

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes.count("ok") == 1 and len(outcomes) == 3, outcomes
        assert all(o.startswith("input:") for o in outcomes if o != "ok"), outcomes
        assert [r.seq for r in store.records("t1", "race")] == [1, 2]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return object()
