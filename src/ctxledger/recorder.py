"""Recording a live agent's history, record by record, into a ledger.

A :class:`Recorder` writes the records of one conversation and fills in their envelope (tenant,
conversation, branch, time, ids), so an agent loop calls ``rec.user(text)``, ``rec.tool_call(tool, args,
output)`` or ``rec.memory(summary, sources=[…])`` instead of building record dataclasses by hand. Obtain one
with :meth:`ctxledger.Ledger.recorder`; every method appends at once (one record, or the three records of a
tool exchange in one transaction) and returns the id it wrote, which later calls accept as a reference.

Ids:
    ``<conversation>/<name>`` when a method is given ``name=``, else ``<conversation>/<n>`` with the next free
    number (0, 1, 2 … in writing order: the importers' scheme, so a recorder can continue an imported
    conversation). A tool exchange named ``x`` is ``<conversation>/x`` (the assistant message),
    ``<conversation>/x#call`` and ``<conversation>/art-x`` (the raw result); unnamed, three consecutive
    numbers. Participants are ``<conversation>/participant/<name>`` (as the importers write them), the
    main branch ``<conversation>/main``, other branches ``<conversation>/<name>``.

References:
    wherever a method takes a record, participant or branch it accepts the id a method returned, the short
    ``name`` it was written under, or (for participants) the participant's name. A reference that names
    nothing in the conversation is an :class:`~ctxledger.errors.InputError` naming the field. A memory's
    ``sources`` may also name artifacts of other conversations of the tenant by their full id.

Clock:
    ``clock=None`` stamps every record with the current UTC time. A callable is called once per record and
    must return an aware datetime. A fixed start (an aware ``datetime``) makes a stepping clock for
    reproducible histories: each record is ``step`` (default one second) after the previous one, starting
    one step after the start, and :meth:`Recorder.tick` moves it on. :attr:`Recorder.now` is the time of the
    last record written.

Envelope keywords, accepted by every record method (:class:`Envelope`): ``owner`` (a participant),
``visibility`` (``participant_private``, ``branch`` (default), ``conversation``, ``shared``, ``audit_only``),
``shared_with`` (participants; implies ``visibility="shared"``, which requires it), ``privacy_class`` (one of
the policy's privacy classes; default ``internal``), ``provider_scope`` (the provider whose account the data came from,
e.g. ``"google"``), ``trust`` (a :class:`~ctxledger.records.Trust` value), ``tags`` (``meta["tags"]``, e.g.
``["typed_request"]`` or ``["evidence"]``), ``scope`` (labels such as ``{"user_id": …}``), ``branch`` (write
on another branch than the current one) and ``meta`` (store-only metadata).

Several writes as one: :meth:`Recorder.atomic` runs a function that records, and stores everything it
wrote in one transaction when it returns (nothing when it raises), with consecutive ``seq`` numbers; a
recorder made with ``create=False`` also writes a new conversation only then.

A conversation that already exists in the store is continued: its records are read once, numbering goes on
after the highest number, and the records' names stay usable as references.

Several writers (threads with their own recorder, processes, service replicas on one database) may record
into one conversation at once. The store gives every record its own ``seq`` under its write lock; a number
the recorder chose that another writer stored first makes the recorder read the records written since
(:meth:`Recorder.refresh`) and write again under the next free numbers, up to :data:`RENUMBER_ATTEMPTS`
times; a writer that keeps losing skips further ahead each time, so under contention the numbers stay
unique but may leave gaps. A ``name=`` another writer already used stays an
:class:`~ctxledger.errors.DuplicateRecordId`. Two recorders creating the same conversation at once both end
up writing into it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from ctxledger.conversation_ids import check_conversation_id
from ctxledger.errors import ConfigurationError, DuplicateRecordId, InputError, RecordNotFound
from ctxledger.json_text import media_type_of
from ctxledger.policy.secrets import default_scanner
from ctxledger.records import (
    Branch,
    Checkpoint,
    Compaction,
    Conversation,
    Freshness,
    Message,
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
from ctxledger.serialize.parts import inline_image_problem, part_problem
from ctxledger.store._rules import in_lineage

if TYPE_CHECKING:
    from ctxledger.policy.base import Policy
    from ctxledger.store.base import GraphStore


class LedgerLike(Protocol):
    """What a :class:`Recorder` writes through: a :class:`ctxledger.Ledger`'s store, policy and ``append``."""

    store: GraphStore
    policy: Policy

    def append(self, records: Sequence[Record]) -> list[Record]:
        """Append ``records`` in one transaction; return them as stored."""
        ...


RENUMBER_ATTEMPTS = 20
"""How often one write is retried after another writer took the numbers it chose (see the module docstring)."""

DEFAULT_STEP = timedelta(seconds=1)
"""How far a stepping clock (a fixed start) moves per record."""

BINARY_MEDIA_TYPE = "application/octet-stream"

_PRIVACY_CLASSES = ("public", "internal", "confidential", "restricted", "secret")
_ENVELOPE = frozenset(
    {
        "owner",
        "visibility",
        "shared_with",
        "privacy_class",
        "provider_scope",
        "trust",
        "tags",
        "scope",
        "branch",
        "meta",
    }
)
_NUMBERED = re.compile(r"\d+")


def _renumbering(method: Callable[..., Any]) -> Callable[..., Any]:
    """Retry a write whose self-numbered ids another writer stored first, after :meth:`Recorder.refresh`.

    Only ids the recorder numbered itself during the call are renumbered; a taken ``name=`` stays an
    error. The clock is put back before each retry, so a stepping clock does not skip ahead. The n-th retry
    starts ``2**(n-1) - 1`` numbers after the highest stored one, so a writer that keeps losing the race to
    a busy one gets through.
    """

    @functools.wraps(method)
    def write(self: Recorder, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("name") is not None:
            _short_name(kwargs["name"], f"{method.__name__}()")
        if self._numbered is not None:  # a nested call: the outer one retries
            return method(self, *args, **kwargs)
        attempt = 0
        while True:
            self._numbered, now = set(), self.now
            try:
                return method(self, *args, **kwargs)
            except DuplicateRecordId as exc:
                attempt += 1
                if exc.record_id not in self._numbered or attempt >= RENUMBER_ATTEMPTS:
                    raise
                self.now = now
                self.refresh()
                # the other writer keeps numbering from where it is; jump further ahead each time so a
                # writer that loses the race again and again still gets through (numbers may leave gaps)
                self._next_number += (1 << min(attempt - 1, 10)) - 1
            finally:
                self._numbered = None

    return write


class Envelope(TypedDict, total=False):
    """The envelope keywords every record method accepts (see the module docstring)."""

    owner: str | None
    visibility: str
    shared_with: Sequence[str]
    privacy_class: str
    provider_scope: str | None
    trust: str
    tags: Sequence[str] | str
    scope: Mapping[str, str]
    branch: str
    meta: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolExchange:
    """The ids a tool call wrote.

    Attributes:
        message: the assistant message that made the call (promoting it promotes the whole exchange).
        call: the :class:`~ctxledger.records.ToolCall`.
        artifact: the :class:`~ctxledger.records.ToolArtifact` holding the raw output, or ``None`` while the
            call has no result (pending or deferred).
    """

    message: str
    call: str
    artifact: str | None


@dataclass(frozen=True, slots=True)
class ParallelExchange:
    """The ids :meth:`Recorder.tool_calls` wrote.

    Attributes:
        message: the assistant message that made the calls.
        calls: the :class:`~ctxledger.records.ToolCall` ids in call order.
        artifacts: provider call id → the :class:`~ctxledger.records.ToolArtifact` of each call given an output.
    """

    message: str
    calls: tuple[str, ...]
    artifacts: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """What :meth:`Recorder.record_response` wrote and read.

    Attributes:
        message: the assistant message.
        calls: provider call id → :class:`~ctxledger.records.ToolCall` id (pass it to :meth:`Recorder.tool_result`).
        api: the response's format (``openai-chat``, ``openai-responses``, ``anthropic-messages``).
        input_tokens, output_tokens: the usage the provider reported, ``None`` when it reported none.
    """

    message: str
    calls: Mapping[str, str]
    api: str
    input_tokens: int | None
    output_tokens: int | None


_CALL_KEYS = frozenset({"tool", "arguments", "output", "call_id", "status", "media_type", "source_version"})

Ref = str | ToolExchange
"""A reference to a record: an id, a short name, or a :class:`ToolExchange` (its artifact, else its message)."""


class Recorder:
    """Writes one conversation's history into a ledger (see the module docstring).

    Args:
        ledger: the ledger whose store receives the records and raw outputs.
        conversation_id: the conversation; created (with its main branch) unless it exists.
        tenant_id: its tenant.
        clock: ``None`` (current UTC time), a callable returning aware datetimes, or an aware start
            datetime for a stepping clock.
        step: how far a stepping clock moves per record (only with a fixed start).
        title: the conversation's title when it is created (default: its id).
        create: ``False`` writes a conversation that does not exist yet together with the first records
            written (in their transaction) instead of at once, so a failed first write leaves nothing behind.

    Raises:
        ConfigurationError: ``clock`` is a naive datetime or neither a datetime nor a callable, or ``step`` is
            not a positive timedelta.
        InputError: ``conversation_id`` is empty, padded, holds control characters or empty ``/`` segments, is
            the id of another record or would nest with another conversation's id
            (:mod:`ctxledger.conversation_ids`); ``tenant_id`` is empty.
    """

    strict: bool = True
    """Whether references must name something; the scenarios' builder turns this off to write broken graphs."""

    def __init__(
        self,
        ledger: LedgerLike,
        conversation_id: str,
        tenant_id: str = "default",
        clock: datetime | Callable[[], datetime] | None = None,
        *,
        step: timedelta = DEFAULT_STEP,
        title: str | None = None,
        create: bool = True,
    ) -> None:
        check_conversation_id(conversation_id, source="<recorder>")
        _no_secret(conversation_id, "<recorder>", "conversation_id")
        if not isinstance(tenant_id, str) or not tenant_id:
            raise InputError(f"must be a non-empty string, got {tenant_id!r}", source="<recorder>", field="tenant_id")
        if not isinstance(step, timedelta) or step <= timedelta(0):
            raise ConfigurationError(f"step must be a positive timedelta, got {step!r}")
        self.ledger = ledger
        self.conversation_id = conversation_id
        self.tenant_id = tenant_id
        self.records: dict[str, Record] = {}
        """Every record of the conversation this recorder knows, by id (its own writes included)."""
        self._clock, self.now = _clock(clock)
        self._step = step
        self._next_number = 0
        self._numbered: set[str] | None = None
        self._seen_seq = 0
        self._names: dict[str, str] = {}
        self._foreign: dict[str, Record] = {}
        self.main = f"{conversation_id}/main"
        self.branch_id = self.main
        self._pending: list[Record] | None = None
        self._unborn: list[Record] = []
        if not self._resume():
            if create:
                self._create(title or conversation_id)
            else:
                self._unborn = self._birth(title or conversation_id)

    # -- ids, clock and lookups --------------------------------------------------------------------------

    def id(self, name: str) -> str:
        """The record id of a short name: ``<conversation>/<name>``."""
        return f"{self.conversation_id}/{name}"

    def seq(self, ref: Ref) -> int:
        """The ``seq`` the store gave a record.

        Raises:
            InputError: ``ref`` names no record of the conversation.
        """
        return self.records[self._ref(ref, "ref", "record", self.conversation_id)].seq

    def tick(self, minutes: float = 1.0) -> datetime:
        """Move a stepping clock on by ``minutes`` and return the new time (e.g. a scheduled task's next day).

        Raises:
            ConfigurationError: the recorder does not have a stepping clock (a fixed start).
        """
        if self._clock is not None:
            raise ConfigurationError("tick() moves only a stepping clock (Recorder(..., clock=<aware datetime>))")
        self.now += timedelta(minutes=minutes)
        return self.now

    def on(self, branch: str) -> None:
        """Write the following records on ``branch`` (an id or name :meth:`branch` returned, or the main branch).

        Raises:
            InputError: ``branch`` names no branch of the conversation.
        """
        self.branch_id = self._ref(branch, "branch", "branch", "on()")

    def refresh(self) -> int:
        """Read the records other writers appended to the conversation since this recorder last looked.

        Afterwards numbering continues after their numbers too and their names work as references.
        Writes do this by themselves when another writer took the numbers they chose (see the module
        docstring), so call it only to reference another writer's records.

        Returns:
            How many records were new to this recorder.
        """
        new = [
            r
            for r in self.ledger.store.records(self.tenant_id, self.conversation_id, after_seq=self._seen_seq)
            if r.id not in self.records
        ]
        self._append_known(new)
        return len(new)

    def atomic(self, write: Callable[[Recorder], Any]) -> Any:
        """Run ``write(self)`` and store every record it writes in one transaction, when it returns.

        Inside ``write`` the recorder's methods check and build records as usual and return their ids, but
        nothing reaches the store until ``write`` returns; then all of them (with the conversation and its
        main branch, for a recorder made with ``create=False`` whose conversation did not exist) are
        appended at once, in the order written, so they get consecutive ``seq`` numbers. If ``write`` or
        the append raises, nothing was written and the recorder forgets the records of the block. When
        another writer took the numbers chosen (or created the conversation meanwhile), the recorder
        reads what was written and runs ``write`` again, as single writes do (module docstring); ``write``
        must therefore have no effects besides recording. Raw outputs are put in the blob store as they
        are recorded: after a failure they are unreferenced, and ``ctxledger gc`` removes them.
        A branch cannot be forked after a record written in the same block (it has no ``seq`` yet).

        Returns:
            What ``write`` returned.

        Raises:
            Whatever ``write`` or the append raised (an :class:`~ctxledger.errors.InputError` for bad input).
        """
        if self._pending is not None:  # nested: the outer block stores
            return write(self)
        attempt = 0
        while True:
            saved = (self._next_number, self._seen_seq, self.branch_id, dict(self._names), self.now)
            staged: list[Record] = []
            self._pending, self._numbered = staged, set()
            self._append_known(self._unborn)  # the new conversation's main branch is a valid reference
            try:
                result = write(self)
                batch = [*self._unborn, *staged]
                self._pending = None
                stored = self.ledger.append(batch) if batch else []
            except InputError as exc:
                self._forget(staged, saved)
                attempt += 1
                taken = isinstance(exc, DuplicateRecordId) and exc.record_id in (self._numbered or ())
                joined = bool(self._unborn) and self._resume()
                if not (taken or joined) or attempt >= RENUMBER_ATTEMPTS:
                    raise
                if joined:
                    self._unborn = []
                else:
                    self.refresh()
                    self._next_number += (1 << min(attempt - 1, 10)) - 1
                continue
            except BaseException:
                self._forget(staged, saved)
                raise
            finally:
                self._pending = self._numbered = None
            self._unborn = []
            self._append_known(stored)
            return result

    def _forget(self, staged: Sequence[Record], saved: tuple[int, int, str, dict[str, str], datetime]) -> None:
        """Drop the records an :meth:`atomic` block staged, and the numbering and names they took."""
        for rec in [*self._unborn, *staged]:
            self.records.pop(rec.id, None)
        self._next_number, self._seen_seq, self.branch_id, self._names, self.now = saved
        self._pending = None

    # -- structure ---------------------------------------------------------------------------------------

    def participant(
        self,
        name: str,
        role: str = "assistant",
        *,
        parent: str | None = None,
        model: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """Add a participant (visible to the whole conversation unless ``visibility`` says otherwise).

        Args:
            name: its name (unique in the conversation); also the speaker label of its messages.
            role: ``user``, ``assistant``, ``subagent``, ``moderator`` …
            parent: the participant that started it (a subagent's parent sees its private state only once a
                checkpoint promotes it).
            model: the model configuration it runs on.
            **env: envelope keywords (:class:`Envelope`).

        Returns:
            Its id, ``<conversation>/participant/<name>``.

        Raises:
            InputError: an empty or taken name, an empty role, an unknown parent, or a bad envelope value.
        """
        pid = self._participant_id(name)
        _text(role, pid, "role")
        if self.strict and name in self._names:
            raise InputError(f"participant {name!r} already exists as {self._names[name]}", source=pid, field="name")
        env.setdefault("visibility", "conversation")
        parent_id = self._ref(parent, "parent", "participant", pid) if parent is not None else None
        self._write(
            Participant,
            name,
            env,
            record_id=pid,
            role=role,
            name=name,
            model=model,
            parent_participant_id=parent_id,
        )
        self._names[name] = pid
        return pid

    def branch(self, name: str, *, fork_after: Ref, parent: str | None = None) -> str:
        """Fork a branch after record ``fork_after`` (inclusive) of ``parent`` and switch to it.

        ``parent`` defaults to the branch the recorder is on (:attr:`branch_id`), so forking twice in a row
        nests the second branch in the first; pass ``parent=rec.main`` (or another branch) to fork elsewhere.
        The new branch sees ``parent``'s lineage up to ``fork_after``, so that record must be one ``parent``
        sees: written on ``parent`` or inherited by it, at or before its head.

        Returns:
            The branch id, ``<conversation>/<name>``.

        Raises:
            InputError: ``fork_after`` names no record or one outside ``parent``'s lineage (e.g. a record of
                a sibling branch, or of the parent's own parent after the parent's fork point), or a record inside
                a tool exchange written whole (the message or a call whose result was written with it: fork after
                the exchange's last result or before its message), ``parent`` names no branch, or the name is
                taken.
        """
        bid = self.id(_short_name(name, "branch()"))
        parent_id = self._ref(parent, "parent", "branch", bid) if parent is not None else self.branch_id
        after = self._ref(fork_after, "fork_after", "record", bid)
        if self.strict:
            self._check_in_lineage(after, parent_id, bid)
        env = {**self._envelope({}, bid), "branch": bid}  # a branch record lives on itself
        fork_seq = self.records[after].seq
        if self.strict:
            self.ledger.check_fork_point(
                self.tenant_id, self.conversation_id, parent_id, fork_seq, field="fork_after", source=bid
            )
        self._append(
            [self._build(Branch, name, env, record_id=bid, parent_branch_id=parent_id, fork_seq=fork_seq, name=name)]
        )
        self.branch_id = bid
        return bid

    # -- messages ----------------------------------------------------------------------------------------

    def system(
        self, text: str, *, name: str | None = None, supersedes: Sequence[Ref] = (), **env: Unpack[Envelope]
    ) -> str:
        """A system instruction (trust ``system``); returns its id.

        ``supersedes``: earlier instructions this one replaces (they stay recorded and are omitted as
        ``superseded``). Raises :class:`~ctxledger.errors.InputError` for a reference to no record.
        """
        return self._message(Role.SYSTEM, text, name, None, env, supersedes)

    def developer(
        self, text: str, *, name: str | None = None, supersedes: Sequence[Ref] = (), **env: Unpack[Envelope]
    ) -> str:
        """A developer instruction (trust ``developer``); returns its id. ``supersedes`` as :meth:`system`."""
        return self._message(Role.DEVELOPER, text, name, None, env, supersedes)

    def user(
        self,
        text: str | Sequence[Mapping[str, Any]],
        *,
        name: str | None = None,
        speaker: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """A user message (trust ``user``; ``speaker``: an author label, e.g. a moderator's name); returns its id.

        ``text`` is a non-empty string, or a non-empty sequence of OpenAI content parts (``text`` and
        ``image_url`` parts only, :mod:`ctxledger.serialize.parts`; a ``data:`` URL's base64 must be base64),
        kept as given. Raises :class:`~ctxledger.errors.InputError` naming ``text`` or ``text[k].<field>``.
        """
        return self._message(Role.USER, text, name, speaker, env)

    def assistant(
        self, text: str, *, name: str | None = None, speaker: str | None = None, **env: Unpack[Envelope]
    ) -> str:
        """A visible assistant message (``speaker``: the author label, default its owner's name); returns its id."""
        return self._message(Role.ASSISTANT, text, name, speaker, env)

    # -- tools -------------------------------------------------------------------------------------------

    @_renumbering
    def tool_call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | str,
        output: str | bytes | None = None,
        *,
        name: str | None = None,
        status: str | None = None,
        call_id: str | None = None,
        text: str | None = None,
        media_type: str | None = None,
        tool_version: str | None = None,
        source_version: str | None = None,
        result_env: Envelope | None = None,
        **env: Unpack[Envelope],
    ) -> ToolExchange:
        """A tool call the model made, with its raw output when there is one.

        Writes the assistant message, the :class:`~ctxledger.records.ToolCall` and, with ``output``, the
        :class:`~ctxledger.records.ToolArtifact` in one transaction. The output's bytes go to the blob
        store whole (str as UTF-8); the artifact records their sha256, size in bytes and media type.

        Args:
            tool: the tool's name.
            arguments: the arguments (a mapping, written as sorted JSON) or the JSON text the model produced.
            output: the raw result or error; ``None`` leaves the call unanswered (see :meth:`tool_result`).
            name: short name (see the module docstring for the three ids).
            status: with an output ``succeeded`` (default) or ``failed``; without one ``pending`` (default) or
                ``deferred``.
            call_id: the provider's call id (default ``call_<name or number>``).
            text: the assistant's text alongside the call, if any.
            media_type: default ``application/json`` when the output parses as JSON, else
                ``text/plain; charset=utf-8`` (``application/octet-stream`` for bytes that are not UTF-8).
            tool_version: the tool's version.
            source_version: the version of the source the output was read from, ``"<source>@<version>"``
                (e.g. ``"repo@a1b2c3"``); a newer version of the same source makes derived memories stale.
            result_env: envelope keywords for the artifact only (e.g. a more private raw result).
            **env: envelope keywords for all three records.

        Returns:
            The :class:`ToolExchange` ids.

        Raises:
            InputError: an empty tool name, arguments that are not a mapping or JSON text, a status that does
                not fit the output, or a bad envelope value (the error names the record and field).
        """
        msg_id, call_rid = self._exchange_ids(name)
        _no_secret(_text(tool, call_rid, "tool"), "tool_call()", "tool")
        args = _arguments(arguments, call_rid)
        allowed = ("succeeded", "failed") if output is not None else ("pending", "deferred")
        status = status or allowed[0]
        if status not in allowed:
            state = "with an output" if output is not None else "without an output"
            raise InputError(
                f"status {status!r} does not fit a call {state}; use one of {', '.join(allowed)}",
                source=call_rid,
                field="status",
            )
        cid = call_id or f"call_{(name or msg_id.rsplit('/', 1)[1]).replace('-', '_')}"
        _no_secret(_text(cid, call_rid, "call_id"), "tool_call()", "call_id")
        env_in = self._envelope(env, msg_id)
        message = self._build(Message, name, env_in, record_id=msg_id, role=Role.ASSISTANT, content=text)
        call = self._build(
            ToolCall,
            f"{name}#call" if name else None,
            env_in,
            record_id=call_rid,
            message_id=msg_id,
            call_id=cid,
            name=tool,
            arguments=args,
            status=ToolStatus.PENDING if output is not None else ToolStatus(status),
        )
        written = [message, call]
        if output is not None:
            art_id = self._artifact_id(name)
            written.append(
                self._result_record(
                    call,
                    art_id,
                    f"art-{name}" if name else None,
                    output,
                    status,
                    media_type,
                    tool_version,
                    source_version,
                    {**env, "trust": "tool_result", **(result_env or {})},
                )
            )
        stored = self._append(written)
        return ToolExchange(stored[0].id, stored[1].id, stored[2].id if len(stored) > 2 else None)

    @_renumbering
    def tool_result(
        self,
        call: Ref,
        output: str | bytes,
        *,
        status: str = "succeeded",
        name: str | None = None,
        media_type: str | None = None,
        tool_version: str | None = None,
        source_version: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """The raw output of a call :meth:`tool_call` left unanswered; returns the artifact's id.

        Args:
            call: the call (its id, the exchange's message id, or the :class:`ToolExchange`).
            output: the raw result or error (str as UTF-8).
            status: ``succeeded`` or ``failed``.
            name: short name of the artifact (default: the next number).
            media_type: as for :meth:`tool_call`.
            tool_version: the tool's version.
            source_version: ``"<source>@<version>"``, as for :meth:`tool_call`.
            **env: envelope keywords (trust defaults to ``tool_result``; owner and visibility to the call's).

        Raises:
            InputError: ``call`` names no tool call, the call already has a result, or ``status`` is not
                ``succeeded`` or ``failed``.
        """
        ref = call.call if isinstance(call, ToolExchange) else call
        rid = self._ref(ref, "call", "record", "tool_result()")
        found = self.records[rid]
        if isinstance(found, Message):
            found = next((r for r in self.records.values() if isinstance(r, ToolCall) and r.message_id == rid), found)
        if not isinstance(found, ToolCall):
            raise InputError(f"{rid} is a {found.kind.value}, not a tool call", source="tool_result()", field="call")
        answered = [r.id for r in self.records.values() if isinstance(r, ToolArtifact) and r.tool_call_id == found.id]
        if answered:
            raise InputError(
                f"call {found.id} already has a result ({answered[0]})", source="tool_result()", field="call"
            )
        art_id = self.id(name) if name else self._number()
        if status not in ("succeeded", "failed"):
            raise InputError(f"status {status!r}: use succeeded or failed", source=art_id, field="status")
        defaults = {
            "owner": found.owner_participant_id,
            "visibility": found.visibility.value,
            "shared_with": found.shared_with,
            "branch": found.branch_id,
            "trust": "tool_result",
        }
        rec = self._result_record(
            found, art_id, name, output, status, media_type, tool_version, source_version, {**defaults, **env}
        )
        return self._append([rec])[0].id

    # -- derived state -----------------------------------------------------------------------------------

    @_renumbering
    def memory(
        self,
        summary: str,
        *,
        name: str | None = None,
        sources: Sequence[Ref] = (),
        fields: Mapping[str, Any] | None = None,
        freshness: str = "bounded",
        observed_at: datetime | None = None,
        stale_after: datetime | None = None,
        revalidation_tool: str | None = None,
        source_version: str | None = None,
        locators: Sequence[Mapping[str, Any]] | None = None,
        conflicts_with: Sequence[Ref] = (),
        supersedes: Sequence[Ref] = (),
        confidence: float = 0.9,
        trust_source: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """A tool memory: a compact, model-facing fact derived from raw tool outputs.

        Args:
            summary: the fact, as the model should read it.
            name: short name.
            sources: the artifacts it was derived from (ids, names, or :class:`ToolExchange`); artifacts of
                other conversations of the tenant by full id.
            fields: structured fields (JSON-able).
            freshness: ``volatile``, ``session``, ``bounded`` (default), ``durable`` or ``permanent``.
            observed_at: when the fact was observed (aware); default the newest source's time, else now.
            stale_after: when it goes stale (aware datetime).
            revalidation_tool: the tool that refreshes it (the hint a stale memory carries).
            source_version: ``"<source>@<version>"`` it was read at (e.g. ``"crm@2026-09-01"``); once a newer
                version of that source is recorded or requested, the memory is stale.
            locators: provenance locators; default one per source artifact (``artifact_id``, ``sha256``).
            conflicts_with: memories it contradicts (both are kept and flagged).
            supersedes: older memories it replaces (they are then omitted as ``superseded``).
            confidence: 0 … 1.
            trust_source: where its trust comes from (default ``tool:<the first source's tool>``).
            **env: envelope keywords (trust defaults to ``verified_internal``).

        Returns:
            Its id.

        Raises:
            InputError: an unknown source or a source that is no tool artifact, an unknown freshness class, a
                naive datetime, a confidence outside 0 … 1, a malformed source version, or a bad envelope value.
        """
        rid = self.id(name) if name else self._number()
        _text(summary, rid, "summary")
        ids = tuple(self._ref(s, f"sources[{i}]", "artifact", rid) for i, s in enumerate(sources))
        found = [self._lookup(i) for i in ids]
        arts = [a for a in found if isinstance(a, ToolArtifact)]
        if self.strict:
            for i, rec in enumerate(found):
                if not isinstance(rec, ToolArtifact):
                    raise InputError(
                        f"{ids[i]} is a {rec.kind.value if rec else 'missing record'}, not a tool artifact",
                        source=rid,
                        field=f"sources[{i}]",
                    )
        if locators is None:
            locators = [{"artifact_id": a.id, "sha256": a.sha256} for a in arts]
        if not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise InputError(f"must be a number from 0 to 1, got {confidence!r}", source=rid, field="confidence")
        env.setdefault("trust", "verified_internal")
        if observed_at is None:
            observed_at = max((a.created_at for a in arts), default=None)
        return self._write(
            ToolMemory,
            name,
            env,
            record_id=rid,
            summary=summary,
            fields=dict(fields or {}),
            confidence=confidence,
            trust_source=trust_source or (f"tool:{arts[0].name}" if arts else "recorder"),
            freshness=_enum(Freshness, freshness, rid, "freshness"),
            observed_at=_aware(observed_at, rid, "observed_at"),
            stale_after=_aware(stale_after, rid, "stale_after"),
            revalidation_tool=revalidation_tool,
            source_artifact_ids=ids,
            source_version=_source_version(source_version, rid),
            locators=tuple(dict(loc) for loc in locators),
            conflicts_with=tuple(
                self._ref(c, f"conflicts_with[{i}]", "record", rid) for i, c in enumerate(conflicts_with)
            ),
            supersedes=tuple(self._ref(s, f"supersedes[{i}]", "record", rid) for i, s in enumerate(supersedes)),
        ).id

    @_renumbering
    def checkpoint(
        self,
        run_id: str,
        state: Mapping[str, Any] | None = None,
        *,
        promote: Sequence[Ref] = (),
        through: Ref | None = None,
        name: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """Resumable run state, e.g. a subagent's final report handed back to its parent.

        A checkpoint its parent can see (default ``branch`` visibility, or ``shared_with`` the parent) promotes
        itself and every record listed in ``promote`` — written as ``state["promote"]``, a list of record
        ids — to the parent: before that, a subagent's private records are omitted as ``not_promoted``.
        Listing any record of a tool exchange promotes the whole exchange; only the checkpoint owner's own
        records can be promoted, and audit-only ones never are.

        Args:
            run_id: the run it resumes.
            state: JSON-able run state (``status``, ``report``, ``pending`` …).
            promote: records to promote (ids, names, or :class:`ToolExchange`).
            through: the last record it stands for (default none): the owner's tool exchanges up to it are
                then restored from the checkpoint instead of re-sent (omitted as ``summarized``).
            name: short name.
            **env: envelope keywords (``owner`` should be the subagent; trust defaults to
                ``verified_internal``).

        Returns:
            Its id.

        Raises:
            InputError: an unknown record in ``promote`` or ``through``, ``state`` with its own ``"promote"``
                key as well as ``promote=``, or a bad envelope value.
        """
        rid = self.id(name) if name else self._number()
        _text(run_id, rid, "run_id")
        full = dict(state or {})
        if promote and "promote" in full:
            raise InputError("give promote= or state['promote'], not both", source=rid, field="promote")
        listed = promote or full.get("promote", ())
        if isinstance(listed, str) or not isinstance(listed, Sequence):
            raise InputError(f"must be a list of record ids, got {listed!r}", source=rid, field="promote")
        if listed:
            full["promote"] = [
                self._ref(p, f"promote[{i}]", "record", rid, exchange="message") for i, p in enumerate(listed)
            ]
        through_seq = self.records[self._ref(through, "through", "record", rid)].seq if through is not None else 0
        env.setdefault("trust", "verified_internal")
        return self._write(Checkpoint, name, env, record_id=rid, run_id=run_id, through_seq=through_seq, state=full).id

    @_renumbering
    def compaction(
        self,
        text: str,
        *,
        covers: Sequence[Ref],
        name: str | None = None,
        body: Mapping[str, Any] | None = None,
        policy_version: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """A summary of earlier records written by the agent (``ledger.compact`` writes a checked one).

        ``through_seq`` is the ``seq`` of the last covered record; trust defaults to ``generated_summary``
        and ``policy_version`` to the ledger policy's.

        Raises:
            InputError: ``covers`` is empty or names an unknown record.
        """
        rid = self.id(name) if name else self._number()
        _text(text, rid, "text")
        if not covers:
            raise InputError("must name at least one record", source=rid, field="covers")
        ids = tuple(self._ref(c, f"covers[{i}]", "record", rid) for i, c in enumerate(covers))
        env.setdefault("trust", "generated_summary")
        return self._write(
            Compaction,
            name,
            env,
            record_id=rid,
            through_seq=max(self.records[i].seq for i in ids),
            source_ids=ids,
            text=text,
            body=dict(body or {}),
            policy_version=policy_version if policy_version is not None else str(self.ledger.policy.version),
        ).id

    @_renumbering
    def skills(
        self,
        skills: Sequence[str],
        *,
        tools: Sequence[str] = (),
        schemas: Sequence[Mapping[str, Any]] = (),
        profiles: Sequence[str] = (),
        name: str | None = None,
        **env: Unpack[Envelope],
    ) -> str:
        """Skill state: loaded skills, enabled tools and their schemas (OpenAI function-tool form).

        ``tools`` defaults to the names of ``schemas``. Returns its id.

        Raises:
            InputError: a schema without a function name.
        """
        rid = self.id(name) if name else self._number()
        names = []
        for i, schema in enumerate(schemas):
            fn = schema.get("function", schema) if isinstance(schema, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise InputError("a tool schema needs a function name", source=rid, field=f"schemas[{i}]")
            names.append(fn["name"])
        return self._write(
            SkillState,
            name,
            env,
            record_id=rid,
            skills=tuple(skills),
            tool_profiles=tuple(profiles),
            enabled_tools=tuple(tools or names),
            tool_schemas=tuple(dict(s) for s in schemas),
        ).id

    # -- internals ---------------------------------------------------------------------------------------

    # -- provider responses and parallel tool calls ------------------------------------------------------

    @_renumbering
    def tool_calls(
        self,
        calls: Sequence[Mapping[str, Any]],
        *,
        text: str | None = None,
        name: str | None = None,
        thinking: Sequence[Mapping[str, Any]] = (),
        thinking_at: Sequence[int] | None = None,
        **env: Unpack[Envelope],
    ) -> ParallelExchange:
        """One assistant message that made N tool calls at once, with the results that are known.

        Writes the message, one :class:`~ctxledger.records.ToolCall` per call (``index`` = its position) and a
        :class:`~ctxledger.records.ToolArtifact` for every call given an ``output``, in one transaction;
        calls without an output stay pending for :meth:`tool_result`.

        Args:
            calls: one mapping per call: ``tool`` (name), ``arguments`` (a mapping or JSON text) and optionally
                ``output``, ``call_id`` (default ``call_<message number>_<k>``), ``status``, ``media_type``,
                ``source_version``.
            text: the assistant's text alongside the calls.
            name: short name: ids ``<name>``, ``<name>#call<k>``, ``art-<name>-<k>``; unnamed, consecutive numbers.
            thinking: the provider's reasoning items or blocks as received (``meta["thinking"]``; sent back only
                to the provider they came from).
            thinking_at: their positions in the response's output (``meta["thinking_at"]``).
            **env: envelope keywords for every record.

        Raises:
            InputError: no calls, a call without a tool name, arguments that are not a mapping or JSON text,
                a call id given twice, or an unknown call key (names the call index and field).
        """
        if not calls:
            raise InputError("no calls given", source="tool_calls()", field="calls")
        msg_id = self.id(name) if name else self._number()
        slots = 1 + len(calls) + sum(1 for c in calls if isinstance(c, Mapping) and c.get("output") is not None)
        numbered = iter([] if name else [self._number(skip=k) for k in range(1, slots)])
        meta = dict(env.pop("meta", None) or {})
        if thinking:
            meta["thinking"] = [dict(b) for b in thinking]
            if thinking_at is not None:
                meta["thinking_at"] = list(thinking_at)
        env_in = self._envelope({**env, "meta": meta} if meta else env, msg_id)
        message = self._build(Message, name, env_in, record_id=msg_id, role=Role.ASSISTANT, content=text)
        env_call = self._envelope(env, msg_id)
        written: list[Record] = [message]
        results: list[tuple[ToolCall, Mapping[str, Any]]] = []
        seen: set[str] = set()
        for k, spec in enumerate(calls):
            where = f"calls[{k}]"
            if not isinstance(spec, Mapping) or set(spec) - _CALL_KEYS:
                raise InputError(
                    f"a call is a mapping with keys {', '.join(sorted(_CALL_KEYS))}", source=msg_id, field=where
                )
            rid = self.id(f"{name}#call{k}") if name else next(numbered)
            cid = spec.get("call_id") or f"call_{msg_id.rsplit('/', 1)[1].replace('-', '_')}_{k}"
            _no_secret(_text(cid, rid, "call_id"), "tool_calls()", f"{where}.call_id")
            if cid in seen:
                raise InputError(f"call id {cid!r} is given twice", source=msg_id, field=f"{where}.call_id")
            seen.add(cid)
            call = self._build(
                ToolCall,
                f"{name}#call{k}" if name else None,
                env_call,
                record_id=rid,
                message_id=msg_id,
                call_id=cid,
                name=_no_secret(_text(spec.get("tool"), rid, "tool"), "tool_calls()", f"{where}.tool"),
                arguments=_arguments(spec.get("arguments", {}), rid),
                index=k,
                status=ToolStatus.PENDING,
            )
            written.append(call)
            if spec.get("output") is not None:
                results.append((call, spec))
        for call, spec in results:
            art_id = self.id(f"art-{name}-{call.index}") if name else next(numbered)
            status = spec.get("status") or "succeeded"
            if status not in ("succeeded", "failed"):
                raise InputError(f"status {status!r}: use succeeded or failed", source=art_id, field="status")
            written.append(
                self._result_record(
                    call,
                    art_id,
                    f"art-{name}-{call.index}" if name else None,
                    spec["output"],
                    status,
                    spec.get("media_type"),
                    None,
                    spec.get("source_version"),
                    {**env, "trust": "tool_result"},
                )
            )
        stored = self._append(written)
        n = len(calls)
        return ParallelExchange(
            stored[0].id,
            tuple(r.id for r in stored[1 : 1 + n]),
            {r.call_id: r.id for r in stored[1 + n :] if isinstance(r, ToolArtifact)},
        )

    def record_response(self, response: Any, *, name: str | None = None, **env: Unpack[Envelope]) -> RecordedResponse:
        """Record a model response as it came: its text, its tool calls (parallel ones included), its reasoning.

        Accepts an OpenAI Chat completion, an OpenAI Responses result or an Anthropic message, as a dict or
        the SDK's object (:func:`ctxledger.provider_responses.read_response`). A response with tool calls
        is one assistant message with its pending calls (answer them with :meth:`tool_result`); one without
        is a plain assistant message. Reasoning items and thinking blocks go to ``meta["thinking"]`` as
        received, so they go back to the provider they came from.

        Returns:
            The ids written, the calls by provider call id, and the usage the provider reported (pass it to
            :meth:`ctxledger.Ledger.record_usage` with the assembly the call was made with).

        Raises:
            InputError: the response is none of the three shapes (names the field).
        """
        from ctxledger.provider_responses import read_response

        read = read_response(response)
        meta = dict(env.pop("meta", None) or {})
        if read.response_id:
            meta.setdefault("response_id", read.response_id)
        if read.model:
            meta.setdefault("model", read.model)
        if read.calls:
            exchange = self.tool_calls(
                [{"tool": c.name, "arguments": c.arguments, "call_id": c.call_id} for c in read.calls],
                text=read.text,
                name=name,
                thinking=read.thinking,
                thinking_at=read.thinking_at,
                meta=meta,
                **env,
            )
            message, calls = exchange.message, dict(zip([c.call_id for c in read.calls], exchange.calls, strict=True))
        else:
            if read.thinking:
                meta["thinking"], meta["thinking_at"] = [dict(b) for b in read.thinking], list(read.thinking_at)
            message = self.assistant(read.text or "", name=name, meta=meta, **env)
            calls = {}
        return RecordedResponse(message, calls, read.api, read.input_tokens, read.output_tokens)

    def _participant_id(self, name: str) -> str:
        _short_name(name, f"{self.conversation_id}/participant")
        return f"{self.conversation_id}/participant/{name}"

    def _exchange_ids(self, name: str | None) -> tuple[str, str]:
        if name:
            return self.id(name), self.id(f"{name}#call")
        return self._number(), self._number(skip=1)

    def _artifact_id(self, name: str | None) -> str:
        return self.id(f"art-{name}") if name else self._number(skip=2)

    def _number(self, skip: int = 0) -> str:
        """The id ``skip`` places after the next free number (``skip`` > 0 looks ahead within one exchange)."""
        n, left = self._next_number, skip
        while True:
            rid = self.id(str(n))
            if rid not in self.records:
                if left == 0:
                    if self._numbered is not None:
                        self._numbered.add(rid)
                    return rid
                left -= 1
            n += 1

    @_renumbering
    def _message(
        self,
        role: Role,
        text: str | Sequence[Mapping[str, Any]],
        name: str | None,
        speaker: str | None,
        env: Mapping[str, Any],
        supersedes: Sequence[Ref] = (),
    ) -> str:
        if name is not None:
            _short_name(name, f"{role.value}()")
        rid = self.id(name) if name else self._number()
        content = _parts(text, rid) if role is Role.USER and not isinstance(text, str) else _text(text, rid, "text")
        olds = tuple(self._ref(s, f"supersedes[{i}]", "record", rid) for i, s in enumerate(supersedes))
        fields: dict[str, Any] = {"supersedes": olds} if olds else {}
        return self._write(Message, name, env, record_id=rid, role=role, content=content, name=speaker, **fields).id

    def _result_record(
        self,
        call: ToolCall,
        art_id: str,
        ext: str | None,
        output: str | bytes,
        status: str,
        media_type: str | None,
        tool_version: str | None,
        source_version: str | None,
        env: Mapping[str, Any],
    ) -> Record:
        if isinstance(output, str):
            data = output.encode("utf-8")
        elif isinstance(output, bytes | bytearray):
            data = bytes(output)
        else:
            raise InputError(f"must be str or bytes, got {type(output).__name__}", source=art_id, field="output")
        ref = self.ledger.store.blobs.put(data, media_type or _media_type(data))
        return self._build(
            ToolArtifact,
            ext,
            self._envelope(env, art_id),
            record_id=art_id,
            tool_call_id=call.id,
            call_id=call.call_id,
            name=call.name,
            sha256=ref.sha256,
            size_bytes=len(data),
            media_type=media_type or _media_type(data),
            tool_version=tool_version,
            status=ToolStatus(status),
            source_version=_source_version(source_version, art_id),
        )

    def _write(
        self, cls: type[Record], ext: str | None, env: Mapping[str, Any], /, *, record_id: str, **fields: Any
    ) -> Record:
        built = self._build(cls, ext, self._envelope(env, record_id), record_id=record_id, **fields)
        return self._append([built])[0]

    def _build(
        self, cls: type[Record], ext: str | None, env: Mapping[str, Any], /, *, record_id: str, **fields: Any
    ) -> Record:
        if self.strict and record_id in self.records:
            raise InputError(
                f"{record_id} already exists in conversation {self.conversation_id}; choose another name",
                source=record_id,
                field="name",
            )
        meta = dict(env.get("meta", {}))
        if env.get("tags"):
            meta["tags"] = list(env["tags"])
        trust = env.get("trust") or _default_trust(cls, fields)
        return cls(
            id=record_id,
            tenant_id=self.tenant_id,
            conversation_id=self.conversation_id,
            branch_id=env.get("branch") or self.branch_id,
            created_at=self._tick(),
            owner_participant_id=env.get("owner"),
            visibility=env["visibility"],
            shared_with=env["shared_with"],
            privacy_class=env["privacy_class"],
            provider_scope=env.get("provider_scope"),
            trust=_enum(Trust, trust, record_id, "trust"),
            scope=env["scope"],
            external_id=ext,
            meta=meta,
            **fields,
        )

    def _append(self, records: Sequence[Record]) -> list[Record]:
        if self._pending is not None:  # inside atomic(): stored with the rest of the block
            self._pending.extend(records)
            self._append_known(records)
            return list(records)
        if self._unborn:
            self._create_unborn()
        stored = self.ledger.append(records)
        self._append_known(stored)
        return stored

    def _envelope(self, env: Mapping[str, Any], rid: str) -> dict[str, Any]:
        """Check the envelope keywords and resolve their references (errors name ``rid`` and the field)."""
        unknown = sorted(set(env) - _ENVELOPE)
        if unknown:
            raise InputError(
                f"unknown keyword {unknown[0]!r}; envelope keywords are {', '.join(sorted(_ENVELOPE))}",
                source=rid,
                field=unknown[0],
            )
        out = dict(env)
        shared = env.get("shared_with") or ()
        if isinstance(shared, str):
            shared = (shared,)
        out["shared_with"] = tuple(self._ref(p, f"shared_with[{i}]", "participant", rid) for i, p in enumerate(shared))
        vis = env.get("visibility") or ("shared" if out["shared_with"] else "branch")
        out["visibility"] = _enum(Visibility, vis, rid, "visibility")
        if self.strict and out["visibility"] is Visibility.SHARED and not out["shared_with"]:
            raise InputError(
                'visibility="shared" needs the participants it is shared with (shared_with=[…]); without them '
                'nobody would see the record — use visibility="conversation" to show it to everyone',
                source=rid,
                field="shared_with",
            )
        if env.get("owner") is not None:
            out["owner"] = self._ref(env["owner"], "owner", "participant", rid)
        if env.get("branch"):
            out["branch"] = self._ref(env["branch"], "branch", "branch", rid)
        privacy = env.get("privacy_class", "internal")
        if self.strict and privacy not in self._privacy_classes():
            raise InputError(
                f"unknown privacy class {privacy!r}; the policy knows {', '.join(self._privacy_classes())}",
                source=rid,
                field="privacy_class",
            )
        out["privacy_class"] = privacy
        scope_ = env.get("provider_scope")
        if scope_ is not None and (not isinstance(scope_, str) or not scope_):
            raise InputError(f"must be a non-empty provider name, got {scope_!r}", source=rid, field="provider_scope")
        tags = env.get("tags") or ()
        tags = [tags] if isinstance(tags, str) else list(tags)
        if not all(isinstance(t, str) and t for t in tags):
            raise InputError(f"must be a list of non-empty strings, got {tags!r}", source=rid, field="tags")
        out["tags"] = tags
        labels = env.get("scope") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise InputError(f"must map strings to strings, got {labels!r}", source=rid, field="scope")
        out["scope"] = dict(labels)
        return out

    def _privacy_classes(self) -> tuple[str, ...]:
        stage = self.ledger.policy.stage("privacy")
        return tuple(getattr(stage, "classes", _PRIVACY_CLASSES))

    def _ref(self, value: Any, field: str, kind: str, source: str, *, exchange: str = "artifact") -> str:
        """Resolve a reference (an id, a short name or a :class:`ToolExchange`) to a record id.

        ``kind`` is ``record``, ``artifact``, ``participant`` or ``branch``; ``exchange`` says which id of a
        :class:`ToolExchange` stands for it (its artifact, falling back to its message).
        """
        if isinstance(value, ToolExchange):
            value = (value.artifact or value.message) if exchange == "artifact" else value.message
        if not isinstance(value, str) or not value:
            raise InputError(f"must be a record id or name, got {value!r}", source=source, field=field)
        candidates = [value, self.id(value)]
        if kind == "participant":
            candidates[1:1] = [self._names.get(value, ""), f"{self.conversation_id}/participant/{value}"]
        found = next((c for c in candidates if c in self.records), None)
        if found is None and kind == "artifact" and "/" in value:
            try:  # an artifact of another conversation of the tenant
                self._foreign[value] = self.ledger.store.get(self.tenant_id, value)
                return value
            except RecordNotFound:
                found = None
        if found is None:
            raise InputError(
                f"{value!r} names no {'record' if kind == 'artifact' else kind} of conversation "
                f"{self.conversation_id} (tenant {self.tenant_id})",
                source=source,
                field=field,
            )
        want = {"participant": Participant, "branch": Branch}.get(kind)
        if want is not None and not isinstance(self.records[found], want):
            raise InputError(f"{found} is a {self.records[found].kind.value}, not a {kind}", source=source, field=field)
        return found

    def _check_in_lineage(self, after: str, parent_id: str, source: str) -> None:
        """Refuse a fork point that ``parent_id`` does not see (its lineage, up to the head)."""
        record = self.records[after]
        hops = self.ledger.store.lineage(self.tenant_id, parent_id)
        if in_lineage(record, hops):
            return
        raise InputError(
            f"{after} (seq {record.seq}, on branch {record.branch_id}) is not in the lineage of the parent "
            f"branch {parent_id}; fork after a record {parent_id} sees, or pass parent= the branch it is on",
            source=source,
            field="fork_after",
        )

    def _lookup(self, rid: str) -> Record | None:
        return self.records.get(rid) or self._foreign.get(rid)

    def _tick(self) -> datetime:
        if self._clock is None:
            self.now = self.now + self._step
        else:
            self.now = _aware(self._clock(), "<clock>", "clock()")  # type: ignore[assignment]
        return self.now

    def _birth(self, title: str) -> list[Record]:
        """The conversation record and its main branch, built but not written."""
        env = self._envelope({}, self.conversation_id)
        conv = self._build(Conversation, "conversation", env, record_id=self.conversation_id, title=title)
        return [conv, self._build(Branch, "main", env, record_id=self.main, name="main")]

    def _create(self, title: str) -> None:
        """Write the conversation and its main branch in one append; join it if another writer was first."""
        self._unborn = self._birth(title)
        self._create_unborn()

    def _create_unborn(self) -> None:
        born, self._unborn = self._unborn, []
        try:
            self._append(born)
        except InputError:  # its id, or (PostgreSQL) its head, was written by another writer meanwhile
            if not self._resume():
                raise

    def _resume(self) -> bool:
        """Load an existing conversation; ``False`` when it does not exist yet."""
        try:
            conv = self.ledger.store.get(self.tenant_id, self.conversation_id)
        except RecordNotFound:
            return False
        if not isinstance(conv, Conversation) or conv.conversation_id != self.conversation_id:
            raise InputError(
                f"{self.conversation_id!r} is already the id of a {conv.kind.value} record of conversation "
                f"{conv.conversation_id!r}; a conversation id cannot be a record id",
                source="<recorder>",
                field="conversation_id",
            )
        self.main = self.branch_id = conv.branch_id
        self._append_known(self.ledger.store.records(self.tenant_id, self.conversation_id))
        return True

    def _append_known(self, records: Iterable[Record]) -> None:
        for rec in records:
            self.records[rec.id] = rec
            self._seen_seq = max(self._seen_seq, rec.seq or 0)
            if isinstance(rec, Participant) and rec.name:
                self._names.setdefault(rec.name, rec.id)
            number = rec.id[len(self.conversation_id) + 1 :]
            if rec.id.startswith(self.conversation_id + "/") and _NUMBERED.fullmatch(number):
                self._next_number = max(self._next_number, int(number) + 1)


# -- helpers ---------------------------------------------------------------------------------------------


def _clock(clock: Any) -> tuple[Callable[[], datetime] | None, datetime]:
    """``(callable or None for a stepping clock, the starting time)``."""
    if clock is None:
        return (lambda: datetime.now(UTC)), datetime.now(UTC)
    if isinstance(clock, datetime):
        if clock.tzinfo is None:
            raise ConfigurationError(f"clock {clock.isoformat()} is naive; give an aware datetime (tzinfo=UTC)")
        return None, clock.astimezone(UTC)
    if callable(clock):
        return clock, datetime.now(UTC)
    raise ConfigurationError(f"clock must be None, an aware datetime or a callable, got {type(clock).__name__}")


def _short_name(value: Any, source: str) -> str:
    """A ``name=`` the caller gave: a non-blank string without ``/``.

    An empty name is an error, never a silently numbered id. Ids join the conversation, a kind and the name with
    ``/``, so a name holding one would read as a nested id and could take another record's id (a message named
    ``participant/bob`` would be ``<conversation>/participant/bob``, participant ``bob``'s id). A name holding a
    secret is refused without repeating it (:func:`_no_secret`).
    """
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"must be a non-blank string, got {value!r}", source=source, field="name")
    _no_secret(value, source, "name")
    if "/" in value:
        raise InputError(
            f"must not contain '/', got {value!r}: ids join names with '/', so use another separator",
            source=source,
            field="name",
        )
    return value


def _text(value: Any, source: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"must be a non-empty string, got {value!r}", source=source, field=field)
    return value


def _parts(value: Any, source: str) -> tuple[dict[str, Any], ...]:
    """``value`` as the content parts a message keeps (:func:`~ctxledger.serialize.parts.part_problem`).

    Raises:
        InputError: not a non-empty list or tuple, or a part the rule refuses (names ``text[k].<field>``).
    """
    if not isinstance(value, list | tuple) or not value:
        problem = f"must be a non-empty string or list of content parts, got {value!r}"
        raise InputError(problem, source=source, field="text")
    for k, part in enumerate(value):
        problem = part_problem(part) or inline_image_problem(part)
        if problem is not None:
            field = f"text[{k}]" + (f".{problem.field}" if problem.field else "")
            raise InputError(problem.problem, source=source, field=field)
    return tuple(dict(part) for part in value)


def _no_secret(value: str, source: str, field: str) -> str:
    """``value`` (an identifier the caller gave) when it holds no secret.

    Ids, participant and tool names are stored in every manifest, so the write would refuse a secret in one; this
    refuses it first, naming the argument the caller passed (``field``) and the method (``source``), never the value.

    Raises:
        InputError: the secret's type, the method and the argument.
    """
    hits = default_scanner().scan(value)
    if hits:
        what = ", ".join(sorted({h.type for h in hits}))
        raise InputError(
            f"holds a secret ({what}); ids, participant and tool names are stored in every manifest, so a secret "
            "cannot be one: name it otherwise",
            source=source,
            field=field,
        )
    return value


def _enum(cls: Any, value: Any, source: str, field: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise InputError(f"unknown value {value!r}; use one of {allowed}", source=source, field=field) from None


def _aware(value: datetime | None, source: str, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InputError(f"must be an aware datetime (e.g. tzinfo=UTC), got {value!r}", source=source, field=field)
    return value.astimezone(UTC)


def _source_version(value: str | None, source: str) -> str | None:
    if value is None:
        return None
    head, sep, version = value.rpartition("@") if isinstance(value, str) else ("", "", "")
    if not isinstance(value, str) or not version or (sep and not head):
        raise InputError(
            f"must be '<source>@<version>' (e.g. 'repo@a1b2c3'), got {value!r}", source=source, field="source_version"
        )
    return value


def _arguments(arguments: Any, source: str) -> str:
    if isinstance(arguments, Mapping):
        try:
            return json.dumps(dict(arguments), sort_keys=True)
        except TypeError as exc:
            raise InputError(f"not JSON-serialisable: {exc}", source=source, field="arguments") from None
        except (ValueError, RecursionError):  # a value that holds itself, or nesting past the interpreter's limit
            raise InputError(
                "nested too deeply (or holds itself) to be written as JSON", source=source, field="arguments"
            ) from None
    if isinstance(arguments, str):
        return arguments
    raise InputError(
        f"must be a mapping or the JSON text the model produced, got {type(arguments).__name__}",
        source=source,
        field="arguments",
    )


def _media_type(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return BINARY_MEDIA_TYPE
    return media_type_of(text)


def _default_trust(cls: type[Record], fields: Mapping[str, Any]) -> str:
    role = fields.get("role")
    if cls is Message and role is not None:
        return {"system": "system", "developer": "developer", "assistant": "verified_internal"}.get(str(role), "user")
    if cls is ToolArtifact:
        return "tool_result"
    return "verified_internal"
