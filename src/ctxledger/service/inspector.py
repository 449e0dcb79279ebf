"""The web inspector at ``/inspect``: server-rendered pages an operator reads at a glance.

Pages: the tenant's conversations; one conversation's assemblies with its tokens over the calls (an
inline SVG chart of estimated and observed input tokens); one assembly as a picture (the budget as a bar
by context class, the included items with stage, utility, tokens and representation, the omissions
grouped by reason with counts and the notable ones, and the diff against the previous assembly of the
conversation: what entered, what left and why); one item's provenance chain (memory → artifact → bytes)
with a rehydrate button that obeys the policy (:func:`ctxledger.service.manifest_view.rehydration_refusal`).

The pages accept the same ``Authorization: Bearer`` key as the API; a browser logs in once at
``/inspect/login`` and keeps a cookie holding a server-side session's token (:mod:`ctxledger.service.auth`).
A failure a browser asks for (``Accept: text/html``) is an HTML page, anything else problem+json
(:func:`error_page`); a 404 is the same for another tenant's ids and for ids that do not exist. No
JavaScript is needed; every value is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from ctxledger.errors import RecordNotFound
from ctxledger.facts import direct_sources
from ctxledger.manifest import has_full_trace
from ctxledger.replay_mismatch import ReplayMismatch, replay_remedy
from ctxledger.service import manifest_view as mv
from ctxledger.service.auth import SESSION_COOKIE, presented_tenant
from ctxledger.store.sessions import end_session, open_session

router = APIRouter(prefix="/inspect", include_in_schema=False)

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
header a{color:#cfe0ff;text-decoration:none}main{padding:16px 20px;max-width:1200px}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:22px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border-bottom:1px solid #e3e6eb;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#eef1f5;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:flex;height:28px;border-radius:4px;overflow:hidden;background:#e3e6eb;margin:6px 0}
.bar div{color:#fff;font-size:12px;white-space:nowrap;overflow:hidden;padding:5px 6px;box-sizing:border-box}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:10px;height:10px;margin-right:4px}
.card{background:#fff;border:1px solid #e3e6eb;border-radius:6px;padding:10px 14px;margin:8px 0}
.reason{font-weight:600}.muted{color:#6b7280}.in{color:#137333}.out{color:#b3261e}code{font-size:12px}
button{font:inherit;padding:4px 12px}.refused{color:#b3261e}
"""
_COLOURS = ("#3367d6", "#0b8043", "#f09300", "#8e24aa", "#d50000", "#00897b", "#6d4c41", "#546e7a", "#c2185b")


def _page(title: str, body: str, tenant: str | None = None, status: int = 200) -> HTMLResponse:
    who = f'<span class="muted">tenant {escape(tenant)}</span>' if tenant else ""
    nav = '<a href="/inspect">Conversations</a>' if tenant else ""
    logout = '<form method="post" action="/inspect/logout" style="margin-left:auto"><button>Log out</button></form>'
    html = (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)} · ctxledger</title>"
        f"<style>{_CSS}</style></head><body><header><strong>ctxledger inspector</strong>{nav}{who}"
        f"{logout if tenant else ''}</header><main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(html, status_code=status)


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()) -> str:
    nums = set(numeric)
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{c}</td>' if i in nums else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _tenant(request: Request) -> str | None:
    return presented_tenant(request)[0]


def _login(message: str = "", status: int = 401) -> HTMLResponse:
    note = f'<p class="refused">{escape(message)}</p>' if message else ""
    form = (
        f"{note}<form method='post' action='/inspect/login' class='card'><p>Paste an API key "
        "(<code>ctxledger keys create --tenant T</code> prints one). The browser keeps a session cookie.</p>"
        "<input name='key' type='password' size='70' aria-label='API key' autocomplete='off'> "
        "<button type='submit'>Log in</button></form>"
    )
    return _page("Log in", form, status=status)


def _short(ref: str, conversation_id: str) -> str:
    return ref.removeprefix(f"{conversation_id}/")


def _num(value: Any) -> str:
    return "" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:.3f}"


@router.get("/login")
def login_form() -> HTMLResponse:
    """The login form."""
    return _login(status=200)


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the posted key; on success open a server-side session, set its cookie and go to the conversations.

    The cookie holds the session's random token, not the key (``HttpOnly``, ``SameSite=Strict``, ``Secure``
    over https, expiring with the session).
    """
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    key = (form.get("key") or [""])[0].strip()
    store = request.app.state.service.ledger.store
    ttl = request.app.state.session_ttl
    opened = await run_in_threadpool(open_session, store, key, ttl=ttl) if key else None
    if opened is None:
        return _login("That key is unknown or revoked.")
    token, _session = opened
    response = RedirectResponse("/inspect", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(request.app.state.session_ttl.total_seconds()),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    """End the session (its row is deleted, so the token no longer works anywhere) and forget the cookie."""
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        end_session(request.app.state.service.ledger.store, token)
    response = RedirectResponse("/inspect/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def wants_html(request: Request) -> bool:
    """Whether a request to an ``/inspect`` page asks for HTML (a browser's ``Accept: text/html``)."""
    if not request.url.path.startswith(router.prefix):
        return False
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() in ("text/html", "application/xhtml+xml") for part in accept.split(","))


def error_page(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    """The HTML page of a failed ``/inspect`` request (the same facts as the problem+json answer).

    A 404 reads the same whether the id belongs to another tenant or to nobody.
    """
    if status == 404:
        detail = "No conversation, assembly or item with that id for this key."
    body = f'<p class="refused">{escape(detail)}</p><p><a href="/inspect">Back to the conversations</a></p>'
    return _page(f"{status} {title}", body, _tenant(request), status=status)


@router.get("")
def conversations(request: Request) -> HTMLResponse:
    """The tenant's conversations."""
    tenant = _tenant(request)
    if tenant is None:
        return _login()
    service = request.app.state.service

    def run(ledger: Any) -> list[tuple[str, int, str, int]]:
        out = []
        for cid in ledger.store.conversations(tenant):
            head = ledger.store.get(tenant, cid)
            calls = len(ledger.store.list_assemblies(tenant, cid))
            out.append((cid, ledger.store.head_seq(tenant, cid), str(getattr(head, "title", "") or ""), calls))
        return out

    rows = [
        (f'<a href="/inspect/conversations/{quote(cid, safe="")}">{escape(cid)}</a>', f"{n:,}", escape(t), f"{c:,}")
        for cid, n, t, c in service.call(run)
    ]
    body = (
        _table(("conversation", "records", "title", "assemblies"), rows, numeric=(1, 3))
        if rows
        else ("<p>No conversations yet. Append messages with <code>POST /v1/conversations/{id}/messages</code>.</p>")
    )
    return _page("Conversations", body, tenant)


def _tokens_chart(assemblies: Sequence[Mapping[str, Any]]) -> str:
    """Estimated (blue) and observed (green) input tokens per call, as an inline SVG line chart."""
    points = [(mv.tokens(a)["estimated_input"] or 0, mv.tokens(a)["observed_input"]) for a in assemblies]
    if not points:
        return ""
    width, height, pad = 760, 180, 36
    top = max([1, *(e for e, _ in points), *(o or 0 for _, o in points)])
    step = (width - 2 * pad) / max(len(points) - 1, 1)

    def xy(i: int, v: int) -> str:
        return f"{pad + i * step:.1f},{height - pad - (height - 2 * pad) * v / top:.1f}"

    est = " ".join(xy(i, e) for i, (e, _) in enumerate(points))
    obs = [(i, o) for i, (_, o) in enumerate(points) if o is not None]
    dots = "".join(
        f'<circle cx="{xy(i, e).split(",")[0]}" cy="{xy(i, e).split(",")[1]}" r="3" fill="#3367d6">'
        f"<title>call {i + 1}: {e:,} estimated</title></circle>"
        for i, (e, _) in enumerate(points)
    )
    obs_line = (
        f'<polyline fill="none" stroke="#0b8043" stroke-width="2" points="{" ".join(xy(i, o) for i, o in obs)}"/>'
    )
    return (
        f'<svg role="img" aria-label="tokens over calls" width="{width}" height="{height}" class="card">'
        f'<text x="{pad}" y="16" font-size="12">input tokens per call (max {top:,}) — '
        '<tspan fill="#3367d6">estimated</tspan>, <tspan fill="#0b8043">observed</tspan></text>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>'
        f'<polyline fill="none" stroke="#3367d6" stroke-width="2" points="{est}"/>{obs_line if obs else ""}{dots}'
        f'<text x="{pad}" y="{height - 12}" font-size="12">call 1</text>'
        f'<text x="{width - pad - 40}" y="{height - 12}" font-size="12">call {len(points)}</text></svg>'
    )


@router.get("/conversations/{conversation_id:path}")
def conversation(request: Request, conversation_id: str) -> HTMLResponse:
    """One conversation's assemblies and its tokens over the calls."""
    tenant = _tenant(request)
    if tenant is None:
        return _login()

    def run(ledger: Any) -> list[dict[str, Any]]:
        if conversation_id not in ledger.store.conversations(tenant):
            raise RecordNotFound(tenant, conversation_id, what="conversation")
        return ledger.store.list_assemblies(tenant, conversation_id)

    assemblies = request.app.state.service.call(run)
    rows = []
    for i, a in enumerate(assemblies, 1):
        t = mv.tokens(a)
        rows.append(
            (
                str(i),
                f'<a href="/inspect/assemblies/{quote(a["id"])}">{escape(a["id"])}</a>',
                _num(a.get("snapshot_seq")),
                escape(str(a.get("model", ""))),
                _num(t["estimated_input"]),
                _num(t["observed_input"]),
                _num(t["replay"]),
            )
        )
    table = (
        _table(
            ("call", "assembly", "at seq", "model", "estimated input", "observed input", "full replay"),
            rows,
            numeric=(0, 2, 4, 5, 6),
        )
        if rows
        else "<p>No assemblies yet.</p>"
    )
    return _page(
        f"Conversation {conversation_id}",
        "<h2>Tokens over the calls</h2>" + _tokens_chart(assemblies) + "<h2>Assemblies</h2>" + table,
        tenant,
    )


def _budget_bar(b: mv.Budget) -> str:
    total = max(b.input, 1)
    segments, legend = [], []
    for i, c in enumerate(cls for cls in b.classes if cls.used):
        colour = _COLOURS[i % len(_COLOURS)]
        pct = 100.0 * c.used / total
        cap = "no cap" if c.cap is None else f"cap {c.cap:,}"
        segments.append(
            f'<div style="width:{pct:.2f}%;background:{colour}" title="{escape(c.name)}: {c.used:,} '
            f'tokens ({c.required:,} required, {cap})">{escape(c.name)}</div>'
        )
        legend.append(f'<span><i class="sw" style="background:{colour}"></i>{escape(c.name)} {c.used:,}</span>')
    free = max(b.input - b.used, 0)
    legend.append(f'<span class="muted">free {free:,} of B_input {b.input:,}</span>')
    terms = (
        f"W {b.window:,} − O {b.output:,} − M {b.margin:,} = B_input {b.input:,}; F {b.fixed:,}; "
        f"B_dynamic {b.dynamic:,}; used {b.used:,}"
    )
    return (
        f'<div class="bar" role="img" aria-label="budget by context class">{"".join(segments)}</div>'
        f'<div class="legend">{"".join(legend)}</div><p class="muted">{escape(terms)}</p>'
    )


def _item_link(aid: str, ref: str, conv: str) -> str:
    return f'<a href="/inspect/assemblies/{quote(aid)}/items/{quote(ref)}">{escape(_short(ref, conv))}</a>'


@router.get("/assemblies/{assembly_id}/items/{ref:path}")
def item(request: Request, assembly_id: str, ref: str) -> HTMLResponse:
    """One item's explanation and provenance chain, with the rehydrate button."""
    tenant = _tenant(request)
    if tenant is None:
        return _login()

    def run(ledger: Any) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
        manifest, _ = _manifest(ledger, assembly_id, tenant)
        why = ledger.explain_as(assembly_id, ref, tenant_id=tenant, source="<request>")
        return manifest, why, _provenance(ledger, tenant, ref)

    manifest, why, chain = request.app.state.service.call(run)
    conv = manifest["conversation_id"]
    status = why.get("status", "")
    rows = [
        (escape(k), escape(str(why.get(k))))
        for k in ("status", "stage", "reason", "representation", "tokens", "utility", "transform", "detail", "note")
        if why.get(k) not in (None, "")
    ]
    steps = "".join(f"<li>{escape(str(s))}</li>" for s in why.get("chain") or [])
    links = "".join(f"<li>{escape(kind)} <code>{escape(rid)}</code> {escape(what)}</li>" for kind, rid, what in chain)
    body = (
        f'<p class="{"in" if status == "included" else "out"} reason">{escape(status.upper())}</p>'
        f"{_table(('field', 'value'), rows)}<h2>Why</h2><ol>{steps}</ol>"
        f"<h2>Provenance</h2><ol class='card'>{links or '<li>no sources</li>'}</ol>"
        f"{_rehydrate_buttons(manifest, assembly_id, ref, chain)}"
        f'<p><a href="/inspect/assemblies/{quote(assembly_id)}">back to the assembly</a></p>'
    )
    return _page(f"Item {_short(ref, conv)} of {assembly_id}", body, tenant)


ARTIFACT_KINDS = ("tool_artifact", "artifact")
"""Provenance kinds of a record whose raw bytes can be read back: the item itself, or one of its sources."""


def _rehydrate_buttons(manifest: Mapping[str, Any], aid: str, ref: str, chain: Sequence[tuple[str, str, str]]) -> str:
    """One button per artifact whose bytes the provenance shows (the item, a call's result, a memory's sources).

    Each reads that artifact through ``/v1/assemblies/{id}/rehydrate/{artifact}``, so the policy is checked for
    the item and for the artifact: a refusal of either is shown instead of the button.
    """
    refusal = mv.rehydration_refusal(manifest, ref)
    if refusal is not None:
        return f'<p class="refused">Rehydration refused by the policy: {escape(refusal)}.</p>'
    targets = list(dict.fromkeys(rid for kind, rid, _ in chain if kind in ARTIFACT_KINDS))
    if not targets:
        return '<p class="muted">No raw bytes behind this item.</p>'
    out = []
    for target in targets:
        label = "Rehydrate raw bytes" + ("" if target == ref else f" of {target}")
        if (refused := mv.rehydration_refusal(manifest, target)) is not None:
            out.append(f'<p class="refused">{escape(label)}: refused by the policy: {escape(refused)}.</p>')
            continue
        action = f"/v1/assemblies/{quote(aid)}/rehydrate/{quote(target)}"
        out.append(f'<form method="get" action="{action}"><button type="submit">{escape(label)}</button></form>')
    return "".join(out)


def _provenance(ledger: Any, tenant: str, ref: str) -> list[tuple[str, str, str]]:
    """``(kind, id, what)`` from the record down to its bytes: memory → artifact → sha256 blob."""
    out: list[tuple[str, str, str]] = []
    try:
        rec = ledger.store.get(tenant, ref)
    except RecordNotFound:
        return out
    kind = rec.kind.value
    out.append((kind, rec.id, ""))
    sources = list(direct_sources(rec))
    if kind == "tool_call":
        sources += [
            r.id
            for r in ledger.store.records(tenant, rec.conversation_id)
            if getattr(r, "tool_call_id", None) == rec.id
        ]
    for sid in sources[:20]:
        try:
            src = ledger.store.get(tenant, sid)
        except RecordNotFound:
            out.append(("missing source", sid, "not in this tenant"))
            continue
        out.append((src.kind.value.replace("tool_", ""), src.id, ""))
        if getattr(src, "sha256", None):
            out.append(("bytes", f"sha256:{src.sha256}", f"{src.size_bytes:,} bytes, {src.media_type}"))
    if getattr(rec, "sha256", None):
        out.append(("bytes", f"sha256:{rec.sha256}", f"{rec.size_bytes:,} bytes, {rec.media_type}"))
    return out


@router.get("/assemblies/{assembly_id}")
def assembly(request: Request, assembly_id: str) -> HTMLResponse:
    """One assembly at a glance: budget bar, included items, omissions by reason, diff against the previous."""
    tenant = _tenant(request)
    if tenant is None:
        return _login()

    def run(ledger: Any) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
        manifest, mismatch = _manifest(ledger, assembly_id, tenant)
        before = mv.previous(ledger.store.list_assemblies(tenant, manifest["conversation_id"]), assembly_id)
        return manifest, before, mismatch

    manifest, before, mismatch = request.app.state.service.call(run)
    conv = manifest["conversation_id"]
    policy = manifest.get("policy", {})
    head = (
        f'<p>conversation <a href="/inspect/conversations/{quote(conv, safe="")}">{escape(conv)}</a> at seq '
        f"{_num(manifest.get('snapshot_seq'))} · {escape(str(manifest.get('api')))} · "
        f"{escape(str(manifest.get('model')))} · policy {escape(str(policy.get('name')))}@"
        f"{escape(str(policy.get('version')))}</p>"
    )
    inc = [
        (
            _item_link(assembly_id, e["ref"], conv),
            escape(str(e.get("role") or e.get("kind", ""))),
            escape(str(e.get("stage", ""))),
            escape(str(e.get("reason", ""))),
            _num(e.get("utility")),
            _num(e.get("tokens")),
            escape(str(e.get("representation", ""))),
        )
        for e in mv.included(manifest)
    ]
    groups = (
        "".join(
            f'<div class="card"><span class="reason">{escape(g.reason)}</span> <span class="muted">({g.count} records, '
            f"stage {escape(g.stage)})</span><br>notable: "
            + ", ".join(_item_link(assembly_id, e["ref"], conv) + _weight(e) for e in g.notable)
            + "</div>"
            for g in mv.omissions(manifest)
        )
        or "<p>Nothing omitted: the whole history fits this budget.</p>"
    )
    if mismatch is not None:
        counts = ", ".join(f"{n} {r}" for r, n in (manifest.get("omitted_by_reason") or {}).items()) or "none"
        groups = (
            f'<p class="refused">The record keeps a summary of what was left out ({escape(counts)}), and replaying '
            f"the assembly gave a different call ({escape(mismatch)}): only the included items can be explained; "
            f"{escape(replay_remedy(mismatch))}.</p>"
        )
    body = (
        head
        + "<h2>Budget by context class</h2>"
        + _budget_bar(mv.budget(manifest))
        + f"<h2>Omitted by reason ({len(manifest.get('omitted', []))} records)</h2>"
        + groups
        + "<h2>Diff against the previous assembly</h2>"
        + _diff_html(before, manifest)
        + f"<h2>Included ({len(inc)} records)</h2>"
        + _table(("record", "role/kind", "stage", "reason", "utility", "tokens", "representation"), inc, numeric=(4, 5))
    )
    return _page(f"Assembly {assembly_id}", body, tenant)


def _manifest(ledger: Any, assembly_id: str, tenant: str) -> tuple[dict[str, Any], ReplayMismatch | None]:
    """The full manifest (a summary's replay) and ``None``; or the stored summary and why its replay differed."""
    stored = ledger.get_assembly(assembly_id, tenant_id=tenant)
    if has_full_trace(stored):
        return stored, None
    replayed, mismatch = ledger.replay(stored)
    return (stored, mismatch) if replayed is None else (replayed, None)


def _weight(e: Mapping[str, Any]) -> str:
    """`` (utility 0.312, 45 tok)`` for what an entry carries, else nothing."""
    parts = [f"utility {e['utility']:.3f}" if e.get("utility") is not None else "",
             f"{e['tokens']:,} tok" if e.get("tokens") is not None else ""]  # fmt: skip
    shown = ", ".join(p for p in parts if p)
    return f" ({escape(shown)})" if shown else ""


def _diff_html(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    if before is None:
        return "<p class='muted'>This is the conversation's first assembly.</p>"
    d = mv.diff(before, after)
    conv = after["conversation_id"]
    entered = "".join(
        f"<li class='in'>+ {_item_link(d.after_id, e['ref'], conv)} ({escape(str(e.get('stage')))}: "
        f"{escape(str(e.get('reason')))})</li>"
        for e in d.entered[:12]
    )
    left = "".join(
        f"<li class='out'>− {escape(_short(e['ref'], conv))} ({escape(str(e['reason']))})</li>" for e in d.left[:12]
    )
    more = len(d.entered) + len(d.left) - len(d.entered[:12]) - len(d.left[:12])
    left += f"<li class='muted'>… and {more} more</li>" if more > 0 else ""
    return (
        f'<p>against <a href="/inspect/assemblies/{quote(d.before_id)}">{escape(d.before_id)}</a>: '
        f"{len(d.entered)} entered, {len(d.left)} left, {d.kept} kept</p>"
        f"<ul class='card'>{entered or '<li>nothing entered</li>'}{left or '<li>nothing left</li>'}</ul>"
    )
