"""The evaluation report: Markdown for people, JSON for machines, PNG plots.

``write_report(results, out_dir)`` writes ``report.md``, ``results.json`` (config, datasets and every
aggregate), ``rows.jsonl`` (one judged selection per line, when the run kept rows) and, with the
``eval`` extra installed, one recall-or-tokens plot and one latency plot per dataset. Every number of
every selector comes from the same run, so the ratio tables compare like with like.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ctxledger.errors import ConfigurationError
from ctxledger.eval.results import COMPARED_BASELINES, OURS, DatasetInfo, EvalResults

_HINT = "PNG plots need matplotlib: pip install 'ctxledger[eval]' (or pass plots=False)"


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows)
    return [*lines, ""]


def _file_stem(label: str) -> str:
    """A dataset label as a file name: ``"locomo (a.json)"`` → ``"locomo-a.json"`` (a plain name is kept)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "dataset"


def _by(aggregates: Sequence[Mapping[str, Any]], dataset: str) -> dict[tuple[str, int], Mapping[str, Any]]:
    return {(a["selector"], a["budget"]): a for a in aggregates if a["dataset"] == dataset}


def _selectors(results: EvalResults) -> list[str]:
    return list(results.config["selectors"])


def _grid(results: EvalResults, info: DatasetInfo, title: str, value: Callable[[Mapping[str, Any]], Any]) -> list[str]:
    """A selectors × budgets table of one metric."""
    cells = _by(results.aggregates, info.name)
    rows = [[s, *(value(cells[(s, b)]) for b in info.budgets)] for s in _selectors(results)]
    return [f"**{title}**", "", *_table(["selector", *(f"{b} tok" for b in info.budgets)], rows)]


def _categories(results: EvalResults, info: DatasetInfo) -> list[str]:
    cells = _by(results.aggregates, info.name)
    out = []
    for budget in info.budgets:
        cats = sorted({c for s in _selectors(results) for c in cells[(s, budget)]["recall_by_category"]})
        rows = [[s, *(cells[(s, budget)]["recall_by_category"].get(c) for c in cats)] for s in _selectors(results)]
        out += [f"**Evidence recall by category at {budget} tokens**", "", *_table(["selector", *cats], rows)]
    return out


COMPARED = COMPARED_BASELINES
"""The baselines the report sets ctxledger's default policy against, category by category."""


def _against(results: EvalResults, info: DatasetInfo, reference: str) -> list[str]:
    """Per budget: a categories × (reference, BM25, newest-fit, reference − BM25) table of evidence recall."""
    cells = _by(results.aggregates, info.name)
    names = [s for s in (reference, *COMPARED) if s in _selectors(results)]
    if reference not in names:
        return [f"_By-category comparison: `{reference}` is not in this run._", ""]
    missing = [s for s in COMPARED if s not in names]
    out = [f"_Not in this run: {', '.join(f'`{s}`' for s in missing)}._", ""] if missing else []
    for budget in info.budgets:
        cats = sorted({c for s in names for c in cells[(s, budget)]["recall_by_category"]})
        rows = []
        for label, pick in [*((c, lambda a, c=c: a["recall_by_category"].get(c)) for c in cats),
                            ("**headline**", lambda a: a["recall"])]:  # fmt: skip
            values = [pick(cells[(s, budget)]) for s in names]
            delta = None if "bm25" not in names or None in values[:2] else values[0] - values[names.index("bm25")]
            rows.append([label, *values, delta])
        header = ["category", *names, f"{reference} − bm25"]
        title = f"Evidence recall by category at {budget} tokens against BM25 and newest-fit (same run)"
        out += [f"**{title}**", "", *_table(header, rows)]
    return out


def _latency_table(results: EvalResults, info: DatasetInfo) -> list[str]:
    """Selector latency per budget: p50 / p95 ms of the wall clock around ``select``, and p50 CPU ms."""
    cells = _by(results.aggregates, info.name)

    def cell(lat: Mapping[str, Any]) -> str:
        return f"{_fmt(lat['p50'], 2)} / {_fmt(lat['p95'], 2)} ({_fmt(lat.get('cpu_p50'), 2)} CPU)"

    rows = [[s, *(cell(cells[(s, b)]["latency_ms"]) for b in info.budgets)] for s in _selectors(results)]
    header = ["selector", *(f"{b} tok p50 / p95 wall ms (p50 CPU ms)" for b in info.budgets)]
    return ["**Selector latency per call**", "", *_table(header, rows)]


def _rules(results: EvalResults, info: DatasetInfo) -> list[str]:
    cells = _by(results.aggregates, info.name)
    header = [
        "selector", "budget", "omission", "precision", "violations", "pair integrity", "overflow",
        "fits", "tokens/replay", "p50 wall ms", "p95 wall ms", "determinism",
    ]  # fmt: skip
    rows = []
    for s in _selectors(results):
        for b in info.budgets:
            a = cells[(s, b)]
            rows.append([
                s, b, a["omission_rate"], a["precision"], a["violations"], a["tool_pair_integrity"],
                a["overflow_rate"], a["fit_rate"], a["replay_ratio"], a["latency_ms"]["p50"],
                a["latency_ms"]["p95"], a["determinism"],
            ])  # fmt: skip
    return ["**Rules, budget, cost and latency**", "", *_table(header, rows)]


def _keyed(results: EvalResults, info: DatasetInfo, title: str, field: str) -> list[str]:
    """A (selector, budget) × keys table of a mapping-valued aggregate (recovery, occupancy)."""
    cells = _by(results.aggregates, info.name)
    keys = sorted({k for a in cells.values() for k in a[field]})
    if not keys:
        return []
    rows = [[s, b, *(cells[(s, b)][field].get(k) for k in keys)] for s in _selectors(results) for b in info.budgets]
    return [f"**{title}**", "", *_table(["selector", "budget", *keys], rows)]


def _ratios(results: EvalResults, info: DatasetInfo, reference: str) -> list[str]:
    cells = _by(results.aggregates, info.name)
    if reference not in _selectors(results):
        return [f"_Same-run ratios: reference selector `{reference}` is not in this run._", ""]
    metric = "recall" if info.kind == "evidence" else "replay_ratio"
    rows = []
    for s in _selectors(results):
        row: list[Any] = [s]
        for b in info.budgets:
            ours, theirs = cells[(reference, b)][metric], cells[(s, b)][metric]
            row.append(None if not ours or theirs is None else theirs / ours)
        rows.append(row)
    title = f"Same-run ratio of {metric} to `{reference}` (selector / reference)"
    return [f"**{title}**", "", *_table(["selector", *(f"{b} tok" for b in info.budgets)], rows)]


def _dataset_section(results: EvalResults, info: DatasetInfo, reference: str) -> list[str]:
    out = [f"## {info.name}", "", f"{info.kind} dataset, {info.cases} cases, budgets {list(info.budgets)} tokens; "
           f"source `{info.source}`.", ""]  # fmt: skip
    if info.quirks:
        out += ["Data handling in every source record read (counted, not silently dropped; `--max-cases` keeps "
                "fewer cases, not fewer records read): "
                + ", ".join(f"{k} = {v}" for k, v in sorted(info.quirks.items())) + ".", ""]  # fmt: skip
    for quirk, entries in sorted(info.listed.items()):
        out += [f"{quirk} ({len(entries)}):", "", *(f"- {e}" for e in entries), ""]
    if info.counter_error:
        e = info.counter_error
        out += [f"Counter error against the provider's reported prompt tokens over {e['n']} calls: mean signed "
                f"{_fmt(e['mean_signed'])}, mean |error| {_fmt(e['mean_abs'])}, p95 |error| {_fmt(e['p95_abs'])} "
                "(relative; positive = we over-count).", ""]  # fmt: skip
    if info.kind == "evidence":
        out += _grid(results, info, "Evidence recall (headline: adversarial questions excluded)", lambda a: a["recall"])
        out += _grid(results, info, "Evidence recall, all questions", lambda a: a["recall_all"])
        out += _against(results, info, reference)
        out += _categories(results, info)
    else:
        out += _grid(
            results, info, "Tokens against full history replay (payload / replay)", lambda a: a["replay_ratio"]
        )
        out += _keyed(results, info, "Recovery-state preservation (share of calls keeping it)", "recovery")
    out += _latency_table(results, info)
    out += _rules(results, info)
    out += _keyed(results, info, "Occupancy per context class (share of the budget)", "occupancy")
    out += _ratios(results, info, reference)
    return out


_METHOD = """\
How to read this: budgets are input tokens of the whole request under the exact counter; every selector \
saw the same cases. Evidence recall is the mean per call of |required ∩ included| / |required| over calls \
with resolvable evidence; `omission` is the share of calls missing some required evidence. \
`violations` counts OpenAI Chat rule breaks (orphan or split tool results) and must be 0; `overflow` is the \
share of sent payloads over budget under the exact counter and must be 0. Full history replay sends \
nothing when the history does not fit (`fits` < 1) and then counts as omitting all evidence. Latency (`p50 wall ms`, \
`p95 wall ms`) is the harness's wall-clock time around `select`; the goals' latency figure is the CPU time of the \
same calls (`p50 CPU ms`), which leaves out waiting for the machine. Determinism re-runs a sample of calls \
and compares payload hashes."""


def render_markdown(results: EvalResults, reference: str = OURS) -> str:
    """The report as Markdown text (one section per dataset; see the module docstring)."""
    cfg = results.config
    out = [
        "# ctxledger context-selection evaluation",
        "",
        f"Counter `{cfg['counter']}`; selectors {', '.join(f'`{s}`' for s in cfg['selectors'])}; "
        f"started {cfg['started_at']}; determinism checked on every {cfg['determinism_every']}th case.",
        "",
        _METHOD,
        "",
    ]
    for info in results.datasets:
        out += _dataset_section(results, info, reference)
    return "\n".join(out)


def check_plotting() -> None:
    """Raise now, before any call is run, when PNG plots were asked for and matplotlib is missing.

    Raises:
        ConfigurationError: matplotlib is not installed (the message says how to install it or skip plots).
    """
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigurationError(_HINT.replace("plots=False", "--no-plots / plots=False"))


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigurationError(_HINT) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_metric(ax: Any, results: EvalResults, info: DatasetInfo, metric: str, ylabel: str) -> None:
    cells = _by(results.aggregates, info.name)
    for s in _selectors(results):
        values = [cells[(s, b)][metric] for b in info.budgets]
        ax.plot(info.budgets, [float("nan") if v is None else v for v in values], marker="o", label=s)
    ax.set_xscale("log", base=2)
    ax.set_xticks(info.budgets, [str(b) for b in info.budgets])
    ax.set_xlabel("budget (tokens)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _plot_latency(ax: Any, results: EvalResults, info: DatasetInfo) -> None:
    cells = _by(results.aggregates, info.name)
    budget = info.budgets[-1]
    names = _selectors(results)
    p50 = [cells[(s, budget)]["latency_ms"]["p50"] or 0.0 for s in names]
    p95 = [cells[(s, budget)]["latency_ms"]["p95"] or 0.0 for s in names]
    ax.barh(names, p95, color="#c8d6e5", label="p95")
    ax.barh(names, p50, color="#2e86de", label="p50")
    ax.set_xscale("log")
    ax.set_xlabel(f"selector latency at {budget} tokens (ms, log)")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7)


def _plot_categories(plt: Any, results: EvalResults, info: DatasetInfo, out_dir: Path, reference: str) -> Path:
    """``<dataset>-categories.png``: recall against budget, one panel per category, reference vs BM25 vs newest-fit."""
    cells = _by(results.aggregates, info.name)
    names = [s for s in (reference, *COMPARED) if s in _selectors(results)]
    cats = sorted({c for s in names for b in info.budgets for c in cells[(s, b)]["recall_by_category"]})
    fig, axes = plt.subplots(1, len(cats), figsize=(3.2 * len(cats), 3.4), squeeze=False)
    for ax, cat in zip(axes[0], cats, strict=True):
        for s in names:
            values = [cells[(s, b)]["recall_by_category"].get(cat) for b in info.budgets]
            ax.plot(info.budgets, [float("nan") if v is None else v for v in values], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_xticks(info.budgets, [str(b) for b in info.budgets])
        ax.set_ylim(0, 1)
        ax.set_title(cat, fontsize=9)
        ax.set_xlabel("budget (tokens)", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("evidence recall")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{info.name}: evidence recall against budget by category")
    fig.tight_layout()
    path = out_dir / f"{_file_stem(info.name)}-categories.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_plots(results: EvalResults, out_dir: Path, reference: str = OURS) -> list[Path]:
    """Write one ``<dataset>.png`` per dataset (and ``<dataset>-categories.png`` for evidence) and return the paths.

    ``<dataset>`` is the dataset's label with each run of characters other than letters, digits, ``.``, ``_``
    and ``-`` made one ``-`` (``locomo (a.json)`` → ``locomo-a.json``).

    Each figure shows evidence recall (evidence datasets) or tokens against replay (trajectories) by
    budget and selector, beside each selector's latency at the largest budget; the categories figure
    plots recall against budget per question category for ``reference``, BM25 and newest-fit.

    Raises:
        ConfigurationError: matplotlib is not installed (the message names the ``eval`` extra).
    """
    plt = _pyplot()
    paths = []
    for info in results.datasets:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        if info.kind == "evidence":
            _plot_metric(left, results, info, "recall", "evidence recall")
        else:
            _plot_metric(left, results, info, "replay_ratio", "tokens / full replay")
        _plot_latency(right, results, info)
        fig.suptitle(f"{info.name} ({len(results.config['selectors'])} selectors, {info.cases} cases)")
        fig.subplots_adjust(left=0.06, right=0.98, wspace=0.45, bottom=0.12)
        path = out_dir / f"{_file_stem(info.name)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
        if info.kind == "evidence" and reference in _selectors(results):
            paths.append(_plot_categories(plt, results, info, out_dir, reference))
    return paths


def write_report(results: EvalResults, out_dir: Path, *, plots: bool = True, reference: str = OURS) -> list[Path]:
    """Write the report files into ``out_dir`` (created if needed) and return their paths.

    Args:
        results: the run's results.
        out_dir: the output folder.
        plots: also write PNG plots (needs the ``eval`` extra).
        reference: the selector the ratio tables divide by (ctxledger's default policy).

    Raises:
        ConfigurationError: ``plots`` and matplotlib is not installed.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if plots:
        written += write_plots(results, out_dir, reference)
    summary = out_dir / "results.json"
    summary.write_text(json.dumps(results.to_json(), indent=2, sort_keys=True, allow_nan=False), encoding="utf-8")
    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(results, reference), encoding="utf-8")
    written += [summary, markdown]
    if results.rows:
        rows = out_dir / "rows.jsonl"
        with rows.open("w", encoding="utf-8") as fh:
            for row in results.rows:
                fh.write(json.dumps(asdict(row), sort_keys=True, allow_nan=False) + "\n")
        written.append(rows)
    return written
