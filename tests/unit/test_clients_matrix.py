"""The compatibility matrix's own parts (scripts/clients.py): what it asks
each CLI, how it words a failure, and its report's table."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from scripts import clients, connect


@pytest.mark.parametrize("agent", clients.AGENTS, ids=lambda a: a.label or a.client)
def test_every_agent_is_set_up_by_connect_and_asked_for_a_file(agent):
    assert agent.client in connect.CLIENTS
    assert set(agent.wires) <= set(connect.CLIENTS[agent.client].wires)
    prompt = agent.tool_round(Path("/w/made-by-agent.txt"))
    assert "made-by-agent.txt" in prompt and clients.TEXT in prompt


def test_npms_own_words_not_its_log_pointer():
    said = ("npm error code 1\nnpm error npm error notarget No matching version found for @kilocode/cli-linux-x64@7.8.1."
            "\nnpm error A complete log of this run can be found in: /root/.npm/_logs/x.log\n")
    assert clients._npm_error(said) == "notarget No matching version found for @kilocode/cli-linux-x64@7.8.1."


def test_the_report_counts_and_escapes():
    rows = [clients.Row("pi", "1.6.0", "chat", "off", "pass", "pass"),
            clients.Row("kilo", "7.7.7", "chat", "on", "FAIL", "FAIL", "POST /v1/x|y 400"),
            clients.Row("gemini-cli", "0.61.0", "-", "on", "FAIL", "FAIL", "POST /v1beta/x 404", "needs issue 59")]
    text = clients.report(rows, datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc), 600)
    assert "(2026-11-29 09:00 UTC, 10 min;" in text and "1 of 2 rows pass both" in text
    assert "| kilo | 7.7.7 | chat | on | FAIL | FAIL | POST /v1/x\\|y 400 |\n" in text
    assert "- gemini-cli: needs issue 59\n" in text.split("## Waiting on an open issue")[1]
