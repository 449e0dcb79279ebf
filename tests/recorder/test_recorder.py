"""The public Recorder: each method writes the records a live agent's history needs, validated at the edge."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger, Recorder, ToolExchange
from ctxledger.errors import ConfigurationError, InputError
from ctxledger.records import (
    Branch,
    Checkpoint,
    Compaction,
    Conversation,
    Freshness,
    Message,
    Participant,
    Role,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    ToolStatus,
    Trust,
    Visibility,
)
from ctxledger.testing import MemoryStore

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _rec(conv: str = "c", **kwargs) -> tuple[Ledger, Recorder]:
    ledger = Ledger(MemoryStore())
    return ledger, ledger.recorder(conv, clock=kwargs.pop("clock", START), **kwargs)


def _get(ledger: Ledger, rid: str):
    return ledger.store.get("default", rid)


# -- structure and ids -------------------------------------------------------------------------------------


def test_conversation_branch_and_numbered_ids_follow_the_importers_scheme():
    """A new conversation gets its main branch; unnamed records are c/0, c/1 …; named ones c/<name>."""
    ledger, rec = _rec()
    conv = _get(ledger, "c")
    assert isinstance(conv, Conversation) and conv.branch_id == "c/main" and conv.title == "c"
    assert isinstance(_get(ledger, "c/main"), Branch)
    assert rec.system("Be brief.") == "c/0"
    assert rec.user("hi", name="greeting") == "c/greeting"
    assert rec.assistant("hello") == "c/1"
    ex = rec.tool_call("search", {"q": "x"}, "found 3")
    assert (ex.message, ex.call, ex.artifact) == ("c/2", "c/3", "c/4")
    named = rec.tool_call("search", {"q": "y"}, "found 1", name="s2")
    assert (named.message, named.call, named.artifact) == ("c/s2", "c/s2#call", "c/art-s2")
    assert rec.developer("Use metric units.") == "c/5"
    assert [r.seq for r in rec.records.values()] == sorted(r.seq for r in rec.records.values())


def test_messages_carry_role_default_trust_and_speaker():
    """system/developer/user/assistant set role and the trust each author has."""
    ledger, rec = _rec()
    ids = [rec.system("s"), rec.developer("d"), rec.user("u", speaker="moderator"), rec.assistant("a")]
    got = [_get(ledger, i) for i in ids]
    assert [(m.role, m.trust) for m in got] == [
        (Role.SYSTEM, Trust.SYSTEM),
        (Role.DEVELOPER, Trust.DEVELOPER),
        (Role.USER, Trust.USER),
        (Role.ASSISTANT, Trust.VERIFIED_INTERNAL),
    ]
    assert got[2].name == "moderator" and got[2].content == "u"
    assert all(isinstance(m, Message) and m.visibility is Visibility.BRANCH for m in got)


def test_participants_subagent_parent_and_references_by_name():
    """Participants are c/participant/<name>; parent and owner accept the id, the name or the short name."""
    ledger, rec = _rec()
    lead = rec.participant("lead", model="gpt-4o")
    scout = rec.participant("scout", role="subagent", parent="lead")
    assert (lead, scout) == ("c/participant/lead", "c/participant/scout")
    p = _get(ledger, scout)
    assert isinstance(p, Participant) and p.parent_participant_id == lead and p.role == "subagent"
    assert p.visibility is Visibility.CONVERSATION
    by_name = rec.user("a", owner="scout")
    by_id = rec.user("b", owner=scout)
    assert _get(ledger, by_name).owner_participant_id == _get(ledger, by_id).owner_participant_id == scout


def test_branch_forks_after_a_record_and_switches():
    """branch() records parent and fork_seq (inclusive) and later records land on it; on() switches back."""
    ledger, rec = _rec()
    u1 = rec.user("first")
    rec.user("second on main")
    alt = rec.branch("alt", fork_after=u1)
    b = _get(ledger, alt)
    assert isinstance(b, Branch) and b.parent_branch_id == "c/main" and b.fork_seq == rec.seq(u1)
    on_alt = rec.user("on alt")
    assert _get(ledger, on_alt).branch_id == alt
    rec.on("main")
    assert _get(ledger, rec.user("back")).branch_id == "c/main"
    elsewhere = rec.user("written on alt explicitly", branch="alt")
    assert _get(ledger, elsewhere).branch_id == alt
    asm = ledger.assemble("c", branch_id=alt, window_tokens=4000, output_tokens=100)
    omitted = {o["ref"]: o["reason"] for o in asm.manifest["omitted"]}
    assert omitted.get("c/1") == "not_in_lineage"  # "second on main" came after the fork


# -- tools -------------------------------------------------------------------------------------------------


def test_tool_call_stores_raw_bytes_with_hash_size_and_media_type():
    """The output goes to the blob store whole; the artifact records sha256, size and a sniffed media type."""
    ledger, rec = _rec()
    body = '{"rows": 3, "note": "naïve"}'
    ex = rec.tool_call("db.query", {"sql": "select 1", "limit": 3}, body, source_version="db@42", tool_version="2.1")
    art = _get(ledger, ex.artifact)
    call = _get(ledger, ex.call)
    assert isinstance(art, ToolArtifact) and isinstance(call, ToolCall)
    data = body.encode("utf-8")
    assert art.sha256 == hashlib.sha256(data).hexdigest() and art.size_bytes == len(data)
    assert ledger.store.blobs.get(art.sha256) == data
    assert art.media_type == "application/json" and art.status is ToolStatus.SUCCEEDED
    assert (art.source_version, art.tool_version, art.trust) == ("db@42", "2.1", Trust.TOOL_RESULT)
    assert call.arguments == json.dumps({"limit": 3, "sql": "select 1"}) and call.message_id == ex.message
    assert art.tool_call_id == call.id and art.call_id == call.call_id == "call_0"
    text = _get(ledger, rec.tool_call("shell", '{"cmd": "ls"}', "a.txt\nb.txt\n").artifact)
    assert text.media_type == "text/plain; charset=utf-8"
    raw = _get(ledger, rec.tool_call("fetch", {}, b"\x89PNG\r\n\x1a\n\xff").artifact)
    assert (
        raw.media_type == "application/octet-stream" and ledger.store.blobs.get(raw.sha256) == b"\x89PNG\r\n\x1a\n\xff"
    )


def test_failed_pending_and_deferred_calls_and_a_later_result():
    """A failed result is kept; a call without output stays pending until tool_result answers it."""
    ledger, rec = _rec()
    failed = rec.tool_call("deploy", {}, "Error: permission denied", status="failed", call_id="toolu_9")
    assert _get(ledger, failed.artifact).status is ToolStatus.FAILED and _get(ledger, failed.call).call_id == "toolu_9"
    pending = rec.tool_call("approve", {"amount": 10})
    assert pending.artifact is None and _get(ledger, pending.call).status is ToolStatus.PENDING
    deferred = rec.tool_call("wait", {}, status="deferred")
    assert _get(ledger, deferred.call).status is ToolStatus.DEFERRED
    art = rec.tool_result(pending, "approved")
    assert _get(ledger, art).tool_call_id == pending.call
    with pytest.raises(InputError, match="already has a result") as info:
        rec.tool_result(pending.call, "again")
    assert info.value.field == "call"
    with pytest.raises(InputError, match="not a tool call"):
        rec.tool_result(rec.user("hi"), "x")


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"output": "x", "status": "pending"}, "status", "does not fit a call with an output"),
        ({"status": "succeeded"}, "status", "without an output"),
        ({"output": "x", "status": "exploded"}, "status", "succeeded, failed"),
        ({"output": 42}, "output", "str or bytes"),
    ],
)
def test_tool_call_status_and_output_are_checked(kwargs, field, words):
    """Status must fit whether there is an output; the error names the call record and the field."""
    _, rec = _rec()
    with pytest.raises(InputError, match=words) as info:
        rec.tool_call("t", {}, **kwargs)
    assert info.value.field == field and info.value.source.startswith("c/")
    assert not any(isinstance(r, ToolCall) for r in rec.records.values())  # nothing half-written


# -- memories, checkpoints, compactions, skills -----------------------------------------------------------


def test_memory_from_an_artifact_with_provenance_and_validity_fields():
    """sources → source_artifact_ids and sha256 locators; observed_at defaults to the artifact's time."""
    ledger, rec = _rec()
    ex = rec.tool_call("crm.get", {"id": 7}, '{"plan": "pro"}')
    later = datetime(2026, 3, 2, tzinfo=UTC)
    old = rec.memory("Plan was basic.", name="m-old")
    mid = rec.memory(
        "Customer 7 is on the pro plan.",
        sources=[ex],
        freshness="volatile",
        stale_after=later,
        revalidation_tool="crm.get",
        source_version="crm@2026-03-01",
        supersedes=["m-old"],
        conflicts_with=[old],
        fields={"plan": "pro"},
        tags=["evidence"],
    )
    m = _get(ledger, mid)
    art = _get(ledger, ex.artifact)
    assert isinstance(m, ToolMemory) and m.source_artifact_ids == (ex.artifact,)
    assert m.locators == ({"artifact_id": ex.artifact, "sha256": art.sha256},)
    assert m.observed_at == art.created_at and m.stale_after == later
    assert (m.freshness, m.revalidation_tool, m.source_version) == (Freshness.VOLATILE, "crm.get", "crm@2026-03-01")
    assert m.supersedes == (old,) and m.conflicts_with == (old,) and m.trust_source == "tool:crm.get"
    assert m.meta["tags"] == ["evidence"] and m.fields == {"plan": "pro"} and m.trust is Trust.VERIFIED_INTERNAL


def test_memory_may_name_an_artifact_of_another_conversation_of_the_tenant():
    """A full id of another conversation's artifact is found in the store (not in another tenant)."""
    ledger = Ledger(MemoryStore())
    earlier = ledger.recorder("earlier", clock=START).tool_call("export", {}, "42 rows").artifact
    rec = ledger.recorder("today", clock=START)
    mid = rec.memory("Yesterday's export had 42 rows.", sources=[earlier])
    assert _get(ledger, mid).source_artifact_ids == (earlier,)
    other = ledger.recorder("other", tenant_id="tenant-b", clock=START)
    with pytest.raises(InputError, match="names no record") as info:
        other.memory("x", sources=[earlier])
    assert info.value.field == "sources[0]"


def test_checkpoint_promote_list_and_through():
    """promote= resolves names and exchanges into state['promote']; through sets through_seq."""
    ledger, rec = _rec()
    scout = rec.participant("scout", role="subagent")
    ex = rec.tool_call("grep", {}, "hit", owner=scout, visibility="participant_private")
    note = rec.assistant("report", owner=scout, visibility="participant_private", name="report")
    cid = rec.checkpoint("run-1", {"status": "done"}, promote=[ex, "report"], through=note, owner=scout)
    ck = _get(ledger, cid)
    assert isinstance(ck, Checkpoint) and ck.state == {"status": "done", "promote": [ex.message, note]}
    assert ck.through_seq == rec.seq(note) and ck.run_id == "run-1" and ck.owner_participant_id == scout
    assert _get(ledger, rec.checkpoint("run-2")).through_seq == 0
    with pytest.raises(InputError, match="not both") as both:
        rec.checkpoint("run-3", {"promote": [note]}, promote=[note])
    assert both.value.field == "promote"
    with pytest.raises(InputError, match="names no record") as unknown:
        rec.checkpoint("run-4", {"promote": ["nope"]})
    assert unknown.value.field == "promote[0]"


def test_compaction_and_skills():
    """A compaction covers records up to its last one; skills default enabled tools to the schema names."""
    ledger, rec = _rec()
    a, b = rec.user("one"), rec.assistant("two")
    comp = _get(ledger, rec.compaction("one and two", covers=[a, b]))
    assert isinstance(comp, Compaction) and comp.source_ids == (a, b) and comp.through_seq == rec.seq(b)
    assert comp.trust is Trust.GENERATED_SUMMARY and comp.policy_version == str(ledger.policy.version)
    schema = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    sk = _get(ledger, rec.skills(["research"], schemas=[schema], profiles=["read-only"]))
    assert isinstance(sk, SkillState) and sk.enabled_tools == ("search",) and sk.tool_schemas == (schema,)
    assert sk.tool_profiles == ("read-only",)
    with pytest.raises(InputError, match="function name") as info:
        rec.skills(["x"], schemas=[{"type": "function", "function": {}}])
    assert info.value.field == "schemas[0]"
    with pytest.raises(InputError, match="at least one record"):
        rec.compaction("nothing", covers=[])


def test_envelope_fields_on_any_record():
    """privacy class, provider scope, visibility, owner, shared_with, tags and scope reach the record."""
    ledger, rec = _rec()
    lead, scout = rec.participant("lead"), rec.participant("scout", parent="lead")
    mid = rec.memory(
        "From the user's Gmail.",
        privacy_class="confidential",
        provider_scope="google",
        owner=scout,
        shared_with=["lead"],
        tags="typed_request",
        scope={"user_id": "u-1"},
        meta={"note": "kept"},
    )
    m = _get(ledger, mid)
    assert (m.privacy_class, m.provider_scope, m.owner_participant_id) == ("confidential", "google", scout)
    assert m.visibility is Visibility.SHARED and m.shared_with == (lead,)  # shared_with implies shared
    assert m.meta == {"note": "kept", "tags": ["typed_request"]} and m.scope == {"user_id": "u-1"}
    hidden = rec.user("audit me", visibility="audit_only", trust="untrusted")
    assert _get(ledger, hidden).visibility is Visibility.AUDIT_ONLY and _get(ledger, hidden).trust is Trust.UNTRUSTED


# -- validation at the edge --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field", "words"),
    [
        (lambda r: r.memory("m", sources=["art-nope"]), "sources[0]", "'art-nope' names no record"),
        (lambda r: r.memory("m", sources=[r.user("u")]), "sources[0]", "is a message, not a tool artifact"),
        (lambda r: r.branch("b", fork_after="ghost"), "fork_after", "'ghost' names no record"),
        (lambda r: r.branch("b", fork_after=r.user("u"), parent="nope"), "parent", "names no branch"),
        (lambda r: r.on(r.user("u")), "branch", "is a message, not a branch"),
        (lambda r: r.user("u", visibility="private"), "visibility", "participant_private, branch, conversation"),
        (lambda r: r.user("u", trust="very"), "trust", "use one of system, developer"),
        (lambda r: r.memory("m", freshness="weekly"), "freshness", "volatile, session, bounded"),
        (lambda r: r.user("u", privacy_class="topsecret"), "privacy_class", "public, internal, confidential"),
        (lambda r: r.user("u", owner="nobody"), "owner", "'nobody' names no participant"),
        (lambda r: r.user("u", shared_with=["nobody"]), "shared_with[0]", "names no participant"),
        (lambda r: r.user("u", colour="red"), "colour", "unknown keyword 'colour'"),
        (lambda r: r.user("u", tags=[""]), "tags", "non-empty strings"),
        (lambda r: r.user("u", scope={"user_id": 7}), "scope", "strings to strings"),
        (lambda r: r.user("u", provider_scope=""), "provider_scope", "non-empty provider name"),
        (lambda r: r.user(""), "text", "non-empty string"),
        (lambda r: r.memory("m", observed_at=datetime(2026, 1, 1)), "observed_at", "aware datetime"),
        (lambda r: r.memory("m", confidence=1.5), "confidence", "from 0 to 1"),
        (lambda r: r.memory("m", source_version="@v2"), "source_version", "'<source>@<version>'"),
        (lambda r: r.memory("m", source_version="repo@"), "source_version", "'<source>@<version>'"),
        (lambda r: r.tool_call("t", ["not", "a", "mapping"]), "arguments", "mapping or the JSON text"),
        (lambda r: [r.user("u", name="x"), r.user("v", name="x")], "name", "already exists"),
        (lambda r: [r.participant("p"), r.participant("p")], "name", "already exists"),
        (lambda r: r.participant("p", parent="ghost"), "parent", "names no participant"),
        (lambda r: r.participant("p", role=""), "role", "non-empty string"),
    ],
)
def test_bad_inputs_are_refused_naming_the_record_and_field(call, field, words):
    """Every refusal is an InputError whose field says what to fix; nothing of the bad record is written."""
    _, rec = _rec()
    before = len(rec.records)
    with pytest.raises(InputError, match=words) as info:
        call(rec)
    assert info.value.field == field
    assert info.value.source.startswith("c/") or info.value.source.endswith("()")
    assert len(rec.records) <= before + 2  # at most the helper records the lambda wrote first


def test_privacy_classes_come_from_the_ledgers_policy():
    """A class the policy's privacy stage knows is accepted; the default classes otherwise."""
    _, rec = _rec()
    for cls in ("public", "internal", "confidential", "restricted", "secret"):
        rec.user(f"a {cls} note", privacy_class=cls)


def test_bad_clocks_are_configuration_errors():
    """A naive start, a non-callable, a bad step, tick() on a real clock, a callable returning naive times."""
    ledger = Ledger(MemoryStore())
    with pytest.raises(ConfigurationError, match="naive"):
        ledger.recorder("a", clock=datetime(2026, 1, 1))
    with pytest.raises(ConfigurationError, match="callable"):
        ledger.recorder("b", clock=12)
    with pytest.raises(ConfigurationError, match="positive timedelta"):
        ledger.recorder("c", clock=START, step=timedelta(0))
    with pytest.raises(ConfigurationError, match="stepping clock"):
        ledger.recorder("d").tick()
    with pytest.raises(InputError, match="aware datetime"):
        ledger.recorder("e", clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(InputError, match="non-empty"):
        ledger.recorder("")


# -- clocks and determinism --------------------------------------------------------------------------------


def _history(ledger: Ledger) -> Recorder:
    rec = ledger.recorder("det", clock=START)
    lead = rec.participant("lead")
    rec.system("You answer from evidence.")
    rec.user("What plan is customer 7 on?")
    ex = rec.tool_call("crm.get", {"id": 7}, '{"plan": "pro", "seats": 40}', owner=lead)
    rec.memory("Customer 7: pro plan, 40 seats.", sources=[ex], source_version="crm@1")
    rec.user("And how many seats?")
    return rec


def test_a_fixed_clock_gives_the_same_records_and_payload_hash():
    """Two recorders with the same fixed start write identical records; assembly gives one payload hash."""
    runs = []
    for _ in range(2):
        ledger = Ledger(MemoryStore())
        rec = _history(ledger)
        asm = ledger.assemble(
            "det", participant_id="c/participant/lead", now=rec.now, window_tokens=4000, output_tokens=100
        )
        runs.append(([repr(r) for r in rec.records.values()], asm.payload_hash))
    assert runs[0] == runs[1]


def test_fixed_clock_steps_and_tick_moves_it():
    """With a fixed start, record n is at start + n·step; tick() jumps ahead; now is the last record's time."""
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("s", clock=START, step=timedelta(minutes=5))
    created = [r.created_at for r in rec.records.values()]
    assert created == [START + timedelta(minutes=5), START + timedelta(minutes=10)]  # conversation, main branch
    rec.tick(60)
    u = rec.user("an hour later")
    assert _get(ledger, u).created_at == START + timedelta(minutes=75) == rec.now


def test_a_callable_clock_is_called_once_per_record():
    """clock=callable: each record takes the next value (converted to UTC)."""
    from datetime import timezone

    cet = timezone(timedelta(hours=1))
    ticks = iter(datetime(2026, 5, 1, 10, i, tzinfo=cet) for i in range(10))
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("k", clock=lambda: next(ticks))
    u = rec.user("hi")
    assert _get(ledger, u).created_at == datetime(2026, 5, 1, 9, 2, tzinfo=UTC)


def test_the_default_clock_is_the_real_utc_time():
    """clock=None stamps records with the current UTC time (between two readings taken around the call)."""
    ledger = Ledger(MemoryStore())
    before = datetime.now(UTC)
    rec = ledger.recorder("live")
    u = rec.user("now")
    after = datetime.now(UTC)
    stamp = _get(ledger, u).created_at
    assert stamp.tzinfo is not None and stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= after


# -- continuing a conversation -----------------------------------------------------------------------------


def test_a_recorder_continues_an_imported_conversation():
    """Numbering goes on after the importer's ids; imported participants and records are references."""
    ledger = Ledger(MemoryStore())
    ledger.import_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
        ],
        conversation_id="imp",
    )
    rec = ledger.recorder("imp")
    assert rec.main == "imp/main" and "imp/2" in rec.records
    nxt = rec.user("And now?")
    assert nxt == "imp/3"
    people = [r for r in rec.records.values() if isinstance(r, Participant)]
    assert people, "the importer's participants are known"
    assert _get(ledger, rec.assistant("Sure.", owner=people[0].name)).owner_participant_id == people[0].id
    again = ledger.recorder("imp")  # a second process picks up where the first stopped
    assert again.user("Third time.") == "imp/5"
    asm = ledger.assemble("imp", window_tokens=4000, output_tokens=100)
    assert asm.payload["messages"][-1]["content"] == "Third time."


def test_public_names():
    """Recorder and ToolExchange are exported from ctxledger; ledger.recorder builds one."""
    ledger = Ledger(MemoryStore())
    assert isinstance(ledger.recorder("x"), Recorder)
    assert ToolExchange("a", "b", None).artifact is None


_NAMING = {
    "user": lambda r, name: r.user("hello", name=name),
    "assistant": lambda r, name: r.assistant("hi", name=name),
    "participant": lambda r, name: r.participant(name),
    "branch": lambda r, name: r.branch(name, fork_after="fork"),
}


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(_NAMING)),
    left=st.text(min_size=0, max_size=8),
    right=st.text(min_size=0, max_size=8),
)
def test_a_name_with_a_slash_is_refused_and_writes_nothing(kind, left, right):
    """Ids join names with '/', so a name holding one is refused on every method that takes a name."""
    name = f"{left}/{right}"
    _, rec = _rec()
    rec.user("fork here", name="fork")
    before = dict(rec.records)
    with pytest.raises(InputError, match="must not contain '/'") as info:
        _NAMING[kind](rec, name)
    assert info.value.field == "name"
    assert rec.records == before


@settings(max_examples=60, deadline=None)
@given(name=st.text(min_size=1, max_size=12).filter(lambda s: s.strip() and "/" not in s))
def test_a_record_named_like_a_participant_path_cannot_take_its_id(name):
    """A participant's id is ``<conversation>/participant/<name>``: no record name can produce it."""
    _, rec = _rec()
    pid = rec.participant(name)
    assert pid == f"c/participant/{name}"
    with pytest.raises(InputError):
        rec.user("hello", name=f"participant/{name}")


SECRET = "sk-proj-Abc123XyZ987QweRty456UioP0asdfGhjkLzxcvBnm1234"


@pytest.mark.parametrize(
    ("write", "source", "field"),
    [
        (lambda r: r.user("x", name=SECRET), "user()", "name"),
        (lambda r: r.assistant("x", name=SECRET), "assistant()", "name"),
        (lambda r: r.tool_call(SECRET, {}), "tool_call()", "tool"),
        (lambda r: r.tool_call("t", {}, call_id=SECRET), "tool_call()", "call_id"),
        (lambda r: r.tool_call("t", {}, "out", name=SECRET), "tool_call()", "name"),
        (lambda r: r.tool_calls([{"tool": "t"}, {"tool": SECRET}]), "tool_calls()", "calls[1].tool"),
        (lambda r: r.tool_calls([{"tool": "t", "call_id": SECRET}]), "tool_calls()", "calls[0].call_id"),
    ],
)
def test_a_secret_in_an_identifier_names_the_argument_the_caller_passed(write, source: str, field: str) -> None:
    ledger, rec = _rec()
    before = len(ledger.store.records("default", "c"))
    with pytest.raises(InputError) as caught:
        write(rec)
    assert (caught.value.source, caught.value.field, caught.value.index) == (source, field, None)
    assert "holds a secret" in caught.value.problem and SECRET not in str(caught.value)
    assert len(ledger.store.records("default", "c")) == before


def test_a_secret_conversation_id_names_it() -> None:
    with pytest.raises(InputError) as caught:
        Ledger(MemoryStore()).recorder(SECRET)
    assert (caught.value.field, caught.value.index) == ("conversation_id", None) and SECRET not in str(caught.value)
