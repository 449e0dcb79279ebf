"""Evaluation of context selection: datasets, metrics, baselines, peers, harness, report.

The core never imports this package. Public entry points: :func:`ctxledger.eval.harness.run_eval`,
:func:`ctxledger.eval.harness.run_named`, :func:`ctxledger.eval.report.write_report`, and the
:class:`~ctxledger.eval.base.Selector` protocol with its task and selection types.
"""

from ctxledger.eval.base import EvalCase, EvalDataset, EvalItem, Selection, SelectionTask, Selector

__all__ = ["EvalCase", "EvalDataset", "EvalItem", "Selection", "SelectionTask", "Selector"]
