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
from identity import mcp_accounts
from identity.keys import ApiKey
from protocol.gateway import connect_url, pool_heard

log = logging.getLogger(__name__)


def acts_as_them(shared: Services, template: ApiKey, name: str) -> bool:
    """Whether `name` is a server whose tools act as the person (auth = "oauth") and their policy gives them."""
    server = shared.registry.servers.get(name)
    return server is not None and server.auth == "oauth" and template.grants.may_use_server(name)


def offered(shared: Services, template: ApiKey, holder: str, root: str) -> dict:
    """`template`: the person's limits (the sign-in policy for their groups); `holder`: the name their
    requests carry."""
    models = agent_setups.served_models(shared.registry, template.allows)
    connected = mcp_accounts.of_person(shared.redis, holder)
    servers = _servers(shared, template, holder, connected)
    return {"models": [{"name": m.name, "context": m.context, "output": m.output, "tools": m.tools,
                        "vision": m.vision, "thinking": m.thinking} for m in models],
            "mcp_servers": servers,
            "mcp_accounts": [{"server": s["server"], "connected": s["connected"],
                              "connect": connect_url("", s["server"])} for s in servers if s["acts_as_you"]],
            "agents": _agents(shared, models, root)}


def _servers(shared: Services, template: ApiKey, holder: str, connected: dict[str, float]) -> list[dict]:
    grants = template.grants
    names = tuple(name for name in shared.registry.servers if grants.may_use_server(name))
    listings = {}
    # (no MCP pool heard of: the servers are named, their tools unknown; the page waits for none to start)
    if names and pool_heard(shared.redis):
        try:
            listings = Caller(shared, holder, template.own_headers_env, None).gather(names, "tools/list")
        except RpcError as error:
            log.info("/me: the MCP servers' tools are unknown now (%s)", error.message)
    found = []
    for name in names:
        tools = [t.get("name", "") for t in listings.get(name, []) if grants.may_use(name, t.get("name", ""))]
        acts = acts_as_them(shared, template, name)
        found.append({"server": name, "tools": tools if name in listings else None, "acts_as_you": acts,
                      "connected": connected.get(name) if acts else None})
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
