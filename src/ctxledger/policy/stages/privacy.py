"""Privacy classes and provider routing, failing closed (seed 004 §4.5, §8 R3 and R12).

Every record carries a ``privacy_class`` and may carry a ``provider_scope`` (the provider account or OAuth
scope its data came from, e.g. ``"google"``). For the provider the payload goes to (the request's
``provider``, else the one its ``api`` implies):

* a privacy class not in ``classes`` is unknown and omitted (``privacy_restricted``): fail closed;
* a known class must be allowed for that provider by ``allow[provider]`` (else ``allow["*"]``);
  otherwise ``privacy_restricted``;
* data with a ``provider_scope`` goes only to that same provider or to the providers ``routes`` lists for
  it (``provider_restricted``); when the request's provider is unknown, scoped data never goes.

A derived record (a memory, a compaction) is held to its sources' restrictions too, transitively
(:mod:`ctxledger.policy.derivation`): when a source may not go to the provider, neither may the record, and
its detail names that source (``derived from c/art-gmail (provider_scope google)``), so data from one
provider's OAuth scope never reaches another provider through a summary of it. A summary declared safe (tag
``safe_summary``: it carries none of the restricted data) keeps only its own restrictions, so it stays
selectable with its revalidation hint while the raw data stays out. :meth:`PrivacyStage.allows` is also what
phase-two rehydration asks before it reads a raw artifact back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ctxledger.errors import InvalidSetting
from ctxledger.policy.checks import string_lists, strings
from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.derivation import restricting_sources
from ctxledger.policy.stages._common import omit, request_provider, stage_key
from ctxledger.records import Branch, Conversation, Participant, Record

DEFAULT_CLASSES = ("public", "internal", "confidential", "restricted", "secret")
"""Privacy classes, least to most sensitive."""

DEFAULT_ALLOW: Mapping[str, Sequence[str]] = {"*": ("public", "internal", "confidential")}
"""By default ``restricted`` and ``secret`` data go to no provider."""


class PrivacyStage:
    """Omit what the target provider may not receive.

    Args:
        classes: known privacy classes (others fail closed).
        allow: provider → classes it may receive; ``"*"`` is the default for unnamed providers.
        routes: provider scope → extra providers that may receive data of that scope.

    Raises:
        InvalidSetting: ``classes`` is not a non-empty list of strings; ``allow`` or ``routes`` is not a table of
            lists of strings; ``allow`` names a class that is not in ``classes`` (a typo would fail closed
            silently).
    """

    name: ClassVar[str] = "privacy"
    version: ClassVar[str] = "2"

    def __init__(
        self,
        classes: Iterable[str] = DEFAULT_CLASSES,
        allow: Mapping[str, Iterable[str]] | None = None,
        routes: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.classes = strings(classes, self.name, "classes")
        if not self.classes:
            raise InvalidSetting(self.name, "classes", "must name at least one privacy class")
        self.allow = string_lists(DEFAULT_ALLOW if allow is None else allow, self.name, "allow", known=self.classes)
        self.routes = string_lists({} if routes is None else routes, self.name, "routes")

    def config(self) -> Mapping[str, Any]:
        """Classes, allow-lists and routes."""
        return {
            "classes": list(self.classes),
            "allow": {k: list(v) for k, v in sorted(self.allow.items())},
            "routes": {k: list(v) for k, v in sorted(self.routes.items())},
        }

    def allows(self, rec: Record, provider: str | None) -> tuple[ReasonCode | None, str]:
        """``(None, "")`` when ``rec`` may go to ``provider``, else the reason code and a detail (no content).

        Only the record's own envelope counts here; :meth:`__call__` adds what a derived record inherits.
        """
        reason, why = self._restriction(rec, provider)
        if reason is None:
            return None, ""
        if reason is ReasonCode.PROVIDER_RESTRICTED:
            return reason, f"derived from {rec.provider_scope} data; provider {provider!r} may not receive it"
        return reason, why

    def _restriction(self, rec: Record, provider: str | None) -> tuple[ReasonCode | None, str]:
        cls = rec.privacy_class
        if cls not in self.classes:
            return ReasonCode.PRIVACY_RESTRICTED, f"unknown privacy class {cls!r} (fail closed)"
        allowed = self.allow.get(provider or "", self.allow.get("*", ()))
        if cls not in allowed:
            return ReasonCode.PRIVACY_RESTRICTED, f"privacy class {cls!r} may not go to provider {provider!r}"
        origin = rec.provider_scope
        if origin and (provider is None or (provider != origin and provider not in self.routes.get(origin, ()))):
            return ReasonCode.PROVIDER_RESTRICTED, f"provider_scope {origin}"
        return None, ""

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Omit records the request's provider may not receive, by their own envelope or a source's."""
        provider = request_provider(ctx.request)
        # a verdict depends on the record, its sources (earlier, immutable records) and the provider only
        key = stage_key(self, provider, ctx.find_record is not None)
        for rec, decision in ctx.scan(key, ctx.records, lambda r: self._decide(ctx, r, provider)):
            if rec.id not in ctx.omitted:
                yield decision

    def _decide(self, ctx: StageContext, rec: Record, provider: str | None) -> PolicyDecision | None:
        if isinstance(rec, Conversation | Branch | Participant):
            return None
        reason, detail = self.allows(rec, provider)
        if reason is None:
            reason, detail = self._inherited(ctx, rec, provider)
        return omit(self.name, rec.id, reason, detail) if reason is not None else None

    def _inherited(self, ctx: StageContext, rec: Record, provider: str | None) -> tuple[ReasonCode | None, str]:
        """The first restriction ``rec`` inherits from a source (nearest first), naming the source."""
        for src in restricting_sources(ctx, rec):
            reason, why = self._restriction(src, provider)
            if reason is not None:
                if reason is ReasonCode.PROVIDER_RESTRICTED:
                    why = f"{why}; provider {provider!r} may not receive it"
                return reason, f"derived from {src.id} ({why})"
        return None, ""
