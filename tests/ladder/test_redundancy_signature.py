"""Redundancy never merges outputs of different calls (a cancellation dropped as a 'duplicate')."""

from __future__ import annotations

import json

from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore

RESERVATION = {
    "reservation_id": "HATHAU",
    "user_id": "mia_li_3668",
    "origin": "JFK",
    "destination": "SEA",
    "flights": [{"flight_number": "HAT136", "date": "2024-05-20", "price": 305}] * 6,
    "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
    "status": "booked",
}


def _exchange(call_id, name, args, result):
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
    ]


def test_booking_and_cancellation_are_not_redundant_but_a_repeated_poll_is():
    """Near-identical JSON from different calls both stay; the same call repeated with the same output enters once."""
    cancelled = {**RESERVATION, "status": "cancelled", "refund": -305}
    messages = [{"role": "system", "content": "You are an airline agent."}, {"role": "user", "content": "Book it."}]
    messages += _exchange("c1", "book_reservation", {"flight": "HAT136"}, RESERVATION)
    messages += [{"role": "user", "content": "Actually cancel it."}]
    messages += _exchange("c2", "cancel_reservation", {"reservation_id": "HATHAU"}, cancelled)
    messages += _exchange("c3", "get_reservation_details", {"reservation_id": "HATHAU"}, cancelled)
    messages += _exchange("c4", "get_reservation_details", {"reservation_id": "HATHAU"}, cancelled)
    messages += [{"role": "user", "content": "What is the status now?"}]
    ledger = Ledger(MemoryStore())
    ledger.import_messages(messages, conversation_id="r")
    asm = ledger.assemble("r", window_tokens=16_000, output_tokens=500, margin_tokens=100)
    redundant = {e["ref"] for e in asm.manifest["omitted"] if e["reason"] == "redundant"}
    body = json.dumps(asm.payload)
    assert '\\"refund\\": -305' in body and "book_reservation" in body and "cancel_reservation" in body
    assert redundant and all(ref.startswith("r/") for ref in redundant)
    calls = [c["id"] for m in asm.payload["messages"] for c in m.get("tool_calls") or ()]
    assert {"c1", "c2"} <= set(calls) and not {"c3", "c4"} <= set(calls)
