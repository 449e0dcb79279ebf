"""Raw tool output missing from the blob store.

Two edges: ``append`` (and every import, which appends) refuses a ToolArtifact whose bytes were never stored;
and when stored bytes disappear later (deleted from disk) or stop matching their sha256, assembly goes on:
the result renders as a reference that says so, the manifest marks the record ``provenance_broken`` and
names it, and a memory's rehydration falls back to a reference. History: the bundled real tau-bench
trajectory, on a real SQLite store with its blob folder.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from ctxledger import Ledger
from ctxledger.demo import demo_source
from ctxledger.errors import BlobNotFound, InputError
from ctxledger.records import Message, Role, ToolArtifact, ToolCall, ToolMemory
from ctxledger.units import data_block_body, unavailable_text

BUDGET: dict[str, Any] = {"window_tokens": 16_000, "output_tokens": 1_000, "margin_tokens": 200}


def _imported(tmp_path: Path) -> tuple[str, str, list[ToolArtifact]]:
    url = f"sqlite:///{tmp_path}/h.db"
    with Ledger.open(url) as ledger, demo_source() as path:
        conv = ledger.import_file(path, "tau-bench", conversation_id="tau").conversation_ids[0]
        arts = [r for r in ledger.store.records("default", conv) if isinstance(r, ToolArtifact)]
    return url, conv, arts


def test_append_refuses_an_artifact_whose_blob_was_never_stored(tmp_path: Path) -> None:
    url, conv, arts = _imported(tmp_path)
    env = {"tenant_id": "default", "conversation_id": conv, "branch_id": arts[0].branch_id}
    fake = hashlib.sha256(b"never stored").hexdigest()
    with Ledger.open(url) as ledger:
        head = ledger.store.head_seq("default", conv)
        batch = [
            Message(id="x/a", role=Role.ASSISTANT, content=None, **env),
            ToolCall(id="x/c", message_id="x/a", call_id="call_r", name="report", arguments="{}", **env),
            ToolArtifact(id="x/art", tool_call_id="x/c", call_id="call_r", name="report", sha256=fake, **env),
        ]
        with pytest.raises(InputError) as err:
            ledger.append(batch)
        assert (err.value.index, err.value.field) == (2, "sha256") and "x/art" in str(err.value)
        assert ledger.store.head_seq("default", conv) == head  # nothing written
        ref = ledger.store.blobs.put(b"3 rows")
        batch[2] = ToolArtifact(
            id="x/art", tool_call_id="x/c", call_id="call_r", name="report", sha256=ref.sha256, size_bytes=6, **env
        )
        assert len(ledger.append(batch)) == 3


def test_a_blob_deleted_later_renders_as_a_reference_and_is_marked(tmp_path: Path) -> None:
    url, conv, arts = _imported(tmp_path)
    gone = arts[-1]  # the newest result: part of the step being continued (required)
    with Ledger.open(url) as ledger:
        ledger.store.blobs.delete(gone.sha256)
        asm = ledger.assemble(conv, **BUDGET)
        manifest = ledger.get_assembly(asm.id)
        shown = asm.payload["messages"][asm.turn_refs.index(gone.id)]["content"]
        assert data_block_body(shown) == unavailable_text(gone, "blob_missing")
        assert "raw bytes missing from the blob store" in shown and gone.sha256 in shown and gone.id in shown
        entry = next(e for e in manifest["included"] if e["ref"] == gone.id)
        assert entry["transform"].split("+")[0] == "blob_missing"  # then delimited as data, like any result
        marks = [m for m in manifest["marks"] if m["ref"] == gone.id and m["stage"] == "integrity"]
        assert [m["reason"] for m in marks] == ["provenance_broken"]
        assert gone.sha256 in marks[0]["detail"]
        assert any("marked provenance_broken" in line for line in ledger.explain(asm.id, gone.id)["chain"])
        with pytest.raises(BlobNotFound) as err:
            ledger.rehydrate(gone.id)
        assert gone.id in str(err.value)
        # Other results still show their exact bytes.
        index = manifest["turn_refs"].index(arts[-2].id)
        shown = data_block_body(asm.payload["messages"][index]["content"])
        assert shown == ledger.store.blobs.get(arts[-2].sha256).decode()


def test_bytes_that_no_longer_match_their_sha256_are_not_shown(tmp_path: Path) -> None:
    url, conv, arts = _imported(tmp_path)
    bad = arts[-1]
    with Ledger.open(url) as ledger:
        changed = ledger.store.blobs.path(bad.sha256)  # imported into the pack: a file there is read first
        changed.parent.mkdir(parents=True, exist_ok=True)
        changed.write_bytes(b'{"balance": 1000000}')  # changed on disk
        asm = ledger.assemble(conv, **BUDGET)
        shown = asm.payload["messages"][asm.turn_refs.index(bad.id)]["content"]
        assert data_block_body(shown) == unavailable_text(bad, "blob_mismatch") and "1000000" not in shown
        marks = [m for m in ledger.get_assembly(asm.id)["marks"] if m["ref"] == bad.id and m["stage"] == "integrity"]
        assert marks and marks[0]["reason"] == "provenance_broken" and "no longer match" in marks[0]["detail"]


def test_exact_evidence_from_a_missing_blob_falls_back_to_a_reference(tmp_path: Path) -> None:
    url, conv, arts = _imported(tmp_path)
    source = arts[0]
    with Ledger.open(url) as ledger:
        env = {"tenant_id": "default", "conversation_id": conv, "branch_id": source.branch_id}
        mem = ToolMemory(
            id="tau/mem-user",
            summary=f"{source.name}: the user's profile and reservations",
            source_artifact_ids=(source.id,),
            locators=({"artifact_id": source.id, "sha256": source.sha256},),
            **env,
        )
        ledger.append([mem])
        ledger.store.blobs.delete(source.sha256)
        asm = ledger.assemble(conv, exact_evidence=(mem.id,), **BUDGET)
        manifest = ledger.get_assembly(asm.id)
        if all(e["ref"] != mem.id for e in manifest["included"]):
            pytest.fail(f"the memory was not selected: {[o for o in manifest['omitted'] if o['ref'] == mem.id]}")
        entries = [r for r in manifest["rehydrations"] if r["memory"] == mem.id]
        assert [(r["artifact"], r["decision"], r["reason"]) for r in entries] == [(source.id, "reference", "missing")]
        assert entries[0]["detail"] == "raw bytes missing from the blob store"
