"""The operator's console: a live status page (/admin), its data
(/admin/status), usage per person and model (/admin/usage?day=...) and per
day over a range as CSV (/admin/usage.csv?from=...&to=...), and the audit
log (/admin/audit).

With keys on, only a key marked `admin = true` opens them (a browser can
carry it in the path: /k/<key>/admin); no other key reads anyone's usage.
The page is one HTML file with its script inline: no build step, nothing
from the network."""
from __future__ import annotations

import re
from functools import wraps
from pathlib import Path

from flask import Blueprint, Response, jsonify, request

from app.auth import current_key
from app.console import snapshot
from app.errors import ApiError, register_error_handlers
from app.services import services
from dialects.openai_writer import error_body
from protocol import audit, usage

bp = Blueprint("admin", __name__, url_prefix="/admin")
register_error_handlers(bp, error_body)
PAGE = (Path(__file__).resolve().parent.parent / "console.html").read_text(encoding="utf-8")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def admin_only(view):
    @wraps(view)
    def checked(*args, **kwargs):
        if services().keys.enabled and not current_key().admin:
            raise ApiError(403, "the console needs a key marked admin = true in the keys file")
        return view(*args, **kwargs)
    return checked


@bp.get("")
@admin_only
def page():
    return Response(PAGE, content_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"})


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
    try:
        count = min(max(int(request.args.get("count", 100)), 1), 1000)
    except ValueError:
        raise ApiError(400, "count: must be a number of entries", "count") from None
    return jsonify({"entries": audit.latest(services().redis, count)})


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
