"""The main job on a real trajectory: what ``ctxledger demo`` runs.

The bundled trajectory is tau-bench's airline task 2, trial 1 (gpt-4o; MIT, Copyright (c) 2024
Sierra; see ``ctxledger/_demo/NOTICE``): the longest of the 160 development trajectories and the one
with the most tool calls. The user asks the agent to downgrade all of their business reservations to
economy; its 62 raw entries import as 35 messages (1 system, 4 user, 30 assistant), 27 tool calls (user
and reservation lookups, twelve flight searches, a calculation, five reservation updates) and their 27
results, about 10.1k tokens when replayed whole as one gpt-4o request.

**The tools of the call.** The agent ran with tau-bench's 14 airline tools; their schemas (OpenAI function
tools, as tau-bench's ``get_info()`` gives them; MIT, see ``NOTICE``) are bundled too, in
``tau_bench_airline_tools.json``, and written once as the conversation's :class:`~ctxledger.records.SkillState`
(:func:`ensure_tools`), so the assembled payload has its ``tools`` and is a call the model can answer with a
tool call. They are part of the fixed blocks ``F``.

**Which model call is assembled.** The trajectory ends on a tool result: the run hit tau-bench's
30-step limit (``max_num_steps``; 62 = 2 + 30 × 2 raw entries) while the agent was still working on the
user's request, so the call the agent would make next (read that result and continue) never happened.
That is the call the demo assembles, on the whole trajectory as recorded (no cut). The long airline
policy is the system instruction (a fixed block); the latest user turn and what the policy protects
of the turn in progress are required.

**Why 8,000 tokens.** With ``W = 8000``, ``O = 1000`` and ``M = 200`` the input budget is 6,800
tokens, less than the full replay, so the policy has to choose: older exchanges are omitted with
reason ``budget`` while every required item is kept. (Under the default policy only the newest tool
exchange of the running turn is pinned; a policy that pinned the whole turn would need a larger window
here, and ``RequiredBlocksDoNotFit`` would list why.)

**Where the demo store lives.** Without ``--db`` the CLI keeps the demo's SQLite store in one fixed
folder, :func:`demo_dir` (``$CTXLEDGER_CACHE_DIR/demo``, default ``~/.cache/ctxledger/demo``), reused by
every run, so the ``explain`` commands the demo prints keep working and no folder piles up per run; the
demo prints that folder and how to remove it.

LoCoMo is licensed for non-commercial use only and is never bundled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

from ctxledger.assemble.assembler import Assembly
from ctxledger.errors import RecordNotFound
from ctxledger.ledger import Ledger
from ctxledger.recorder import Recorder
from ctxledger.records import SkillState
from ctxledger.serialize import default_model

DEMO_FILE = "tau_bench_airline_task2.json"
"""The bundled trajectory, in ``ctxledger/_demo/`` next to its ``NOTICE``."""

DEMO_TOOLS_FILE = "tau_bench_airline_tools.json"
"""The trajectory's tool schemas (tau-bench's airline tools, OpenAI function-tool form), in ``ctxledger/_demo/``."""

DEMO_TOOLS_NAME = "airline-tools"
"""Short name of the SkillState that enables the bundled tools (record id ``<conversation>/airline-tools``)."""

DEMO_PREFIX = "tau-bench-airline"
"""Conversation-id prefix given at import (tau-bench ids are ``<prefix>-task<id>-trial<n>``)."""

DEMO_CONVERSATION = f"{DEMO_PREFIX}-task2-trial1"
"""Id of the demo conversation once imported."""

DEMO_TASK = (2, 1)
"""``(task_id, trial)`` of the bundled tau-bench record."""

DEMO_ATTRIBUTION = "tau-bench airline task 2, trial 1 (MIT, Copyright (c) 2024 Sierra)"
"""One line naming the data and its licence, printed by the demo."""


def demo_dir() -> Path:
    """The folder of the demo store when no ``--db`` is given: ``$CTXLEDGER_CACHE_DIR/demo``.

    ``CTXLEDGER_CACHE_DIR`` defaults to ``~/.cache/ctxledger`` (where the tokenizer check is remembered
    too). The folder is not created here.
    """
    return Path(os.environ.get("CTXLEDGER_CACHE_DIR", Path.home() / ".cache" / "ctxledger")) / "demo"


@contextmanager
def demo_source() -> Iterator[Path]:
    """Yield a filesystem path of the bundled trajectory (extracted first if the package is zipped)."""
    with as_file(files("ctxledger._demo").joinpath(DEMO_FILE)) as path:
        yield Path(path)


@dataclass(frozen=True, slots=True)
class RequiredItems:
    """Required units of an assembly and which of them the payload kept.

    Attributes:
        required: unit ids the policy required (``require`` decisions: instructions, the latest user
            turn, the turn in progress, unresolved tool calls and errors), in decision order.
        kept: those of them whose records are in the manifest's ``included`` list.
    """

    required: tuple[str, ...]
    kept: tuple[str, ...]

    @property
    def lost(self) -> tuple[str, ...]:
        """Required units missing from the payload (always empty for a successful assembly)."""
        kept = set(self.kept)
        return tuple(u for u in self.required if u not in kept)


def required_items(manifest: Mapping[str, Any]) -> RequiredItems:
    """Count the required units of a manifest and those kept (seed 000 "protección").

    Args:
        manifest: a manifest as returned by ``Ledger.get_assembly`` (see :mod:`ctxledger.manifest`).
    """
    required = tuple(dict.fromkeys(d["ref"] for d in manifest["decisions"] if d["outcome"] == "require"))
    included_units = {e["unit"] for e in manifest["included"]}
    return RequiredItems(required, tuple(u for u in required if u in included_units))


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What :func:`run_demo` did.

    Attributes:
        conversation_id: the demo conversation.
        imported: whether this run imported it (``False``: it was already in the store).
        history: records of the conversation by kind (``{"message": 35, "tool_call": 27, …}``).
        assembly: the persisted assembly of the next model call.
        payload_path: where the payload JSON was written, if anywhere.
        required: required units and those kept.
    """

    conversation_id: str
    imported: bool
    history: Mapping[str, int]
    assembly: Assembly
    payload_path: Path | None
    required: RequiredItems

    @property
    def replay_tokens(self) -> int:
        """Tokens of the whole history replayed as one request (same counter and serializer)."""
        return int(self.assembly.manifest["tokens"]["replay"])

    @property
    def assembled_tokens(self) -> int:
        """Tokens of the assembled payload, counted on its serialized form."""
        return self.assembly.input_tokens

    @property
    def saved_pct(self) -> float:
        """Tokens saved against full replay, in percent of the replay (0 when nothing to replay)."""
        replay = self.replay_tokens
        return 100.0 * (replay - self.assembled_tokens) / replay if replay else 0.0


def demo_tools() -> list[dict[str, Any]]:
    """The bundled tool schemas of the demo trajectory: tau-bench's 14 airline tools (OpenAI ``tools`` form)."""
    text = files("ctxledger._demo").joinpath(DEMO_TOOLS_FILE).read_text(encoding="utf-8")
    tools: list[dict[str, Any]] = json.loads(text)
    return tools


def ensure_tools(ledger: Ledger, *, tenant_id: str = "default") -> bool:
    """Enable the bundled tools on the demo conversation (a SkillState) unless it has them; return whether it wrote.

    Raises:
        RecordNotFound: the demo conversation is not in the store (call :func:`ensure_imported` first).
    """
    if any(isinstance(r, SkillState) for r in ledger.store.records(tenant_id, DEMO_CONVERSATION)):
        return False
    Recorder(ledger, DEMO_CONVERSATION, tenant_id).skills(["airline"], schemas=demo_tools(), name=DEMO_TOOLS_NAME)
    return True


def ensure_imported(ledger: Ledger, *, tenant_id: str = "default") -> bool:
    """Import the bundled trajectory unless the store already holds it; return whether it imported.

    Raises:
        InputError: the bundled file is damaged (names the file, record and field).
    """
    try:
        ledger.store.get(tenant_id, DEMO_CONVERSATION)
        return False
    except RecordNotFound:
        pass
    with demo_source() as path:
        ledger.import_file(path, "tau-bench", tenant_id=tenant_id, conversation_id=DEMO_PREFIX)
    return True


def history_counts(ledger: Ledger, conversation_id: str, *, tenant_id: str = "default") -> dict[str, int]:
    """Records of a conversation by kind value (all branches), e.g. ``{"message": 39, …}``."""
    counts: dict[str, int] = {}
    for rec in ledger.store.records(tenant_id, conversation_id):
        counts[rec.kind.value] = counts.get(rec.kind.value, 0) + 1
    return counts


def run_demo(
    ledger: Ledger,
    *,
    tenant_id: str = "default",
    window_tokens: int = 8_000,
    output_tokens: int = 1_000,
    margin_tokens: int = 200,
    api: str = "openai-chat",
    model: str | None = None,
    payload_path: Path | None = None,
) -> DemoResult:
    """Import the bundled trajectory (once) and assemble its next model call under the budget.

    Args:
        ledger: where to import and assemble (the CLI passes a temporary SQLite store).
        tenant_id: the tenant.
        window_tokens: ``W``, the context window, in tokens.
        output_tokens: ``O``, tokens reserved for the reply.
        margin_tokens: ``M``, the safety margin in tokens.
        api: ``openai-chat`` or ``anthropic-messages``.
        model: the model (default per ``api``: :data:`ctxledger.serialize.DEFAULT_MODELS`).
        payload_path: write the payload JSON there (UTF-8, indented) if given.

    Returns:
        The :class:`DemoResult`; its assembly is persisted, so ``explain`` works on its id.

    Raises:
        RequiredBlocksDoNotFit: the budget is too small for the required items (itemised).
        ConfigurationError: an unknown ``api``/``model`` or a budget with no room for input.
    """
    imported = ensure_imported(ledger, tenant_id=tenant_id)
    ensure_tools(ledger, tenant_id=tenant_id)
    asm = ledger.assemble(
        DEMO_CONVERSATION,
        tenant_id=tenant_id,
        window_tokens=window_tokens,
        output_tokens=output_tokens,
        margin_tokens=margin_tokens,
        api=api,
        model=model or default_model(api),
    )
    if payload_path is not None:
        write_payload(asm.payload, payload_path)
    return DemoResult(
        conversation_id=DEMO_CONVERSATION,
        imported=imported,
        history=history_counts(ledger, DEMO_CONVERSATION, tenant_id=tenant_id),
        assembly=asm,
        payload_path=payload_path,
        required=required_items(asm.manifest),
    )


def write_payload(payload: Mapping[str, Any], path: Path) -> int:
    """Write a provider payload as indented UTF-8 JSON (parent folders created); return its bytes."""
    data = (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)
