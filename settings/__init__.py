"""Switchboard's settings, for both processes: one pydantic-settings model,
read from the environment once per process (12-factor). A bad value stops
start-up with a message naming the variable. Every variable is documented in
the README's configuration table (a test checks it).

The web process reads it in create_app(); a worker in queue_config (Celery's
configuration) and in its run context.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# Beside the project (git ignores it): the embedded Redis's files.
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def _env(name: str, default, **constraints):
    """A field read from the variable `name` (and settable by field name)."""
    return Field(default, validation_alias=AliasChoices(name), json_schema_extra={"env": name}, **constraints)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(populate_by_name=True, env_ignore_empty=True, extra="forbid",
                                      frozen=True)

    redis_url: str = _env("REDIS_URL", DEFAULT_REDIS_URL)
    # With a sentinel:// REDIS_URL: the master's name, and the sentinels' own password.
    redis_master: str = _env("SWITCHBOARD_REDIS_MASTER", "mymaster", min_length=1)
    redis_sentinel_password: SecretStr | None = _env("SWITCHBOARD_REDIS_SENTINEL_PASSWORD", None)
    models_path: Path | None = _env("SWITCHBOARD_MODELS", None)
    # What the server keeps on disk: the embedded Redis's append-only file (`make run`), the office secret.
    data_dir: Path = _env("SWITCHBOARD_DATA_DIR", DEFAULT_DATA_DIR)
    # The office secret that seals what clients keep for us (reasoning, compactions); unset: generated into
    # the data directory. Web processes on several machines must share one.
    secret: SecretStr | None = _env("SWITCHBOARD_SECRET", None)
    # Connections one process's Redis pool may open (pub/sub and Celery's own
    # broker connections come on top): bounded however many streams it carries.
    redis_connections: int = _env("SWITCHBOARD_REDIS_CONNECTIONS", 32, ge=1)
    # How long a running job may send nothing before the request gives up.
    event_timeout_seconds: float = _env("SWITCHBOARD_EVENT_TIMEOUT", 600.0, gt=0)
    # How long to wait for Redis to confirm a subscription before enqueueing.
    subscribe_timeout_seconds: float = _env("SWITCHBOARD_SUBSCRIBE_TIMEOUT", 5.0, gt=0)
    # API keys (off when neither is set); see identity/keys.py.
    keys_file: Path | None = _env("SWITCHBOARD_KEYS_FILE", None)
    api_keys: str | None = _env("SWITCHBOARD_API_KEYS", None)
    # CIDRs whose clients need no key when keys are on (comma-separated).
    trusted_networks: str | None = _env("SWITCHBOARD_TRUSTED_NETWORKS", None)
    # Reverse proxies (CIDRs) whose X-Forwarded-For names the client: a request from one of them is the
    # address it forwards for (its rightmost untrusted hop); from anywhere else the header is ignored.
    trusted_proxies: str | None = _env("SWITCHBOARD_TRUSTED_PROXIES", None)
    # The Host names the server answers to (comma-separated; `*.example.org` for a domain's names, `*` for
    # any): beside loopback, the machine's own names, any IP address and SWITCHBOARD_PUBLIC_URL's host. A
    # name not among them is refused (a DNS-rebinding page's request carries its own).
    allowed_hosts: str | None = _env("SWITCHBOARD_ALLOWED_HOSTS", None)
    # Web pages (origins, e.g. https://chat.office.example, fnmatch) that may call the API from a browser,
    # beside the server's own origin and local editors' (vscode-webview://, app://...): a browser's request
    # from another origin is refused with a 403 naming this setting.
    allowed_origins: str | None = _env("SWITCHBOARD_ALLOWED_ORIGINS", None)
    # Per-key defaults (a key may set its own), and the queue bound per pool.
    requests_per_minute: int = _env("SWITCHBOARD_REQUESTS_PER_MINUTE", 600, ge=1)
    max_concurrent: int = _env("SWITCHBOARD_MAX_CONCURRENT", 16, ge=1)
    # The MCP gateway (/mcp): a key's tool calls per minute (a key may set its own), and whether a key
    # that names no mcp_servers reaches none (else all).
    tool_calls_per_minute: int = _env("SWITCHBOARD_TOOL_CALLS_PER_MINUTE", 120, ge=1)
    mcp_default_deny: bool = _env("SWITCHBOARD_MCP_DEFAULT_DENY", False)
    max_queue: int = _env("SWITCHBOARD_MAX_QUEUE", 500, ge=1)
    # How workers choose among waiting jobs: fair shares between people, or
    # arrival order ("fifo", the old behaviour, kept for comparison).
    queue_policy: Literal["fair", "fifo"] = _env("SWITCHBOARD_QUEUE_POLICY", "fair")
    # A job not started within this is dropped: clients give up about then.
    max_queue_wait_seconds: float = _env("SWITCHBOARD_MAX_QUEUE_WAIT", 300.0, gt=0)
    # While a streaming job waits: SSE comments / empty NDJSON lines this often.
    keepalive_seconds: float = _env("SWITCHBOARD_KEEPALIVE", 10.0, gt=0)
    # A started job whose worker has not beaten for this long is lost.
    heartbeat_timeout_seconds: float = _env("SWITCHBOARD_HEARTBEAT_TIMEOUT", 5.0, gt=0)
    # Request limits.
    max_body_bytes: int = _env("SWITCHBOARD_MAX_BODY_BYTES", 32 * 1024 * 1024, ge=1)
    max_messages: int = _env("SWITCHBOARD_MAX_MESSAGES", 2000, ge=1)
    max_tools: int = _env("SWITCHBOARD_MAX_TOOLS", 512, ge=0)
    # Logging: prompts only when asked; conversation logs (JSON lines) opt-in.
    log_prompts: bool = _env("SWITCHBOARD_LOG_PROMPTS", False)
    # Celery's per-task INFO lines in the worker log (two per job).
    log_tasks: bool = _env("SWITCHBOARD_LOG_TASKS", False)
    conversation_log_dir: Path | None = _env("SWITCHBOARD_CONVERSATION_LOG_DIR", None)
    # On SIGTERM, how long open streams may run on before they are ended with
    # an in-band error (gunicorn's graceful timeout; LLM streams run long).
    graceful_timeout_seconds: int = _env("SWITCHBOARD_GRACEFUL_TIMEOUT", 120, ge=1)
    # How long a finished job's state (and an unrun job's abort mark) is kept
    # in Redis; at least the queue wait.
    record_seconds: int = _env("SWITCHBOARD_RECORD_SECONDS", 600, ge=1)
    # How long the audit log (keys added, revoked, changed; the models served) keeps its entries.
    audit_log_days: int = _env("SWITCHBOARD_AUDIT_LOG_DAYS", 400, ge=1)
    # The request log (one record per model request, in Redis; the console's Requests page): kept this
    # many days, and at most this many records whatever their age.
    request_log_days: int = _env("SWITCHBOARD_REQUEST_LOG_DAYS", 14, ge=1)
    request_log_max: int = _env("SWITCHBOARD_REQUEST_LOG_MAX", 500_000, ge=100)
    # Prompt and reply bodies in the request log: off unless on here (everyone) or for a key (`log_bodies`
    # in the keys file); kept this many days (never keys or headers).
    request_log_bodies: bool = _env("SWITCHBOARD_REQUEST_LOG_BODIES", False)
    request_log_body_days: int = _env("SWITCHBOARD_REQUEST_LOG_BODY_DAYS", 3, ge=1)
    # A link from a request to its trace in the operator's tracing system ({trace_id} is replaced),
    # e.g. http://jaeger:16686/trace/{trace_id}.
    trace_url: str | None = _env("SWITCHBOARD_TRACE_URL", None)
    # How long a stored response (/v1/responses with store: true) is kept.
    responses_ttl_seconds: int = _env("SWITCHBOARD_RESPONSES_TTL", 86400, ge=1)
    # The Responses API over WebSocket (GET /v1/responses upgraded: Codex's own transport); off, the upgrade
    # is answered 426 and clients use HTTP.
    responses_websocket: bool = _env("SWITCHBOARD_RESPONSES_WEBSOCKET", True)
    # A Responses WebSocket's life: past it, its next response.create is refused with OpenAI's
    # websocket_connection_limit_reached and the socket closed (clients open a new one).
    websocket_max_seconds: float = _env("SWITCHBOARD_WEBSOCKET_MAX_SECONDS", 3600.0, gt=0)
    # Worker side: caps on one job, whatever it asks for.
    max_job_seconds: float = _env("SWITCHBOARD_MAX_JOB_SECONDS", 600.0, gt=0)
    max_job_tokens: int = _env("SWITCHBOARD_MAX_JOB_TOKENS", 16384, ge=1)
    # The guard (secrets kept from hosted models): the policy of a model the registry gives none ("auto":
    # redact for upstreams outside the operator's networks, off for the rest); those networks (CIDRs,
    # comma-separated; unset: SWITCHBOARD_TRUSTED_NETWORKS); the allow-list file (a value or `re:pattern`
    # per line); how long a person's found values and the scanned texts' findings are remembered.
    guard: Literal["auto", "off", "log", "redact", "block"] = _env("SWITCHBOARD_GUARD", "auto")
    guard_networks: str | None = _env("SWITCHBOARD_GUARD_NETWORKS", None)
    guard_allow_file: Path | None = _env("SWITCHBOARD_GUARD_ALLOW_FILE", None)
    guard_memory_hours: float = _env("SWITCHBOARD_GUARD_MEMORY_HOURS", 24.0, gt=0)
    # How long /api/ps lists a model after a worker last ran it.
    loaded_marker_seconds: int = _env("SWITCHBOARD_LOADED_SECONDS", 300, ge=0)
    # Worker side: a job's streamed messages at most this far apart (its first
    # and its last never wait; workers/publisher.py); 0 sends each piece at once.
    stream_interval_seconds: float = _env("SWITCHBOARD_STREAM_INTERVAL", 0.05, ge=0, le=1)
    # Both processes: net allocations between the garbage collector's young
    # passes, after start-up is frozen (settings/collector.py); 0 keeps
    # Python's defaults.
    gc_threshold: int = _env("SWITCHBOARD_GC_THRESHOLD", 10000, ge=0)
    # The server's address as people's browsers and tools reach it (sign-in's redirect and the device login's
    # page are built on it); unset: the address each request came to.
    public_url: str | None = _env("SWITCHBOARD_PUBLIC_URL", None, pattern=r"^https?://[^/?#]+(/[^?#]*)?$")
    # Sign-in with the office's OpenID provider (identity/provider.py; off without an issuer): its client, the scopes
    # asked for, the claim that names a person, and who is an admin (members of these groups in that claim,
    # or these people); extra parameters for its authorization request (`access_type=offline` for Google).
    oidc_issuer: str | None = _env("SWITCHBOARD_OIDC_ISSUER", None, pattern=r"^https?://")
    oidc_client_id: str | None = _env("SWITCHBOARD_OIDC_CLIENT_ID", None)
    oidc_client_secret: SecretStr | None = _env("SWITCHBOARD_OIDC_CLIENT_SECRET", None)
    oidc_scopes: str = _env("SWITCHBOARD_OIDC_SCOPES", "openid profile email offline_access")
    oidc_person_claim: str = _env("SWITCHBOARD_OIDC_PERSON_CLAIM", "preferred_username", min_length=1)
    oidc_admin_claim: str = _env("SWITCHBOARD_OIDC_ADMIN_CLAIM", "groups", min_length=1)
    oidc_admin_groups: str = _env("SWITCHBOARD_OIDC_ADMIN_GROUPS", "")
    oidc_admins: str = _env("SWITCHBOARD_OIDC_ADMINS", "")
    oidc_auth_params: str = _env("SWITCHBOARD_OIDC_AUTH_PARAMS", "")
    # A console sign-in's life; a key a helper (scripts/admin.py token) gets; how often each person is asked
    # of the provider again (a person it no longer knows loses their keys at their next use after that);
    # the longest a key minted in the console may live; how long an unused command-line login lasts.
    signin_session_seconds: int = _env("SWITCHBOARD_SIGNIN_SESSION_SECONDS", 3600, ge=60)
    signin_token_seconds: int = _env("SWITCHBOARD_SIGNIN_TOKEN_SECONDS", 3600, ge=1)
    signin_recheck_seconds: int = _env("SWITCHBOARD_SIGNIN_RECHECK_SECONDS", 300, ge=1)
    signin_key_days: int = _env("SWITCHBOARD_SIGNIN_KEY_DAYS", 90, ge=1)
    signin_login_days: int = _env("SWITCHBOARD_SIGNIN_LOGIN_DAYS", 30, ge=1)
    # Whether MCP agents may name their client metadata document (a client_id that is an https URL: Claude
    # Code's and Codex's are on their makers' sites) rather than register: off for a server that cannot reach
    # the internet, whose agents then register. Hosts on the office's own networks (a name or an address,
    # comma-separated) whose documents may be fetched; a host on the internet always may.
    agent_metadata_documents: bool = _env("SWITCHBOARD_AGENT_METADATA_DOCUMENTS", True)
    agent_metadata_hosts: str = _env("SWITCHBOARD_AGENT_METADATA_HOSTS", "")

    @model_validator(mode="after")
    def _oidc_whole(self) -> "Settings":
        if self.oidc_issuer and not self.oidc_client_id:
            raise ValueError("SWITCHBOARD_OIDC_ISSUER needs SWITCHBOARD_OIDC_CLIENT_ID (and, for a confidential "
                             "client, SWITCHBOARD_OIDC_CLIENT_SECRET)")
        return self

    @property
    def signin(self) -> bool:
        return bool(self.oidc_issuer)


class SettingsError(ValueError):
    """A setting's value is invalid; the message names the variable."""


def environment_names() -> dict[str, str]:
    """Field name -> the environment variable it is read from."""
    return {name: field.json_schema_extra["env"] for name, field in Settings.model_fields.items()}


def load_settings(overrides: dict | None = None) -> Settings:
    """Read the environment (and apply overrides, by field name)."""
    overrides = overrides or {}
    unknown = set(overrides) - set(Settings.model_fields)
    if unknown:
        raise SettingsError(f"unknown settings: {sorted(unknown)}")
    try:
        return Settings(**overrides)
    except ValidationError as error:
        names = environment_names()
        problems = []
        for problem in error.errors():
            where = str(problem["loc"][0]) if problem["loc"] else ""
            variable = names.get(where, where)
            problems.append(f"{variable}: {problem['msg']} (got {problem['input']!r})" if variable
                            else problem["msg"].removeprefix("Value error, "))  # (a check of several together)
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


@lru_cache(maxsize=1)
def settings_from_environment() -> Settings:
    """The process's settings, read once."""
    return load_settings()
