"""`ctxledger import` and `conversations`: real files and folders in, bad input refused whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ingest import parse_file
from ctxledger.ledger import Ledger


def _flat(text: str) -> str:
    return " ".join(text.split())


def _db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ctx.db'}"


def _conversations(url: str) -> list[str]:
    with Ledger.open(url) as ledger:
        return ledger.store.conversations("default")


def test_import_a_real_trajectory_prints_its_counts(runner: CliRunner, tmp_path: Path, data_dir: Path) -> None:
    """A mini-swe-agent file imports as one conversation; the table shows the parser's counts and events/s."""
    path = data_dir / "mini-swe-agent-deepseek" / "sqlfluff__sqlfluff-2419.traj.json"
    batch = parse_file(path)
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(path)])
    assert result.exit_code == 0, result.output
    flat = _flat(result.stdout)
    assert (
        f"mini-swe-agent │ 1 │ {batch.messages:,} │ {batch.tool_calls:,} │ {batch.artifacts:,} │ {batch.records:,}"
        in flat
    )
    assert "events/s" in flat
    assert _conversations(_db(tmp_path)) == ["sqlfluff__sqlfluff-2419"]


def test_import_a_folder_names_conversations_by_relative_path(
    runner: CliRunner, tmp_path: Path, data_dir: Path
) -> None:
    """Files with the same stem in different folders become distinct conversations named by relative path."""
    root = data_dir / "swe-agent-demos" / "trajectories" / "demonstrations"
    files = sorted(p for p in root.rglob("*.traj"))
    stems = [p.stem for p in files]
    assert len(set(stems)) < len(stems), "the folder must hold colliding stems for this test to mean anything"
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(root), "--model", ""])
    assert result.exit_code == 0, result.output
    ids = _conversations(_db(tmp_path))
    assert len(ids) == len(files)
    expected = {p.relative_to(root).with_suffix("").as_posix() for p in files}
    assert set(ids) == expected
    listing = runner.invoke(app, ["--db", _db(tmp_path), "conversations"])
    assert listing.exit_code == 0
    assert "ctf/crypto/katy" in listing.stdout


def test_bad_input_exits_2_naming_file_record_and_field_and_writes_nothing(
    runner: CliRunner, tmp_path: Path, data_dir: Path
) -> None:
    """A real tau-bench file with one broken field is refused whole: exit 2, file/record/field named, store empty."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text(encoding="utf-8"))[:3]
    del records[2]["traj"][3]["role"]
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(records), encoding="utf-8")
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(bad)])
    assert result.exit_code == 2
    flat = _flat(result.stderr)
    assert str(bad) in flat
    assert "record 2" in flat
    assert "traj[3].role" in flat
    assert "Traceback" not in result.output
    assert _conversations(_db(tmp_path)) == []


def test_one_bad_file_in_a_folder_refuses_the_whole_folder(runner: CliRunner, tmp_path: Path, data_dir: Path) -> None:
    """Every file is parsed before any is written, so the good file of the folder is not imported either."""
    folder = tmp_path / "in"
    folder.mkdir()
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text(encoding="utf-8"))[:2]
    (folder / "a_good.json").write_text(json.dumps(records[:1]), encoding="utf-8")
    broken = records[1:]
    broken[0]["traj"][2]["tool_calls"] = "not a list"
    (folder / "b_bad.json").write_text(json.dumps(broken), encoding="utf-8")
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(folder)])
    assert result.exit_code == 2
    assert "b_bad.json" in result.stderr
    assert _conversations(_db(tmp_path)) == []


def test_reimporting_the_same_source_is_refused(runner: CliRunner, tmp_path: Path, data_dir: Path) -> None:
    """Ids are deterministic, so a second import of a file exits 2 and says how to import it again."""
    path = data_dir / "mini-swe-agent-deepseek" / "sqlfluff__sqlfluff-2419.traj.json"
    assert runner.invoke(app, ["--db", _db(tmp_path), "import", str(path), "--model", ""]).exit_code == 0
    again = runner.invoke(app, ["--db", _db(tmp_path), "import", str(path)])
    assert again.exit_code == 2
    assert "already in tenant" in _flat(again.stderr)
    renamed = runner.invoke(
        app, ["--db", _db(tmp_path), "import", str(path), "--conversation-id", "second", "--model", ""]
    )
    assert renamed.exit_code == 0, renamed.output
    assert sorted(_conversations(_db(tmp_path))) == ["second", "sqlfluff__sqlfluff-2419"]


def test_missing_path_and_unknown_format_are_user_errors(runner: CliRunner, tmp_path: Path) -> None:
    """A path that does not exist, or a format name that is not one, exits 2 without a traceback."""
    missing = runner.invoke(app, ["--db", _db(tmp_path), "import", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2
    assert "no such file" in missing.stderr
    wrong = runner.invoke(app, ["--db", _db(tmp_path), "import", str(tmp_path), "--format", "csv"])
    assert wrong.exit_code == 2
    assert "Traceback" not in missing.output + wrong.output


def test_tenants_are_separate(runner: CliRunner, tmp_path: Path, data_dir: Path) -> None:
    """--tenant scopes import and listing: another tenant sees no conversations."""
    path = data_dir / "mini-swe-agent-deepseek" / "sqlfluff__sqlfluff-2419.traj.json"
    ok = runner.invoke(app, ["--db", _db(tmp_path), "--tenant", "acme", "import", str(path), "--model", ""])
    assert ok.exit_code == 0, ok.output
    other = runner.invoke(app, ["--db", _db(tmp_path), "conversations"])
    assert "no conversations yet" in other.stdout
    mine = runner.invoke(app, ["--db", _db(tmp_path), "--tenant", "acme", "conversations"])
    assert "sqlfluff__sqlfluff-2419" in mine.stdout


def test_import_for_an_unknown_model_needs_a_counter_and_writes_nothing_without_one(
    runner: CliRunner, tmp_path: Path, data_dir: Path
) -> None:
    """--model names the tokenizer to warm counts for; an unknown one is refused before any write."""
    path = data_dir / "mini-swe-agent-deepseek" / "sqlfluff__sqlfluff-2419.traj.json"
    refused = runner.invoke(app, ["--db", _db(tmp_path), "import", str(path), "--model", "deepseek-chat"])
    assert refused.exit_code == 2
    assert "pass --counter one of" in _flat(refused.stderr)
    assert _conversations(_db(tmp_path)) == []
    args = ["--db", _db(tmp_path), "import", str(path), "--model", "deepseek-chat", "--counter", "cl100k_base"]
    assert runner.invoke(app, args).exit_code == 0
    assert _conversations(_db(tmp_path)) == ["sqlfluff__sqlfluff-2419"]


_NOT_TRANSCRIPT_KEYS = st.text(alphabet="qvwxyz", min_size=1, max_size=5)
"""Keys no transcript format and no transcript-like key is made of (``role``, ``messages``, ``history`` …)."""
NOT_TRANSCRIPTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_NOT_TRANSCRIPT_KEYS, inner, max_size=4),
    max_leaves=12,
)
"""JSON that holds no transcript under any format: a package manifest, a schema, a list of numbers."""


def _ambiguous_chat(system: str, text: str) -> dict:
    return {"system": system, "messages": [{"role": "tool", "tool_call_id": "c1", "content": text}]}


AMBIGUOUS_CHATS = st.builds(_ambiguous_chat, st.text(max_size=10), st.text(max_size=10))
"""Chats with traits of both OpenAI (a tool role) and Anthropic (a top-level system): only --format tells them."""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(others=st.lists(NOT_TRANSCRIPTS, min_size=1, max_size=3), chats=st.lists(AMBIGUOUS_CHATS, max_size=2))
def test_a_folder_import_skips_files_that_are_not_transcripts_without_pointing_at_format(
    runner: CliRunner, tmp_path_factory: pytest.TempPathFactory, data_dir: Path, others: list, chats: list
) -> None:
    """Files that hold no transcript are skipped as such; --format is named only for transcripts it could tell."""
    tmp_path = tmp_path_factory.mktemp("skips")
    folder = tmp_path / "in"
    folder.mkdir()
    traj = data_dir / "swe-agent-demos" / "trajectories" / "demonstrations" / "ctf" / "misc" / "networking_1.traj"
    (folder / "networking_1.traj").write_bytes(traj.read_bytes())
    for i, value in enumerate(others):
        (folder / f"other-{i}.json").write_text(json.dumps(value), encoding="utf-8")
    for i, value in enumerate(chats):
        (folder / f"chat-{i}.json").write_text(json.dumps(value), encoding="utf-8")
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(folder), "--model", ""])
    assert result.exit_code == 0, result.output
    warning = _flat(result.stderr)
    not_transcripts, _, transcripts = warning.partition("look like transcripts")
    assert f"skipped {len(others)} file(s) that are not transcripts" in not_transcripts
    assert all(str(folder / f"other-{i}.json") in not_transcripts for i in range(len(others)))
    assert "--format" not in not_transcripts and "other-" not in transcripts
    if chats:
        assert f"skipped {len(chats)} file(s) that look like transcripts in a format that could not be told" in warning
        assert "(import them with --format)" in transcripts
        assert all(str(folder / f"chat-{i}.json") in transcripts for i in range(len(chats)))
    else:
        assert "--format" not in warning
    assert _conversations(_db(tmp_path)) == ["networking_1"]


def test_unrecognised_input_errors_name_the_format_option_only_for_transcripts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A named file whose format cannot be told, or a folder whose transcripts' cannot, fails naming --format
    (not the API's fmt=); a folder holding no transcript says so instead."""
    plain, chats = tmp_path / "plain", tmp_path / "chats"
    plain.mkdir()
    chats.mkdir()
    (plain / "package.json").write_text('{"name": "x"}', encoding="utf-8")
    (chats / "chat.json").write_text(json.dumps(_ambiguous_chat("be brief", "42")), encoding="utf-8")
    one = runner.invoke(app, ["--db", _db(tmp_path), "import", str(plain / "package.json")])
    every = runner.invoke(app, ["--db", _db(tmp_path), "import", str(chats)])
    for result in (one, every):
        assert result.exit_code == 2
        flat = _flat(result.stderr)
        assert "pass --format one of anthropic-messages" in flat and "fmt=" not in flat
    assert f"{chats}: the format of none of the 1 transcript(s) could be told" in _flat(every.stderr)
    none = runner.invoke(app, ["--db", _db(tmp_path), "import", str(plain)])
    assert none.exit_code == 2
    assert f"{plain}: none of the 1 files holds a conversation" in _flat(none.stderr)
    assert "--format" not in none.stderr
    assert _conversations(_db(tmp_path)) == []


def test_conversations_shows_every_id_whole(runner: CliRunner, tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    """Long ids (relative paths of a folder import) are never cut: one line each when piped, folded when narrow."""
    root = data_dir / "swe-agent-demos"
    assert runner.invoke(app, ["--db", _db(tmp_path), "import", str(root), "--model", ""]).exit_code == 0
    ids = _conversations(_db(tmp_path))
    assert max(len(i) for i in ids) > 120, "the data must hold ids wider than a default pipe for this test"
    piped = runner.invoke(app, ["--db", _db(tmp_path), "conversations"])
    assert piped.exit_code == 0, piped.output
    first_cells = [line.split("│")[1].strip() for line in piped.stdout.splitlines() if line.startswith("│")]
    assert first_cells == ids
    monkeypatch.setenv("COLUMNS", "80")
    narrow = runner.invoke(app, ["--db", _db(tmp_path), "conversations"])
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    folded = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert folded == "".join(ids)


def test_a_toolbench_failed_run_is_skipped_with_a_warning_and_the_rest_imports(
    runner: CliRunner, tmp_path: Path, data_dir: Path
) -> None:
    """A ToolBench answer with a search tree but no train_messages (a failed run) is listed and skipped."""
    source = data_dir / "toolbench-examples" / "answer" / "G1_answer"
    folder = tmp_path / "answers"
    folder.mkdir()
    names = sorted(p.name for p in source.glob("*.json"))
    for name in names:
        record = json.loads((source / name).read_text())
        if name == names[0]:
            del record["answer_generation"]["train_messages"]
        (folder / name).write_text(json.dumps(record))
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(folder), "--model", ""])
    assert result.exit_code == 0, result.output
    assert "skipped 1 file(s) with nothing to import" in _flat(result.output)
    assert sorted(_conversations(_db(tmp_path))) == sorted(n.removesuffix(".json") for n in names[1:])
    single = runner.invoke(app, ["--db", _db(tmp_path), "import", str(folder / names[0])])
    assert single.exit_code == 2 and "failed run" in _flat(single.output)


def _chat(k: int, turns: int) -> str:
    """A small OpenAI Chat transcript, distinct per ``k``."""
    messages = [{"role": "user", "content": f"question {k}"}]
    messages += [{"role": "assistant" if i % 2 == 0 else "user", "content": f"turn {k}.{i}"} for i in range(turns)]
    return json.dumps({"messages": messages})


@given(total=st.integers(min_value=2, max_value=4), data=st.data())
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_an_interrupted_folder_import_finishes_with_skip_imported(runner: CliRunner, tmp_path_factory, total, data):
    """Whatever part of a folder was written before, --skip-imported writes exactly the rest; a plain re-run
    is refused with a hint naming it, and a stored conversation whose records differ is still refused."""
    tmp = tmp_path_factory.mktemp("resume")
    folder, url = tmp / "chats", f"sqlite:///{tmp / 'ctx.db'}"
    folder.mkdir()
    done = data.draw(st.sets(st.integers(min_value=0, max_value=total - 1), min_size=1, max_size=total - 1))
    for k in sorted(done):  # what an interrupted run had written: whole files
        (folder / f"c{k}.json").write_text(_chat(k, 3))
    assert runner.invoke(app, ["--db", url, "import", str(folder), "--model", ""]).exit_code == 0
    for k in range(total):
        (folder / f"c{k}.json").write_text(_chat(k, 3))
    plain = runner.invoke(app, ["--db", url, "import", str(folder), "--model", ""])
    assert plain.exit_code == 2 and "--skip-imported" in _flat(plain.stderr)
    resumed = runner.invoke(app, ["--db", url, "import", str(folder), "--model", "", "--skip-imported"])
    assert resumed.exit_code == 0, resumed.output
    assert f"skipped {len(done)} conversation(s) already imported" in _flat(resumed.stderr)
    assert sorted(_conversations(url)) == [f"c{k}" for k in range(total)]
    again = runner.invoke(app, ["--db", url, "import", str(folder), "--model", "", "--skip-imported"])
    assert again.exit_code == 0 and "nothing left to import" in _flat(again.stderr)
    (folder / f"c{min(done)}.json").write_text(_chat(min(done), 5))  # same id, other records
    changed = runner.invoke(app, ["--db", url, "import", str(folder), "--model", "", "--skip-imported"])
    assert changed.exit_code == 2 and "already in tenant" in _flat(changed.stderr)


def test_a_folder_import_shows_each_files_name_whole(runner: CliRunner, tmp_path: Path) -> None:
    """Files whose paths share a long prefix stay told apart in the table (the folder is named once, above)."""
    folder = tmp_path / "a-rather-long-folder-name-for-runs" / "trajectories-of-one-agent-run"
    folder.mkdir(parents=True)
    names = [f"same-long-prefix-run-{i}.json" for i in range(3)]
    for name in names:
        (folder / name).write_text('[{"role": "user", "content": "hello"}]', encoding="utf-8")
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(folder), "--model", ""])
    assert result.exit_code == 0, result.output
    for name in names:
        assert name in result.stdout, result.stdout
    assert str(folder) in _flat(result.stdout).replace(" ", "")


@given(st.lists(st.lists(st.sampled_from(["a", "bb", "run-1", "x.json", ".."]), min_size=1, max_size=5), min_size=1))
def test_display_names_are_suffixes_that_keep_different_files_apart(parts: list[list[str]]) -> None:
    from ctxledger.cli.importing import _display_names

    sources = list(dict.fromkeys("/".join(p) for p in parts))
    root, shown = _display_names(sources)
    assert len(shown) == len(sources) and len(set(shown)) == len(set(sources))
    for source, name in zip(sources, shown, strict=True):
        assert source == name if root is None else source == f"{root}/{name}"


def test_every_real_transcript_looks_like_one_and_the_real_non_transcripts_do_not(data_dir: Path) -> None:
    """On the shared data: each file whose format is told looks like a transcript; BFCL's function docs and
    expected answers (the folder's files that are no transcript) do not."""
    from ctxledger.cli._transcripts import looks_like_transcript
    from ctxledger.errors import FormatNotRecognised
    from ctxledger.ingest._load import load_file
    from ctxledger.ingest._sniff import sniff

    told, not_told = [], []
    for path in sorted(p for p in data_dir.rglob("*") if p.suffix in (".json", ".jsonl", ".traj")):
        value = load_file(path, str(path)).value
        try:
            sniff(value, str(path))
        except FormatNotRecognised:
            not_told.append(path.relative_to(data_dir).as_posix())
            assert not looks_like_transcript(value), path
        else:
            told.append(path)
            assert looks_like_transcript(value), path
    assert len(told) > 20
    assert not_told == [
        "bfcl-memory/multi_turn_func_doc/memory_kv.json",
        "bfcl-memory/multi_turn_func_doc/memory_rec_sum.json",
        "bfcl-memory/multi_turn_func_doc/memory_vector.json",
        "bfcl-memory/possible_answer/BFCL_v4_memory.json",
    ]


_TEXT = st.text(alphabet="abcdefghij ", min_size=1, max_size=12)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": _TEXT | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), min_size=1),
    }
)


def _fields(message: dict[str, Any]) -> list[str]:
    """The paths of a message's leaves, as the importers name fields."""
    if isinstance(message["content"], str):
        return ["role", "content"]
    return ["role", *(f"content[{k}].{key}" for k in range(len(message["content"])) for key in ("type", "text"))]


def _broken(message: dict[str, Any], field: str) -> str:
    """``message`` as one line of JSON with the leaf at ``field`` replaced by a character no JSON value starts with."""
    marker = "__broken__"
    copy = json.loads(json.dumps(message))
    if field in ("role", "content"):
        copy[field] = marker
    else:
        k, key = field.removeprefix("content[").split("].")
        copy["content"][int(k)][key] = marker
    return json.dumps(copy).replace(json.dumps(marker), "@")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=4), data=st.data(), form=st.sampled_from(["jsonl", "array", "doc"])
)
def test_malformed_json_names_the_record_and_the_field_where_parsing_stopped(
    runner: CliRunner, tmp_path: Path, messages: list[dict[str, Any]], data: st.DataObject, form: str
) -> None:
    """A transcript with one unparsable value: the CLI names the file, the record and the field (as the service)."""
    index = data.draw(st.integers(0, len(messages) - 1), "index")
    field = data.draw(st.sampled_from(_fields(messages[index])), "field")
    lines = [json.dumps(m) for m in messages]
    lines[index] = _broken(messages[index], field)
    if form == "jsonl":
        path, content = tmp_path / "chat.jsonl", "\n".join(lines) + "\n"
    elif form == "array":
        path, content = tmp_path / "chat.json", "[" + ",\n".join(lines) + "]"
    else:
        path, content = tmp_path / "chat.json", '{"messages": [' + ", ".join(lines) + "]}"
    path.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(path), "--model", ""])
    assert result.exit_code == 2, result.output
    said = _flat(result.stderr)
    where = f"field 'messages[{index}].{field}'" if form == "doc" else f"record {index}, field '{field}'"
    assert f"chat.json{'l' if form == 'jsonl' else ''}, {where}: malformed JSON" in said, said


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.integers(2, 4), stop=st.integers(0, 3))
def test_an_interrupted_folder_import_says_what_was_written_and_resumes(
    runner: CliRunner, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, files: int, stop: int
) -> None:
    """Ctrl-C while writing: exit 130 with a sentence on stderr; files before stay whole, --skip-imported resumes."""
    import ctxledger.ingest

    stop = min(stop, files - 1)
    folder = tmp_path_factory.mktemp("interrupted")
    for k in range(files):
        messages = [{"role": "user", "content": f"question {k}"}, {"role": "assistant", "content": f"answer {k}"}]
        (folder / f"run{k}.json").write_text(json.dumps(messages))
    url = f"sqlite:///{folder / 'i.db'}"
    real, written = ctxledger.ingest.write_batch, []

    def interrupted(store: Any, batch: Any) -> Any:
        if len(written) == stop:
            raise KeyboardInterrupt
        written.append(batch)
        return real(store, batch)

    monkeypatch.setattr(ctxledger.ingest, "write_batch", interrupted)
    result = runner.invoke(app, ["--db", url, "import", str(folder)])
    monkeypatch.setattr(ctxledger.ingest, "write_batch", real)
    assert result.exit_code == 130
    assert "interrupted" in result.stderr and "--skip-imported" in result.stderr
    assert len(_conversations(url)) == stop
    again = runner.invoke(app, ["--db", url, "import", str(folder), "--skip-imported"])
    assert again.exit_code == 0, again.output
    assert len(_conversations(url)) == files


@pytest.mark.parametrize("value", ["ok/0", "ok"])
def test_a_conversation_id_given_that_is_taken_says_the_value_is_at_fault(
    runner: CliRunner, tmp_path: Path, value: str
) -> None:
    source = tmp_path / "ok.json"
    source.write_text('[{"role": "user", "content": "hi"}]')
    url = f"sqlite:///{tmp_path / 'c.db'}"
    assert runner.invoke(app, ["--db", url, "import", str(source)]).exit_code == 0
    answer = runner.invoke(app, ["--db", url, "import", str(source), "--conversation-id", value])
    assert answer.exit_code == 2
    flat = " ".join(answer.stderr.split())
    assert f"the --conversation-id given ({value!r}) cannot be used" in flat
    assert "pass --conversation-id" not in flat


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    outer=st.text("abc", min_size=1, max_size=3),
    inner=st.text("xyz", min_size=1, max_size=3),
    skip=st.booleans(),
)
def test_files_of_one_folder_whose_ids_would_nest_are_refused_truthfully(
    runner: CliRunner, tmp_path_factory: pytest.TempPathFactory, outer: str, inner: str, skip: bool
) -> None:
    """``a.json`` and ``a/x.json`` would be conversations ``a`` and ``a/x``: neither is stored, so the error says
    they come from this import (not that one "exists") and names a remedy that works, not --skip-imported."""
    tmp_path = tmp_path_factory.mktemp("nest")
    folder = tmp_path / "nest"
    (folder / outer).mkdir(parents=True)
    chat = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    (folder / f"{outer}.json").write_text(chat, encoding="utf-8")
    (folder / outer / f"{inner}.json").write_text(chat, encoding="utf-8")
    url = _db(tmp_path)
    args = ["--db", url, "import", str(folder), "--model", "", *(["--skip-imported"] if skip else [])]
    refused = runner.invoke(app, args)
    text = _flat(refused.stderr)
    assert refused.exit_code == 2, text
    assert "exists" not in text and "--skip-imported" not in text
    assert f"'{outer}'" in text and f"'{outer}/{inner}'" in text and "would nest" in text
    assert _conversations(url) == []
    alone = ["--db", url, "import", str(folder / outer / f"{inner}.json"), "--model", "", "--conversation-id"]
    assert runner.invoke(app, [*alone, f"{outer}-{inner}"]).exit_code == 0
    assert runner.invoke(app, ["--db", url, "import", str(folder / f"{outer}.json"), "--model", ""]).exit_code == 0


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 5))
def test_an_import_on_no_terminal_prints_progress_lines(
    runner: CliRunner, tmp_path_factory: pytest.TempPathFactory, n: int
) -> None:
    """A log or CI gets plain progress lines (the bars show only on a terminal), ending at the last file; the rate
    says what it times."""
    tmp_path = tmp_path_factory.mktemp("lines")
    folder = tmp_path / "chats"
    folder.mkdir()
    chat = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    for i in range(n):
        (folder / f"c{i}.json").write_text(chat, encoding="utf-8")
    result = runner.invoke(app, ["--db", _db(tmp_path), "import", str(folder), "--model", ""])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("import: ")]
    assert lines[0].startswith("import: parsed 1/")
    assert any(line.startswith(f"import: parsed {n}/{n} files (100%)") for line in lines)
    assert any(line.startswith(f"import: written {n}/{n} files (100%)") for line in lines)
    assert "process start-up, opening the store and loading the tokenizer not counted" in _flat(result.stdout)
