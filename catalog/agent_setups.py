"""Each agent's set-up for this server: what `admin.py connect <client>`
writes (scripts/connect.py puts it on the disk) and what a person's page
(/me) shows them to copy.

Most agents do not discover models: each person writes a config naming every
model with its context window and output limit, and a wrong window means
failed or truncated turns (Ollama ships `ollama launch <client>` for this).
Each builder here turns the server's address, the person's key (or a
placeholder: never a key found anywhere else) and the models that key may
use, from the registry, into the files and variables that client reads.

A builder is pure: `Setup -> [ConfigFile | EnvBlock]`. admin.py prints them,
or writes them (never over a file without --force, which keeps a backup);
/me shows them.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

import tomlkit
import yaml

PLACEHOLDER_KEY = "YOUR_SWITCHBOARD_KEY"  # any value works while the server's keys are off
KEY_VARIABLE = "SWITCHBOARD_KEY"  # where configs that read a key from the environment find it


@dataclass(frozen=True)
class Model:
    name: str
    context: int  # tokens: prompt and reply together
    output: int  # the longest reply to ask for
    tools: bool = True
    vision: bool = False
    thinking: bool = False

    @property
    def prompt(self) -> int:
        """What is left of the window for the prompt."""
        return max(self.context - self.output, 1)


@dataclass(frozen=True)
class Setup:
    server: str  # http://host:port, no trailing slash
    models: tuple[Model, ...]
    model: str  # the one a client starts with
    small_model: str  # for a client's background calls (titles, summaries, Claude Code's haiku)
    key: str | None = None  # None: the placeholder
    wire: str = ""  # for a client with several: which API it speaks ("" its default)
    helper: tuple[str, ...] = ()  # a command that prints a key (`admin.py token`), for a client that runs one

    @property
    def api_key(self) -> str:
        return self.key or PLACEHOLDER_KEY

    def default(self) -> Model:
        return next(m for m in self.models if m.name == self.model)


@dataclass(frozen=True)
class ConfigFile:
    path: str  # under the person's home: "~/.codex/config.toml"
    text: str
    about: str = ""


@dataclass(frozen=True)
class EnvBlock:
    """Variables the client reads: printed as `export` lines; written as a
    file to source (`path`)."""

    variables: dict[str, str]
    path: str
    about: str = ""

    @property
    def text(self) -> str:
        return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in self.variables.items())


Output = list[ConfigFile | EnvBlock]


@dataclass(frozen=True)
class Client:
    build: Callable[[Setup], Output]
    wires: tuple[str, ...] = ("",)  # the first is the default
    run: str = ""  # how to start it headless once set up
    key_in_ui: bool = False  # without a key given it asks for one itself (no placeholder is written)


def _json(value) -> str:
    return json.dumps(value, indent=2) + "\n"


def _env_file(client: str) -> str:
    return f"~/.config/switchboard/{client}.env"


# --- Anthropic's and OpenAI's own agents -----------------------------------------------
def claude_code(setup: Setup) -> Output:
    """Claude Code reads `env` from its settings; it asks for claude-* names
    for background work unless told which model that is."""
    env = {"ANTHROPIC_BASE_URL": setup.server, "ANTHROPIC_API_KEY": setup.api_key, "ANTHROPIC_MODEL": setup.model,
           "ANTHROPIC_DEFAULT_HAIKU_MODEL": setup.small_model, "ANTHROPIC_SMALL_FAST_MODEL": setup.small_model,
           "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(setup.default().output),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if setup.helper:  # its key from the helper, renewed as it ends (apiKeyHelper)
        del env["ANTHROPIC_API_KEY"]
        return [ConfigFile("~/.claude/settings.json", _json({"apiKeyHelper": shlex.join(setup.helper), "env": env}))]
    return [ConfigFile("~/.claude/settings.json", _json({"env": env}))]


def codex(setup: Setup) -> Output:
    """Codex's own provider, on Responses over HTTP (`wire` "websocket":
    its built-in provider pointed here, Responses over a WebSocket)."""
    model = setup.default()
    document = tomlkit.document()
    document["model"] = setup.model
    document["model_context_window"] = model.context
    document["model_max_output_tokens"] = model.output
    if setup.wire == "websocket":  # the built-in provider takes its key from its login, not from a variable
        document["openai_base_url"] = f"{setup.server}/v1"
        document.add(tomlkit.comment(f"then log in with your key: printf %s {shlex.quote(setup.api_key)} | "
                                     "codex login --with-api-key"))
        return [ConfigFile("~/.codex/config.toml", tomlkit.dumps(document))]
    document["model_provider"] = "switchboard"
    provider = tomlkit.table()
    provider.update({"name": "Switchboard", "base_url": f"{setup.server}/v1", "wire_api": "responses"})
    if setup.helper:  # its key from the helper, renewed as it ends (the provider's command-based auth)
        provider["auth"] = {"command": setup.helper[0], "args": list(setup.helper[1:])}
        document["model_providers"] = {"switchboard": provider}
        return [ConfigFile("~/.codex/config.toml", tomlkit.dumps(document))]
    provider["env_key"] = KEY_VARIABLE
    document["model_providers"] = {"switchboard": provider}
    return [ConfigFile("~/.codex/config.toml", tomlkit.dumps(document)),
            EnvBlock({KEY_VARIABLE: setup.api_key}, _env_file("codex"))]


# --- agents configured by variables --------------------------------------------------
_COPILOT_WIRES = {"chat": ("openai", "/v1", "completions"), "responses": ("openai", "/v1", "responses"),
                  "websocket": ("openai", "/v1", "responses"), "messages": ("anthropic", "", "")}


def copilot_cli(setup: Setup) -> Output:
    """Copilot CLI's BYOK: a provider, its wire, and the limits it would
    otherwise guess from GitHub's catalog."""
    kind, path, wire = _COPILOT_WIRES[setup.wire or "chat"]
    model = setup.default()
    env = {"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_TYPE": kind,
           "COPILOT_PROVIDER_BASE_URL": setup.server + path, "COPILOT_PROVIDER_API_KEY": setup.api_key,
           "COPILOT_MODEL": setup.model, "COPILOT_PROVIDER_MAX_PROMPT_TOKENS": str(model.prompt),
           "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS": str(model.output)}
    if wire:
        env["COPILOT_PROVIDER_WIRE_API"] = wire
    if setup.wire == "websocket":
        env["COPILOT_PROVIDER_TRANSPORT"] = "websockets"
    return [EnvBlock(env, _env_file("copilot-cli"))]


def gemini_cli(setup: Setup) -> Output:
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {"name": setup.model}}
    env = {"GOOGLE_GEMINI_BASE_URL": setup.server, "GEMINI_API_KEY": setup.api_key, "GEMINI_MODEL": setup.model}
    return [ConfigFile("~/.gemini/settings.json", _json(settings)), EnvBlock(env, _env_file("gemini-cli"))]


def qwen_code(setup: Setup) -> Output:
    """Qwen Code reads its OpenAI settings from ~/.qwen/.env."""
    text = "".join(f"{k}={v}\n" for k, v in {"OPENAI_BASE_URL": f"{setup.server}/v1", "OPENAI_API_KEY": setup.api_key,
                                             "OPENAI_MODEL": setup.model}.items())
    return [ConfigFile("~/.qwen/.env", text)]


def aider(setup: Setup) -> Output:
    """Aider (LiteLLM underneath): the `openai/` provider pointed here, with
    each model's window in its model metadata file. `wire` "ollama": the
    `ollama_chat/` provider instead."""
    prefix, provider = ("ollama_chat/", "ollama_chat") if setup.wire == "ollama" else ("openai/", "openai")
    options = {"model": prefix + setup.model, "weak-model": prefix + setup.small_model, "show-model-warnings": False}
    if provider == "openai":
        options |= {"openai-api-base": f"{setup.server}/v1", "openai-api-key": setup.api_key}
    metadata = {prefix + m.name: {"max_input_tokens": m.prompt, "max_output_tokens": m.output,
                                  "max_tokens": m.output, "litellm_provider": provider, "mode": "chat",
                                  "input_cost_per_token": 0, "output_cost_per_token": 0,
                                  "supports_function_calling": m.tools, "supports_vision": m.vision}
                for m in setup.models}
    out: Output = [ConfigFile("~/.aider.conf.yml", "".join(f"{k}: {json.dumps(v)}\n" for k, v in options.items())),
                   ConfigFile("~/.aider.model.metadata.json", _json(metadata))]
    if provider == "ollama_chat":  # LiteLLM's Ollama provider takes its address from here
        out.append(EnvBlock({"OLLAMA_API_BASE": setup.server, "OLLAMA_API_KEY": setup.api_key}, _env_file("aider")))
    return out


# --- agents with a provider file ---------------------------------------------------------
_PI_APIS = {"chat": ("openai-completions", "/v1"), "responses": ("openai-responses", "/v1"),
            "messages": ("anthropic-messages", "")}


def pi(setup: Setup) -> Output:
    api, path = _PI_APIS[setup.wire or "chat"]
    provider = {"baseUrl": setup.server + path, "api": api, "apiKey": setup.api_key,
                "models": [{"id": m.name, "name": m.name, "reasoning": m.thinking,
                            "input": ["text", "image"] if m.vision else ["text"],
                            "contextWindow": m.context, "maxTokens": m.output} for m in setup.models]}
    settings = {"defaultProvider": "switchboard", "defaultModel": setup.model}
    return [ConfigFile("~/.pi/agent/models.json", _json({"providers": {"switchboard": provider}})),
            ConfigFile("~/.pi/agent/settings.json", _json(settings))]


# OpenCode and Kilo take a provider from the AI SDK's packages: one per wire.
_AI_SDK = {"chat": ("@ai-sdk/openai-compatible", "/v1"), "responses": ("@ai-sdk/openai", "/v1"),
           "messages": ("@ai-sdk/anthropic", "/v1")}


def _ai_sdk_config(setup: Setup) -> dict:
    package, path = _AI_SDK[setup.wire or "chat"]
    models = {m.name: {"name": m.name, "tool_call": m.tools, "reasoning": m.thinking, "attachment": m.vision,
                       "limit": {"context": m.context, "output": m.output}} for m in setup.models}
    provider = {"npm": package, "name": "Switchboard",
                "options": {"baseURL": setup.server + path, "apiKey": setup.api_key}, "models": models}
    return {"provider": {"switchboard": provider}, "model": f"switchboard/{setup.model}",
            "small_model": f"switchboard/{setup.small_model}"}


def opencode(setup: Setup) -> Output:
    config = {"$schema": "https://opencode.ai/config.json"} | _ai_sdk_config(setup)
    return [ConfigFile("~/.config/opencode/opencode.json", _json(config))]


def kilo(setup: Setup) -> Output:
    return [ConfigFile("~/.config/kilo/kilo.json", _json(_ai_sdk_config(setup)))]


# Vibe's api_style, and its base: its Anthropic adapter adds /v1/messages itself.
_VIBE_STYLES = {"chat": ("openai", "/v1"), "responses": ("openai-responses", "/v1"), "messages": ("anthropic", "")}


def vibe(setup: Setup) -> Output:
    """Mistral Vibe: a provider and one model entry per served model."""
    document = tomlkit.document()
    document["active_model"] = setup.model
    providers = tomlkit.aot()
    style, path = _VIBE_STYLES[setup.wire or "chat"]
    providers.append(tomlkit.item({"name": "switchboard", "api_base": setup.server + path,
                                   "api_key_env_var": KEY_VARIABLE, "api_style": style, "backend": "generic"}))
    document["providers"] = providers
    models = tomlkit.aot()
    for m in setup.models:
        models.append(tomlkit.item({"name": m.name, "provider": "switchboard", "alias": m.name,
                                    "max_context_length": m.context, "max_output_tokens": m.output,
                                    "supports_images": m.vision}))
    document["models"] = models
    return [ConfigFile("~/.vibe/config.toml", tomlkit.dumps(document)),
            EnvBlock({KEY_VARIABLE: setup.api_key}, _env_file("vibe"))]


# --- editors -----------------------------------------------------------------------------
def continue_(setup: Setup) -> Output:
    """Continue (cn 1.5) keeps a buffer as large as maxTokens besides the
    reply, and refuses every turn when the two fill the window ("max_tokens
    is larger than context_length"): its replies are held to a quarter."""
    models = [{"name": m.name, "provider": "openai", "model": m.name, "apiBase": f"{setup.server}/v1",
               "apiKey": setup.api_key, "roles": ["chat", "edit", "apply"],
               "capabilities": ["tool_use"] + (["image_input"] if m.vision else []) if m.tools else [],
               "defaultCompletionOptions": {"contextLength": m.context, "maxTokens": min(m.output, m.context // 4)}}
              for m in setup.models]
    document = {"name": "Switchboard", "version": "1.0.0", "schema": "v1", "models": models}
    return [ConfigFile("~/.continue/config.yaml", _yaml(document))]


def cline(setup: Setup) -> Output:
    """Cline CLI's providers file, as `cline auth -p openai` writes it (the
    OpenAI-compatible provider); it takes no context window from a file."""
    settings = {"provider": "openai-compatible", "apiKey": setup.api_key, "model": setup.model,
                "baseUrl": f"{setup.server}/v1"}
    # without updatedAt Cline 3.0 takes the entry for unset and falls back to its own cloud provider
    updated = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    document = {"version": 1, "lastUsedProvider": "openai-compatible", "modes": {}, "providers": {
        "openai-compatible": {"settings": settings, "updatedAt": updated, "tokenSource": "manual"}}}
    return [ConfigFile("~/.cline/data/settings/providers.json", _json(document))]


# VS Code's Custom Endpoint provider: its API type, and each model's URL.
_VSCODE_APIS = {"chat": ("chat-completions", "/v1/chat/completions"), "responses": ("responses", "/v1/responses"),
                "messages": ("messages", "/v1/messages")}


def vscode(setup: Setup) -> Output:
    """VS Code Copilot Chat's Custom Endpoint models (chatLanguageModels.json,
    which Chat: Manage Language Models opens). Without --key it asks for the
    key itself and keeps it in its secret storage."""
    api, path = _VSCODE_APIS[setup.wire or "chat"]
    models = [{"id": m.name, "name": m.name, "url": setup.server + path, "toolCalling": m.tools, "vision": m.vision,
               "thinking": m.thinking, "maxInputTokens": m.prompt, "maxOutputTokens": m.output} for m in setup.models]
    provider = {"name": "Switchboard", "vendor": "customendpoint", "apiType": api, "models": models}
    if setup.key:
        provider["apiKey"] = setup.key
    return [ConfigFile("~/.config/Code/User/chatLanguageModels.json", _json([provider]))]


def zed(setup: Setup) -> Output:
    models = [{"name": m.name, "display_name": m.name, "max_tokens": m.context, "max_output_tokens": m.output,
               "capabilities": {"tools": m.tools, "images": m.vision, "parallel_tool_calls": True,
                                "prompt_cache_key": True}} for m in setup.models]
    settings = {"language_models": {"openai_compatible": {"Switchboard": {
        "api_url": f"{setup.server}/v1", "available_models": models}}}}
    return [ConfigFile("~/.config/switchboard/zed-settings.json", _json(settings),
                       "merge into Zed's settings.json; Zed asks for the key in its Agent settings"),
            EnvBlock({"SWITCHBOARD_API_KEY": setup.api_key}, _env_file("zed"))]


def _yaml(value) -> str:
    """A YAML document in the order it was built (Continue's config)."""
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)


CLIENTS: dict[str, Client] = {
    "claude-code": Client(claude_code, run='claude -p "<prompt>"'),
    "codex": Client(codex, ("http", "websocket"), run='codex exec "<prompt>"'),
    "copilot-cli": Client(copilot_cli, ("chat", "responses", "websocket", "messages"),
                          run='copilot -p "<prompt>" --allow-all-tools'),
    "gemini-cli": Client(gemini_cli, run='gemini -p "<prompt>"'),
    "pi": Client(pi, ("chat", "responses", "messages"), run='pi -p "<prompt>"'),
    "opencode": Client(opencode, ("chat", "responses", "messages"), run='opencode run "<prompt>"'),
    "kilo": Client(kilo, ("chat", "responses", "messages"), run='kilo run --auto "<prompt>"'),
    "vibe": Client(vibe, ("chat", "responses", "messages"), run='vibe -p "<prompt>"'),
    "aider": Client(aider, ("openai", "ollama"), run='aider --message "<prompt>"'),
    "continue": Client(continue_, run='cn -p "<prompt>"'),
    "cline": Client(cline, run='cline "<prompt>"'),
    "qwen-code": Client(qwen_code, run='qwen -p "<prompt>"'),
    "vscode": Client(vscode, ("chat", "responses", "messages"), key_in_ui=True),
    "zed": Client(zed),
}


HELPER_CLIENTS = ("claude-code", "codex")  # those that run a command for their key (and ask it again)


def build(client: str, setup: Setup) -> Output:
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
    if setup.helper and client not in HELPER_CLIENTS:
        raise ValueError(f"{client} takes only a fixed key: mint one on {setup.server}/me and pass --key "
                         f"(--sign-in is for {', '.join(HELPER_CLIENTS)})")
    if setup.helper and client == "codex" and setup.wire == "websocket":
        raise ValueError("Codex's built-in provider (--wire websocket) takes its key from its login: --sign-in "
                         "needs its own provider (the default wire)")
    wires = CLIENTS[client].wires
    if setup.wire and setup.wire not in wires:
        raise ValueError(f"{client} has no wire {setup.wire!r}; its wires: {', '.join(w for w in wires if w)}")
    return CLIENTS[client].build(setup)


# --- from the registry and the keys file; onto the disk ------------------------------------
def served_models(registry, allowed: Callable[[str], bool] = lambda name: True) -> tuple[Model, ...]:
    """The chat models a key may use, with their windows from the registry."""
    return tuple(Model(e.name, e.info.context_length, e.output_limit, tools="tools" in e.capabilities,
                       vision=e.vision, thinking=e.thinks)
                 for e in registry.entries() if "completion" in e.capabilities and allowed(e.name))


def pick_small_model(registry, models: tuple[Model, ...], default: str) -> str:
    """The registry's background model the key may use, else the default."""
    names = {m.name for m in models}
    return next((e.name for e in registry.entries() if e.background and e.name in names), default)


# --- the MCP gateway, as each agent adds it ------------------------------------------------
GATEWAY_NAME = "office"  # what the agent calls the gateway (its tools: mcp__office__..., mcp_office_...)


def mcp_gateway(client: str, server: str, sign_in: bool) -> str:
    """How the agent adds the MCP gateway (`server`: its URL): with no key where it signs in itself (OAuth) and
    the server has sign-in on, else with a key (the placeholder)."""
    url = f"{server}/mcp"
    if client == "claude-code":
        if sign_in:
            return (f"claude mcp add --transport http {GATEWAY_NAME} {url}\n"
                    f"claude mcp login {GATEWAY_NAME}   # your browser opens: sign in and approve\n")
        return (f"claude mcp add --transport http {GATEWAY_NAME} {url} "
                f"--header \"Authorization: Bearer {PLACEHOLDER_KEY}\"\n")
    if client == "codex":
        table = f'# ~/.codex/config.toml\n[mcp_servers.{GATEWAY_NAME}]\nurl = "{url}"\n'
        if sign_in:
            return table + f"\n# then, once:\ncodex mcp login {GATEWAY_NAME}   # your browser opens\n"
        return table + f'bearer_token_env_var = "{KEY_VARIABLE}"   # export {KEY_VARIABLE}=<your key>\n'
    headers = {"Authorization": f"Bearer {PLACEHOLDER_KEY}"}
    if client == "gemini-cli":  # (it signs in at its first use: the browser opens, it listens on loopback)
        server_entry = {"httpUrl": url, "oauth": {"enabled": True}} if sign_in else {"httpUrl": url, "headers": headers}
        return "# ~/.gemini/settings.json\n" + _json({"mcpServers": {GATEWAY_NAME: server_entry}})
    return (f"# its MCP settings: a streamable HTTP server named {GATEWAY_NAME}\nurl: {url}\n"
            f"header: Authorization: Bearer {PLACEHOLDER_KEY}\n")
