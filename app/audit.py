"""What a web process tells the audit log (ledger/audit.py): the keys of
the keys file each time it reads the file anew, and the models it serves
when it starts, each compared with the last state recorded (a change made
while no web process ran is logged by the first to start). Redis away: the
change is logged by the next process that sees it, never an error here."""
from __future__ import annotations

import logging
import socket

from redis.exceptions import RedisError

from app.services import Services
from identity.keys import BY_HAND_AUTHOR, public_view
from ledger import audit

log = logging.getLogger(__name__)


def audit_changes(shared: Services) -> None:
    days, host = shared.settings.audit_log_days, socket.gethostname()

    def record(subject: str, state: dict, who: str, before: dict | None = None) -> None:
        try:
            audit.record_change(shared.redis, subject, state, audit.Author(who, host), days, before)
        except RedisError as error:
            log.warning("the audit log could not be written (%s): the next process to see the change will", error)

    models = {entry.name: {"backend": entry.backend, "pool": entry.pool} for entry in shared.registry.entries()}
    record("models", models, f"a web process started with {shared.settings.models_path or 'models.toml'}")
    if shared.keys.has_file:
        record("keys", public_view(shared.keys.file_keys), BY_HAND_AUTHOR)
        shared.keys.on_reload = lambda before, after: record("keys", public_view(after), BY_HAND_AUTHOR,
                                                            public_view(before))
