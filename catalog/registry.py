"""The model registry: one TOML file describing every served model.

    [models."smollm2:135m"]
    backend = "llamacpp"     # a registered backend name
    pool = "local"           # the Celery queue its jobs go to
    # ...then the backend's own settings (see its Settings model)

Both processes read it: the web for listing, validation and routing, the
workers to build backends (workers/backends maps a kind to its runtime). A bad
entry, or one whose file or key variable is missing, makes start-up fail with
a message naming the entry and the key.
"""
from __future__ import annotations

import fnmatch
import tomllib
from functools import cached_property
from pathlib import Path

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog.fim import FAMILIES
from catalog.kinds import backend_kind, kind_names
from catalog.mcp import McpServer
from catalog.model_info import BackendSettings, ModelInfo, validation_message
from protocol.errors import RegistryError, SwitchboardError, UnknownModel

FimFamily = Literal[tuple(FAMILIES)]  # type: ignore[valid-type]

DEFAULT_REGISTRY = Path(__file__).resolve().parent.parent / "models.toml"
_COMMON_KEYS = {"backend", "pool", "display_name", "tools", "system", "step_limit", "fim", "supersede", "background",
                "mcp_servers", "embeddings", "vision", "thinking", "think_tags", "aliases", "fallbacks",
                "fallback_after", "price", "max_output_tokens", "guard"}
# A reply's length clients are told to plan for when the registry names none:
# half the context (the rest is the prompt's), at most this.
DEFAULT_OUTPUT_LIMIT = 32768


class Price(BaseModel):
    """What a million tokens cost, in the operator's currency: the usage
    export's estimated cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)  # per million prompt tokens
    output: float = Field(ge=0)  # per million completion tokens


class ModelEntry(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    backend: str
    pool: str  # the Celery queue its jobs go to; default: the backend's
    display_name: str | None = None  # shown as general.basename (Copilot's model name)
    # emulated: described in the prompt, parsed from the reply; native: passed to the backend
    tools: Literal["emulated", "native", "off"] = "emulated"
    system: Literal["native", "inject"] = "native"  # inject: for backends that ignore the system role
    step_limit: int = Field(default=25, ge=1)  # tool rounds per request before a final answer is asked for
    fim: FimFamily | None = None  # fill-in-the-middle template family: gives the "insert" capability
    # A person's newer code completion for this model cancels their older one
    # (off by default: real Ollama completes both).
    supersede: bool = False
    # Every call on it is background work (the agents' small model): served after interactive turns.
    background: bool = False
    # The operator's MCP servers whose tools this model may call server-side
    # (catalog/mcp.py), in order of precedence when two offer one name.
    mcp_servers: tuple[str, ...] = ()
    # "only": an embedding model (capability "embedding", refused for chat);
    # "also": a chat model that also serves embeddings (as Ollama's chat
    # models do, it does not say so in its capabilities); "off": refused.
    embeddings: Literal["off", "also", "only"] = "off"
    vision: bool = False  # an upstream model that accepts images
    thinking: bool = False  # reports the thinking capability; its thinking is passed on
    # A local model that writes its reasoning between these tags: split out
    # into the thinking field (implies thinking).
    think_tags: tuple[str, str] | None = None
    # Name patterns (fnmatch) it also answers to, for clients that ask for
    # names of their own (Claude Code's claude-* background calls); listed
    # only under its real name.
    aliases: tuple[str, ...] = ()
    # Models that answer instead, in order, when every deployment of this one
    # is down, or (with fallback_after) its queue's wait would be longer than
    # that many seconds (app/fallback.py).
    fallbacks: tuple[str, ...] = ()
    fallback_after: float | None = Field(default=None, gt=0)
    price: Price | None = None  # per million tokens, for the usage export's estimated cost
    # The longest reply clients are told to ask for (scripts/connect.py writes
    # it into their configs beside the context window); None: see output_limit.
    max_output_tokens: int | None = Field(default=None, ge=1)
    # What the guard does with secrets in its requests (guard/policy.py); None: the server's default.
    guard: Literal["off", "log", "redact", "block"] | None = None
    settings: BackendSettings

    def answers_to(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.aliases)

    @property
    def capabilities(self) -> list[str]:
        if self.embeddings == "only":
            return ["embedding"]
        return (["completion"] + (["tools"] if self.tools != "off" else []) + (["insert"] if self.fim else [])
                + (["vision"] if self.vision else []) + (["thinking"] if self.thinks else []))

    @property
    def output_limit(self) -> int:
        if self.max_output_tokens is not None:
            return min(self.max_output_tokens, self.info.context_length)
        return min(self.info.context_length // 2, DEFAULT_OUTPUT_LIMIT)

    @property
    def thinks(self) -> bool:
        return self.thinking or self.think_tags is not None

    @cached_property
    def info(self) -> ModelInfo:
        # Copilot names a model by general.basename: each served model gets its
        # own (the registry name unless display_name is set), not the family's.
        info = self.settings.describe(self.name).model_copy(update={"basename": self.display_name or self.name})
        if self.fim:  # Continue offers FIM only when the template mentions .Suffix
            info = info.model_copy(update={"template": FAMILIES[self.fim].template})
        return info


def parse_entry(name: str, table: dict) -> ModelEntry:
    where = f'models."{name}"'
    if not isinstance(table, dict) or "backend" not in table:
        raise RegistryError(f'{where}: needs a "backend" key (known: {", ".join(kind_names())})')
    try:
        backend = backend_kind(table["backend"])
        settings = backend.Settings.model_validate({k: v for k, v in table.items() if k not in _COMMON_KEYS})
        common = {"pool": backend.default_pool} | {k: v for k, v in table.items() if k in _COMMON_KEYS}
        entry = ModelEntry(name=name, settings=settings, **common)
        if entry.vision and not backend.passes_images:
            raise RegistryError(f'{where}: backend "{backend.name}" cannot take images; vision = true is for '
                                "upstream models that accept them")
        if entry.tools == "native" and not backend.native_tools:
            raise RegistryError(f'{where}: backend "{backend.name}" has no native tool calling; '
                                'use tools = "emulated" or "off"')
        entry.settings.check_environment()
        entry.info  # fail at start-up, not on the first request, if the model file is unusable
        return entry
    except ValidationError as error:
        raise RegistryError(f"{where}: {validation_message(error)}") from None
    except (SwitchboardError, OSError, ValueError) as error:
        raise RegistryError(f"{where}: {error}") from None


def parse_server(name: str, table: dict) -> McpServer:
    where = f'mcp_servers."{name}"'
    if not isinstance(table, dict):
        raise RegistryError(f"{where}: must be a table")
    try:
        server = McpServer(name=name, **table)
        server.check_environment()
        return server
    except ValidationError as error:
        raise RegistryError(f"{where}: {validation_message(error)}") from None
    except (TypeError, ValueError) as error:
        raise RegistryError(f"{where}: {error}") from None


def _check_servers_known(entries: dict[str, ModelEntry], servers: dict[str, McpServer]) -> None:
    for entry in entries.values():
        unknown = [s for s in entry.mcp_servers if s not in servers]
        if unknown:
            raise RegistryError(f'models."{entry.name}": mcp_servers: no server "{unknown[0]}" in [mcp_servers] '
                                f"(known: {', '.join(sorted(servers)) or 'none'})")
        if entry.mcp_servers and entry.tools == "off":
            raise RegistryError(f'models."{entry.name}": mcp_servers needs tools = "emulated" or "native"')


def _check_fallbacks_known(entries: dict[str, ModelEntry]) -> None:
    for entry in entries.values():
        unknown = [name for name in entry.fallbacks if name not in entries or name == entry.name]
        if unknown:
            raise RegistryError(f'models."{entry.name}": fallbacks: "{unknown[0]}" is not another model of the '
                                "registry (name it exactly as its [models.\"NAME\"] table)")
        if entry.fallback_after is not None and not entry.fallbacks:
            raise RegistryError(f'models."{entry.name}": fallback_after needs fallbacks')


class Registry:
    def __init__(self, entries: dict[str, ModelEntry], servers: dict[str, McpServer] | None = None):
        self._entries = entries
        self.servers: dict[str, McpServer] = servers or {}
        _check_servers_known(entries, self.servers)
        _check_fallbacks_known(entries)

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> list[ModelEntry]:
        return list(self._entries.values())

    def prices(self) -> dict[str, tuple[float, float]]:
        """Model -> (input, output) price per million tokens, where the registry gives one."""
        return {e.name: (e.price.input, e.price.output) for e in self.entries() if e.price is not None}

    def get(self, name: str) -> ModelEntry:
        """Ollama clients may add or drop the implicit ":latest" tag; a name
        no model has goes to the first model with an alias matching it."""
        for candidate in (name, name.removesuffix(":latest"), f"{name}:latest"):
            if candidate in self._entries:
                return self._entries[candidate]
        for entry in self._entries.values():
            if entry.answers_to(name):
                return entry
        raise UnknownModel(name)

    def pools(self) -> set[str]:
        return {e.pool for e in self._entries.values()}


def load_registry(path: Path | None = None) -> Registry:
    path = path or DEFAULT_REGISTRY
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RegistryError(f"cannot read model registry {path}: {error}") from None
    unknown = set(document) - {"models", "mcp_servers"}
    if unknown:
        raise RegistryError(f"{path}: unknown top-level keys {sorted(unknown)}; expected [models.\"NAME\"] tables")
    tables = document.get("models", {})
    if not tables:
        raise RegistryError(f"{path}: no models defined")
    servers = {name: parse_server(name, table) for name, table in document.get("mcp_servers", {}).items()}
    return Registry({name: parse_entry(name, table) for name, table in tables.items()}, servers)
