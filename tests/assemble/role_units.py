"""Units of a plain user/assistant history, for the role-order tests (`assemble.lead`, the repair phase)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ctxledger.records import Message, Role
from ctxledger.units import Unit, build_units


def role_units(roles: list[str]) -> list[Unit]:
    """One message unit per role (``"user"`` or another), ``seq`` 1, 2, … as the store assigns them on append."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    records = [
        Message(
            id=f"m{i}",
            role=Role.USER if role == "user" else Role.ASSISTANT,
            content=f"turn {i}",
            tenant_id="t",
            conversation_id="c",
            branch_id="b",
            created_at=start + timedelta(minutes=i),
            seq=i + 1,  # the anchor is found by seq
        )
        for i, role in enumerate(roles)
    ]
    units, _ = build_units(records, bytes)
    return units
