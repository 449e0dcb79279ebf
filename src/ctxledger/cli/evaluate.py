"""``ctxledger eval``: context selection evaluated on real data, the seed scenarios and the failure cases."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ctxledger.cli._app import app
from ctxledger.cli._common import _err, _handled, _is_stdout, _out
from ctxledger.cli._escape import escape
from ctxledger.cli._numbers import int_option
from ctxledger.errors import (
    ConfigurationError,
    InputError,
)

eval_app = typer.Typer(
    help=(
        "Evaluate context selection on real data: ctxledger's default policy beside baselines and peer "
        "libraries, the seed scenarios and the failure cases.\n\n"
        "Example: [bold]ctxledger eval run --dataset locomo --budget 2000 --budget 8000 --out eval-report[/bold]"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(eval_app, name="eval")

DATA_DIR_DEFAULT = Path("../shared/data")
"""Where ``eval run`` looks for the datasets unless told (``--data-dir`` or ``CTXLEDGER_DATA_DIR``)."""
CASES_DIR_DEFAULT = Path("../shared/cases")
"""Where ``eval cases`` looks for the failure cases unless told (``--cases-dir`` or ``CTXLEDGER_CASES_DIR``)."""
CACHING_SELECTORS = ("ctxledger-default", "ctxledger-stable", "newest-fit", "bm25")
"""The selectors ``eval caching`` compares unless told (``--selector``)."""


def _default_selectors() -> list[str]:
    """Ours, every baseline, and the peers whose libraries are installed (the ``bench`` extra)."""
    import importlib.util

    from ctxledger.eval.harness import BASELINE_NAMES, OURS

    needs = {"langchain-trim-exact": "langchain_core", "langchain-trim-approx": "langchain_core"}
    needs["llamaindex-memory"] = "llama_index.core"
    peers = [name for name, module in needs.items() if _installed(module, importlib.util.find_spec)]
    return [OURS, *BASELINE_NAMES, *peers]


def _installed(module: str, find_spec: Any) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _existing_dir(path: Path, what: str, option: str) -> Path:
    if path.exists() and not path.is_dir():
        raise InputError(f"is a file, not a {what} folder; pass {option} the folder that holds it", source=str(path))
    if not path.is_dir():
        raise InputError(f"{what} folder not found; pass {option}", source=str(path))
    return path


def _data_root(names: Sequence[str | Path], data_dir: Path) -> Path:
    """``data_dir``, checked only when a dataset is named (``-d locomo``); paths (``-d run.json``) never read it."""
    if any(isinstance(name, str) for name in names):
        return _existing_dir(data_dir, "dataset", "--data-dir")
    return data_dir


def _budget_list(budgets: Sequence[int]) -> list[int]:
    """The ``--budget`` values, each checked as a window ``W`` before any dataset loads.

    Raises:
        BudgetOutOfBounds: a value outside the bounds of ``W`` (``ctxledger.budget.TOKEN_BOUNDS``), which the
            commands' ``_handled("--budget")`` reports naming ``--budget``.
    """
    from ctxledger.budget import Budget

    for value in budgets:
        Budget(window_tokens=value)
    return list(budgets)


def _selector_list(names: Sequence[str]) -> list[str]:
    """The ``--selector`` names, each checked before any dataset loads (after the policy's selectors register).

    Raises:
        ConfigurationError: an unknown name; the message lists the available ones, comma-separated.
    """
    from ctxledger.eval.harness import selector_names

    known = selector_names()
    for name in names:
        if name not in known:
            raise ConfigurationError(f"unknown selector {name!r}; available: {', '.join(known)}")
    return list(names)


def _dataset_list(names: Sequence[str]) -> list[str | Path]:
    """Dataset names, ``all``, or paths of dataset files or folders (kept as paths)."""
    from ctxledger.eval.datasets import dataset_names

    known = dataset_names()
    chosen: list[str | Path] = []
    for name in dict.fromkeys(names):
        if name == "all":
            chosen += [k for k in known if k not in chosen]
        elif name in known or Path(name).exists():
            chosen.append(name if name in known else Path(name))
        else:
            raise ConfigurationError(
                f"unknown dataset {name!r} (neither a name nor an existing path); known: {', '.join(known)} "
                "(or all, or a dataset file or folder)"
            )
    return chosen


def _goals_table(goals: Sequence[Any]) -> Table:
    table = Table(title="Goals", title_justify="left")
    table.add_column("goal")
    table.add_column("measured")
    table.add_column("result")
    marks = {True: "[green]met[/]", False: "[red]not met[/]", None: "[dim]not checked[/]"}
    for g in goals:
        table.add_row(escape(g.goal), escape(g.measured), marks[g.met])
    return table


def _headline_table(results: Any) -> Table:
    table = Table(title="Headline per dataset, selector and budget", title_justify="left")
    for name, justify in (("dataset", "left"), ("selector", "left"), ("budget", "right"), ("recall", "right"),
                          ("tokens/replay", "right"), ("violations", "right"), ("overflow", "right"),
                          ("p50 wall ms", "right")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for a in results.aggregates:
        ratio = a["replay_ratio"]
        table.add_row(
            escape(str(a["dataset"])), escape(str(a["selector"])), f"{a['budget']:,}", _num(a["recall"]), _num(ratio),
            str(a["violations"]), _num(a["overflow_rate"]), _num(a["latency_ms"]["p50"], 2),
        )  # fmt: skip
    return table


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _cases_table(outcomes: Sequence[Any]) -> Table:
    table = Table(title="Failure cases (shared/cases) under the default policy", title_justify="left")
    table.add_column("case")
    table.add_column("kind")
    table.add_column("what went wrong in the original library")
    table.add_column("input tok", justify="right")
    table.add_column("result")
    for c in outcomes:
        result = "[green]pass[/]" if c.passed else "[red]FAIL[/] " + escape("; ".join(c.failures))
        tokens = "refused" if c.input_tokens is None else f"{c.input_tokens:,}"
        table.add_row(escape(str(c.case_id)), escape(c.kind), escape(c.title), tokens, result)
    return table


def _load_cases(cases_dir: Path, checks: bool) -> list[Any]:
    """The failure cases ``--checks`` will run, read and checked before any call.

    Without the default folder (``../shared/cases``) there are none; a folder named otherwise (``--cases-dir``,
    ``CTXLEDGER_CASES_DIR``) that does not exist is refused, so a mistyped path is never a run without cases.
    """
    from ctxledger.eval.cases import load_cases

    if not checks or (cases_dir == CASES_DIR_DEFAULT and not cases_dir.exists()):
        return []
    return load_cases(_existing_dir(cases_dir, "failure-case", "--cases-dir"))


def _checks_line(scenarios: Sequence[Any], cases: Sequence[Any], cases_dir: Path) -> str:
    """The one-line result of ``--checks``: scenarios and cases counted apart, and cases that did not run said so."""
    line = f"seed scenarios: {sum(r.passed for r in scenarios)}/{len(scenarios)} pass; failure cases: "
    if not cases:
        return line + f"not run (no folder {cases_dir}; pass --cases-dir)"
    return line + f"{sum(c.passed for c in cases)}/{len(cases)} pass"


def _run_checks(cases: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Run the seed scenarios and the failure cases read by :func:`_load_cases`."""
    from ctxledger.eval.cases import run_loaded_case
    from ctxledger.scenarios import run_scenarios

    return run_scenarios(), [run_loaded_case(case) for case in cases]


@eval_app.command("run")
def eval_run(
    dataset: Annotated[
        list[str],
        typer.Option(
            "--dataset",
            "-d",
            help="Dataset to evaluate (repeatable): locomo, bfcl-memory, tau-bench, "
            "mini-swe-agent, swe-agent, toolbench, locomo-memory, all, or the path of a dataset file or "
            "folder as its owners publish it (e.g. the upstream locomo10.json, a tau-bench results file under "
            "any name).",
            show_default=False,
        ),
    ],
    selector: Annotated[
        list[str] | None,
        typer.Option(
            "--selector",
            "-s",
            help="Selector (repeatable; the selectors are listed above). Default: ours, every baseline and the "
            "installed peers.",
        ),
    ] = None,
    budget: Annotated[
        list[int] | None,
        int_option(
            "--budget",
            "-b",
            unit="tokens",
            help="Input budget in tokens (repeatable). Default: 1000 2000 4000 8000 "
            "for evidence datasets, 4000 8000 16000 for trajectories.",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Report folder: report.md, results.json, rows.jsonl and PNG plots (a folder, never '-')."
        ),
    ] = Path("eval-report"),
    data_dir: Annotated[
        Path, typer.Option("--data-dir", envvar="CTXLEDGER_DATA_DIR", help="Folder holding the datasets.")
    ] = DATA_DIR_DEFAULT,
    cases_dir: Annotated[
        Path,
        typer.Option(
            "--cases-dir",
            envvar="CTXLEDGER_CASES_DIR",
            help="Folder of failure cases for --checks: every *.json in it is a case, read before the first call "
            "(a JSON file that is not a case stops the run, named); skipped, and said so, when the default "
            "folder does not exist; a folder named here that does not exist is an error.",
        ),
    ] = CASES_DIR_DEFAULT,
    limit: Annotated[
        int | None,
        int_option(
            "--limit",
            minimum=1,
            metavar="<n>",
            help="Read only the first N source records of each dataset: LoCoMo conversations (per file), BFCL "
            "questions, trajectories (tau-bench: records; the others: files). Every case of a record read is kept "
            "(unless --max-cases cuts them).",
        ),
    ] = None,
    max_cases: Annotated[
        int | None,
        int_option(
            "--max-cases",
            minimum=1,
            metavar="<n>",
            help="Evaluate only the first N cases of each dataset (after --limit). A case is one model call to "
            "assemble: a LoCoMo or BFCL question, one step of a trajectory; each runs once per selector and budget. "
            "Data problems are still counted over every record read.",
        ),
    ] = None,
    step_stride: Annotated[
        int, int_option("--step-stride", minimum=1, metavar="<n>", help="Trajectories: evaluate every N-th model call.")
    ] = 1,
    determinism_every: Annotated[
        int,
        int_option(
            "--determinism-every",
            minimum=0,
            metavar="<n>",
            help="Re-run every N-th case to compare payload hashes (0: never).",
        ),
    ] = 10,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots (needs matplotlib).")] = True,
    checks: Annotated[
        bool, typer.Option("--checks/--no-checks", help="Also run the seed scenarios and failure cases (pass/fail).")
    ] = True,
) -> None:
    """Run every selector on the same real cases and budgets, and write one report of the same run.

    Each selector (ctxledger's default policy, the baselines, the peers) gets the same calls; the
    harness judges each answer itself: evidence recall per question category, tokens against full
    history replay, recovery state kept, provider-rule violations, budget overflows under the exact
    cl100k counter, latency and determinism. The report (Markdown, JSON, per-call rows, PNG plots) also
    checks the evaluation goals and, with --checks, lists the seed scenarios and the failure cases as
    pass/fail. A progress bar shows the calls done.

    Selectors (--selector): ctxledger-default (ours), ctxledger-stable (ours with prefix-stable selection; not
    run unless named), the baselines full-replay, newest-fit, head-tail and bm25, and the peers
    langchain-trim-exact, langchain-trim-approx and llamaindex-memory (when installed).

    Example:
    [bold]ctxledger eval run -d locomo -d tau-bench -s ctxledger-default -s bm25 -b 2000 -b 8000 --out rep[/bold]
    """
    from ctxledger.eval.goals import checks_markdown, conversations_of, goal_checks, held_out_checks
    from ctxledger.eval.harness import rich_progress, run_named
    from ctxledger.eval.ours import register

    console = _out()
    with _handled(window_option="--budget"):
        if _is_stdout(out):
            raise ConfigurationError(
                "--out - (stdout) cannot hold the report's files (report.md, results.json, rows.jsonl, plots); "
                "pass a folder, e.g. --out eval-report"
            )
        if out.exists() and not out.is_dir():
            raise ConfigurationError(
                f"--out {out}: not a folder; the report is a folder of files, e.g. --out eval-report"
            )
        if plots:
            from ctxledger.eval.report import check_plotting

            check_plotting()  # before hours of calls, not after
        names = _dataset_list(dataset)
        budgets = _budget_list(budget or [])
        register()
        selectors = _selector_list(selector or _default_selectors())
        root = _data_root(names, data_dir)
        case_files = _load_cases(cases_dir, checks)
        started = time.perf_counter()
        with rich_progress() as progress:
            results = run_named(
                names, selectors, budgets or None, out, data_dir=root, limit=limit,
                max_cases=max_cases, step_stride=step_stride, progress=progress,
                determinism_every=determinism_every, plots=plots,
            )  # fmt: skip
        scenarios, cases = _run_checks(case_files) if checks else ([], [])
        judged = conversations_of(results.rows)
        goals = goal_checks(results.aggregates) + held_out_checks(results.aggregates, conversations=judged)
        report = out / "report.md"
        report.write_text(report.read_text(encoding="utf-8") + "\n" + checks_markdown(goals, scenarios, cases))
    _warn_skipped(results)
    console.print(_headline_table(results))
    console.print(_goals_table(goals))
    if checks:
        console.print(escape(_checks_line(scenarios, cases, cases_dir)), soft_wrap=True)
    console.print(f"report written to {escape(str(report))} in {time.perf_counter() - started:.0f} s", soft_wrap=True)


SKIPPED_QUIRKS = {"files_unreadable": "unreadable file", "runs_skipped": "failed run"}
"""Listed quirks that leave source files out of a run, with what each skipped file is; each is also warned about
on stderr."""


def _warn_skipped(results: Any) -> None:
    """One warning per dataset and skipping quirk.

    It says how many files were skipped, that the rest was evaluated, and names the first few skipped files with
    why (all are listed in the report).
    """
    err = _err()
    for info in results.datasets:
        for quirk, what in SKIPPED_QUIRKS.items():
            entries = info.listed.get(quirk) or []
            if entries:
                shown = "; ".join(entries[:3]) + ("; …" if len(entries) > 3 else "")
                plural = "s" if len(entries) > 1 else ""
                err.print(
                    f"warning: {info.name}: skipped {len(entries)} {what}{plural}, evaluated the rest (listed in "
                    f"the report): {shown}",
                    markup=False,
                    soft_wrap=True,
                )


@eval_app.command("scenarios")
def eval_scenarios(
    name: Annotated[
        list[str] | None, typer.Option("--name", help="Run only this scenario (repeatable); default all.")
    ] = None,
) -> None:
    """Run the scenario suite (the specification's scenarios and failure cases) and print it as a pass/fail table.

    Each scenario builds a deterministic execution graph, assembles its model call under the default
    policy (or the scenario's own), checks what was included, omitted and why, and compares the tokens
    with a full history replay. Exits with code 1 when a scenario fails.

    Example: [bold]ctxledger eval scenarios --name branch-isolation[/bold]
    """
    from ctxledger.scenarios import run_scenarios
    from ctxledger.scenarios.catalog import SCENARIOS

    known = [s.name for s in SCENARIOS]
    unknown = [n for n in name or () if n not in known]
    if unknown:
        _err().print(f"[red]error:[/] unknown scenario {escape(unknown[0])!r}; known: {', '.join(known)}")
        raise typer.Exit(2)
    with _handled():
        results = run_scenarios(name or None, out=sys.stdout)
    if not all(r.passed for r in results):
        raise typer.Exit(1)


@eval_app.command("cases")
def eval_cases(
    cases_dir: Annotated[
        Path,
        typer.Option(
            "--cases-dir",
            envvar="CTXLEDGER_CASES_DIR",
            help="Folder of failure cases: every *.json file directly in it is a case, whatever its name (a JSON "
            "file that is not a case is refused, named, before any case runs).",
        ),
    ] = CASES_DIR_DEFAULT,
) -> None:
    """Run every failure case from real bug reports (shared/cases) and print a pass/fail table.

    Each case is a small history that made an existing agent library send a wrong or invalid request;
    it is imported into a fresh in-memory ledger, assembled under the default policy with the case's
    reference token costs, and every expectation of the case is checked (tool pairs, system prompt,
    tool schemas in the budget, cross-user memories, summaries that drop constraints …). Exits with
    code 1 when a case fails.

    Every *.json file directly in --cases-dir is a case, whatever its name (without an "id", its file's stem);
    a JSON file there that is not a case (an object with "messages" and "expect"), or repeats another's id,
    is refused naming the file (exit 2) before any case runs.

    Example: [bold]ctxledger eval cases --cases-dir ../shared/cases[/bold]
    """
    from ctxledger.eval.cases import run_cases

    with _handled():
        outcomes = run_cases(_existing_dir(cases_dir, "failure-case", "--cases-dir"))
    console = _out()
    console.print(_cases_table(outcomes))
    console.print(f"{sum(c.passed for c in outcomes)}/{len(outcomes)} cases pass")
    if not all(c.passed for c in outcomes):
        raise typer.Exit(1)


@eval_app.command("caching")
def eval_caching(
    dataset: Annotated[
        list[str],
        typer.Option(
            "--dataset",
            "-d",
            help="Trajectory dataset (repeatable): tau-bench, mini-swe-agent, swe-agent, toolbench, or a path.",
            show_default=False,
        ),
    ],
    selector: Annotated[
        list[str] | None,
        typer.Option(
            "--selector",
            "-s",
            help=f"Selector (repeatable). Default: {', '.join(CACHING_SELECTORS)} (ctxledger-stable: the default "
            "policy with prefix-stable selection).",
        ),
    ] = None,
    budget: Annotated[
        int, int_option("--budget", "-b", unit="tokens", help="Input budget of every call in tokens.")
    ] = 8000,
    data_dir: Annotated[
        Path, typer.Option("--data-dir", envvar="CTXLEDGER_DATA_DIR", help="Folder holding the datasets.")
    ] = DATA_DIR_DEFAULT,
    limit: Annotated[
        int | None,
        int_option(
            "--limit",
            minimum=1,
            metavar="<n>",
            help="Read only the first N trajectories of each dataset (tau-bench: records; the others: files); "
            "every call of each is priced.",
        ),
    ] = None,
) -> None:
    """Cost per call with provider prompt caching, against full history replay with caching.

    Over the consecutive calls of each trajectory: the tokens each payload shares as a prefix with the
    previous one, and the priced input per call with cached input at the provider's published rate
    (OpenAI gpt-4o: cached input at half price from 1,024 tokens; Anthropic Claude Sonnet 4: cache reads at
    0.1x, writes at 1.25x; the "breakpoints" rows find the cache only where an earlier call set a breakpoint).
    The ratio column is cost / full replay with caching (the goal is at most 0.5);
    "latest error kept" is the share of calls after an error result whose payload carried the latest one.
    The "floor" rows price a reference point: the required state (instructions, goal, latest error …)
    perfectly cached plus the turns written since the previous call, verbatim (a selection that excerpts or
    leaves out a new turn can cost less).

    Example: [bold]ctxledger eval caching -d tau-bench -d mini-swe-agent -b 8000 --limit 5[/bold]
    """
    from ctxledger.eval.caching import caching_costs, floor_rows
    from ctxledger.eval.datasets import load_dataset, load_path
    from ctxledger.eval.harness import make_selectors
    from ctxledger.eval.ours import register
    from ctxledger.tokens import get_counter

    console = _out()
    with _handled(window_option="--budget"):
        register()
        counter = get_counter("cl100k_base")
        names = _dataset_list(dataset)
        selectors = make_selectors(_selector_list(selector or list(CACHING_SELECTORS)), counter)
        _budget_list([budget])
        root = _data_root(names, data_dir)
        table = Table(title=f"Cost per call with prompt caching at {budget:,} tokens", title_justify="left")
        for name in ("dataset", "selector", "provider", "calls", "input", "shared prefix", "$/1k calls",
                     "replay $/1k calls", "ratio", "latest error kept"):  # fmt: skip
            table.add_column(name, justify="left" if name in ("dataset", "selector", "provider") else "right")
        for name in names:
            loaded = (
                [load_dataset(name, root, counter, limit=limit)]
                if isinstance(name, str)
                else load_path(name, counter, limit=limit)
            )
            for ds in loaded:
                if ds.kind != "trajectory":
                    raise ConfigurationError(f"{ds.name} is not a trajectory dataset (consecutive calls)")
                for r in [*caching_costs(ds, selectors, budget, counter), *floor_rows(ds)]:
                    ratio = "n/a" if r.ratio is None else f"{r.ratio:.3f}"
                    error = r.recovery.get("latest_error")
                    error_kept = "n/a" if error is None else f"{error:.1%}"
                    table.add_row(r.dataset, r.selector, r.provider, str(r.calls), f"{r.mean_input:,.0f}",
                                  f"{r.mean_shared:,.0f}", f"{r.mean_cost * 1000:.3f}", f"{r.replay_cost * 1000:.3f}",
                                  ratio, error_kept)  # fmt: skip
    console.print(table)
