"""The evaluation harness: every selector on the same cases and budgets in one run.

``run_eval`` gives each :class:`Selector` (ctxledger's policy, the baselines, the peers) the same
:class:`SelectionTask` for every case and budget, checks each answer against the case's gold
annotations with :mod:`ctxledger.eval.metrics`, and aggregates per dataset, selector and budget, so
every comparison in the report is a ratio within one run. The harness, not the selector, is the judge:
it measures wall-clock latency itself, recounts the payload from the items' exact costs (an item a
selector sent as an excerpt is recounted on the excerpt's text, ``details["sent_texts"]``), checks the
provider's message rules, and re-runs a sample of selections to test determinism.

ctxledger's default policy is plugged in with ``register_selector(OURS, factory)``; baselines and peers
are built in (peers need ``pip install 'ctxledger[bench]'``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxledger.errors import ConfigurationError
from ctxledger.eval import metrics
from ctxledger.eval.base import (
    REQUEST_BASE_TOKENS,
    EvalCase,
    EvalDataset,
    EvalItem,
    Selection,
    SelectionTask,
    Selector,
)
from ctxledger.eval.datasets import ADVERSARIAL, chat_tokens, load_dataset
from ctxledger.eval.results import COMPARED_BASELINES, OURS, CaseResult, DatasetInfo, EvalResults
from ctxledger.hashing import content_hash
from ctxledger.tokens import TokenCounter, get_counter

__all__ = [
    "BASELINE_NAMES",
    "OURS",
    "PEER_NAMES",
    "CaseResult",
    "DatasetInfo",
    "EvalItem",
    "EvalResults",
    "ProgressFn",
    "Selection",
    "SelectionTask",
    "Selector",
    "aggregate",
    "evaluate_case",
    "make_selectors",
    "register_selector",
    "rich_progress",
    "run_eval",
    "run_named",
    "selector_names",
]

BASELINE_NAMES = ("full-replay", "newest-fit", "head-tail", "bm25")
"""Built-in baselines (:mod:`ctxledger.eval.baselines`), in report order."""
PEER_NAMES = ("langchain-trim-exact", "langchain-trim-approx", "llamaindex-memory")
"""Built-in peers (:mod:`ctxledger.eval.peers`), in report order."""
HEADLINE_EXCLUDED = frozenset({ADVERSARIAL})
"""Categories left out of the headline recall (reported on their own): LoCoMo's adversarial questions."""

SelectorFactory = Callable[[TokenCounter], Selector]
ProgressFn = Callable[[str, int, int], None]
"""Called as ``progress(label, selections_done, selections_total)``: once with 0 done before the first
selection (and while each dataset loads), then after every selection. Done and total count the selections
of the whole run; the label is the dataset at work, followed by ``[i/n]`` (its place among the run's
``n`` datasets) when the run holds more than one."""

_FACTORIES: dict[str, SelectorFactory] = {}


def register_selector(name: str, factory: SelectorFactory, *, replace: bool = False) -> None:
    """Make ``name`` available to :func:`make_selectors` (``register_selector(OURS, …)`` for the policy).

    Raises:
        ConfigurationError: ``name`` is already taken (built in, or registered without ``replace``).
    """
    if name in BASELINE_NAMES or name in PEER_NAMES or (name in _FACTORIES and not replace):
        raise ConfigurationError(f"selector name {name!r} is already registered")
    _FACTORIES[name] = factory


def selector_names() -> list[str]:
    """Every selector name available now: registered ones (``OURS`` first), then baselines, then peers."""
    registered = sorted(_FACTORIES, key=lambda n: (n != OURS, n))
    return [*registered, *BASELINE_NAMES, *PEER_NAMES]


def make_selectors(names: Iterable[str], counter: TokenCounter) -> list[Selector]:
    """Build the named selectors, in the given order.

    Raises:
        ConfigurationError: an unknown name (the message lists the known ones; ``OURS`` until the policy
            registers itself), or a peer whose library is not installed.
    """
    from ctxledger.eval import baselines, peers

    builtin: dict[str, Callable[[], Selector]] = {
        "full-replay": baselines.FullReplay,
        "newest-fit": baselines.NewestThatFits,
        "head-tail": baselines.HeadTail,
        "bm25": baselines.BM25Only,
    }
    out: list[Selector] = []
    for name in names:
        if name in _FACTORIES:
            out.append(_FACTORIES[name](counter))
        elif name in builtin:
            out.append(builtin[name]())
        elif name in PEER_NAMES:
            out.append(peers.make_peer(name, counter))
        else:
            raise ConfigurationError(f"unknown selector {name!r}; available: {', '.join(selector_names())}")
    return out


def payload_hash(kept: Sequence[EvalItem], case: EvalCase) -> str:
    """Hash of the payload the kept items and the query form, in ``seq`` order (canonical JSON).

    Used when a selector does not hash its own payload; two selections hash alike iff they send the
    same turns with the same content.
    """
    turns = [
        {
            "role": i.role,
            "content": i.text,
            "tool_call_id": i.tool_call_id,
            "tool_calls": [[c.call_id, c.name, c.arguments] for c in i.tool_calls],
        }
        for i in sorted(kept, key=lambda i: i.seq)
    ]
    return content_hash({"turns": turns, "query": case.query if case.query_tokens else None})


def _kept(case: EvalCase, selection: Selection) -> list[EvalItem]:
    included = set(selection.included_ids) if selection.fits else set()
    return [item for item in case.items if item.id in included]


def _sent_tokens(item: EvalItem, selection: Selection, counter: TokenCounter) -> int:
    """An included item's cost: verbatim, or recounted on the text sent when the selector reports a cheaper one."""
    sent = (selection.details.get("sent_texts") or {}).get(item.id)
    if sent is None or sent == item.text:
        return item.tokens
    return chat_tokens(counter, item.role, sent, tool_calls=item.tool_calls)


sent_tokens = _sent_tokens


def _hash(case: EvalCase, selection: Selection) -> str:
    return selection.payload_hash or payload_hash(_kept(case, selection), case)


def _fidelity(case: EvalCase, selection: Selection, included: set[str]) -> float | None:
    """Compaction fidelity: recovery items left out verbatim must be cited by an included summary."""
    summaries = selection.details.get("summaries") or ()
    if not summaries:
        return None
    invariants = {kind: [i for i in sorted(ids) if i not in included] for kind, ids in case.recovery.items()}
    text = "\n".join(str(s.get("text", "")) for s in summaries)
    cited = {str(i) for s in summaries for i in s.get("evidence_ids", ())}
    return metrics.compaction_fidelity(invariants, text, cited).score


def _occupancy(case: EvalCase, selection: Selection, included: set[str], budget: int) -> dict[str, float]:
    ledger = selection.details.get("occupancy_tokens")
    if isinstance(ledger, Mapping):
        return {str(k): float(v) / budget for k, v in ledger.items()}
    return metrics.occupancy(case.items, included, budget, case.query_tokens)


def credited_sources(kept: Iterable[EvalItem]) -> set[str]:
    """Ids the kept memories stand for through their provenance (``meta["covers"]``).

    A required turn counts as recalled when a memory derived from it is in the context.
    """
    return {str(i) for item in kept for i in item.meta.get("covers", ())}


def credited_by(kept: Iterable[EvalItem], required: Collection[str]) -> frozenset[str]:
    """Kept memories whose provenance names a required id (they count as required for precision)."""
    need = set(required)
    return frozenset(item.id for item in kept if need & {str(i) for i in item.meta.get("covers", ())})


def evaluate_case(
    case: EvalCase, selector: Selector, budget: int, counter: TokenCounter, *, check_determinism: bool = False
) -> CaseResult:
    """Run ``selector`` on ``case`` at ``budget`` tokens and judge the answer (see the module docstring).

    With ``check_determinism`` the selection is made a second time and its payload hash compared.
    """
    task = SelectionTask(
        items=case.items, query=case.query, budget_tokens=budget, counter=counter, query_tokens=case.query_tokens
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    selection = selector.select(task)
    latency, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    kept = _kept(case, selection)
    included = {item.id for item in kept}
    evidence = included | credited_sources(kept)
    payload = task.base_tokens + case.query_tokens + sum(_sent_tokens(item, selection, counter) for item in kept)
    chosen = set(selection.included_ids) if selection.fits else set()
    pairs = metrics.tool_pair_integrity(case.items, chosen)
    first_hash = _hash(case, selection)
    deterministic = _hash(case, selector.select(task)) == first_hash if check_determinism else None
    return CaseResult(
        dataset=case.dataset,
        case_id=case.case_id,
        category=case.category,
        selector=selector.name,
        budget=budget,
        fits=selection.fits,
        included=len(included),
        payload_tokens=payload if selection.fits else 0,
        claimed_tokens=selection.payload_tokens,
        replay_tokens=task.base_tokens + case.query_tokens + sum(item.tokens for item in case.items),
        overflow=selection.fits and metrics.budget_overflow(payload, budget),
        recall=metrics.evidence_recall(evidence, case.required_ids),
        omission=metrics.critical_omission(evidence, case.required_ids),
        precision=metrics.context_precision(included, case.required_ids | credited_by(kept, case.required_ids)),
        stale=metrics.stale_incidence(included, case.stale_ids),
        pairs_touched=pairs.touched,
        pairs_broken=pairs.broken,
        violations=tuple(metrics.provider_violations(case.items, chosen)),
        occupancy=_occupancy(case, selection, included, budget),
        recovery=metrics.recovery_preservation(included, case.recovery),
        latency_s=latency,
        cpu_s=cpu,
        payload_hash=first_hash,
        deterministic=deterministic,
        provenance=metrics.provenance_coverage(selection.details.get("derived") or ()),
        rehydration=metrics.rehydration_success(selection.details.get("rehydrations") or ()),
        fidelity=_fidelity(case, selection, included),
        self_reported=tuple(selection.violations),
    )


def _group_means(
    rows: Sequence[CaseResult], key: Callable[[CaseResult], str], value: Callable[[CaseResult], Any]
) -> dict[str, float | None]:
    keys = sorted({key(r) for r in rows})
    return {k: metrics.mean(value(r) for r in rows if key(r) == k) for k in keys}


def _latency(rows: Sequence[CaseResult]) -> dict[str, float | None]:
    ms = [r.latency_s * 1000.0 for r in rows]
    cpu = [r.cpu_s * 1000.0 for r in rows if r.cpu_s is not None]
    return {
        "mean": metrics.mean(ms),
        "p50": metrics.percentile(ms, 50),
        "p95": metrics.percentile(ms, 95),
        "max": max(ms) if ms else None,
        "cpu_p50": metrics.percentile(cpu, 50),
    }


def _summarize(rows: Sequence[CaseResult], excluded: frozenset[str]) -> dict[str, Any]:
    """One aggregate (see :func:`aggregate`) over the rows of one dataset, selector and budget."""
    head = [r for r in rows if r.category not in excluded]
    sent = [r for r in rows if r.fits]
    touched = sum(r.pairs_touched for r in rows)
    classes = sorted({c for r in rows for c in r.occupancy})
    kinds = sorted({k for r in rows for k in r.recovery})
    return {
        "dataset": rows[0].dataset,
        "selector": rows[0].selector,
        "budget": rows[0].budget,
        "cases": len(rows),
        "fit_rate": metrics.mean(r.fits for r in rows),
        "recall": metrics.mean(r.recall for r in head),
        "recall_all": metrics.mean(r.recall for r in rows),
        "recall_by_category": _group_means(rows, lambda r: r.category, lambda r: r.recall),
        "omission_rate": metrics.mean(r.omission for r in head),
        "precision": metrics.mean(r.precision for r in head),
        "irrelevant_inclusion": _complement(metrics.mean(r.precision for r in head)),
        "stale_incidence": metrics.mean(r.stale for r in rows),
        "tool_pair_integrity": None if touched == 0 else 1.0 - sum(r.pairs_broken for r in rows) / touched,
        "violation_rate": metrics.mean(bool(r.violations) for r in sent),
        "violations": sum(len(r.violations) for r in rows),
        "overflow_rate": metrics.mean(r.overflow for r in sent),
        "occupancy": {c: metrics.mean(r.occupancy.get(c, 0.0) for r in rows) for c in classes},
        "payload_tokens_mean": metrics.mean(r.payload_tokens for r in sent),
        "replay_tokens_mean": metrics.mean(r.replay_tokens for r in rows),
        "replay_ratio": metrics.mean(metrics.replay_ratio(r.payload_tokens, r.replay_tokens) for r in sent),
        "latency_ms": _latency(rows),
        "determinism": metrics.mean(r.deterministic for r in rows),
        "recovery": {k: metrics.mean(r.recovery.get(k) for r in rows) for k in kinds},
        "provenance_coverage": metrics.mean(r.provenance for r in rows),
        "rehydration_success": metrics.mean(r.rehydration for r in rows),
        "compaction_fidelity": metrics.mean(r.fidelity for r in rows),
    }


def _complement(value: float | None) -> float | None:
    return None if value is None else 1.0 - value


def aggregate(rows: Sequence[CaseResult], excluded: frozenset[str] = HEADLINE_EXCLUDED) -> list[dict[str, Any]]:
    """Aggregate rows per (dataset, selector, budget), in first-seen order.

    Each aggregate holds: ``recall`` (mean per-case evidence recall over cases with evidence, categories
    in ``excluded`` left out), ``recall_all``, ``recall_by_category``, ``omission_rate``, ``precision``,
    ``irrelevant_inclusion``, ``stale_incidence``, ``tool_pair_integrity`` (1 − Σ broken / Σ touched),
    ``violation_rate`` and ``violations`` (provider rules), ``overflow_rate``, ``fit_rate``,
    ``occupancy`` (mean share of the budget per class), ``payload_tokens_mean``,
    ``replay_tokens_mean``, ``replay_ratio`` (mean payload/replay over sent payloads), ``latency_ms``
    (mean, p50, p95, max of wall time), ``determinism``, ``recovery`` (share of calls keeping each kind),
    ``provenance_coverage``, ``rehydration_success`` and ``compaction_fidelity`` (``None`` when no
    selection reported the details they need).
    """
    groups: dict[tuple[str, str, int], list[CaseResult]] = {}
    for row in rows:
        groups.setdefault((row.dataset, row.selector, row.budget), []).append(row)
    return [_summarize(group, excluded) for group in groups.values()]


def counter_error_summary(dataset: EvalDataset) -> dict[str, Any] | None:
    """Our count of each recorded call's full prompt against the provider's reported prompt tokens.

    The estimate is the replayed prefix (every item, as the recording agent sent it) plus the request
    base; tool schemas are not in the recordings and are not counted. Returns ``n`` and the mean signed,
    mean absolute, p50 and p95 absolute relative errors (see :func:`metrics.counter_error`), or ``None``
    when the dataset records no provider usage.
    """
    errors = [
        metrics.counter_error(REQUEST_BASE_TOKENS + sum(i.tokens for i in case.items), case.provider_prompt_tokens)
        for case in dataset.cases
        if case.provider_prompt_tokens
    ]
    if not errors:
        return None
    absolute = [abs(e) for e in errors]
    return {
        "n": len(errors),
        "mean_signed": metrics.mean(errors),
        "mean_abs": metrics.mean(absolute),
        "p50_abs": metrics.percentile(absolute, 50),
        "p95_abs": metrics.percentile(absolute, 95),
    }


def _budgets_for(dataset: EvalDataset, budgets: Mapping[str, Sequence[int]] | Sequence[int] | None) -> tuple[int, ...]:
    if budgets is None:
        chosen: Sequence[int] = dataset.default_budgets
    elif isinstance(budgets, Mapping):
        chosen = budgets.get(dataset.name, dataset.default_budgets)
    else:
        chosen = budgets
    if not chosen or any(b <= 0 for b in chosen):
        raise ConfigurationError(f"budgets for {dataset.name!r} must be positive token counts, got {list(chosen)}")
    return tuple(chosen)


def _distinct_labels(datasets: Sequence[EvalDataset]) -> list[str]:
    """One label per dataset, unique within the run.

    A dataset's label is its name, or ``"<name> (<source file name>)"`` when several datasets of the run share
    the name (the full source path if the file names are alike too, and ``#i`` after it if even the sources are).
    """
    shared = Counter(d.name for d in datasets)
    labels: list[str] = []
    for where in (lambda d: Path(d.source).name or d.source, lambda d: d.source):
        labels = [d.name if shared[d.name] == 1 else f"{d.name} ({where(d)})" for d in datasets]
        if len(set(labels)) == len(labels):
            return labels
    nth: Counter[str] = Counter()
    for i, d in enumerate(datasets):
        if shared[d.name] > 1:
            nth[labels[i]] += 1
            labels[i] = f"{d.name} ({d.source} #{nth[labels[i]]})"
    return labels


def _labelled(dataset: EvalDataset, label: str) -> EvalDataset:
    if label == dataset.name:
        return dataset
    return replace(dataset, name=label, cases=tuple(replace(c, dataset=label) for c in dataset.cases))


def run_eval(
    datasets: Sequence[EvalDataset],
    selectors: Sequence[Selector],
    budgets: Mapping[str, Sequence[int]] | Sequence[int] | None,
    out_dir: Path | None,
    *,
    counter: TokenCounter,
    progress: ProgressFn | None = None,
    determinism_every: int = 10,
    keep_rows: bool = True,
    plots: bool = True,
) -> EvalResults:
    """Evaluate every selector on every case of every dataset at every budget, in one run.

    Args:
        datasets: loaded datasets (:func:`ctxledger.eval.datasets.load_dataset`).
        selectors: the selectors; names must be unique.
        budgets: token budgets for all datasets, per dataset name, or ``None`` for each dataset's
            ``default_budgets`` (1k–8k for evidence, 4k–16k for trajectories).
        out_dir: where :func:`ctxledger.eval.report.write_report` writes the report; ``None`` writes nothing.
        counter: the exact counter the datasets were costed with.
        progress: called after every case (see :data:`ProgressFn`).
        determinism_every: re-run every n-th case of each dataset to compare payload hashes (0: never).
        keep_rows: keep every per-case row in the results (and ``rows.jsonl``).
        plots: write PNG plots (needs the ``eval`` extra).

    Several datasets of one name (two LoCoMo files, say) are told apart in the results, the report and the
    progress by their source's file name: ``"locomo (a.json)"``, ``"locomo (b.json)"`` (see
    :func:`ctxledger.eval.results.dataset_of`); per-name ``budgets`` apply to each of them.

    Raises:
        ConfigurationError: duplicate selector names, empty or non-positive budgets, or (with plots)
            matplotlib missing.
    """
    names = [s.name for s in selectors]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"selector names must be unique, got {names}")
    labels = _distinct_labels(datasets)
    plan = [(_labelled(d, label), _budgets_for(d, budgets)) for d, label in zip(datasets, labels, strict=True)]
    total = sum(len(d.cases) * len(b) * len(selectors) for d, b in plan)
    rows: list[CaseResult] = []
    aggregates: list[dict[str, Any]] = []
    done = 0
    for position, (dataset, dataset_budgets) in enumerate(plan, start=1):
        dataset_rows = []
        shown = f"{dataset.name} [{position}/{len(plan)}]" if len(plan) > 1 else dataset.name
        if progress is not None:
            progress(shown, done, total)
        for index, case in enumerate(dataset.cases):
            check = determinism_every > 0 and index % determinism_every == 0
            for budget in dataset_budgets:
                for selector in selectors:
                    dataset_rows.append(evaluate_case(case, selector, budget, counter, check_determinism=check))
                    done += 1
                    if progress is not None:
                        progress(shown, done, total)
        aggregates.extend(aggregate(dataset_rows))
        if keep_rows:
            rows.extend(dataset_rows)
    results = EvalResults(
        config={
            "counter": counter.id,
            "counter_is_estimate": counter.is_estimate,
            "selectors": names,
            "budgets": {d.name: list(b) for d, b in plan},
            "determinism_every": determinism_every,
            "started_at": datetime.now(UTC).isoformat(),
            "headline_excludes": sorted(HEADLINE_EXCLUDED),
        },
        datasets=[_info(d, b) for d, b in plan],
        aggregates=aggregates,
        rows=rows,
    )
    if out_dir is not None:
        from ctxledger.eval.report import write_report

        write_report(results, out_dir, plots=plots)
    return results


def _info(dataset: EvalDataset, budgets: tuple[int, ...]) -> DatasetInfo:
    return DatasetInfo(
        name=dataset.name,
        kind=dataset.kind,
        cases=len(dataset.cases),
        budgets=budgets,
        quirks=dict(dataset.quirks),
        source=dataset.source,
        counter_error=counter_error_summary(dataset),
        listed={k: list(v) for k, v in dataset.listed.items()},
    )


def run_named(
    dataset_names: Sequence[str | Path],
    selector_names_: Sequence[str],
    budgets: Mapping[str, Sequence[int]] | Sequence[int] | None,
    out_dir: Path | None,
    *,
    data_dir: Path,
    counter: TokenCounter | None = None,
    limit: int | None = None,
    max_cases: int | None = None,
    step_stride: int = 1,
    progress: ProgressFn | None = None,
    determinism_every: int = 10,
    plots: bool = True,
) -> EvalResults:
    """The CLI's entry point: load datasets by name or path and build selectors by name, then :func:`run_eval`.

    When ctxledger's default policy is among the selectors, BM25 and newest-fit are added (if absent) so
    the report's by-category comparison is of the same run.

    Each of ``dataset_names`` is a dataset name (read from ``data_dir/<its folder>``,
    :func:`ctxledger.eval.datasets.load_dataset`) or a file or folder path (its datasets told by shape,
    :func:`ctxledger.eval.datasets.load_path`). ``counter`` defaults to
    ``ctxledger.tokens.get_counter("cl100k_base")``; ``limit``, ``max_cases`` and ``step_stride`` are passed
    to the loader. ``progress`` is called (0 done) while each dataset loads.

    Raises:
        ConfigurationError: unknown dataset or selector name, bad budgets, missing optional extra.
        InputError: a path that does not exist or holds no dataset; malformed data (names file, record
            index and field).
    """
    from ctxledger.eval.datasets import dataset_names as known_names
    from ctxledger.eval.datasets import load_path

    counter = counter or get_counter("cl100k_base")
    chosen = list(selector_names_)
    if OURS in chosen:
        chosen += [name for name in COMPARED_BASELINES if name not in chosen]
    selectors = make_selectors(chosen, counter)
    datasets: list[EvalDataset] = []
    for source in dataset_names:
        if progress is not None:
            progress(f"loading {source}", 0, 0)
        options = {"limit": limit, "max_cases": max_cases, "step_stride": step_stride}
        if isinstance(source, str) and source in known_names():
            datasets.append(load_dataset(source, data_dir, counter, **options))
        else:
            datasets.extend(load_path(Path(source), counter, **options))
    return run_eval(
        datasets,
        selectors,
        budgets,
        out_dir,
        counter=counter,
        progress=progress,
        determinism_every=determinism_every,
        plots=plots,
    )


@contextmanager
def rich_progress(console: Any = None, *, every_seconds: float = 10.0) -> Iterator[ProgressFn]:
    """Yield a progress callback that drives a rich progress bar on ``console`` (default: stderr).

    On a terminal the bar shows from the first call (datasets loading, then selections done of the
    total with the time left). Elsewhere (a log file, CI) a plain line ``eval <dataset>: <done>/<total>
    (<pct>%), <s> s`` is printed at the first call of each dataset and then at most every
    ``every_seconds``, so a long run is never silent. Use as ``with rich_progress() as p: run_eval(...,
    progress=p)``.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield _plain_progress(console, every_seconds)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        task_id = bar.add_task("eval", total=None)

        def update(name: str, done: int, total: int) -> None:
            bar.update(task_id, description=name, completed=done, total=total or None)

        yield update


def _plain_progress(console: Any, every_seconds: float) -> ProgressFn:
    started = time.perf_counter()
    state = {"name": "", "last": float("-inf")}

    def update(name: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if name == state["name"] and now - float(state["last"]) < every_seconds and done != total:
            return
        state["name"], state["last"] = name, now
        if not total:
            console.print(f"eval {name} …", highlight=False)
            return
        share = f"{100 * done / total:.0f}%"
        console.print(f"eval {name}: {done:,}/{total:,} ({share}), {now - started:.0f} s", highlight=False)

    return update
