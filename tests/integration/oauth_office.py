"""The MCP OAuth tests' office (tests/integration/mcp_oauth/ and
tests/security/mcp_oauth/, once per package: a sign-in office's web
processes recheck the people in their Redis with their provider, so two
offices on one Redis must not overlap in time): web processes with sign-in on (a real provider) on the MCP
stack's registry, whose pool runs their calls, and a server of agents'
client metadata documents on loopback; and "wiki", an OAuth-protected MCP
server with an authorization server of its own (people's own accounts)."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager

from scripts.embedded_redis import free_port
from scripts.processes import Process, ready_together, stack_env, start_web, stop_together, wait_http_ready
from scripts.redis_servers import make_certificates
from tests.integration.mcp_stack import ERIN_TOKEN, TOOLS_TOKEN
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.signin_stack import ADMIN_GROUP, CLIENT_ID, CLIENT_SECRET, start_provider, write_people

TOKEN_SECONDS = 5  # an agent's access token: short, so that the test sees it end and the SDK refresh it


class DocumentServer:
    """Agents' client metadata documents over https (a CA of the test's own, which the web process trusts):
    `documents` maps a path to the JSON answered there (or to (status, headers, body))."""

    def __init__(self, certificates):
        import ssl
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.documents: dict = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                found = server.documents.get(self.path)
                status, headers, body = found if isinstance(found, tuple) else (
                    (200, {"Content-Type": "application/json"}, json.dumps(found).encode()) if found is not None
                    else (404, {}, b""))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificates.cert, certificates.key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def oauth_office(mcp_stack, redis_url: str, folder):
    """A web process with sign-in on and the MCP stack's registry (its pool runs the calls), and a server of
    agents' client metadata documents on loopback, which the operator named (SWITCHBOARD_AGENT_METADATA_HOSTS)."""
    certificates = make_certificates(folder / "tls")
    documents = DocumentServer(certificates)
    people, keys_file = folder / "people.json", folder / "keys.toml"
    write_people(people)
    keys_file.write_text('[signin]\nmodels = ["echo", "echo:wiki"]\nmcp_servers = ["time", "wiki"]\n')
    port, closed_port, provider_port = free_port(), free_port(), free_port()
    base, closed = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{closed_port}"
    provider = start_provider(provider_port, people, [f"{base}/login/callback", f"{closed}/login/callback"])
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(mcp_stack[1] / "models.toml"),
                    SWITCHBOARD_KEYS_FILE=str(keys_file), SWITCHBOARD_OIDC_ISSUER=f"http://127.0.0.1:{provider_port}",
                    SWITCHBOARD_OIDC_CLIENT_ID=CLIENT_ID, SWITCHBOARD_OIDC_CLIENT_SECRET=CLIENT_SECRET,
                    SWITCHBOARD_OIDC_ADMIN_GROUPS=ADMIN_GROUP,
                    SWITCHBOARD_OIDC_SCOPES="openid profile email offline_access groups",
                    SWITCHBOARD_SIGNIN_TOKEN_SECONDS=str(TOKEN_SECONDS), SWITCHBOARD_SIGNIN_RECHECK_SECONDS="2",
                    SWITCHBOARD_AGENT_METADATA_HOSTS="127.0.0.1", SSL_CERT_FILE=str(certificates.ca),
                    TEST_TOOLS_TOKEN=TOOLS_TOKEN,
                    ERIN_TOOLS_TOKEN=ERIN_TOKEN)
    webs, traces = [], OtlpReceiver()  # (the first web's traces: no secret may be in them)
    try:  # (and one that cannot reach the internet, so fetches no agent's document: its agents register)
        webs.append(start_web(env | {"OTEL_EXPORTER_OTLP_ENDPOINT": traces.url, "OTEL_BSP_SCHEDULE_DELAY": "100",
                                     "OTEL_SERVICE_NAME": "office"}, port=port, wait=False)[0])
        webs.append(start_web(env | {"SWITCHBOARD_AGENT_METADATA_DOCUMENTS": "false"}, port=closed_port,
                              wait=False)[0])
        ready_together(webs)
    except BaseException:
        stop_together([*webs, provider])
        documents.close()
        traces.close()
        raise
    try:
        yield {"base": base, "closed": closed, "people": people, "documents": documents, "webs": webs,
               "traces": traces}
    finally:
        stop_together([*webs, provider])
        documents.close()
        traces.close()


WIKI_SECRET = "wiki-introspection-secret-44d1"
WIKI_TOKEN_SECONDS = 6  # short, so that a test sees the pool refresh a person's token before it ends


@contextmanager
def wiki(mcp_stack, folder):
    """The wiki's authorization server (its own people: the office's names) and the wiki, on the port the MCP
    stack's registry names."""
    people, notes = folder / "people.json", folder / "notes.txt"
    write_people(people)
    port, provider_port = mcp_stack[4], free_port()
    issuer, resource = f"http://127.0.0.1:{provider_port}", f"http://127.0.0.1:{port}/mcp"
    provider = start_provider(provider_port, people, [], clients=[{
        "client_id": "wiki-server", "client_secret": WIKI_SECRET, "redirect_uris": [], "response_types": [],
        "grant_types": []}], resource={"resource": resource, "scope": "wiki", "ttl": WIKI_TOKEN_SECONDS,
                                       "introspector": "wiki-server"})
    try:
        server = Process("mcp-wiki", [sys.executable, "-m", "tests.mcp_servers.oauth_server", str(port), issuer,
                                      "wiki-server", WIKI_SECRET, str(notes)], stack_env("redis://unused"))
        wait_http_ready(server, resource, answered=lambda response: response.status_code < 500)
    except BaseException:
        provider.stop()
        raise
    try:
        yield {"issuer": issuer, "notes": notes, "processes": [server, provider]}
    finally:
        stop_together([server, provider])
