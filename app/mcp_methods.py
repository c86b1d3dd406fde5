"""What the MCP gateway answers to each method a client may send, for one
request: the key's endpoint (dialects.mcp.Names and its grants) decides
what is listed and what may be called; upstream methods go to the MCP pool
(app/mcp_gateway.py). Every tool call is counted against the person's rates
and left in the operator's records: a request-log record (never its
arguments or result unless the key logs bodies), a span `execute_tool
<name>`, the tool-call metrics the server-side tool loop counts too, and
the day's tool use per person.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Callable


import jobqueue
from app.mcp_gateway import Caller, Endpoint, Hooks
from app.services import Services
from dialects import mcp
from dialects.mcp import INVALID_PARAMS, METHOD_NOT_FOUND, Message, RpcError
from protocol import keys
from protocol.gateway import NOT_CONNECTED, error_outcome
from telemetry import tracing

INSTRUCTIONS = ("Switchboard's MCP gateway: the office's MCP servers this key may use. On /mcp their tools and "
                "prompts are named <server>__<name>.")


@dataclass
class Methods:
    shared: Services
    endpoint: Endpoint
    caller: Caller
    person: str
    rates: tuple[int, int]  # the key's requests and tool calls per minute
    log_bodies: bool = False
    span: object = None
    session: str | None = None
    hooks: Hooks = field(default_factory=Hooks)  # told each upstream call's progress, and its id (cancellation)
    noted: dict = field(default_factory=dict)  # what the request log keeps of the request
    pending: Callable[[], None] | None = None  # a tool call's records, to write when the answer is sent
    holding: str | None = None  # the slot (lease member) an admitted tool call holds until its records
    url_elicitation: bool = False  # the client declared the 2025-11-25 URL elicitation capability

    def answer(self, message: Message) -> dict:
        handler = _HANDLERS.get(message.method or "")
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f'Method not found: "{message.method}"')
        if message.method in METERED:
            self.meter()
        try:
            return handler(self, message)
        except RpcError as error:
            if error.code != NOT_CONNECTED:
                raise
            raise self._connect_first(error) from None

    def _connect_first(self, error: RpcError) -> RpcError:
        """A person who has not connected their account on an OAuth server: a URL elicitation (the spec's
        URLElicitationRequiredError) for a client that declared it takes them, else an error saying where."""
        if not self.url_elicitation:
            return RpcError(-32000, error.message, {"url": error.data["url"]})
        return RpcError(NOT_CONNECTED, "This request requires more information.", {"elicitations": [{
            "mode": "url", "elicitationId": uuid.uuid4().hex, "url": error.data["url"],
            "message": f'Connect your account on "{error.data["server"]}" to use its tools through Switchboard.'}]})

    def meter(self) -> None:
        """A method that reaches the servers or leaves state, counted against the person's rates as a call is."""
        try:
            jobqueue.meter_mcp_method(self.shared.redis, self.person,
                                      keys.lease_member(self.shared.relay.web_id, uuid.uuid4().hex), self.rates)
        except jobqueue.Busy as busy:
            self.noted["outcome"] = "refused"
            raise _over_rate(busy) from None

    # --- listings ---------------------------------------------------------------
    def listing(self, message: Message) -> dict:
        servers = self.endpoint.names.servers
        if message.method != "tools/list":  # resources and prompts: of servers the key may use whole
            servers = tuple(s for s in servers if self.endpoint.grants.whole_server(s))
        listings = self.caller.gather(servers, message.method) if servers else {}
        return mcp.merged_listing(message.method, listings, self.endpoint.names, self.endpoint.listed)

    # --- calls --------------------------------------------------------------------
    def call_tool(self, message: Message) -> dict:
        started = time.perf_counter()
        server, tool = self._tool_of(message)
        self.noted |= {"server": server, "tool": tool}
        outcome, result = "error", None
        try:
            if not self.endpoint.tool_allowed(server, tool):
                outcome = "denied"
                raise RpcError(INVALID_PARAMS, f'Unknown tool: "{message.params["name"]}" is not among the tools '
                                               "this key may use here")
            try:
                result = self._call(server, mcp.upstream_params(message, tool))
            except RpcError as error:
                if error.code != NOT_CONNECTED or self.url_elicitation:
                    raise
                outcome = "not_connected"  # (a result the agent's model reads: it tells its person where to go)
                result = {"content": [{"type": "text", "text": f"Error: {error.message}."}], "isError": True}
                return result
            outcome = "error" if result.get("isError") else "ok"
            return result
        except RpcError as error:
            refused = self.noted.pop("outcome", None)
            outcome = refused or (outcome if outcome == "denied" else error_outcome(error.code))
            self.noted["error"] = error.message
            raise
        finally:  # (written once the client has its answer: Exchange.ended)
            self.pending = partial(self._record_call, server, tool, outcome, time.perf_counter() - started, message,
                                   result)

    def _tool_of(self, message: Message) -> tuple[str, str]:
        try:
            return mcp.call_target(message, self.endpoint.names)
        except RpcError:
            self.noted |= {"tool": str(message.params.get("name"))[:200]}
            raise

    def _call(self, server: str, params: dict) -> dict:
        """The call, admitted against the person's rates and queued in one
        round trip; from then on it holds one of their slots (their jobs
        count it), freed with its records once the client has the answer."""
        lease = keys.lease_member(self.shared.relay.web_id, uuid.uuid4().hex)

        def admitted(call: str) -> None:
            try:
                jobqueue.admit_tool_call(self.shared.redis, self.person, lease, self.rates, call)
            except jobqueue.Busy as busy:
                self.noted["outcome"] = "refused"
                raise _over_rate(busy) from None
            self.holding = lease

        return self.caller.call(server, "tools/call", params, self.hooks, queue=admitted)

    def _record_call(self, server: str, tool: str, outcome: str, seconds: float, message: Message,
                     result: dict | None) -> None:
        bytes_in = len(json.dumps(message.params.get("arguments") or {}))
        bytes_out = len(json.dumps(result)) if result is not None else 0
        self.noted |= {"finish": outcome, "bytes_in": bytes_in, "bytes_out": bytes_out}
        if self.log_bodies:
            self.noted["body"] = {"person": self.person, "request": message.params, "reply": result}
        with self.shared.redis.pipeline(transaction=False) as pipe:
            jobqueue.tool_call_ended(pipe, self.person, server, tool, outcome, seconds)
            if self.holding is None:
                pipe.execute()
            else:  # its slot, freed: the person's jobs waiting on it are woken
                jobqueue.free_slot(self.shared.redis, self.person, self.holding, self.shared.wakeups, batch=pipe)
        tracing.ToolCallSpan(tool, server, self.person).record(seconds, outcome, self.span)

    def upstream(self, message: Message) -> dict:
        """resources/read, prompts/get, completion/complete: on the server
        that has it, if the key may use that server whole."""
        server, own_name = self._target(message)
        if not self.endpoint.grants.whole_server(server):
            raise RpcError(INVALID_PARAMS, f'"{server}" offers only some of its tools to this key: its resources '
                                           "and prompts are not among them")
        return self.caller.call(server, message.method, mcp.upstream_params(message, own_name), self.hooks)

    def _target(self, message: Message) -> tuple[str, str | None]:
        if message.method == "prompts/get":
            return mcp.call_target(message, self.endpoint.names)
        if message.method == "resources/read":
            return self._resource_server(message.params.get("uri")), None
        ref = message.params.get("ref")  # completion/complete: a prompt's name, or a resource template's
        if isinstance(ref, dict) and ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            target = self.endpoint.names.inward(ref["name"])
            if target is None:
                raise RpcError(INVALID_PARAMS, f'Unknown prompt: "{ref["name"]}"')
            message.params["ref"] = ref | {"name": target[1]}
            return target[0], None
        if isinstance(ref, dict) and isinstance(ref.get("uri"), str):
            return self._resource_server(ref["uri"]), None
        raise RpcError(INVALID_PARAMS, '"params.ref" must name a prompt or a resource template')

    def _resource_server(self, uri) -> str:
        if not isinstance(uri, str) or not uri:
            raise RpcError(INVALID_PARAMS, '"params.uri" must be a non-empty string')
        servers = tuple(s for s in self.endpoint.names.servers if self.endpoint.grants.whole_server(s))
        if len(servers) == 1:
            return servers[0]
        for method, key in (("resources/list", "uri"), ("resources/templates/list", "uriTemplate")):
            for server, items in self.caller.gather(servers, method).items():
                if any(_resource_matches(item.get(key), uri) for item in items):
                    return server
        raise RpcError(INVALID_PARAMS, f'Resource not found: no server here offers "{uri}"')


def _resource_matches(listed, uri: str) -> bool:
    if not isinstance(listed, str):
        return False
    return listed == uri or ("{" in listed and uri.startswith(listed.split("{", 1)[0]) and listed[0] != "{")


def _over_rate(busy: jobqueue.Busy) -> RpcError:
    return RpcError(-32000, f"{busy.message}; try again in {busy.retry_after} s", {"retryAfter": busy.retry_after})


def _empty(_methods: Methods, _message: Message) -> dict:
    return {}


# What reaches the servers (or, with `initialize`, leaves a session): each counted against the person's rates.
METERED = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read",
                     "prompts/get", "completion/complete"})
_HANDLERS: dict[str, Callable[[Methods, Message], dict]] = {
    "ping": _empty,
    "logging/setLevel": _empty,
    "tools/list": Methods.listing,
    "resources/list": Methods.listing,
    "resources/templates/list": Methods.listing,
    "prompts/list": Methods.listing,
    "tools/call": Methods.call_tool,
    "resources/read": Methods.upstream,
    "prompts/get": Methods.upstream,
    "completion/complete": Methods.upstream,
}
