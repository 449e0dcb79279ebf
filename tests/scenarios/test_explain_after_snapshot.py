"""A record written after an assembly's snapshot is answered as such, not as "not found among the candidates".

The rule lives in ``Ledger.explain_as`` (``explain_tools.explain_after_snapshot``), which the CLI, the HTTP route,
the inspector and MCP call; the service's side is checked in ``tests/service/test_service_explain_after_snapshot.py``.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.store.memory import MemoryStore


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.integers(min_value=1, max_value=12),
    after=st.integers(min_value=1, max_value=4),
    trace=st.sampled_from(["summary", "full"]),
    pick=st.integers(min_value=0),
)
def test_a_record_written_after_the_snapshot_says_so_with_both_seqs(
    before: int, after: int, trace: str, pick: int
) -> None:
    ledger = Ledger(MemoryStore())
    builder = GraphBuilder(ledger, "later")
    builder.system("sys", "Answer from the notes.")
    for i in range(before):
        builder.user(f"u{i}", f"What changed in release {i}?")
        builder.assistant(f"a{i}", f"Release {i} changed worker {i}. " * 8)
    asm = ledger.assemble(
        builder.conversation_id,
        window_tokens=1_200,
        output_tokens=100,
        margin_tokens=20,
        branch_id=builder.branch_id,
        now=builder.now,
        trace=trace,
    )
    later = [builder.user(f"late{i}", f"And release {before + i}?") for i in range(after)]
    ref = later[pick % len(later)]
    seq = ledger.store.get("default", ref).seq
    snapshot = ledger.get_assembly(asm.id)["snapshot_seq"]
    for named in (ref, ref.rsplit("/", 1)[1]):
        why = ledger.explain(asm.id, named)
        assert (why["ref"], why["status"], why["stage"], why["reason"]) == (ref, "omitted", "lineage", "not_in_lineage")
        assert f"written at seq {seq}, after the snapshot (seq {snapshot})" in why["detail"]
        assert seq > snapshot and any(asm.id in step for step in why["chain"])
