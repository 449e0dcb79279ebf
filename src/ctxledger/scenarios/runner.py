"""Running scenarios: build, assemble, check, and compare with a full history replay (seed 004 §9.1–9.2).

The replay baseline is what the earlier approach sends: every instruction, message and tool exchange of
the active branch lineage, verbatim (other participants' scratch and raw tool outputs included), costed
with the same serializer framing and tokenizer as the assembled payload. The reduction is
``1 − assembled / replay``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ctxledger.errors import CtxledgerError
from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.base import Scenario
from ctxledger.store.memory import MemoryStore
from ctxledger.units import UnitKind

DEFAULT_REQUEST: Mapping[str, Any] = {
    "model": "gpt-4o",
    "api": "openai-chat",
    "window_tokens": 16_000,
    "output_tokens": 1_000,
    "margin_tokens": 200,
}
"""Request fields every scenario starts from (a scenario's ``build`` overrides them)."""

_REPLAYED = (UnitKind.INSTRUCTION, UnitKind.MESSAGE, UnitKind.TOOL_EXCHANGE)


@dataclass(slots=True)
class ScenarioResult:
    """The outcome of one scenario.

    Attributes:
        name, title, source: from the scenario.
        passed: every expectation held.
        failures: the expectations that did not hold, as sentences.
        replay_tokens: tokens of the full history replay (serialized, same tokenizer).
        assembled_tokens: tokens of the assembled payload.
        reduction: ``1 − assembled / replay``.
        required_total / required_kept: the scenario's required items, and how many were included.
        omitted_by_reason: the manifest's omission counts.
        payload_hash: the payload's hash (same scenario, same policy → same hash).
        manifest: the full manifest.
        seed_reduction: seed 004 §9.1's reduction for this scenario, where it reports one.
        rehydrated: raw artifacts (or located ranges of them) read back into the payload.
    """

    name: str
    title: str
    source: str
    passed: bool
    failures: list[str]
    replay_tokens: int
    assembled_tokens: int
    reduction: float
    required_total: int
    required_kept: int
    omitted_by_reason: dict[str, int] = field(default_factory=dict)
    payload_hash: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    seed_reduction: float | None = None
    rehydrated: int = 0


def run_scenario(scenario: Scenario) -> tuple[ScenarioResult, Any, GraphBuilder]:
    """Build the scenario on a fresh in-memory ledger, assemble its call and check it.

    Returns:
        ``(result, assembly, builder)``; the assembly is ``None`` when assembly raised (a failure).
    """
    ledger = Ledger(MemoryStore(), policy=scenario.policy() if scenario.policy else None)
    builder = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, "now": None, **scenario.build(builder)}
    if request["now"] is None:
        request["now"] = builder.now
    request.setdefault("branch_id", builder.branch_id)
    try:
        asm = ledger.assemble(builder.conversation_id, **request)
    except CtxledgerError as exc:
        failure = f"assembly raised {type(exc).__name__}: {exc}"
        return _result(scenario, [failure], 0, 0, 0, {}), None, builder
    replay = replay_tokens(ledger, builder, request)
    failures, kept = check(scenario, asm, builder)
    if scenario.check is not None:
        failures += scenario.check(asm, builder)
    reduction = 1 - asm.input_tokens / replay if replay else 0.0
    floor = scenario.expect.min_reduction
    if floor is not None and reduction < floor:
        failures.append(f"reduction {reduction:.1%} is below {floor:.0%} ({asm.input_tokens} of {replay} tokens)")
    if scenario.seed_reduction is not None and reduction <= scenario.seed_reduction:
        failures.append(f"reduction {reduction:.1%} does not beat seed 004's {scenario.seed_reduction:.1%}")
    return _result(scenario, failures, replay, asm.input_tokens, kept, asm.manifest, asm.payload_hash), asm, builder


def _result(
    s: Scenario,
    failures: list[str],
    replay: int,
    assembled: int,
    kept: int,
    manifest: Mapping[str, Any],
    payload_hash: str = "",
) -> ScenarioResult:
    return ScenarioResult(
        name=s.name,
        title=s.title,
        source=s.source,
        passed=not failures,
        failures=failures,
        replay_tokens=replay,
        assembled_tokens=assembled,
        reduction=round(1 - assembled / replay, 4) if replay else 0.0,
        required_total=len(s.expect.include),
        required_kept=kept,
        omitted_by_reason=dict(manifest.get("omitted_by_reason", {})),
        payload_hash=payload_hash,
        manifest=dict(manifest),
        seed_reduction=s.seed_reduction,
        rehydrated=sum(1 for e in manifest.get("rehydrations", ()) if e.get("decision") == "rehydrated"),
    )


def replay_tokens(ledger: Ledger, builder: GraphBuilder, request: Mapping[str, Any]) -> int:
    """Tokens of replaying the active lineage's whole transcript verbatim, with its tool schemas."""
    snap = ledger.snapshots.load(builder.tenant_id, builder.conversation_id, request["branch_id"])
    coster = ledger.coster(request["api"], request["model"])
    turns = [t for u in snap.units if u.kind in _REPLAYED for t in u.turns]
    tools = request.get("tools") or snap.tool_schemas
    return coster.base_tokens() + coster.tools_tokens(tools) + sum(coster.turn_tokens(t) for t in turns)


def check(scenario: Scenario, asm: Any, builder: GraphBuilder) -> tuple[list[str], int]:
    """Check a scenario's :class:`~ctxledger.scenarios.base.Expect` on an assembly.

    Returns:
        ``(failures, required_kept)``.
    """
    exp, manifest = scenario.expect, asm.manifest
    ext = {r.id: r.external_id for r in builder.records.values()}
    included = {ext.get(e["ref"], e["ref"]) for e in manifest["included"]}
    omitted = {ext.get(e["ref"], e["ref"]): e["reason"] for e in manifest["omitted"]}
    body = canonical_json(asm.payload)
    failures = [f"{n} not included ({omitted.get(n, 'not a candidate')})" for n in exp.include if n not in included]
    for name, reason in exp.omit.items():
        if omitted.get(name) != reason:
            got = "included" if name in included else omitted.get(name, "not a candidate")
            failures.append(f"{name}: expected omitted as {reason}, got {got}")
    failures += [f"payload lacks {t!r}" for t in exp.text_in if t not in body]
    failures += [f"payload contains {t!r}" for t in exp.text_out if t in body]
    marks = {(ext.get(m["ref"], m["ref"]), m["reason"]) for m in manifest["marks"]}
    failures += [f"{n} not marked {r}" for n, r in exp.marks.items() if (n, r) not in marks]
    failures += _rehydration_failures(exp, manifest, ext)
    failures += _tool_failures(exp, manifest)
    kept = sum(1 for n in exp.include if n in included)
    return failures, kept


def _rehydration_failures(exp: Any, manifest: Mapping[str, Any], ext: Mapping[str, Any]) -> list[str]:
    done = {ext.get(r["artifact"], r["artifact"]): r for r in manifest["rehydrations"]}
    out = [f"{a} not rehydrated" for a in exp.rehydrated if done.get(a, {}).get("decision") != "rehydrated"]
    for art, reason in exp.referenced.items():
        entry = done.get(art, {})
        if entry.get("decision") != "reference" or entry.get("reason") != reason:
            out.append(f"{art}: expected a reference ({reason}), got {entry.get('decision')} ({entry.get('reason')})")
    return out


def _tool_failures(exp: Any, manifest: Mapping[str, Any]) -> list[str]:
    out = []
    exposed = manifest["tools"].get("exposed", [])
    if exp.tools is not None and sorted(exposed) != sorted(exp.tools):
        out.append(f"tools exposed {sorted(exposed)}, expected {sorted(exp.tools)}")
    withheld = {w["name"] for w in manifest["tools"].get("withheld", [])}
    out += [f"tool {t} not withheld" for t in exp.withheld_tools if t not in withheld]
    return out


def run_scenarios(names: Iterable[str] | None = None, *, out: TextIO | None = None) -> list[ScenarioResult]:
    """Run the scenario suite (or the named scenarios) and, with ``out``, print the report.

    This is what ``ctxledger eval scenarios`` calls.

    Raises:
        KeyError: an unknown scenario name.
    """
    from ctxledger.scenarios.catalog import SCENARIOS

    by_name = {s.name: s for s in SCENARIOS}
    chosen = [by_name[n] for n in names] if names is not None else list(SCENARIOS)
    results = [run_scenario(s)[0] for s in chosen]
    if out is not None:
        out.write(format_report(results))
    return results


def format_report(results: Sequence[ScenarioResult]) -> str:
    """A plain-text table: replay vs assembled tokens, reduction (and seed 004's figure), required kept, pass/fail.

    The footer gives the whole suite's reduction (sum of assembled over sum of replayed tokens), the same for
    the scenarios whose request demands no raw bytes back (exact-evidence rehydration sends the artifact's
    bytes by design), and how many of the scenarios seed 004 §9.1 measured beat its figure.
    """
    head = f"{'scenario':<34} {'replay':>7} {'assembled':>9} {'reduction':>9} {'seed':>6} {'required':>9}  result"
    lines = [head, "-" * len(head)]
    for r in results:
        seed = f"{r.seed_reduction:.1%}" if r.seed_reduction is not None else "-"
        lines.append(
            f"{r.name:<34} {r.replay_tokens:>7} {r.assembled_tokens:>9} {r.reduction:>9.1%} {seed:>6} "
            f"{f'{r.required_kept}/{r.required_total}':>9}  {'ok' if r.passed else 'FAIL'}"
        )
        lines += [f"    - {f}" for f in r.failures]
    kept = sum(r.required_kept for r in results)
    total = sum(r.required_total for r in results)
    lines.append("-" * len(head))
    lines.append(f"{'all scenarios':<34} {_totals(results)} {'':>6} {f'{kept}/{total}':>9}")
    summaries = [r for r in results if not r.rehydrated]
    if len(summaries) != len(results):
        lines.append(f"{'  without raw bytes read back':<34} {_totals(summaries)}")
    seeded = [r for r in results if r.seed_reduction is not None]
    if seeded:
        beat = sum(r.reduction > (r.seed_reduction or 0.0) for r in seeded)
        best = max(r.seed_reduction or 0.0 for r in seeded)
        lines.append(f"seed 004 §9.1 measured {len(seeded)} of these (82.2-{best:.1%}): {beat} beaten here")
    lines.append(f"required items lost: {total - kept}; scenarios failed: {sum(not r.passed for r in results)}")
    return "\n".join(lines) + "\n"


def _totals(results: Sequence[ScenarioResult]) -> str:
    replay = sum(r.replay_tokens for r in results)
    assembled = sum(r.assembled_tokens for r in results)
    overall = 1 - assembled / replay if replay else 0.0
    return f"{replay:>7} {assembled:>9} {overall:>9.1%}"
