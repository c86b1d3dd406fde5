"""The operator's console: a live status page (/admin), its data
(/admin/status), usage per person and model (/admin/usage?day=...) and per
day over a range as CSV (/admin/usage.csv?from=...&to=...), the audit log
(/admin/audit), and the request log (/admin/requests, its records
/admin/requests.json and kept bodies /admin/requests/<id>/body).

With keys on, only a key marked `admin = true` opens them (a browser can
carry it in the path: /k/<key>/admin); no other key reads anyone's usage.
The request log is the exception: any key opens it, and sees its own
requests only. Each page is one HTML file with its script inline: no build
step, nothing from the network."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from functools import wraps
from pathlib import Path

from flask import Blueprint, Response, g, jsonify, request

from app import asker, pages
from app.auth import current_key
from app.console import snapshot
from app.errors import ApiError, register_error_handlers
from app.services import services
from dialects.openai_writer import error_body
from ledger import audit, request_log, usage

bp = Blueprint("admin", __name__, url_prefix="/admin")
register_error_handlers(bp, error_body)
PAGES = {name: (Path(__file__).resolve().parent.parent / name).read_text(encoding="utf-8")
         for name in ("console.html", "requests.html")}
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def admin_only(view):
    @wraps(view)
    def checked(*args, **kwargs):
        if services().keys.enabled and not current_key().admin:
            return _not_an_admin()
        return view(*args, **kwargs)
    return checked


def _not_an_admin():
    """403, naming the reason (as a page to a browser signed in)."""
    shared, session = services(), g.get("session")
    if session is None:
        raise ApiError(403, "the console needs a key marked admin = true in the keys file")
    why = f"You are signed in as {session.person}, who is not an admin here: admins are " \
          f"{shared.signin.describe_admins()}."
    if "text/html" in request.headers.get("Accept", ""):
        return pages.message("Not an admin", why, 403, (("Your own page", "/me"),))
    raise ApiError(403, why)


def _page(name: str) -> Response:
    return Response(PAGES[name], content_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"})


def _count(noun: str) -> int:
    """?count=, 1 to 1000 (100 by default)."""
    try:
        return min(max(int(request.args.get("count", 100)), 1), 1000)
    except ValueError:
        raise ApiError(400, f"count: must be a number of {noun}", "count") from None


@bp.get("")
@admin_only
def page():
    return _page("console.html")


@bp.get("/status")
@admin_only
def status():
    shared = services()
    return jsonify({**snapshot(shared.redis, shared.registry),
                    "redis": shared.persistence.current(shared.redis).report()})


@bp.get("/audit")
@admin_only
def audit_log():
    """The audit log, newest first (?count=, at most 1000)."""
    return jsonify({"entries": audit.latest(services().redis, _count("entries"))})


@bp.get("/usage.csv")
@admin_only
def usage_download():
    """Per day, person and model over a range (?from=&to=, UTC dates; this
    month so far by default), with the estimated cost: the console's
    download, as `scripts/admin.py usage --format csv` gives it."""
    last = request.args.get("to") or usage.today()
    first = request.args.get("from") or last[:8] + "01"
    for name, day in (("from", first), ("to", last)):
        if not _DAY.match(day):
            raise ApiError(400, f"{name}: {day!r} is not a date like 2026-11-23", name)
    shared = services()
    try:
        rows = usage.rows(shared.redis, first, last, shared.registry.prices())
    except ValueError as error:
        raise ApiError(400, f"from, to: {error}") from None
    return Response(usage.as_csv(rows), content_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="switchboard-usage-{first}-to-{last}.csv"',
        "Cache-Control": "no-store"})


@bp.get("/usage")
@admin_only
def usage_report():
    day = request.args.get("day") or usage.today()
    if not _DAY.match(day):
        raise ApiError(400, f"day: {day!r} is not a date like 2026-11-23", "day")
    report = usage.usage(services().redis, day)
    return jsonify({"day": day, "by_person": usage.totals_by_person(report), "by_person_and_model": report})


# --- the request log: everyone's for an admin, one's own for any other key ---------------------------------
def _own_only() -> str | None:
    """The person a key may see the requests of (None: everyone's)."""
    shared = services()
    return None if not shared.keys.enabled or current_key().admin else asker.person(True)


@bp.get("/requests")
def requests_page():
    return _page("requests.html")


@bp.get("/requests.json")
def requests_list():
    """Records newest first, filtered (?person=&model=&status=&session=&from=&to=, times
    as ISO 8601 or epoch milliseconds; ?before=<id> for the next page, ?count=)."""
    own, args, count = _own_only(), request.args, _count("records")
    where = request_log.Filter(person=own or args.get("person") or None, model=args.get("model") or None,
                              status=args.get("status") or None, session=args.get("session") or None,
                              since_ms=_instant("from"), until_ms=_instant("to"))
    before = args.get("before")
    if before is not None and not (re.fullmatch(r"\d+-\d+", before) and
                                   all(int(part) < 2 ** 64 for part in before.split("-"))):  # (Redis's ids)
        raise ApiError(400, f"before: {before!r} is not a record id like 1764230400000-0", "before")
    records, next_page = request_log.read(services().redis, where, count, before)
    return jsonify({"requests": records, "next": next_page, "person": own,
                    "trace_url": services().settings.trace_url})


def _instant(name: str) -> int | None:
    value = request.args.get(name)
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value) if not value.isdigit() else None
        ms = int(value) if moment is None else int(
            (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp() * 1000)
        if not 0 <= ms < 2 ** 64:  # a record id's range (a time before 1970 or past it is no time of a record)
            raise ValueError(ms)
    except ValueError:
        raise ApiError(400, f"{name}: {value!r} is not a time like 2026-11-27T10:40:00Z", name) from None
    return ms


@bp.get("/requests/<request_id>/body")
def request_body(request_id: str):
    """A kept body (the request as sent, its reply's text): its own person's, or any for an admin."""
    kept, own = request_log.body(services().redis, request_id), _own_only()
    if kept is None or (own is not None and kept.get("person") != own):
        raise ApiError(404, "no body is kept for that request (bodies are off, or have expired)")
    return jsonify(kept)


# --- the people who signed in (with sign-in on) -------------------------------------------------------------
@bp.get("/people")
@admin_only
def people():
    signin = services().signin
    return jsonify({"signin": signin is not None, "people": signin.people() if signin is not None else []})


@bp.post("/people/<person>/revoke")
@admin_only
def revoke_everything(person: str):
    """Every key, login and session the person holds, ended on every web process at their next use."""
    who = f"{current_key().name} (an admin)"
    return jsonify({"person": person[:100]} | _signin().revoke_everything(person[:100], who, request.remote_addr or ""))


@bp.post("/people/<person>/forget")
@admin_only
def forget(person: str):
    """As revoke, and the name released from the provider's account it was bound to (a recycled username)."""
    who = f"{current_key().name} (an admin)"
    return jsonify({"person": person[:100]} | _signin().forget(person[:100], who, request.remote_addr or ""))


def _signin():
    signin = services().signin
    if signin is None:
        raise ApiError(404, "sign-in is not configured on this server: a file key is revoked with "
                            "scripts/admin.py keys revoke")
    return signin
