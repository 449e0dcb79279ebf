"""LoCoMo per split with two relevance boosts the assembler does not apply yet: the named speaker and the session.

Measures a proposed change of ``ctxledger.assemble.assembler._relevance`` without making it: the function is
replaced in this process only, then ``bench/locomo_splits.py`` runs as usual. Added to the default relevance:

* **speaker** (before the date boost): when the question names exactly one of the speakers, the units that
  speaker said count ``1 + speaker`` times (a unit's speaker is its text's ``"<name>:"`` label, as the LoCoMo
  loader writes it; a deployed version would read ``Message.name`` or the owner participant's name);
* **session** (after the neighbour spread): each unit × ``1 + session ×`` the best normalised score of the
  units written the same day (a LoCoMo session).

    python bench/locomo_speaker_session.py --speaker 0.5 --session 0.3 -- --split 0-4 --set neighbour_window=4
"""

from __future__ import annotations

import argparse
import re
import runpy
import sys
from pathlib import Path

import numpy as np

import ctxledger.assemble.assembler as assembler
from ctxledger.assemble.dates import with_dates
from ctxledger.assemble.relevance import spread, tokenize, with_semantic
from ctxledger.units import content_text


def patch(speaker: float, session: float) -> None:
    """Replace the assembler's relevance in this process by the default one plus the two boosts."""

    def relevance(request, snap, policy=None):
        query = request.query if request.query is not None else assembler._latest_user_text(snap.units)
        scores = snap.index.scores(tokenize([query])[0] if query else [], len(snap.units))
        if policy is not None:
            scores = with_semantic(scores, query, snap.vectors, policy.selection.semantic_weight)
            if speaker:
                texts = [content_text(getattr(u.records[0], "content", None)) for u in snap.units]
                names = [t.split(":", 1)[0] if ":" in t[:30] else "" for t in texts]
                named = [n for n in {n for n in names if n} if re.search(rf"\b{re.escape(n)}\b", query)]
                if len(named) == 1:
                    scores = scores * (1 + speaker * np.array([n == named[0] for n in names], dtype=float))
            scores = with_dates(scores, query, snap.units, policy.selection.date_boost)
            scores = spread(scores, policy.selection.neighbour_decay, policy.selection.neighbour_window)
            if session and len(scores):
                days = np.array([u.records[0].created_at.toordinal() for u in snap.units])
                _, sess = np.unique(days, return_inverse=True)
                best = np.zeros(sess.max() + 1)
                np.maximum.at(best, sess, scores / max(float(scores.max()), 1e-12))
                scores = scores * (1 + session * best[sess])
        top = float(scores.max()) if len(scores) else 0.0
        return scores / top if top > 0 else scores

    assembler._relevance = relevance  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speaker", type=float, default=0.5)
    parser.add_argument("--session", type=float, default=0.3)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then the arguments of bench/locomo_splits.py")
    args = parser.parse_args()
    patch(args.speaker, args.session)
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    sys.argv = ["locomo_splits.py", *rest]
    runpy.run_path(str(Path(__file__).with_name("locomo_splits.py")), run_name="__main__")


if __name__ == "__main__":
    main()
