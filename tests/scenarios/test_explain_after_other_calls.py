"""An assembly explains by replay alike whatever was assembled after it, and in a process that made nothing.

A call's payload depends on the previous assembly of its branch: a prefix-stable selection grows it, and an
Anthropic payload puts a cache breakpoint on the part it shares with it. The replay behind ``explain`` must
use the previous assembly the stored manifest names, not whichever one a later call or a new process finds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.policy.default import default_policy
from ctxledger.records import Branch, Conversation, Message, Role
from ctxledger.store.memory import MemoryStore

ENV = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main"}
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _policy(stable: bool) -> Any:
    base = default_policy()
    return dataclasses.replace(base, selection=dataclasses.replace(base.selection, stable_prefix=stable))


def _message(k: int, leak_at: int) -> Message:
    role = Role.USER if k % 2 == 0 else Role.ASSISTANT
    text = f"Step {k}: release {k} changed " + " ".join(f"worker{k}-{j}" for j in range(30))
    return Message(id=f"m{k}", role=role, content=text + (f" and the token is {SECRET}" if k == leak_at else ""), **ENV)


@settings(max_examples=12, deadline=None)
@given(
    api=st.sampled_from(["openai-chat", "anthropic-messages"]),
    stable=st.booleans(),
    window=st.sampled_from([2_500, 20_000]),
    leak_at=st.integers(0, 5),
    order=st.permutations([0, 1, 2]),
)
@example(api="anthropic-messages", stable=False, window=20_000, leak_at=3, order=[0, 1, 2])  # breakpoints alone
@example(api="openai-chat", stable=True, window=2_500, leak_at=3, order=[0, 1, 2])  # the grown selection
def test_every_assembly_explains_its_omissions_from_any_process(
    api: str, stable: bool, window: int, leak_at: int, order: list[int]
) -> None:
    store = MemoryStore()
    policy = _policy(stable)
    live = Ledger(store, policy=policy)
    live.append([Conversation(id="c", **ENV), Branch(id="c/main", name="main", **ENV)])
    live.append([Message(id="sys", role=Role.SYSTEM, content="You answer questions about releases. " * 120, **ENV)])
    ask = {"window_tokens": window, "output_tokens": 0, "margin_tokens": 0, "api": api, "model": "claude-sonnet-4"}
    ask["counter"] = "estimate/quicktok/o200k_base" if api == "anthropic-messages" else None
    made, seqs = [], []
    for k in range(20):  # a live agent: a call after each user turn, at the head
        seqs += [r.seq for r in live.append([_message(k, leak_at)])]
        if k >= 14 and k % 2 == 0:
            made.append(live.assemble("c", **ask))
    for k in order:  # then calls at earlier snapshots, made after the later ones
        live.assemble("c", as_of_seq=seqs[8 + 2 * k], **ask)
    assert any(a.manifest["prefix"]["previous"] for a in made)
    for asm in made:
        left_out = [e["ref"] for e in asm.manifest["omitted"]]
        assert left_out, "the secret at least is left out"
        for ledger in (live, Ledger(store, policy=policy)):
            replayed, why = ledger.replay(ledger.get_assembly(asm.id), policy=policy)
            assert why is None, why
            assert replayed is not None and replayed["payload_hash"] == asm.payload_hash
            assert replayed["prefix"] == asm.manifest["prefix"]
            answer = ledger.explain(asm.id, left_out[0], policy=policy)
            assert answer["status"] == "omitted", answer
