"""The backend kinds the registry knows: each kind's settings class and
capabilities, without its runtime (which lives in workers/backends and is
imported only by workers). Asking for an unknown kind names the known ones."""
from __future__ import annotations

from dataclasses import dataclass

from catalog.echo import EchoSettings
from catalog.llamacpp import LlamaCppSettings
from catalog.model_info import BackendSettings
from catalog.deployments import AnthropicDeployments, Deployments, GeminiDeployments, OllamaDeployments
from protocol.errors import UnknownBackend


@dataclass(frozen=True)
class BackendKind:
    name: str
    Settings: type[BackendSettings]
    # Can pass tools to the model and return its calls (registry tools = "native").
    native_tools: bool = False
    # Can pass images on to a model that takes them (registry vision = true).
    passes_images: bool = False
    # The queue (pool) its models use unless the registry says otherwise.
    default_pool: str = "local"
    # Runs a bounded number of jobs per worker process (`jobs_at_once` of its
    # settings: llama.cpp's sequences of one context): the fair queue gives
    # its jobs only to a worker whose copy has room.
    serial: bool = False


KINDS: dict[str, BackendKind] = {kind.name: kind for kind in (
    BackendKind("echo", EchoSettings),
    BackendKind("llamacpp", LlamaCppSettings, serial=True),
    BackendKind("openai", Deployments, native_tools=True, passes_images=True, default_pool="upstream"),
    BackendKind("ollama", OllamaDeployments, native_tools=True, passes_images=True, default_pool="upstream"),
    BackendKind("anthropic", AnthropicDeployments, native_tools=True, passes_images=True, default_pool="upstream"),
    BackendKind("gemini", GeminiDeployments, native_tools=True, passes_images=True, default_pool="upstream"),
)}


def kind_names() -> list[str]:
    return sorted(KINDS)


def backend_kind(name: str) -> BackendKind:
    if name not in KINDS:
        raise UnknownBackend(name, kind_names())
    return KINDS[name]
