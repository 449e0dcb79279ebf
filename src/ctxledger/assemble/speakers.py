"""Speakers in multi-participant conversations: who said each assistant turn.

Provider formats have one ``assistant`` role: the model takes every assistant turn for its own words.
When several participants speak (a debate, a moderator and agents, a parent and its subagents), that is
wrong twice over: the speakers' turns look alike, and Anthropic merges adjacent assistant turns into one
message, so Bob would read Alice's words as his own. After the policy has run, :func:`attribute_speakers`
fixes that on the units that will be costed and selected:

* **Names.** When two or more participants own live assistant turns, or the call is for a participant
  other than a turn's owner, each assistant turn (messages and tool-call turns) carries its speaker's
  name: ``Message.name`` when set, else the owner's :class:`~ctxledger.records.Participant` ``name``, else
  the owner's id. Transform ``speaker_named``.
* **Other participants' messages.** When the call is for participant P, an assistant *message* owned by
  another participant becomes a **user** turn with that name, relayed (:attr:`Turn.relayed`): OpenAI
  Chat sends ``name`` and a ``"<name>: "`` label on the text, Anthropic the label (it has no ``name``
  field), and neither merges it into P's own assistant message. Transform ``speaker_relayed``. Another
  participant's tool-call turn stays an assistant turn (its results must follow its calls) but is
  named, so Anthropic shows a ``"<name>:"`` label before its ``tool_use`` blocks.

A participant whose name holds a secret (listed in ``withheld`` by the secrets stage) is named
``speaker_withheld`` instead; a message whose own ``name`` held one was already renamed by the policy.

A conversation with a single assistant speaker, assembled for that speaker or for no participant, is left
exactly as it was (same turns, same payload hash). Records are never changed; the unit's turns are.

Speakers also steer relevance: a question that names one speaker ("What did Melanie paint?") asks about that
speaker's turns, so those count more (:func:`with_speaker`) and the name is left out of the query's semantic part
(:func:`without_speaker`). A unit's speaker (:func:`unit_speaker`) is read once per unit into the snapshot
(:mod:`ctxledger.assemble.facets`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from ctxledger.policy.secrets import SPEAKER_WITHHELD
from ctxledger.records import Message, Participant, Record, Role
from ctxledger.units import Unit, UnitKind

_SPOKEN = (UnitKind.MESSAGE, UnitKind.TOOL_EXCHANGE)


def attribute_speakers(
    units: Sequence[Unit],
    records: Sequence[Record],
    participant_id: str | None,
    withheld: Collection[str] = (),
) -> list[Unit]:
    """Name the assistant turns of other speakers and relay other participants' messages (module docstring).

    Args:
        units: the live units of the call (after every policy stage), in ``seq`` order.
        records: the call's candidate records (the :class:`Participant` records give the names).
        participant_id: the participant the call is for, or ``None``.
        withheld: participant ids whose name holds a secret (named ``speaker_withheld``).

    Returns:
        The units, with new :class:`Unit` values where a turn changed (the others are the same objects).
    """
    owners = {
        u.records[0].owner_participant_id
        for u in units
        if u.kind in _SPOKEN and _assistant_message(u) is not None and u.records[0].owner_participant_id
    }
    if not owners:
        return list(units)
    several = len(owners) >= 2
    if not several and (participant_id is None or owners == {participant_id}):
        return list(units)
    people = {r.id: r for r in records if isinstance(r, Participant)}
    return [_attributed(u, people, participant_id, several, withheld) for u in units]


def _assistant_message(unit: Unit) -> Message | None:
    first = unit.records[0] if unit.records else None
    return first if isinstance(first, Message) and first.role is Role.ASSISTANT else None


def _attributed(
    unit: Unit, people: dict[str, Participant], participant_id: str | None, several: bool, withheld: Collection[str]
) -> Unit:
    msg = _assistant_message(unit) if unit.kind in _SPOKEN else None
    owner = msg.owner_participant_id if msg is not None else None
    if msg is None or owner is None:
        return unit
    other = participant_id is not None and owner != participant_id
    if not (several or other):
        return unit
    person = people.get(owner)
    first = unit.turns[0]
    if msg.name:
        name = first.name or msg.name  # the turn's name, as the policy left it (withheld when it held a secret)
    elif owner in withheld:
        name = SPEAKER_WITHHELD
    else:
        name = person.name if person is not None and person.name else owner
    relay = other and unit.kind is UnitKind.MESSAGE and first.role == "assistant" and first.content is not None
    if relay:
        turn = dataclasses.replace(first, role="user", name=name, relayed=True)
        step = "speaker_relayed"
    elif first.name is None and first.role == "assistant":
        turn = dataclasses.replace(first, name=name)
        step = "speaker_named"
    else:
        return unit
    transforms = dict(unit.transforms)
    transforms[msg.id] = "+".join(filter(None, [transforms.get(msg.id), step]))
    return dataclasses.replace(unit, turns=(turn, *unit.turns[1:]), transforms=transforms)


def unit_speaker(unit: Unit) -> tuple[str, str] | None:
    """Who said ``unit``: ``("name", Message.name)``, else ``("participant", owner id)``, else ``None``.

    Only a unit that opens with a message (a message, or the turn of a tool exchange) has a speaker. An owner
    is kept by id so that its name can come from a :class:`Participant` record written later
    (:func:`speaker_names`).
    """
    first = unit.records[0] if unit.records else None
    if not isinstance(first, Message):
        return None
    if first.name:
        return ("name", first.name)
    if first.owner_participant_id:
        return ("participant", first.owner_participant_id)
    return None


def speaker_names(keys: Sequence[tuple[str, str]], people: Mapping[str, str]) -> list[str]:
    """The name of each :func:`unit_speaker` key: the message's name, the participant's name, else its id."""
    return [value if kind == "name" else people.get(value) or value for kind, value in keys]


def named_speaker(query: str, names: Sequence[str]) -> str | None:
    """The one speaker name ``query`` names (a whole word, case as written), or ``None`` for none or several."""
    found = {n for n in names if n and re.search(rf"(?<!\w){re.escape(n)}(?!\w)", query)}
    return found.pop() if len(found) == 1 else None


def without_speaker(query: str, named: str | None) -> str:
    """``query`` without the speaker name it names (and its ``'s``), for the parts of relevance that match topics.

    Every turn of a speaker is about that speaker, so the name in "What does Melanie do to destress?" pulls the
    query's vector towards all of Melanie's turns alike; :func:`with_speaker` carries the name instead.
    """
    if not named:
        return query
    return re.sub(rf"(?<!\w){re.escape(named)}(?:'s)?(?!\w)", " ", query)


def with_speaker(
    scores: np.ndarray, named: str | None, speakers: np.ndarray, names: Sequence[str], boost: float
) -> np.ndarray:
    """``scores · (1 + boost)`` for the units said by ``named``, the one speaker the query names.

    ``named`` comes from :func:`named_speaker`.

    "What did Melanie paint?" asks about Melanie's turns; the other speaker's turns about painting rank below
    hers. ``speakers`` holds one code per unit (aligned with ``scores``; ``-1`` = no speaker) into ``names``.
    Unchanged when ``boost`` is 0 or ``named`` is ``None`` (the query names no speaker, or several: a question
    about two people is about both).
    """
    if boost <= 0 or named is None or len(speakers) != len(scores):
        return scores
    codes = [i for i, n in enumerate(names) if n == named]
    return scores * (1.0 + boost * np.isin(speakers, codes))
