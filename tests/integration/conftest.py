"""The integration tests' own stacks beside the session's (tests/conftest.py:
the stack, the MCP stack, chromium): a keyed web process, WebSocket web
processes, upstreams."""
from __future__ import annotations

import pytest

from scripts.children import begin_stop_all
from scripts.processes import ROOT, ready_together, stack_env, start_web, stop_together
from tests.integration.events_tap import EventsTap

KEY = "alice-anthropic-key"  # the keyed web process's keys: alice's...
OTHER_KEY = "bob-other-key"  # ...and bob's


@pytest.fixture
def base_url(stack, clean_redis):
    return stack


@pytest.fixture
def tap(redis_url, base_url):
    """Every job event and abort on the session's Redis, as they happen
    (tests/integration/events_tap.py)."""
    tap = EventsTap(redis_url)
    yield tap
    tap.close()


@pytest.fixture(scope="session")
def keyed_base(stack, redis_url, tmp_path_factory):
    """A second web process beside the session's worker, with keys on and
    Claude Code's claude-*-haiku names and Gemini CLI's gemini-* names mapped
    onto echo."""
    registry = tmp_path_factory.mktemp("keyed") / "models.toml"
    registry.write_text((ROOT / "models.toml").read_text().replace(
        '[models."echo"]\n', '[models."echo"]\naliases = ["claude-*-haiku-*", "claude-haiku-*", "gemini-*"]\n', 1))
    web, base = start_web(stack_env(redis_url, SWITCHBOARD_API_KEYS=f"alice:{KEY},bob:{OTHER_KEY}",
                                    SWITCHBOARD_MODELS=str(registry)))
    yield base
    begin_stop_all()  # (the session ends: every process begins to stop at once, tests/conftest.py)
    web.stop()


@pytest.fixture(scope="session")
def socket_webs(stack, redis_url):
    """Web processes beside the session's worker for the Responses
    WebSocket: "plain" (whose request log a test reads), "short" (a socket
    lives 2 s; keep-alives every 0.3 s) and "off" (WebSocket mode switched off)."""
    settings = {"plain": {}, "short": {"SWITCHBOARD_WEBSOCKET_MAX_SECONDS": "2", "SWITCHBOARD_KEEPALIVE": "0.3"},
                "off": {"SWITCHBOARD_RESPONSES_WEBSOCKET": "false"}}
    started = {name: start_web(stack_env(redis_url, **extra), wait=False) for name, extra in settings.items()}
    ready_together([web for web, _ in started.values()])
    yield started
    begin_stop_all()
    stop_together([web for web, _ in started.values()])
