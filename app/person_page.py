"""What a signed-in person's page (/me) says they have and how to use it:
the models their policy gives them (with their windows), the MCP servers
and tools they may call (and which servers act as them, connected or
not), and each agent's set-up for this server, ready to copy
(catalog/agent_setups.py: what `admin.py connect` writes, with the
sign-in way where the agent has one)."""
from __future__ import annotations

import logging

from app.mcp_gateway import Caller
from app.services import Services
from catalog import agent_setups
from dialects.mcp import RpcError
from identity.keys import ApiKey

log = logging.getLogger(__name__)


def offered(shared: Services, template: ApiKey, holder: str, root: str, connected: dict[str, float]) -> dict:
    """`template`: the person's limits (the sign-in policy for their groups); `holder`: the name their
    requests carry; `connected`: the OAuth servers they connected."""
    models = agent_setups.served_models(shared.registry, template.allows)
    return {"models": [{"name": m.name, "context": m.context, "output": m.output, "tools": m.tools,
                        "vision": m.vision, "thinking": m.thinking} for m in models],
            "mcp_servers": _servers(shared, template, holder, connected),
            "agents": _agents(shared, models, root)}


def _servers(shared: Services, template: ApiKey, holder: str, connected: dict[str, float]) -> list[dict]:
    grants = template.grants
    names = tuple(name for name in shared.registry.servers if grants.may_use_server(name))
    try:
        listings = Caller(shared, holder, template.own_headers_env, None).gather(names, "tools/list") \
            if names else {}
    except RpcError as error:  # (no MCP pool: the servers are named, their tools unknown)
        log.info("/me: the MCP servers' tools are unknown now (%s)", error.message)
        listings = {}
    found = []
    for name in names:
        server = shared.registry.servers[name]
        tools = [t.get("name", "") for t in listings.get(name, []) if grants.may_use(name, t.get("name", ""))]
        found.append({"server": name, "tools": tools if name in listings else None,
                      "acts_as_you": server.auth == "oauth",
                      "connected": connected.get(name) if server.auth == "oauth" else None})
    return found


def _agents(shared: Services, models: tuple, root: str) -> list[dict]:
    if not models:
        return []
    model = models[0].name
    setup = agent_setups.Setup(server=root, models=models, model=model,
                               small_model=agent_setups.pick_small_model(shared.registry, models, model))
    sign_in = shared.signin is not None
    agents = []
    for client in agent_setups.CLIENTS:
        helper = client in agent_setups.HELPER_CLIENTS
        command = (f"python scripts/admin.py login --url {root}\n"
                   f"python scripts/admin.py connect {client} --url {root} --sign-in --write") if helper else \
            f"python scripts/admin.py connect {client} --url {root} --key <a key made above> --write"
        files = [{"path": output.path, "text": output.text, "about": output.about}
                 for output in agent_setups.build(client, setup)]
        agents.append({"client": client, "command": command, "files": files,
                       "mcp": agent_setups.mcp_gateway(client, root, sign_in)})
    return agents
