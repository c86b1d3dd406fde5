"""Processes for the server-tool tests: MCP servers run as users run them
(`mcp-server-time` and `mcp-server-git` over stdio, started by the worker;
the tests' own tool server over streamable HTTP, in both spec eras as
`tools` and as a 2025 server only as `tools2025`), and a Switchboard whose
registry gives echo models their tools, with a threads-pool worker and a
gevent-pool worker on pools of their own (the session's stack, with the
default registry, consumes "local" meanwhile), and an MCP pool process for
the MCP gateway."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from identity.keys import digest
from scripts.embedded_redis import free_port
from scripts.processes import (
    BIN, ROOT, Process, ready_together, stack_env, start_mcp_pool, start_web, start_worker, wait_http_ready,
)

ALICE_KEY, BOB_KEY = "alice-key-3b9d", "bob-key-8e21"
CAROL_KEY = "carol-key-51fe"  # time, and git's git_status only
DAVE_KEY = "dave-key-7a20"  # two tool calls a minute
ERIN_KEY = "erin-key-c9d4"  # her own credentials for the tools server
ERIN_TOKEN = "erin-own-token-0e8a"
FRANK_KEY = "frank-key-2d77"  # one job (or tool call) at a time
TOOLS_TOKEN = "tools-secret-61c0"  # the header the operator's registry sends the tool server


def start_tool_server(port: int, notes: Path) -> Process:
    server = Process("mcp-tools", [sys.executable, "-m", "tests.mcp_servers.tool_server", str(port), str(notes)],
                     stack_env("redis://unused", TEST_TOOLS_TOKEN=TOOLS_TOKEN, TEST_OWN_TOKEN=ERIN_TOKEN))
    # An MCP endpoint answers a bare GET with a 4xx: it is up.
    wait_http_ready(server, f"http://127.0.0.1:{port}/mcp", answered=lambda response: response.status_code < 500)
    return server


def git_repository(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    env = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "Test",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "README"], ["git", "commit", "-q", "-m", "first"]):
        if argv[1] == "add":
            (folder / "README").write_text("hello\n")
        subprocess.run(argv, cwd=folder, env=env, check=True)
    (folder / "notes.txt").write_text("not yet added\n")
    return folder


def registry_text(tools_port: int, killable_port: int, closed_port: int, repository: Path, wiki_port: int) -> str:
    tools = f"http://127.0.0.1:{tools_port}/mcp"
    tools_2025 = f"http://127.0.0.1:{tools_port}/session-era/mcp"  # the same server, as a 2025 one answers
    return f'''
[mcp_servers.time]
command = "{BIN / 'mcp-server-time'}"
args = ["--local-timezone", "UTC"]

[mcp_servers.git]
command = "{BIN / 'mcp-server-git'}"
args = ["--repository", "{repository}"]

[mcp_servers.mine]
command = "{BIN / 'python'}"
args = ["-m", "tests.mcp_servers.person_server"]
cwd = "{ROOT}"
per_person = true

[mcp_servers.tools]
url = "{tools}"
headers_env = {{ X-Tools-Token = "TEST_TOOLS_TOKEN" }}
max_result_chars = 2000

[mcp_servers.quick]
url = "{tools}"
timeout_seconds = 1

[mcp_servers.tools2025]
url = "{tools_2025}"
headers_env = {{ X-Tools-Token = "TEST_TOOLS_TOKEN" }}

[mcp_servers.quick2025]
url = "{tools_2025}"
timeout_seconds = 1

[mcp_servers.killable]
url = "http://127.0.0.1:{killable_port}/mcp"

[mcp_servers.down]
url = "http://127.0.0.1:{closed_port}/mcp"
connect_timeout_seconds = 2

[mcp_servers.wiki]
url = "http://127.0.0.1:{wiki_port}/mcp"
auth = "oauth"

[models."echo:wiki"]
backend = "echo"
pool = "mcp-local"
mcp_servers = ["wiki"]

[models."echo"]
backend = "echo"
pool = "mcp-local"

[models."echo:tools"]
backend = "echo"
pool = "mcp-local"
mcp_servers = ["time", "git", "tools"]
step_limit = 3

[models."echo:gevent"]
backend = "echo"
pool = "mcp-gevent"
mcp_servers = ["tools"]

[models."echo:quick"]
backend = "echo"
pool = "mcp-local"
mcp_servers = ["quick"]

[models."echo:killable"]
backend = "echo"
pool = "mcp-local"
mcp_servers = ["killable"]

[models."echo:down"]
backend = "echo"
pool = "mcp-local"
mcp_servers = ["down", "tools"]
'''


def keys_text(bob: bool = True) -> str:
    return (f'[keys.alice]\nsha256 = "{digest(ALICE_KEY)}"\nadmin = true\n\n'
            + (f'[keys.bob]\nsha256 = "{digest(BOB_KEY)}"\nmcp_servers = ["time"]\n\n' if bob else "")
            + f'[keys.carol]\nsha256 = "{digest(CAROL_KEY)}"\nmcp_servers = ["time", "git/git_status"]\n\n'
            f'[keys.dave]\nsha256 = "{digest(DAVE_KEY)}"\ntool_calls_per_minute = 2\n\n'
            f'[keys.frank]\nsha256 = "{digest(FRANK_KEY)}"\nmax_concurrent = 1\n\n'
            f'[keys.erin]\nsha256 = "{digest(ERIN_KEY)}"\n\n'
            '[keys.erin.mcp_headers_env.tools]\nX-Tools-Token = "ERIN_TOOLS_TOKEN"\n')


def start_mcp_stack(redis_url: str, folder: Path, tools_port: int, killable_port: int,
                    wiki_port: int) -> tuple[list[Process], str]:
    """(`wiki_port`: where the OAuth-protected server of tests/mcp_servers/oauth_server.py is started by the
    tests of people's own accounts: tests/integration/mcp_oauth/test_accounts.py)"""
    registry, keys = folder / "models.toml", folder / "keys.toml"
    registry.write_text(registry_text(tools_port, killable_port, free_port(), git_repository(folder / "repo"),
                                      wiki_port))
    keys.write_text(keys_text())
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(registry), SWITCHBOARD_KEYS_FILE=str(keys),
                    SWITCHBOARD_CONVERSATION_LOG_DIR=str(folder / "conversations"),
                    TEST_TOOLS_TOKEN=TOOLS_TOKEN, ERIN_TOOLS_TOKEN=ERIN_TOKEN, SWITCHBOARD_KEEPALIVE="0.5")
    processes = [start_worker(env, concurrency=4, queues="mcp-local", wait=False)]
    try:
        processes.append(start_worker(env, concurrency=20, queues="mcp-gevent", pool="gevent", wait=False))
        processes.append(start_mcp_pool(env, wait=False))
        web, base = start_web(env, wait=False)
        processes.append(web)
    except BaseException:
        for process in processes:
            process.stop()
        raise
    ready_together(processes)
    return processes, base
