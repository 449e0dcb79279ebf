"""Question/answer pairs enter together: a user turn and the assistant answer that followed it.

Selection scores units one by one, so under a tight budget a user question can enter while the answer right
after it is left out: two user turns then run together and the model never sees that it already answered (or
an answer enters without the question it answers). After selection, for each adjacent pair of a user message
and the assistant message that answered it (no other message between them) where exactly one entered, the
other is admitted in its cheapest representation when the room left allows it. When it does not, the pair
stays split and the manifest says why: a warning ``answer_left_out`` / ``question_left_out`` naming both
records and the tokens needed and left. At most :data:`NAMED_SPLITS` split pairs are named (the newest); when
more stay split, one more warning ``pairs_split`` gives their number, so the manifest stays bounded.

The assembler runs :func:`keep_pairs` right after selection and again on the final inclusion set (after the
role-order repair and fill, which change what is included and the room left); the manifest carries the
warnings of that final pass, so they describe the pairs of the payload as sent. Fill itself admits half of a
pair only together with the other half (:func:`partners`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from ctxledger.assemble.select import SelectionItem, SelectionResult
from ctxledger.assemble.units import Unit, UnitKind
from ctxledger.budget import BudgetLedger

NAMED_SPLITS = 16
"""How many split pairs the manifest names one by one (the newest); the rest are counted."""


Pair = tuple[Unit, Unit]
"""A ``(question, answer)`` pair of message units."""


def question_answer_pairs(units: Sequence[Unit]) -> list[Pair]:
    """Adjacent ``(question, answer)`` message units: a user message, then the assistant message after it.

    The repair phase finds them once per assembly and hands them to :func:`keep_pairs` and :func:`partners`.
    """
    messages = [u for u in units if u.kind is UnitKind.MESSAGE]
    return [(q, a) for q, a in pairwise(messages) if a.role == "assistant" and q.role == "user"]


def partners(pairs: Sequence[Pair]) -> dict[str, str]:
    """Unit id → the other half of its adjacent question/answer pair (:func:`question_answer_pairs`), both ways."""
    out: dict[str, str] = {}
    for question, answer in pairs:
        out[question.id] = answer.id
        out[answer.id] = question.id
    return out


def keep_pairs(
    pairs: Sequence[Pair],
    items: Sequence[SelectionItem],
    result: SelectionResult,
    budget_tokens: int,
    ledger: BudgetLedger,
) -> list[dict[str, str]]:
    """Admit the missing half of every split question/answer pair that fits; warn about those that do not.

    Args:
        pairs: the question/answer pairs of the live units (:func:`question_answer_pairs`), in ``seq`` order.
        items: the selection items (their options).
        result: the selection, updated in place.
        budget_tokens: ``B_dynamic`` (tokens).
        ledger: the budget ledger, charged with every admission.

    Returns:
        Manifest warnings ``{code, input, value, detail}`` for the pairs left split (the newest
        :data:`NAMED_SPLITS` by name, then a ``pairs_split`` count when there are more).
    """
    by_id = {i.unit_id: i for i in items}
    warnings: list[dict[str, str]] = []
    used = sum(o.tokens for o in result.chosen.values())
    for question, answer in pairs:
        q_in, a_in = question.id in result.chosen, answer.id in result.chosen
        if q_in == a_in:
            continue
        missing = answer if q_in else question
        item = by_id.get(missing.id)
        if item is None or not item.options:
            continue
        option = min(item.options, key=lambda o: (o.tokens, -o.utility))
        if option.tokens <= budget_tokens - used:
            result.chosen[missing.id] = option
            used += option.tokens
            result.omitted.pop(missing.id, None)
            ledger.charge(missing.context_class.value, option.tokens)
            continue
        code = "answer_left_out" if q_in else "question_left_out"
        warnings.append(
            {
                "code": code,
                "input": "budget",
                "value": missing.id,
                "detail": f"question {question.id} and its answer {answer.id} were split: {missing.id} needs "
                f"{option.tokens} tokens, {max(budget_tokens - used, 0)} were left",
            }
        )
    if len(warnings) <= NAMED_SPLITS:
        return warnings
    count = {
        "code": "pairs_split",
        "input": "budget",
        "value": str(len(warnings)),
        "detail": f"{len(warnings)} question/answer pairs stayed split for budget; the newest {NAMED_SPLITS} are named",
    }
    return [*warnings[-NAMED_SPLITS:], count]
