"""Retention: what is kept, for how long, and in what form (seed 004 §4.15; risk R2).

* :mod:`ctxledger.retention.rules`: the ``[retention]`` table of a policy as typed, hashed rules;
* :mod:`ctxledger.retention.state`: how a retained record says what happened to it (the notice a model and
  an explanation read: "redacted by retention rule R at T");
* :mod:`ctxledger.retention.engine`: applying the rules to a store in bounded, resumable batches, and
  forgetting a conversation or a participant (``Ledger.retain``, ``Ledger.forget``).
"""

from __future__ import annotations

from ctxledger.retention.rules import Action, AssemblyRetention, RetentionRule, RetentionRules

__all__ = ["Action", "AssemblyRetention", "RetentionRule", "RetentionRules"]
