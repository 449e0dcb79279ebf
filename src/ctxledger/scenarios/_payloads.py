"""Deterministic raw tool outputs in the formats real tools return, sized like those that make replay expensive.

Drive and Gmail JSON, CRM rows, CSV exports, pytest logs, skill manuals, renderer logs and documents.

Every generator takes a seed, so a scenario builds the same bytes (and the same payload hash) every run.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

_WORDS = [
    "revenue",
    "forecast",
    "pipeline",
    "renewal",
    "margin",
    "churn",
    "onboarding",
    "invoice",
    "contract",
    "quarterly",
    "board",
    "deck",
    "region",
    "pricing",
    "discount",
    "enterprise",
    "support",
    "escalation",
    "roadmap",
    "migration",
    "latency",
    "incident",
    "backlog",
    "hiring",
    "budget",
]
_QUARTERS = ("Q1", "Q2", "Q3", "Q4")
_STATES = ("draft", "FINAL", "v2", "notes")
_NAMES = ("Ana Ruiz", "Bo Chen", "Chidi Okafor", "Dana Levi", "Eitan Cohen", "Fatima Zahra", "Goran Petrov")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def _stamp(rng: random.Random, base: datetime) -> str:
    return (base - timedelta(minutes=rng.randrange(60 * 24 * 90))).isoformat().replace("+00:00", "Z")


def drive_search(seed: int, n: int = 30, *, title: str = "Board deck") -> str:
    """A Google Drive ``files.list`` response (``files[]`` with id, name, mimeType, owners, modifiedTime)."""
    rng = random.Random(seed)
    base = datetime(2026, 9, 1, tzinfo=UTC)
    files = []
    for i in range(n):
        files.append(
            {
                "kind": "drive#file",
                "id": f"1{rng.getrandbits(120):030x}"[:33],
                "name": f"{title} {rng.choice(_QUARTERS)} {rng.choice(_STATES)} {i}",
                "mimeType": rng.choice(
                    [
                        "application/vnd.google-apps.presentation",
                        "application/pdf",
                        "application/vnd.google-apps.document",
                    ]
                ),
                "owners": [{"displayName": rng.choice(_NAMES), "emailAddress": f"user{rng.randrange(99)}@example.com"}],
                "modifiedTime": _stamp(rng, base),
                "description": _sentence(rng, 12),
            }
        )
    return json.dumps({"kind": "drive#fileList", "incompleteSearch": False, "files": files}, indent=1)


def gmail_messages(seed: int, n: int = 12) -> str:
    """A Gmail ``users.messages.get`` batch: headers and decoded bodies (private mailbox content)."""
    rng = random.Random(seed)
    base = datetime(2026, 9, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        who = rng.choice(_NAMES)
        out.append(
            {
                "id": f"18{rng.getrandbits(56):014x}",
                "threadId": f"18{rng.getrandbits(56):014x}",
                "labelIds": ["INBOX", rng.choice(["IMPORTANT", "CATEGORY_UPDATES", "UNREAD"])],
                "payload": {
                    "headers": [
                        {"name": "From", "value": f"{who} <{who.split()[0].lower()}@client-{i}.example>"},
                        {"name": "Subject", "value": _sentence(rng, 5)},
                        {"name": "Date", "value": _stamp(rng, base)},
                    ],
                    "body": {"data": " ".join(_sentence(rng, 14) for _ in range(4))},
                },
            }
        )
    return json.dumps({"messages": out}, indent=1)


def crm_company(seed: int, name: str, renewal: str) -> str:
    """A CRM ``companies/{id}`` record with properties and recent engagements (HubSpot-like)."""
    rng = random.Random(seed)
    engagements = [
        {
            "type": rng.choice(["CALL", "EMAIL", "MEETING"]),
            "timestamp": _stamp(rng, datetime(2026, 8, 1, tzinfo=UTC)),
            "body": _sentence(rng, 18),
            "owner": rng.choice(_NAMES),
        }
        for _ in range(30)
    ]
    props = {
        "name": name,
        "domain": f"{name.lower().replace(' ', '')}.example",
        "lifecyclestage": "customer",
        "renewal_date": renewal,
        "annualrevenue": str(rng.randrange(1, 90) * 100_000),
        "numberofemployees": str(rng.randrange(50, 5000)),
        "hs_object_id": str(rng.randrange(10**9, 10**10)),
    }
    return json.dumps({"id": props["hs_object_id"], "properties": props, "engagements": engagements}, indent=1)


def invoices_csv(seed: int, rows: int = 120) -> str:
    """An invoice export as CSV (header + ``rows`` lines)."""
    rng = random.Random(seed)
    lines = ["invoice_id,customer,region,issued,due,amount_eur,status"]
    for i in range(rows):
        lines.append(
            f"INV-{24000 + i},{rng.choice(_NAMES)},{rng.choice(['EMEA', 'AMER', 'APAC'])},"
            f"2026-0{rng.randrange(1, 9)}-{rng.randrange(10, 28)},2026-09-{rng.randrange(10, 28)},"
            f"{rng.randrange(200, 90000) / 100:.2f},{rng.choice(['paid', 'open', 'overdue'])}"
        )
    return "\n".join(lines) + "\n"


def pytest_log(seed: int, passed: int = 58, failed: int = 0, commit: str = "a1b2c3") -> str:
    """A verbose ``pytest -v`` run: one line per test, then the summary line."""
    rng = random.Random(seed)
    lines = [f"============================= test session starts (HEAD {commit}) =============================="]
    names = [
        f"tests/billing/test_{rng.choice(_WORDS)}.py::test_{rng.choice(_WORDS)}_{i}" for i in range(passed + failed)
    ]
    for i, name in enumerate(names):
        lines.append(f"{name} {'FAILED' if i < failed else 'PASSED'} [{100 * (i + 1) // len(names):3d}%]")
    took = f"{rng.randrange(3, 40)}.{rng.randrange(10, 99)}s"
    lines.append(f"======================= {passed} passed, {failed} failed in {took} ========================")
    return "\n".join(lines) + "\n"


def skill_manual(seed: int, skill: str, tools: list[str]) -> str:
    """The SKILL.md text a ``load_skill`` call returns: purpose, tools and long usage notes."""
    rng = random.Random(seed)
    parts = [f"# Skill: {skill}", "", "## Tools", *[f"- `{t}`: {_sentence(rng, 10)}" for t in tools], "", "## Usage"]
    parts += [f"{i + 1}. {_sentence(rng, 22)}" for i in range(24)]
    return "\n".join(parts) + "\n"


def build_log(seed: int, lines: int = 60, *, artifact: str = "report.pdf") -> str:
    """A renderer's stdout ending with the path and id of the file it generated."""
    rng = random.Random(seed)
    out = [f"[{i:04d}] {rng.choice(['render', 'layout', 'font', 'image'])}: {_sentence(rng, 9)}" for i in range(lines)]
    out.append(f"wrote /workspace/out/{artifact} ({rng.randrange(40, 900)} KiB)")
    return "\n".join(out) + "\n"


def document_text(seed: int, paragraphs: int = 14, *, fact: str = "") -> str:
    """A long document read by a tool, with one ``fact`` sentence buried in the middle."""
    rng = random.Random(seed)
    paras = [" ".join(_sentence(rng, 16) for _ in range(3)) for _ in range(paragraphs)]
    if fact:
        paras.insert(paragraphs // 2, fact)
    return "\n\n".join(paras) + "\n"


def debate_turn(seed: int, speaker: str, stance: str) -> str:
    """One debater's turn in an autonomous discussion (a few argued sentences)."""
    rng = random.Random(seed)
    return f"{stance} " + " ".join(_sentence(rng, 15) for _ in range(5))
