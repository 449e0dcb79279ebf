"""Why the replay of a stored assembly is not the same call, and what the caller can do about it.

A manifest kept as a summary (the default trace) answers for a record it does not list by replaying the
assembly (:meth:`ctxledger.ledger.Ledger.replay`). When the replay differs from the stored call, the answer is
"unknown" with a :class:`ReplayMismatch`: a sentence naming what differs, which also carries its ``kind`` so that
:func:`replay_remedy` picks its advice from the kind, not from the sentence's wording.
"""

from __future__ import annotations

from typing import Literal

MismatchKind = Literal["assembler_version", "replay_failed", "policy_hash", "relevance", "payload_hash"]
"""What differs: the code (``assembler_version``), the replay itself raised (``replay_failed``), the policy
(``policy_hash``), the semantic extra or its model (``relevance``), or the payload under the same policy and
code (``payload_hash``: the store, the counter or the clock)."""

REMEDIES: dict[str, str] = {
    "policy_hash": (
        "pass the policy the assembly was made under (policy= in the library, --policy FILE on the command line, "
        "as given to assemble)"
    ),
    "relevance": "explain with the relevance the assembly was made with (install or remove the semantic extra)",
    "assembler_version": (
        "explain with the ctxledger version that made the assembly, or assemble with trace='full' to keep why"
    ),
}
GENERIC_REMEDY = (
    "pass the policy and counter the assembly was made with, or assemble with trace='full' (--trace full) so the "
    "record keeps every omitted item"
)


class ReplayMismatch(str):
    """A sentence saying what differs between a stored assembly and its replay, with its ``kind``.

    It is a ``str`` (the sentence), so it prints and formats as one; ``kind`` is a :data:`MismatchKind`.
    """

    __slots__ = ("kind",)
    kind: MismatchKind

    def __new__(cls, kind: MismatchKind, sentence: str) -> ReplayMismatch:
        """Make the sentence ``sentence`` of kind ``kind``."""
        made = super().__new__(cls, sentence)
        made.kind = kind
        return made


def replay_remedy(why: ReplayMismatch | str) -> str:
    """What to do so that a replay that differed for ``why`` is the same call.

    A plain string (a mismatch read back from somewhere that kept only its sentence) gets the generic advice.
    """
    return REMEDIES.get(getattr(why, "kind", ""), GENERIC_REMEDY)
