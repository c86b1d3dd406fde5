"""An OpenAPI 3.1 document of every route the server answers, its request
bodies from the pydantic request models (the same ones that validate them),
so fuzzers and client generators see the whole surface. A test checks that
every route of the app is listed here."""
from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from dialects.anthropic_schemas import CountTokensRequest, MessagesRequest
from dialects.gemini_schemas import (
    BatchEmbedContentsRequest, CountTokensRequest as GeminiCountTokensRequest, EmbedContentRequest,
    GenerateContentRequest,
)
from dialects.ollama_schemas import (
    ChatRequest, EmbeddingsRequest as OllamaEmbeddingsRequest, EmbedRequest, GenerateRequest, PullRequest, ShowRequest,
)
from dialects.openai_schemas import ChatCompletionRequest, CompletionRequest, EmbeddingsRequest
from dialects.responses_schemas import ResponsesRequest

_GEMINI = [("generateContent", GenerateContentRequest, "Gemini API: a reply"),
           ("streamGenerateContent", GenerateContentRequest, "Gemini API: a streamed reply (SSE with ?alt=sse, else "
                                                             "one JSON array)"),
           ("countTokens", GeminiCountTokensRequest, "Gemini API: a prompt's tokens"),
           ("embedContent", EmbedContentRequest, "Gemini API: an embedding"),
           ("batchEmbedContents", BatchEmbedContentsRequest, "Gemini API: embeddings")]
# (method, path, request model or None, summary), in the order of the README's endpoint table.
ROUTES: list[tuple[str, str, type[BaseModel] | None, str]] = [
    ("get", "/", None, "Liveness text, as Ollama answers"),
    ("get", "/api/version", None, "Ollama-compatible version"),
    ("get", "/api/tags", None, "Models"),
    ("post", "/api/show", ShowRequest, "Ollama model details"),
    ("get", "/api/ps", None, "Models loaded in workers"),
    ("post", "/api/chat", ChatRequest, "Ollama chat (NDJSON stream by default)"),
    ("post", "/api/generate", GenerateRequest, "Ollama completion: raw, FIM (suffix), templates"),
    ("post", "/api/embed", EmbedRequest, "Ollama embeddings"),
    ("post", "/api/embeddings", OllamaEmbeddingsRequest, "Ollama embeddings (the older route)"),
    ("post", "/api/pull", PullRequest, "Reports success for a served model"),
    ("post", "/api/create", None, "Refused (403): the operator manages models"),
    ("post", "/api/copy", None, "Refused (403): the operator manages models"),
    ("post", "/api/push", None, "Refused (403): the operator manages models"),
    ("delete", "/api/delete", None, "Refused (403): the operator manages models"),
    ("post", "/api/blobs/{digest}", None, "Refused (403): the operator manages models"),
    ("get", "/v1/models", None, "Models (OpenAI; Anthropic's shape for an Anthropic client)"),
    ("get", "/v1/models/{name}", None, "One model"),
    ("post", "/v1/chat/completions", ChatCompletionRequest, "OpenAI chat completion (SSE with stream)"),
    ("post", "/v1/completions", CompletionRequest, "OpenAI text completion"),
    ("post", "/v1/embeddings", EmbeddingsRequest, "OpenAI embeddings"),
    ("post", "/v1/responses", ResponsesRequest, "OpenAI Responses (SSE with stream)"),
    ("get", "/v1/responses", None, "OpenAI Responses over a WebSocket (upgrade; response.create messages); "
                                   "426 without an upgrade or when switched off"),
    ("post", "/v1/responses/compact", ResponsesRequest, "Compact a conversation: its newest user messages and "
                                                         "one sealed compaction item"),
    ("get", "/v1/responses/{response_id}", None, "A stored response (its creator's only); a background one's "
                                                 "events with ?stream=true&starting_after=N"),
    ("delete", "/v1/responses/{response_id}", None, "Delete a stored response"),
    ("post", "/v1/responses/{response_id}/cancel", None, "Cancel a background response"),
    ("post", "/v1/messages", MessagesRequest, "Anthropic Messages (SSE with stream)"),
    ("post", "/v1/messages/count_tokens", CountTokensRequest, "Anthropic token count"),
    ("get", "/v1beta/models", None, "Gemini API models (paged: pageSize, pageToken); also GET /v1/models from a "
                                    "Google client"),
    ("get", "/v1beta/models/{name}", None, "One Gemini API model"),
    *[("post", f"{version}/models/{{model}}:{method}", body, summary) for version in ("/v1beta", "/v1")
      for method, body, summary in _GEMINI],
    ("post", "/v1beta/models/{target}", None, "Gemini API: any other method, a 404 naming those offered"),
    ("post", "/v1/models/{target}", None, "Gemini API: any other method, a 404 naming those offered"),
    ("post", "/chat/completions", ChatCompletionRequest, "Simple chat (NDJSON with stream)"),
    ("post", "/chat/sse", ChatCompletionRequest, "Simple chat over SSE"),
    *[(method, path, None, summary) for path in ("/mcp", "/mcp/{server}") for method, summary in (
        ("post", "The MCP gateway (streamable HTTP, JSON-RPC): the MCP servers this key may use, their tools and "
                 "prompts named <server>__<name> on /mcp, their own names on /mcp/{server}"),
        ("get", "The MCP gateway: no server-to-client stream (405)"),
        ("delete", "The MCP gateway: end a 2025-11-25-era session (Mcp-Session-Id)"))],
    ("get", "/healthz", None, "Process up"),
    ("get", "/readyz", None, "Redis and workers ready; says whether Redis persists"),
    ("get", "/metrics", None, "Prometheus metrics"),
    ("get", "/openapi.json", None, "This document"),
    ("get", "/admin", None, "The operator's console (HTML)"),
    ("get", "/admin/status", None, "The console's data"),
    ("get", "/admin/usage", None, "Usage per person and model for a day (?day=YYYY-MM-DD)"),
    ("get", "/admin/audit", None, "The audit log, newest first: keys added, revoked, changed; models served"),
    ("get", "/admin/usage.csv", None, "Usage per day, person and model over a range (?from=&to=), with costs"),
    ("get", "/admin/requests", None, "The request log (HTML): everyone's for an admin, one's own for other keys"),
    ("get", "/admin/requests.json", None, "Request-log records, newest first (?person=&model=&status=&from=&to=)"),
    ("get", "/admin/requests/{request_id}/body", None, "A request's kept body and reply (where bodies are on)"),
    ("get", "/admin/people", None, "The people who signed in (with sign-in on): their keys, logins, suspension"),
    ("post", "/admin/people/{person}/revoke", None, "Every key, login and session a person holds, ended now"),
    ("post", "/admin/people/{person}/forget", None, "As revoke, and the name released from its provider account"),
    # Sign-in with the office's identity provider (app/routes/signin.py; 404 while it is off).
    ("get", "/login", None, "Sign in with the office's OpenID provider (?next=a path here)"),
    ("get", "/login/callback", None, "The provider's answer (code, state): a session cookie"),
    ("post", "/logout", None, "End this browser's session"),
    ("get", "/me", None, "A signed-in person's page (HTML): their usage, keys and logins"),
    ("get", "/me.json", None, "A signed-in person's usage today, keys and command-line logins"),
    ("post", "/me/keys", None, "Mint a key ({label, days, models}): shown once"),
    ("delete", "/me/keys/{key_id}", None, "Revoke one of your keys"),
    ("post", "/auth/device", None, "RFC 8628 device authorization (scripts/admin.py login)"),
    ("get", "/login/device", None, "Approve a command-line login (?user_code=), signed in"),
    ("post", "/login/device", None, "The answer to a command-line login (user_code, decision)"),
    ("post", "/auth/token", None, "RFC 6749 token endpoint: a short-lived key for a device code, a login, or an "
                                  "MCP agent's code or refresh token"),
    # The MCP gateway's authorization server for agents (app/routes/oauth.py; 404 while sign-in is off).
    ("get", "/.well-known/oauth-protected-resource/mcp", None, "RFC 9728 metadata of the MCP gateway"),
    ("get", "/.well-known/oauth-protected-resource/mcp/{server}", None, "RFC 9728 metadata of one server's endpoint"),
    ("get", "/.well-known/oauth-authorization-server", None, "RFC 8414 metadata of this authorization server"),
    ("post", "/oauth/register", None, "RFC 7591 registration of a public MCP client (loopback or https redirects)"),
    ("get", "/oauth/authorize", None, "An agent's authorization request (PKCE S256): the consent page, signed in"),
    ("post", "/oauth/authorize", None, "The person's answer (ask, decision): back to the agent with a code"),
    # A person's own accounts on OAuth MCP servers (app/routes/mcp_accounts.py), signed in.
    ("get", "/me/mcp/{name}/connect", None, "Connect your own account on an OAuth MCP server: to its sign-in"),
    ("get", "/me/mcp/callback", None, "Its answer (code, state): your tokens kept, sealed; back to /me"),
    ("post", "/me/mcp/{name}/disconnect", None, "Forget your tokens on the server (revoked there if it can)"),
]
_RESPONSES = {"200": {"description": "OK"}, "400": {"description": "Invalid request (the message names the field)"},
              "401": {"description": "Missing or wrong API key"}, "403": {"description": "No access"},
              "404": {"description": "Unknown model or object"}, "413": {"description": "Body too large"},
              "429": {"description": "Over a limit (OpenAI and Anthropic routes), with Retry-After"},
              "503": {"description": "Busy or unavailable, with Retry-After"}}
_KEY_IN_PATH = ("Every path is also served under /k/{key}/ (the API key in the path); else the key is "
                "sent as `Authorization: Bearer`, `x-api-key`, `x-goog-api-key` or `?key=`.")


def _parameters(path: str) -> list[dict]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in names]


def _operation(summary: str, path: str, schema: dict | None) -> dict:
    operation: dict = {"summary": summary, "responses": _RESPONSES}
    if _parameters(path):
        operation["parameters"] = _parameters(path)
    if schema is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    return operation


@lru_cache(maxsize=1)
def openapi_document() -> dict:
    models = list(dict.fromkeys(model for _, _, model, _ in ROUTES if model is not None))
    refs, top = models_json_schema([(model, "validation") for model in models],
                                   ref_template="#/components/schemas/{model}")
    paths: dict = {}
    for method, path, model, summary in ROUTES:
        schema = refs[(model, "validation")] if model is not None else None
        paths.setdefault(path, {})[method] = _operation(summary, path, schema)
    return {"openapi": "3.1.0", "info": {"title": "Switchboard", "version": "1.0", "description": _KEY_IN_PATH},
            "paths": paths, "components": {"schemas": top.get("$defs", {})}}
