"""Records without a timestamp of their own are dated from the import's ``start_time`` (default: a fixed base)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.errors import InputError
from ctxledger.ingest import BASE_TIME, parse_file, parse_openai_messages
from ctxledger.ledger import Ledger
from ctxledger.records import Kind

_CHAT = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "imported just now"},
]

_RETAIN = """
[policy]
name = "ret"
version = "1"

[[retention.rules]]
name = "delete-1y"
kinds = ["tool_artifact"]
after_days = 365
action = "delete"
"""


def _history_times(batch) -> list[datetime]:
    (conv,) = batch.conversations
    return [r.created_at for r in conv.records if r.kind not in (Kind.CONVERSATION, Kind.BRANCH, Kind.PARTICIPANT)]


@settings(max_examples=40, deadline=None)
@given(
    start=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)),
    offset_minutes=st.integers(min_value=-12 * 60, max_value=14 * 60),
    extra=st.lists(st.text(min_size=1, max_size=20), max_size=6),
)
def test_messages_without_timestamps_are_dated_from_start_time(
    start: datetime, offset_minutes: int, extra: list[str]
) -> None:
    """Timestamp-less records are dated as with the fixed base, shifted to ``start_time``: the first at
    ``start_time``, each message a second after the one before (its tool calls at its time); the conversation
    takes the first record's time; without ``start_time`` the fixed base stands."""
    aware = start.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    messages = [*_CHAT, *({"role": "user", "content": text} for text in extra)]
    dated = parse_openai_messages(messages, start_time=aware)
    times = _history_times(dated)
    fixed = _history_times(parse_openai_messages(messages))
    assert fixed[0] == BASE_TIME and times[0] == aware
    assert [t - aware for t in times] == [t - BASE_TIME for t in fixed]
    assert times == sorted(times) and times[-1] - times[0] < timedelta(seconds=len(times))
    (conv,) = dated.conversations
    assert all(r.created_at == times[0] for r in conv.records if r.kind is Kind.CONVERSATION)


def test_a_start_time_without_a_time_zone_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(_CHAT), encoding="utf-8")
    with pytest.raises(InputError) as info:
        parse_file(path, start_time=datetime(2026, 1, 1))
    assert info.value.field == "start_time" and "timezone-aware" in str(info.value)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(days_ago=st.integers(min_value=0, max_value=300))
def test_retention_by_age_counts_from_an_import_dated_now(tmp_path_factory, days_ago: int) -> None:
    """``import --start-time`` dates timestamp-less records, so a delete-after-a-year rule leaves a recent import
    alone; with the fixed 2024 base the same rule would act on them (the README says so)."""
    tmp = tmp_path_factory.mktemp("start")
    (tmp / "chat.json").write_text(json.dumps(_CHAT), encoding="utf-8")
    (tmp / "policy.toml").write_text(_RETAIN, encoding="utf-8")
    runner = CliRunner()
    moment = (datetime.now(UTC) - timedelta(days=days_ago)).isoformat()
    for name, start in (("dated", moment), ("now", "now"), ("fixed", None)):
        url = f"sqlite:///{tmp / name}.db"
        extra = [] if start is None else ["--start-time", start]
        done = runner.invoke(app, ["--db", url, "import", str(tmp / "chat.json"), "--model", "", *extra])
        assert done.exit_code == 0, done.output
        dry = runner.invoke(app, ["--db", url, "retain", "--policy", str(tmp / "policy.toml"), "--dry-run", "--json"])
        assert dry.exit_code == 0, dry.output
        planned = json.loads(dry.stdout)["by_rule"]
        assert (planned["delete-1y"]["delete"] > 0 if start is None else planned == {}), (name, planned)
        with Ledger.open(url) as ledger:
            (conv,) = ledger.store.conversations("default")
            art = next(r for r in ledger.store.records("default", conv) if r.kind is Kind.TOOL_ARTIFACT)
        if start is None:
            assert timedelta(0) <= art.created_at - BASE_TIME < timedelta(minutes=1)
        else:
            assert datetime.now(UTC) - art.created_at <= timedelta(days=days_ago if start != "now" else 0, minutes=5)


@pytest.mark.parametrize("given_time", ["yesterday", "2026-13-01", ""])
def test_a_start_time_that_is_not_a_time_is_refused_naming_the_option(tmp_path: Path, given_time: str) -> None:
    (tmp_path / "chat.json").write_text(json.dumps(_CHAT), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'x.db'}"
    result = CliRunner().invoke(app, ["--db", url, "import", str(tmp_path / "chat.json"), "--start-time", given_time])
    assert result.exit_code == 2 and "--start-time" in result.stderr
    with Ledger.open(url) as ledger:
        assert ledger.store.conversations("default") == []
