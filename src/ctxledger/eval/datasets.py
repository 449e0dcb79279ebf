"""Real datasets as evaluation cases (the READMEs under ``shared/data/<dataset>/``).

Each loader reads one dataset's files as they are published and turns them into :class:`EvalCase`
values: the candidate turns (one :class:`EvalItem` per dialogue turn or chat message, costed in tokens
on the OpenAI Chat Completions form), the current query, and the gold annotations.

* **LoCoMo** (evidence): each question becomes the current user turn of its conversation; the
  annotated ``evidence`` dia_ids are the required evidence. A turn is ``"Speaker: text"`` (plus
  ``[shares a photo: <caption>]`` for image turns), role ``user`` for ``speaker_a`` and ``assistant``
  for ``speaker_b``; the session date stays in ``meta``. Malformed ids are repaired when the intent
  is unambiguous (``"D8:6; D9:17"`` is split, ``"D:11:26"`` read as ``D11:26``), otherwise counted as
  unresolvable and left out of the required set; every case is counted in ``quirks``. Category 5
  (adversarial: the question presupposes something the other speaker said) is kept, labelled
  ``5-adversarial`` and reported apart from the headline recall.
* **BFCL v4 memory** (evidence): each question is the current user turn after all prerequisite
  conversations of its scenario; the required evidence is the turn that contains the answer's
  ``source`` quote. Quotes are abridged (``"…"``, a ``"Label: "`` heading taken from another place of
  the note) and typographically normalised, so they are matched piecewise after normalisation; quotes
  that match no turn are counted in ``quirks``.
* **Trajectories** (tau-bench, mini-swe-agent, SWE-agent, ToolBench): one case per model call, i.e. per
  assistant message at position ``k``: the candidates are the messages before it, the query is the
  latest of them, and the recovery state (goal, constraints, latest error, unresolved calls, system
  instructions) is annotated. mini-swe-agent records the provider's prompt tokens for each call.

Token costs follow :func:`chat_tokens`. Bad input raises :class:`ctxledger.errors.InputError` naming the
file, the record index and the field.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxledger.errors import ConfigurationError, InputError
from ctxledger.eval.base import EvalCase, EvalDataset, EvalItem, ItemRole
from ctxledger.hashing import canonical_json
from ctxledger.serialize.base import CallView
from ctxledger.tokens import TokenCounter

EVIDENCE_BUDGETS = (1000, 2000, 4000, 8000)
"""Budgets (tokens) for the evidence datasets."""
TRAJECTORY_BUDGETS = (4000, 8000, 16000)
"""Budgets (tokens) for the agent trajectories."""

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo ``category`` numbers to names, as used by the LoCoMo repo's evaluation code. Checked on the
data: category 1 questions cite 2.9 evidence turns on average (multi-hop), category 2 ask "When …"
(temporal), category 3 ask what someone "would likely" do (open-domain), category 4 cite one turn
(single-hop), category 5 carry ``adversarial_answer``."""
ADVERSARIAL = "5-adversarial"
"""The category label of LoCoMo's adversarial questions, reported apart from the headline recall."""

MESSAGE_FRAMING_TOKENS = 3
"""Tokens each chat message costs besides its fields (``<|start|>{role}<|message|>…<|end|>``), as in
OpenAI's cookbook "How to count tokens with tiktoken"."""


def chat_tokens(
    counter: TokenCounter,
    role: str,
    text: str,
    *,
    tool_calls: Sequence[CallView] = (),
    name: str | None = None,
) -> int:
    """Tokens one message adds to an OpenAI Chat Completions request.

    ``3 + count(role) + count(text) [+ count(name) + 1] + Σ count(canonical JSON of {name, arguments})``
    over the tool calls: the cookbook rule, with each tool call costed on its serialized JSON.
    """
    total = MESSAGE_FRAMING_TOKENS + counter.count(role) + counter.count(text)
    if name:
        total += counter.count(name) + 1
    for call in tool_calls:
        total += counter.count(canonical_json({"name": call.name, "arguments": call.arguments}))
    return total


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError("file not found", source=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", source=str(path)) from exc


def _read_jsonl(path: Path) -> list[Any]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise InputError("file not found", source=str(path)) from exc
    out = []
    for index, line in enumerate(lines):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON line: {exc}", source=str(path), index=index) from exc
    return out


def _field(record: Any, key: str, kind: type | tuple[type, ...], source: Path, index: int, prefix: str = "") -> Any:
    """``record[key]`` checked to be of ``kind``; else an InputError naming file, record and field."""
    where = f"{prefix}{key}"
    if not isinstance(record, Mapping):
        raise InputError("expected a JSON object", source=str(source), index=index, field=prefix.rstrip(".") or None)
    if key not in record:
        raise InputError("missing field", source=str(source), index=index, field=where)
    value = record[key]
    if not isinstance(value, kind):
        raise InputError(
            f"expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}",
            source=str(source),
            index=index,
            field=where,
        )
    return value


# --- LoCoMo -------------------------------------------------------------------------------------

_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_DIA_ID_EXTRA_COLON = re.compile(r"^D:(\d+):(\d+)$")


def resolve_evidence_ids(
    raw: Sequence[str], known: Collection[str], quirks: Counter[str]
) -> tuple[set[str], list[str]]:
    """Map LoCoMo evidence strings to turn ids, repairing the README's known quirks.

    ``"D8:6; D9:17"`` → both ids (``evidence_ids_split``); ``"D:11:26"`` → ``D11:26``
    (``evidence_ids_repaired``); an id naming no turn, or unreadable (``"D"``), is dropped and counted
    (``evidence_ids_unresolvable``). Returns the resolved ids and a note per repair or drop.
    """
    resolved: set[str] = set()
    notes: list[str] = []
    for entry in raw:
        parts = [p.strip() for p in str(entry).split(";") if p.strip()]
        if len(parts) > 1:
            quirks["evidence_ids_split"] += 1
            notes.append(f"evidence {entry!r} split into {parts}")
        for part in parts or [str(entry)]:
            fixed = _DIA_ID_EXTRA_COLON.sub(r"D\1:\2", part)
            if fixed != part:
                quirks["evidence_ids_repaired"] += 1
                notes.append(f"evidence {part!r} read as {fixed!r}")
            if _DIA_ID.match(fixed) and fixed in known:
                resolved.add(fixed)
            else:
                quirks["evidence_ids_unresolvable"] += 1
                notes.append(f"evidence {part!r} names no turn; dropped")
    return resolved, notes


def _locomo_turn_text(turn: Mapping[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


MEMORY_PREFIX = "Memory"
"""How a LoCoMo observation reads as a candidate turn: ``"Memory (8 May, 2023): <fact>"``."""


def _locomo_memories(
    record: Mapping[str, Any], turns: Sequence[EvalItem], counter: TokenCounter, source: Path, index: int
) -> tuple[EvalItem, ...]:
    """The record's ``observation`` facts as memory items placed after the session they were drawn from.

    Each observation ``[fact, dia_id]`` becomes a ``user`` item ``"Memory (<session date>): <fact>"`` with
    ``meta["covers"]`` = the dia_ids it was derived from (its provenance; ``"D8:6; D9:17"`` is split) and
    ``meta["kind"] = "memory"`` and ``meta["speaker"]`` = the speaker whose observations list it (the speaker of
    the turns it was drawn from). Items are renumbered so ``seq`` stays the conversation order.
    """
    observations = record.get("observation")
    if not isinstance(observations, Mapping):
        return tuple(turns)
    by_session: dict[int, list[tuple[str, tuple[str, ...], str]]] = {}
    for key, per_speaker in observations.items():
        match = re.fullmatch(r"session_(\d+)_observation", str(key))
        if not match or not isinstance(per_speaker, Mapping):
            continue
        for speaker, facts in per_speaker.items():
            for fact in facts if isinstance(facts, list) else ():
                if isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str):
                    ids = fact[1] if isinstance(fact[1], list) else [fact[1]]
                    covers = tuple(p.strip() for i in ids for p in str(i).split(";") if p.strip())
                    by_session.setdefault(int(match.group(1)), []).append((fact[0], covers, str(speaker)))
    out: list[EvalItem] = []
    sessions = sorted({int(t.meta["session"]) for t in turns} | set(by_session))
    dates = {int(t.meta["session"]): t.meta.get("session_date", "") for t in turns}
    for number in sessions:
        for turn in (t for t in turns if t.meta["session"] == number):
            out.append(replace(turn, seq=len(out)))
        for k, (fact, covers, speaker) in enumerate(by_session.get(number, ())):
            text = (
                f"{MEMORY_PREFIX} ({dates.get(number, '')}): {fact}"
                if dates.get(number)
                else f"{MEMORY_PREFIX}: {fact}"
            )
            out.append(
                EvalItem(
                    id=f"M{number}:{k + 1}",
                    role="user",
                    text=text,
                    seq=len(out),
                    tokens=chat_tokens(counter, "user", text),
                    meta={
                        "session": number,
                        "kind": "memory",
                        "covers": covers,
                        "speaker": speaker,
                        "session_date": dates.get(number, ""),
                        "written_at": _written_at(dates.get(number, ""), 10_000 + k),
                    },
                )
            )
    return tuple(out)


_SESSION_DATE = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<half>am|pm)\s+on\s+(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+),?\s+"
    r"(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)


def session_time(text: str) -> datetime | None:
    """A LoCoMo ``session_<n>_date_time`` (``"1:56 pm on 8 May, 2023"``) as a UTC datetime; ``None`` if unreadable."""
    match = _SESSION_DATE.match(text or "")
    if match is None:
        return None
    try:
        month = datetime.strptime(match["month"][:3], "%b").month
        hour = int(match["hour"]) % 12 + (12 if match["half"].lower() == "pm" else 0)
        return datetime(int(match["year"]), month, int(match["day"]), hour, int(match["minute"]), tzinfo=UTC)
    except ValueError:
        return None


def _written_at(session_date: str, position: int) -> str | None:
    """When a session's item was written: the session's time plus ``position`` seconds, ISO 8601 (or ``None``)."""
    start = session_time(session_date)
    return (start + timedelta(seconds=position)).isoformat() if start is not None else None


def _locomo_items(conv: Mapping[str, Any], counter: TokenCounter, source: Path, index: int) -> tuple[EvalItem, ...]:
    speaker_a = _field(conv, "speaker_a", str, source, index, "conversation.")
    sessions = sorted(
        (int(k.split("_")[1]), k) for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
    )
    items: list[EvalItem] = []
    for number, key in sessions:
        date = conv.get(f"{key}_date_time", "")
        for t_index, turn in enumerate(conv[key]):
            prefix = f"conversation.{key}[{t_index}]."
            dia_id = _field(turn, "dia_id", str, source, index, prefix)
            _field(turn, "speaker", str, source, index, prefix)
            _field(turn, "text", str, source, index, prefix)
            role: ItemRole = "user" if turn["speaker"] == speaker_a else "assistant"
            text = _locomo_turn_text(turn)
            items.append(
                EvalItem(
                    id=dia_id,
                    role=role,
                    text=text,
                    seq=len(items),
                    tokens=chat_tokens(counter, role, text),
                    meta={
                        "session": number,
                        "session_date": date,
                        "written_at": _written_at(date, t_index),
                        "speaker": turn["speaker"],
                    },
                )
            )
    return tuple(items)


def load_locomo(
    directory: Path,
    counter: TokenCounter,
    *,
    limit: int | None = None,
    file_name: str | None = None,
    files: Sequence[Path] | None = None,
    memories: bool = False,
) -> EvalDataset:
    """LoCoMo evidence recall cases (``shared/data/locomo/README.md``).

    Args:
        directory: the dataset folder (every ``*.json`` in it holding LoCoMo conversations, e.g. the
            dev split's ``locomo10_conv0-6.json`` or the upstream ``locomo10.json``), or one such file.
        counter: the exact counter (item and question costs in tokens).
        limit: read only the first ``limit`` conversations (of all the files read, in order).
        file_name: read only this file of ``directory``.
        files: read these LoCoMo files, in order (``directory`` is then only the ``source`` reported).
        memories: also offer each conversation's ``observation`` facts as memory items (dataset
            ``locomo-memory``; see :func:`_locomo_memories`): a required turn counts as recalled when a
            memory derived from it is included (credit through provenance, ``meta["covers"]``).

    Returns:
        One case per question, ``category`` ``"<n>-<name>"`` (see :data:`LOCOMO_CATEGORIES`), quirks
        counted under ``evidence_ids_split``, ``evidence_ids_repaired``, ``evidence_ids_unresolvable``,
        ``questions_without_evidence`` and ``questions_adversarial``.

    Raises:
        InputError: no LoCoMo file, or a record or field is missing or of the wrong type (names file,
            index and field).
    """
    if files is not None:
        paths = list(files)
    else:
        paths = [directory / file_name] if file_name else _files_of("locomo", directory)
    name = "locomo-memory" if memories else "locomo"
    quirks: Counter[str] = Counter()
    cases: list[EvalCase] = []
    seen = 0
    for path in paths:
        if limit is not None and seen >= limit:
            break
        records = _read_json(path)
        if not isinstance(records, list):
            raise InputError("expected a JSON list of conversations", source=str(path))
        for index, record in enumerate(records):
            if limit is not None and seen >= limit:
                break
            seen += 1
            sample_id = _field(record, "sample_id", str, path, index)
            conv = _field(record, "conversation", dict, path, index)
            items = _locomo_items(conv, counter, path, index)
            known = {item.id for item in items}
            if memories:
                items = _locomo_memories(record, items, counter, path, index)
            for q_index, qa in enumerate(_field(record, "qa", list, path, index)):
                cases.append(_locomo_case(sample_id, q_index, qa, items, known, counter, quirks, path, index, name))
    return EvalDataset(
        name=name,
        kind="evidence",
        cases=tuple(cases),
        default_budgets=EVIDENCE_BUDGETS,
        quirks=dict(quirks),
        source=str(directory),
    )


def _locomo_case(
    sample_id: str,
    q_index: int,
    qa: Any,
    items: tuple[EvalItem, ...],
    known: set[str],
    counter: TokenCounter,
    quirks: Counter[str],
    path: Path,
    index: int,
    dataset: str = "locomo",
) -> EvalCase:
    prefix = f"qa[{q_index}]."
    question = _field(qa, "question", str, path, index, prefix)
    number = _field(qa, "category", int, path, index, prefix)
    if number not in LOCOMO_CATEGORIES:
        raise InputError(f"unknown category {number}", source=str(path), index=index, field=f"{prefix}category")
    evidence = _field(qa, "evidence", list, path, index, prefix)
    required, notes = resolve_evidence_ids(evidence, known, quirks)
    if not required:
        quirks["questions_without_evidence"] += 1
        notes.append("no resolvable evidence; left out of recall")
    if number == 5:
        quirks["questions_adversarial"] += 1
    return EvalCase(
        case_id=f"{sample_id}/q{q_index}",
        dataset=dataset,
        items=items,
        query=question,
        query_tokens=chat_tokens(counter, "user", question),
        required_ids=frozenset(required),
        category=f"{number}-{LOCOMO_CATEGORIES[number]}",
        notes=tuple(notes),
    )


# --- BFCL v4 memory --------------------------------------------------------------------------------

_QUOTE_MAP = str.maketrans(
    {"‘": "'", "’": "'", "“": "'", "”": "'", '"': "'", "«": "'", "»": "'", "–": "-", "—": "-", "…": "..."}
)
_LABEL = re.compile(r"^([^:.!?']{1,40}:)\s*(.+)$")
_ELLIPSIS = re.compile(r"\.(?:\s*\.){2,}|\[\s*\.\.\.\s*\]")
_PUNCT_SPACE = re.compile(r"\s*([,.;:!?()\[\]'/-])\s*")


def normalize_quote(text: str) -> str:
    """Normalised text for quote matching: NFKC, case-folded, quote marks as ``'``, dashes as ``-``.

    Also ellipses become ``...`` (``…``, ``. . .``, ``[...]``), no space stays next to punctuation, and
    whitespace is collapsed. The quotes in real annotations swap single and double quotes and curly and
    straight ones relative to the conversations, re-space punctuation (``"word , word"``) and shorten with
    ellipses, so none of these differences count.
    """
    text = unicodedata.normalize("NFKC", text).translate(_QUOTE_MAP).casefold()
    text = _ELLIPSIS.sub("...", text)
    text = _PUNCT_SPACE.sub(r"\1", text)
    return " ".join(text.split())


def quote_pieces(quote: str) -> list[str]:
    """The normalised pieces of an abridged quote.

    Split at ``...``, each piece without the quotation marks that wrap it; a leading ``"Label:"`` is its
    own piece.
    """
    pieces: list[str] = []
    for raw in normalize_quote(quote).split("..."):
        piece = raw.strip(" '")
        match = _LABEL.match(piece)
        parts = [match.group(1), match.group(2).strip(" '")] if match else [piece]
        pieces.extend(p for p in parts if p)
    return pieces


def locate_quote(quote: str, items: Iterable[EvalItem]) -> list[str]:
    """Ids of the items whose normalised text contains every piece of ``quote`` (see :func:`quote_pieces`)."""
    pieces = quote_pieces(quote)
    if not pieces:
        return []
    return [item.id for item in items if all(p in normalize_quote(item.text) for p in pieces)]


BFCL_SCENARIOS = ("customer", "finance", "notetaker", "student")
"""The scenarios present in the development subset (healthcare is held out)."""


def _bfcl_items(directory: Path, scenario: str, counter: TokenCounter) -> tuple[EvalItem, ...]:
    path = directory / "memory_prereq_conversation" / f"memory_{scenario}.json"
    items: list[EvalItem] = []
    for index, record in enumerate(_read_jsonl(path)):
        conv_id = _field(record, "id", str, path, index)
        for t_index, turn in enumerate(_field(record, "question", list, path, index)):
            if not isinstance(turn, list):
                raise InputError(
                    "expected a list of messages", source=str(path), index=index, field=f"question[{t_index}]"
                )
            for m_index, message in enumerate(turn):
                prefix = f"question[{t_index}][{m_index}]."
                content = _field(message, "content", str, path, index, prefix)
                role = _field(message, "role", str, path, index, prefix)
                if role not in ("user", "assistant", "system"):
                    raise InputError(f"unexpected role {role!r}", source=str(path), index=index, field=f"{prefix}role")
                items.append(
                    EvalItem(
                        id=f"{conv_id}#{t_index}.{m_index}",
                        role=role,
                        text=content,
                        seq=len(items),
                        tokens=chat_tokens(counter, role, content),
                        meta={"conversation": conv_id},
                    )
                )
    return tuple(items)


def load_bfcl_memory(directory: Path, counter: TokenCounter, *, limit: int | None = None) -> EvalDataset:
    """BFCL v4 memory cases (``shared/data/bfcl-memory/README.md``).

    Args:
        directory: the dataset folder (``BFCL_v4_memory.json``, ``possible_answer/``,
            ``memory_prereq_conversation/``).
        counter: the exact counter.
        limit: keep only the first ``limit`` questions.

    Returns:
        One case per question, ``category`` = scenario; quotes that match no turn are counted under
        ``quotes_unlocated`` (their case has no required evidence; each is listed in ``listed``), quotes
        matching several turns under ``quotes_ambiguous`` (every matching turn is required).

    Raises:
        InputError: a record or field is missing or malformed (names file, index and field).
    """
    q_path = directory / "BFCL_v4_memory.json"
    a_path = directory / "possible_answer" / "BFCL_v4_memory.json"
    answers = {}
    for index, record in enumerate(_read_jsonl(a_path)):
        answers[_field(record, "id", str, a_path, index)] = _field(record, "source", str, a_path, index)
    quirks: Counter[str] = Counter()
    listed: dict[str, list[str]] = {}
    conversations: dict[str, tuple[EvalItem, ...]] = {}
    cases: list[EvalCase] = []
    for index, record in enumerate(_read_jsonl(q_path)[:limit]):
        qid = _field(record, "id", str, q_path, index)
        scenario = _field(record, "scenario", str, q_path, index)
        if scenario not in conversations:
            conversations[scenario] = _bfcl_items(directory, scenario, counter)
        question = _bfcl_question(record, q_path, index)
        if qid not in answers:
            raise InputError("no possible answer for this id", source=str(a_path), field=f"id={qid}")
        cases.append(
            _bfcl_case(qid, scenario, question, answers[qid], conversations[scenario], counter, quirks, listed)
        )
    return EvalDataset(
        name="bfcl-memory",
        kind="evidence",
        cases=tuple(cases),
        default_budgets=EVIDENCE_BUDGETS,
        quirks=dict(quirks),
        source=str(directory),
        listed={k: tuple(v) for k, v in listed.items()},
    )


def _bfcl_question(record: Mapping[str, Any], path: Path, index: int) -> str:
    turns = _field(record, "question", list, path, index)
    try:
        return str(turns[-1][-1]["content"])
    except (IndexError, KeyError, TypeError) as exc:
        raise InputError("expected [[{role, content}]]", source=str(path), index=index, field="question") from exc


def _bfcl_case(
    qid: str,
    scenario: str,
    question: str,
    source: str,
    items: tuple[EvalItem, ...],
    counter: TokenCounter,
    quirks: Counter[str],
    listed: dict[str, list[str]],
) -> EvalCase:
    hits = locate_quote(source, items)
    notes: list[str] = []
    if not hits:
        quirks["quotes_unlocated"] += 1
        listed.setdefault("quotes_unlocated", []).append(f"{qid}: {source!r}")
        notes.append(f"source quote {source!r} matches no turn; left out of recall")
    elif len(hits) > 1:
        quirks["quotes_ambiguous"] += 1
        notes.append(f"source quote matches {len(hits)} turns; all required")
    return EvalCase(
        case_id=qid,
        dataset="bfcl-memory",
        items=items,
        query=question,
        query_tokens=chat_tokens(counter, "user", question),
        required_ids=frozenset(hits),
        category=scenario,
        notes=tuple(notes),
    )


# --- Agent trajectories ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One agent trajectory as candidate items plus what the steps need.

    Attributes:
        run_id: unique within its dataset.
        items: every model-visible message, in order.
        constraint_ids: ids of user turns that state the goal or constraints (the first is the goal).
        prompt_tokens: provider-reported prompt tokens by assistant item id, when recorded.
    """

    run_id: str
    items: tuple[EvalItem, ...]
    constraint_ids: tuple[str, ...]
    prompt_tokens: Mapping[str, int]


def _text_of(content: Any) -> str:
    """Message content as text: a string as is, OpenAI content parts joined, ``None`` as ``""``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def _openai_calls(raw: Any, path: Path, index: int) -> tuple[CallView, ...]:
    """OpenAI ``tool_calls`` (``[{id, function: {name, arguments}}]``) as CallViews."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise InputError("expected a list", source=str(path), index=index, field="tool_calls")
    calls = []
    for c_index, call in enumerate(raw):
        prefix = f"tool_calls[{c_index}]."
        function = _field(call, "function", dict, path, index, prefix)
        arguments = function.get("arguments", "")
        calls.append(
            CallView(
                call_id=_field(call, "id", str, path, index, prefix),
                name=_field(function, "name", str, path, index, f"{prefix}function."),
                arguments=arguments if isinstance(arguments, str) else canonical_json(arguments),
            )
        )
    return tuple(calls)


def _item(run_id: str, index: int, seq: int, role: ItemRole, text: str, counter: TokenCounter, **kw: Any) -> EvalItem:
    tokens = chat_tokens(counter, role, text, tool_calls=kw.get("tool_calls", ()), name=kw.pop("name", None))
    return EvalItem(id=f"{run_id}#{index}", role=role, text=text, seq=seq, tokens=tokens, **kw)


def _openai_run(
    run_id: str,
    messages: Sequence[Any],
    counter: TokenCounter,
    path: Path,
    quirks: Counter[str],
    *,
    is_error: Callable[[Mapping[str, Any], str], bool],
    constraints: str = "first_user",
) -> Run:
    """OpenAI-format messages (tau-bench, mini-swe-agent, SWE-agent) as a :class:`Run`.

    ``constraints`` is ``"first_user"`` (only the task message) or ``"all_user"`` (every user turn is
    the human's word: tau-bench's simulated customer).
    """
    items: list[EvalItem] = []
    prompt_tokens: dict[str, int] = {}
    for index, message in enumerate(messages):
        role = _field(message, "role", str, path, index)
        text = _text_of(message.get("content"))
        if role == "exit":  # mini-swe-agent's end marker holds the patch; never sent to the model
            quirks["non_model_messages_skipped"] += 1
            continue
        if role == "tool":
            call_id = _tool_call_id(message, path, index)
            items.append(
                _item(
                    run_id,
                    index,
                    len(items),
                    "tool",
                    text,
                    counter,
                    tool_call_id=call_id,
                    is_error=is_error(message, text),
                )
            )
        elif role in ("system", "developer", "user", "assistant"):
            calls = _openai_calls(message.get("tool_calls"), path, index) if role == "assistant" else ()
            items.append(_item(run_id, index, len(items), role, text, counter, tool_calls=calls))
            usage = _usage(message)
            if usage is not None:
                prompt_tokens[items[-1].id] = usage
        else:
            raise InputError(f"unexpected role {role!r}", source=str(path), index=index, field="role")
    users = [i.id for i in items if i.role == "user"]
    return Run(run_id, tuple(items), tuple(users if constraints == "all_user" else users[:1]), prompt_tokens)


def _tool_call_id(message: Mapping[str, Any], path: Path, index: int) -> str:
    if isinstance(message.get("tool_call_id"), str):
        return str(message["tool_call_id"])
    ids = message.get("tool_call_ids")
    if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str):
        return ids[0]
    raise InputError("a tool message needs one tool_call_id", source=str(path), index=index, field="tool_call_id")


def _usage(message: Mapping[str, Any]) -> int | None:
    try:
        value = message["extra"]["response"]["usage"]["prompt_tokens"]
    except (KeyError, TypeError):
        return None
    return value if isinstance(value, int) else None


def _tau_error(message: Mapping[str, Any], text: str) -> bool:
    return text.startswith("Error")


def _returncode_error(message: Mapping[str, Any], text: str) -> bool:
    extra = message.get("extra")
    code = extra.get("returncode") if isinstance(extra, Mapping) else None
    if code is None:
        match = re.match(r"<returncode>(-?\d+)</returncode>", text)
        code = int(match.group(1)) if match else 0
    return code != 0


def _no_error(message: Mapping[str, Any], text: str) -> bool:
    return False


def _toolbench_error(message: Mapping[str, Any], text: str) -> bool:
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(body, Mapping) and bool(body.get("error"))


def _toolbench_messages(messages: Sequence[Any], run_id: str, path: Path) -> list[dict[str, Any]]:
    """Legacy ``function_call`` / ``role: function`` messages in OpenAI tool form with synthesized ids.

    ToolBench has no call ids: each function result answers the latest call, named ``<run>/call<k>``.
    """
    out: list[dict[str, Any]] = []
    last_call: str | None = None
    for index, message in enumerate(messages):
        role = _field(message, "role", str, path, index)
        if role == "assistant" and isinstance(message.get("function_call"), Mapping):
            fc = message["function_call"]
            last_call = f"{run_id}/call{index}"
            call = {"id": last_call, "function": {"name": fc.get("name", ""), "arguments": fc.get("arguments", "")}}
            out.append({"role": "assistant", "content": message.get("content"), "tool_calls": [call]})
        elif role == "function":
            if last_call is None:
                raise InputError("function result with no preceding call", source=str(path), index=index, field="role")
            out.append({"role": "tool", "tool_call_id": last_call, "content": message.get("content")})
            last_call = None
        else:
            out.append(dict(message))
    return out


def _tau_runs(
    paths: Sequence[Path], root: Path, counter: TokenCounter, quirks: Counter[str], limit: int | None
) -> _Loaded:
    runs = []
    for path in paths:
        records = _read_json(path)
        if not isinstance(records, list):
            raise InputError("expected a JSON list", source=str(path))
        for index, record in enumerate(records):
            if limit is not None and len(runs) >= limit:
                break
            task, trial = _field(record, "task_id", int, path, index), _field(record, "trial", int, path, index)
            run_id = f"task{task}-trial{trial}" if len(paths) == 1 else f"{_rel(path, root)}/task{task}-trial{trial}"
            traj = _field(record, "traj", list, path, index)
            runs.append(_openai_run(run_id, traj, counter, path, quirks, is_error=_tau_error, constraints="all_user"))
    return runs, {}


def _mini_swe_runs(
    paths: Sequence[Path], root: Path, counter: TokenCounter, quirks: Counter[str], limit: int | None
) -> _Loaded:
    runs = []
    for path in paths[:limit]:
        record = _read_json(path)
        messages = _field(record, "messages", list, path, 0)
        run_id = path.name.removesuffix(".traj.json").removesuffix(".json")
        runs.append(_openai_run(run_id, messages, counter, path, quirks, is_error=_returncode_error))
    return runs, {}


def _swe_agent_runs(
    paths: Sequence[Path], root: Path, counter: TokenCounter, quirks: Counter[str], limit: int | None
) -> _Loaded:
    runs = []
    for path in paths[:limit]:
        record = _read_json(path)
        history = _field(record, "history", list, path, 0)
        runs.append(_openai_run(_rel(path, root), history, counter, path, quirks, is_error=_no_error))
    return runs, {}


FAILED_RUN = "failed run (a search tree, no train_messages)"
"""Why a ToolBench answer is skipped: the search failed and wrote no trajectory to evaluate."""


def _toolbench_runs(
    paths: Sequence[Path], root: Path, counter: TokenCounter, quirks: Counter[str], limit: int | None
) -> _Loaded:
    """ToolBench answers; the other files still load when one is a failed run.

    A failed run (a search ``tree`` but no ``train_messages`` trajectory) is skipped, counted under
    ``runs_skipped`` and listed by file (``"G1_answer/10.json: failed run (…); skipped"``).

    Raises:
        InputError: every file read is a failed run (nothing to evaluate); the message names the file(s) and why.
    """
    runs = []
    skipped: list[Path] = []
    read = paths[:limit]
    for path in read:
        record = _read_json(path)
        generation = _field(record, "answer_generation", dict, path, 0)
        train = generation.get("train_messages")
        run_id = _rel(path, root)
        if not train and isinstance(record, Mapping) and record.get("tree") is not None:
            quirks["runs_skipped"] += 1
            skipped.append(path)
            continue
        train = _field(generation, "train_messages", list, path, 0, "answer_generation.")
        if not train or not isinstance(train[-1], list):
            raise InputError(
                "expected a non-empty list of message lists", source=str(path), field="answer_generation.train_messages"
            )
        messages = _toolbench_messages(train[-1], run_id, path)
        runs.append(_openai_run(run_id, messages, counter, path, quirks, is_error=_toolbench_error))
    if not runs and skipped:
        raise InputError(_nothing_left(skipped, root, len(paths)), source=str(root))
    return runs, ({"runs_skipped": [f"{_file_in(p, root)}: {FAILED_RUN}; skipped" for p in skipped]} if skipped else {})


def _file_in(path: Path, root: Path) -> str:
    """``path`` relative to the folder ``root`` (its file name when ``root`` is the file itself)."""
    return str(path.relative_to(root)) if root.is_dir() and path.is_relative_to(root) else path.name


def _nothing_left(skipped: Sequence[Path], root: Path, found: int) -> str:
    """Why a ToolBench file or folder gives nothing to evaluate: every file read is a failed run."""
    if root.is_file():
        return f"a {FAILED_RUN}: no trajectory to evaluate"
    if found == 1:
        return f"nothing to evaluate: its only toolbench file, {_file_in(skipped[0], root)}, is a {FAILED_RUN}"
    names = ", ".join(_file_in(p, root) for p in skipped[:5]) + (", …" if len(skipped) > 5 else "")
    cut = f" (the first {len(skipped)} of {found}: raise the limit)" if found > len(skipped) else ""
    return f"nothing to evaluate: every toolbench file read{cut} is a {FAILED_RUN}: {names}"


def _rel(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` without its suffixes (the file's own stem when ``root`` is the file)."""
    try:
        rel = path.relative_to(root) if root != path else Path(path.name)
    except ValueError:
        rel = Path(path.name)
    name = rel.name
    for suffix in (".traj.json", ".json", ".traj", ".jsonl"):
        name = name.removesuffix(suffix)
    return str(rel.with_name(name)) if name else str(rel)


def trajectory_cases(run: Run, dataset: str, *, step_stride: int = 1) -> list[EvalCase]:
    """One case per model call of ``run`` (see :func:`recovery_state` for its annotations).

    Every assistant item at position ``k ≥ 1`` (every ``step_stride``-th one) is a call; its candidates
    are the ``k`` items before it and its query is the latest of them.
    """
    cases = []
    steps = [k for k, item in enumerate(run.items) if item.role == "assistant" and k > 0]
    for k in steps[::step_stride]:
        prefix = run.items[:k]
        cases.append(
            EvalCase(
                case_id=f"{run.run_id}@{k}",
                dataset=dataset,
                items=prefix,
                query=prefix[-1].text,
                query_tokens=0,
                category=dataset,
                recovery=recovery_state(prefix, run.constraint_ids),
                provider_prompt_tokens=run.prompt_tokens.get(run.items[k].id),
            )
        )
    return cases


def recovery_state(prefix: Sequence[EvalItem], constraint_ids: Sequence[str]) -> dict[str, frozenset[str]]:
    """Recovery state a resumed call needs, by kind.

    ``goal``: the first user turn; ``constraints``: the run's later constraint turns seen so far;
    ``latest_error``: the latest error result; ``unresolved_calls``: assistant items with a call that
    has no result yet; ``system``: system and developer instructions. Empty kinds are left out.
    """
    ids = {item.id for item in prefix}
    seen_constraints = [i for i in constraint_ids if i in ids]
    answered = {item.tool_call_id for item in prefix if item.role == "tool"}
    errors = [item.id for item in prefix if item.is_error]
    state = {
        "goal": frozenset(seen_constraints[:1]),
        "constraints": frozenset(seen_constraints[1:]),
        "latest_error": frozenset(errors[-1:]),
        "unresolved_calls": frozenset(
            item.id for item in prefix if any(c.call_id not in answered for c in item.tool_calls)
        ),
        "system": frozenset(item.id for item in prefix if item.role in ("system", "developer")),
    }
    return {kind: value for kind, value in state.items() if value}


_Loaded = tuple[list[Run], dict[str, list[str]]]
_RunLoader = Callable[[Sequence[Path], Path, TokenCounter, Counter[str], int | None], _Loaded]


@dataclass(frozen=True, slots=True)
class _Spec:
    folder: str
    runs: _RunLoader | None = None
    pattern: str = ""
    """Files named this way belong to the dataset even when their shape is not recognised (so the loader
    reports what is wrong with them)."""


_SPECS: dict[str, _Spec] = {
    "locomo": _Spec("locomo"),
    "locomo-memory": _Spec("locomo"),
    "bfcl-memory": _Spec("bfcl-memory"),
    "tau-bench": _Spec("tau-bench", _tau_runs),
    "mini-swe-agent": _Spec("mini-swe-agent-deepseek", _mini_swe_runs, "*.traj.json"),
    "swe-agent": _Spec("swe-agent-demos", _swe_agent_runs, "*.traj"),
    "toolbench": _Spec("toolbench-examples", _toolbench_runs),
}


def dataset_names() -> list[str]:
    """The names :func:`load_dataset` accepts, sorted."""
    return sorted(_SPECS)


def sniff_format(value: Any) -> str | None:
    """The dataset a parsed JSON file belongs to, told from its shape, or ``None``.

    A list of ``{sample_id, conversation, qa}`` is LoCoMo; a list of ``{task_id, trial, traj}`` is
    tau-bench; an object with ``answer_generation`` is a ToolBench answer; with ``history`` a SWE-agent
    trajectory; with ``messages`` and ``trajectory_format`` or ``info.mini_version`` a mini-swe-agent one.
    """
    if isinstance(value, list):
        first = value[0] if value else None
        if isinstance(first, Mapping):
            if {"conversation", "qa"} <= first.keys():
                return "locomo"
            if {"task_id", "traj"} <= first.keys():
                return "tau-bench"
        return None
    if not isinstance(value, Mapping):
        return None
    if "answer_generation" in value:
        return "toolbench"
    if isinstance(value.get("history"), list):
        return "swe-agent"
    info = value.get("info")
    if isinstance(value.get("messages"), list) and (
        "trajectory_format" in value or (isinstance(info, Mapping) and "mini_version" in info)
    ):
        return "mini-swe-agent"
    return None


UNREADABLE = "files_unreadable"
"""The quirk (and ``listed`` key) of the files of a folder that are not one JSON document in UTF-8."""


def _sniff_file(path: Path, unreadable: list[tuple[Path, str]] | None = None) -> str | None:
    """The dataset ``path`` holds (:func:`sniff_format`); ``None`` for another shape or unreadable text.

    ``unreadable``: collects ``(path, why)`` for a file that is not one JSON document in UTF-8.
    """
    try:
        return sniff_format(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, UnicodeDecodeError) as exc:
        if unreadable is not None:
            unreadable.append((path, f"not one JSON document in UTF-8 ({exc})"))
        return None


def _candidates(directory: Path) -> list[Path]:
    if directory.is_file():
        return [directory]
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in (".json", ".traj"))


def _files_of(name: str, directory: Path) -> list[Path]:
    """The files of ``directory`` (or the file itself) that hold dataset ``name``, sorted by path.

    Raises:
        InputError: the path does not exist, or holds no file of that dataset.
    """
    if not directory.exists():
        raise InputError("no such file or directory", source=str(directory))
    pattern = _SPECS[name].pattern
    paths = []
    for path in _candidates(directory):
        shape = _sniff_file(path)
        if shape == name or (shape is None and pattern and path.match(pattern)):
            paths.append(path)
    if not paths:
        raise InputError(f"no {name} file found", source=str(directory))
    return paths


def formats_in(path: Path, unreadable: list[tuple[Path, str]] | None = None) -> dict[str, list[Path]]:
    """The dataset files under ``path`` (a file or a folder), by dataset name (see :func:`sniff_format`).

    A folder holding ``BFCL_v4_memory.json`` is BFCL v4 memory. Files of no known shape are left out;
    ``unreadable`` collects those that are not one JSON document, as ``(path, why)``.

    Raises:
        InputError: ``path`` does not exist.
    """
    if not path.exists():
        raise InputError("no such file or directory", source=str(path))
    if path.is_dir() and (path / "BFCL_v4_memory.json").is_file():
        return {"bfcl-memory": [path]}
    found: dict[str, list[Path]] = {}
    for file in _candidates(path):
        name = _sniff_file(file, unreadable)
        if name is not None:
            found.setdefault(name, []).append(file)
    return found


def load_path(
    path: Path,
    counter: TokenCounter,
    *,
    name: str | None = None,
    limit: int | None = None,
    max_cases: int | None = None,
    step_stride: int = 1,
) -> list[EvalDataset]:
    """Load the dataset file or folder at ``path`` as its owners publish it, whatever the file names.

    Each file's dataset is told from its shape (:func:`formats_in`): the upstream ``locomo10.json``
    whole, a tau-bench results file under any name, a folder of ToolBench answers or mini-swe-agent
    trajectories. A folder holding several datasets gives one :class:`EvalDataset` per dataset.

    Args:
        path: a file or folder.
        counter: the exact counter.
        name: read only this dataset's files (else every dataset found); ``locomo-memory`` reads the
            LoCoMo files with their observation memories.
        limit: source records to read per dataset (as for :func:`load_dataset`).
        max_cases: keep only the first ``max_cases`` cases of each dataset.
        step_stride: for trajectories, keep every ``step_stride``-th call.

    A folder's files that are not one JSON document are counted (quirk ``files_unreadable``) and listed
    (``listed["files_unreadable"]``, each with the parser's line and column) on every dataset loaded from it.

    Raises:
        ConfigurationError: unknown ``name``.
        InputError: the path does not exist or holds no dataset file (of ``name``); a file given by path that
            is not one JSON document (with the parser's message); malformed data.
    """
    if name is not None and name not in _SPECS:
        raise ConfigurationError(f"unknown dataset {name!r}; known: {dataset_names()}")
    unreadable: list[tuple[Path, str]] = []
    found = formats_in(path, unreadable)
    if path.is_file() and unreadable:
        raise InputError(
            f"{unreadable[0][1]}; a dataset file is one JSON document (BFCL memory: pass its folder)", source=str(path)
        )
    skipped = tuple(f"{p.relative_to(path)}: {why}" for p, why in unreadable)  # a folder's files (a file raised)
    if name == "locomo-memory" and "locomo" in found:
        found = {"locomo-memory": found["locomo"]}
    elif name is not None:
        found = {name: found[name]} if name in found else {}
    if not found:
        what = f"no {name} file" if name else f"no dataset file ({', '.join(dataset_names())})"
        also = f"; {len(skipped)} file(s) are not JSON, e.g. {skipped[0]}" if skipped else ""
        raise InputError(f"{what} found{also}", source=str(path))
    out = []
    for fmt, files in sorted(found.items()):
        if fmt in ("locomo", "locomo-memory"):
            dataset = load_locomo(path, counter, limit=limit, files=files, memories=fmt == "locomo-memory")
        elif fmt == "bfcl-memory":
            dataset = load_bfcl_memory(files[0], counter, limit=limit)
        else:
            dataset = _trajectories(fmt, files, path, counter, limit=limit, step_stride=step_stride)
        if skipped:  # the folder's files no dataset could read: counted and listed with every dataset of it
            dataset = replace(
                dataset,
                quirks={**dataset.quirks, UNREADABLE: len(skipped)},
                listed={**dataset.listed, UNREADABLE: skipped},
            )
        out.append(replace(dataset, cases=dataset.cases[:max_cases]) if max_cases is not None else dataset)
    return out


def load_trajectories(
    name: str, directory: Path, counter: TokenCounter, *, limit: int | None = None, step_stride: int = 1
) -> EvalDataset:
    """One agent-trajectory dataset as next-call cases.

    Args:
        name: ``tau-bench``, ``mini-swe-agent``, ``swe-agent`` or ``toolbench``.
        directory: the dataset folder (every file of that dataset in it, told by shape, whatever its
            name) or one file.
        counter: the exact counter.
        limit: read only the first ``limit`` trajectories (files sorted by path; tau-bench records in
            file order).
        step_stride: keep every ``step_stride``-th call of each trajectory (1 = every call).

    Raises:
        ConfigurationError: ``name`` is not a trajectory dataset or ``step_stride < 1``.
        InputError: a file, record or field is malformed (names file, index and field).
    """
    spec = _SPECS.get(name)
    if spec is None or spec.runs is None:
        raise ConfigurationError(f"{name!r} is not a trajectory dataset; known: {dataset_names()}")
    return _trajectories(name, _files_of(name, directory), directory, counter, limit=limit, step_stride=step_stride)


def _trajectories(
    name: str, files: Sequence[Path], root: Path, counter: TokenCounter, *, limit: int | None, step_stride: int
) -> EvalDataset:
    spec = _SPECS[name]
    assert spec.runs is not None
    if step_stride < 1:
        raise ConfigurationError(f"step_stride must be >= 1, got {step_stride}")
    quirks: Counter[str] = Counter()
    runs, listed = spec.runs(files, root, counter, quirks, limit)
    if not runs:
        raise InputError("no trajectories found", source=str(root))
    cases = [case for run in runs for case in trajectory_cases(run, name, step_stride=step_stride)]
    return EvalDataset(
        name=name,
        kind="trajectory",
        cases=tuple(cases),
        default_budgets=TRAJECTORY_BUDGETS,
        quirks=dict(quirks),
        source=str(root),
        listed={k: tuple(v) for k, v in listed.items()},
    )


def load_dataset(
    name: str,
    data_dir: Path,
    counter: TokenCounter,
    *,
    limit: int | None = None,
    max_cases: int | None = None,
    step_stride: int = 1,
) -> EvalDataset:
    """Load a dataset by name from ``data_dir/<its folder>`` (see :func:`dataset_names`).

    Args:
        name: the dataset name.
        data_dir: the folder holding every dataset (``shared/data``).
        counter: the exact counter (costs in tokens).
        limit: source records to read (conversations, questions or trajectories; see each loader).
        max_cases: keep only the first ``max_cases`` cases (a slice for smoke runs).
        step_stride: for trajectories, keep every ``step_stride``-th call.

    Raises:
        ConfigurationError: unknown dataset name.
        InputError: malformed data (names file, record index and field).
    """
    spec = _SPECS.get(name)
    if spec is None:
        raise ConfigurationError(f"unknown dataset {name!r}; known: {dataset_names()}")
    directory = data_dir / spec.folder
    if name in ("locomo", "locomo-memory"):
        dataset = load_locomo(directory, counter, limit=limit, memories=name == "locomo-memory")
    elif name == "bfcl-memory":
        dataset = load_bfcl_memory(directory, counter, limit=limit)
    else:
        dataset = load_trajectories(name, directory, counter, limit=limit, step_stride=step_stride)
    if max_cases is not None:
        dataset = replace(dataset, cases=dataset.cases[:max_cases])
    return dataset
