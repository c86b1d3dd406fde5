"""What the request log's kept bodies and the conversation log write
(app/conversation_log.py): credentials' fields masked, and what the guard
finds in any text said by its kind."""
from __future__ import annotations

import json

from app.conversation_log import masked, redact
from tests.guard_secrets import ENV_FILE, leaked


def test_kept_bodies_and_conversation_logs_hold_kinds_not_values():
    body = {"messages": [{"role": "tool", "content": ENV_FILE}], "api_key": "x", "n": 3}
    kept = redact(body)
    assert leaked(json.dumps(kept)) == [] and kept["api_key"] == "[redacted]" and kept["n"] == 3
    assert "[secret: aws-key]" in kept["messages"][0]["content"] and masked("plain text") == "plain text"
