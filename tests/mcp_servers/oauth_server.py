"""An OAuth-protected MCP server for the tests, as a code host or a wiki
would be one: the SDK's server auth (a protected resource, RFC 9728), its
tokens issued by a node-oidc-provider of its own and checked by asking it
(token introspection, RFC 7662) with the server's own client:

    python -m tests.mcp_servers.oauth_server PORT ISSUER CLIENT_ID CLIENT_SECRET NOTES_FILE

`whoami` answers with the subject of the token the call carried (the
account it acts as); NOTES_FILE gets a line per call, "whoami <sub>
<token>", so a test knows each token that reached the server (and can look
for it where it must never be)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

PORT, ISSUER, CLIENT_ID, CLIENT_SECRET, NOTES = sys.argv[1:6]
RESOURCE = f"http://127.0.0.1:{PORT}/mcp"


class Introspecting:
    """The SDK's TokenVerifier: the authorization server says whether a token is active, whose, for what."""

    def __init__(self):
        self.http = httpx.AsyncClient(timeout=10)

    async def verify_token(self, token: str) -> AccessToken | None:
        answer = await self.http.post(f"{ISSUER}/token/introspection", data={"token": token},
                                      auth=(CLIENT_ID, CLIENT_SECRET))
        if answer.status_code != 200:
            return None
        found = answer.json()
        audience = found.get("aud")
        if not found.get("active") or (audience != RESOURCE and RESOURCE not in (audience or [])):
            return None
        if found.get("exp") and found["exp"] < time.time():
            return None
        return AccessToken(token=token, client_id=str(found.get("client_id", "")), scopes=str(
            found.get("scope", "")).split(), expires_at=found.get("exp"), resource=RESOURCE, subject=found.get("sub"))


server = MCPServer("switchboard-test-wiki", token_verifier=Introspecting(), auth=AuthSettings(
    issuer_url=ISSUER, resource_server_url=RESOURCE, required_scopes=["wiki"], validate_token_resource=True))


@server.tool()
def whoami() -> str:
    """Say whose account the call acts as."""
    token = get_access_token()
    with Path(NOTES).open("a") as notes:
        notes.write(f"whoami {token.subject} {token.token}\n")
    return f"you are {token.subject} on the wiki"


if __name__ == "__main__":
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(PORT), log_level="warning")
