"""Gemini API dialect mappings, both directions side by side:

- client side: a generateContent (stream, countTokens, embedContent)
  request -> Job
- upstream side: a Job -> the request a server of this API gets

A conversation's contents become the job's messages in order: a turn's text
and image parts one message (dialects/parts.py), its `functionCall` parts
the calls of that message, each `functionResponse` a tool message before
it. Calls are matched to responses by `id` where the client sent one (Gemini
CLI does), else by name, oldest unanswered first; a call without an id gets
one made from its place in the conversation, the same on every turn (a
prompt cache sees the same prompt). `thought` parts are the model's thinking,
passed back to a model that thinks. `systemInstruction` becomes the first
message.
"""
from __future__ import annotations

import json
import re
from typing import Mapping

from pydantic.alias_generators import to_camel

from dialects.gemini_schemas import (
    Content, CountableRequest, FunctionDeclaration, GenerateContentRequest, GenerationConfig, Part,
)
from dialects.common import LEVEL_BUDGETS, add_turn, budget_level
from dialects.hints import Hints, read
from dialects.images import check_vision, from_typed_base64
from dialects.parts import interleaved, joined
from protocol.contract import (
    COUNT_VERSION, IMAGES_VERSION, Image, Job, Message, SamplingOptions, ToolCall, ToolChoice, ToolSpec, json_object,
)
from protocol.errors import InvalidRequest

GOOGLE_TOOLS = ("google_search", "google_search_retrieval", "code_execution", "url_context", "google_maps",
                "computer_use", "file_search")
_LEVELS = {"MINIMAL": "low", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
FLASH_LITE = re.compile(r"gemini-.*flash-lite", re.IGNORECASE)  # the model Gemini CLI's side calls ask for
_ROLES = {"user": "user", "function": "user", "model": "assistant", "system": "system"}


def model_id(name: str) -> str:
    """A model's name as the URL gives it: `models/<id>` or `<id>`."""
    return name.removeprefix("models/")


# --- Google's schema subset -> JSON schema ----------------------------------------------
def json_schema(schema: dict) -> dict:
    """Google's OpenAPI subset (`type: "OBJECT"`, `nullable`) as JSON schema."""
    if not isinstance(schema, dict):
        return {}
    out: dict = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: json_schema(inner) for name, inner in value.items()}
        elif key == "items":
            out[key] = json_schema(value)
        elif key in ("anyOf", "any_of") and isinstance(value, list):
            out["anyOf"] = [json_schema(inner) for inner in value]
        elif key not in ("nullable", "propertyOrdering", "property_ordering"):
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


# --- contents -> messages ---------------------------------------------------------------
class _Calls:
    """Which calls await their response, by name, to pair responses that carry no id."""

    def __init__(self):
        self.waiting: dict[str, list[str]] = {}

    def called(self, name: str, given: str | None, place: str) -> str:
        call_id = given or f"call_{place}"
        self.waiting.setdefault(name, []).append(call_id)
        return call_id

    def answered(self, name: str, given: str | None) -> str | None:
        waiting = self.waiting.get(name, [])
        if given in waiting:
            waiting.remove(given)
            return given
        return given or (waiting.pop(0) if waiting else None)


def _image(part: Part, field: str, vision: bool) -> Image:
    blob = part.inline_data
    if not blob.mime_type.startswith("image/"):
        raise InvalidRequest(f"{field}.inlineData: only images are accepted inline, not {blob.mime_type}",
                             param=f"{field}.inlineData")
    check_vision(vision, f"{field}.inlineData")
    return from_typed_base64(blob.data, blob.mime_type, f"{field}.inlineData")


def _response_text(response: dict) -> str:
    """A function's response as the model reads it: its `output` (or
    `content`) text as it is, anything else as JSON."""
    for name in ("output", "content", "result"):
        if len(response) == 1 and isinstance(response.get(name), str):
            return response[name]
    return json.dumps(response, ensure_ascii=False)


def to_messages(content: Content, index: int, calls: _Calls, capabilities) -> list[Message]:
    """The turn's function responses, then its one message: its texts and
    images in order, its calls and its thinking with it."""
    field, thinks = f"contents.{index}.parts", "thinking" in capabilities
    role = _ROLES[content.role]
    results, parts, made, thoughts, signature = [], [], [], [], ""
    for n, part in enumerate(content.parts):
        if part.file_data is not None:
            raise InvalidRequest(f"{field}.{n}.fileData: file references are not accepted (this server fetches "
                                 "no URL and keeps no files); send the data inline", param=f"{field}.{n}.fileData")
        signature = part.thought_signature or signature
        if part.function_response is not None:
            answer = part.function_response
            results.append(Message(role="tool", content=_response_text(answer.response), tool_name=answer.name,
                                   tool_call_id=calls.answered(answer.name, answer.id)))
        elif part.function_call is not None:
            call = part.function_call
            made.append(ToolCall(id=calls.called(call.name, call.id, f"{index}_{n}"), name=call.name,
                                 arguments=json.dumps(call.args, ensure_ascii=False)))
        elif part.inline_data is not None:
            parts.append(_image(part, f"{field}.{n}", "vision" in capabilities))
        elif part.thought and part.text:
            thoughts += [part.text] if thinks else []  # passed back to a model that thinks, else dropped
        elif part.text:
            parts.append(part.text)
    if not (parts or made or thoughts):
        return results
    text, images = joined(parts)
    return results + [Message(role=role, content=text, images=images, tool_calls=made, thinking="".join(thoughts),
                              thinking_signature=signature if role == "assistant" else "")]


def conversation(request: CountableRequest, capabilities) -> list[Message]:
    if request.cached_content:
        raise InvalidRequest("cachedContent: cached contents are not kept here; send the contents themselves "
                             "(this server's prompt cache reuses a repeated prefix by itself)", param="cachedContent")
    system = "\n\n".join(p.text for p in request.system_instruction.parts if p.text) \
        if request.system_instruction else ""
    calls = _Calls()
    head = [Message(role="system", content=system)] if system else []
    return head + [m for i, content in enumerate(request.contents) for m in to_messages(content, i, calls,
                                                                                         capabilities)]


# --- tools, thinking, sampling, output ------------------------------------------------
def _spec(declaration: FunctionDeclaration) -> ToolSpec:
    parameters = declaration.parameters_json_schema or json_schema(declaration.parameters or {})
    return ToolSpec(name=declaration.name, description=declaration.description or "",
                    parameters=parameters or {"type": "object", "properties": {}})


def to_tool_specs(request: CountableRequest) -> list[ToolSpec]:
    return [_spec(d) for tool in request.tools or [] for d in tool.function_declarations or []]


def google_only_tools(request: CountableRequest) -> list[str]:
    """Google's own tools (search, code execution, ...): left out of the job, named in the request log."""
    return [to_camel(name) for tool in request.tools or [] for name in GOOGLE_TOOLS if getattr(tool, name) is not None]


def to_tools(request: CountableRequest) -> tuple[list[ToolSpec], ToolChoice]:
    """The tools the model may call and how: ANY with allowed names offers only those."""
    specs = to_tool_specs(request)
    config = request.tool_config.function_calling_config if request.tool_config else None
    if config is None or config.mode in ("AUTO", "MODE_UNSPECIFIED", "VALIDATED"):
        return specs, ToolChoice()
    if config.mode == "NONE":
        return specs, ToolChoice(mode="none")
    allowed = config.allowed_function_names
    if allowed:
        unknown = sorted(set(allowed) - {s.name for s in specs})
        if unknown:
            raise InvalidRequest(f"toolConfig.functionCallingConfig.allowedFunctionNames: {unknown[0]!r} is not "
                                 "among the functions declared", param="toolConfig.functionCallingConfig")
        specs = [s for s in specs if s.name in allowed]
    if len(specs) == 1:
        return specs, ToolChoice(mode="function", name=specs[0].name)
    return specs, ToolChoice(mode="required")


def to_think(config: GenerationConfig | None, capabilities) -> bool | str | None:
    """`thinkingBudget` (0: off, -1: the model decides) or `thinkingLevel`,
    for a model that thinks."""
    thinking = config.thinking_config if config else None
    if "thinking" not in capabilities or thinking is None:
        return None
    if thinking.thinking_level in _LEVELS:
        return _LEVELS[thinking.thinking_level]
    budget = thinking.thinking_budget
    if budget is None:
        return None
    if budget == 0:
        return False
    return True if budget < 0 else budget_level(budget)


def to_format(config: GenerationConfig | None) -> str | dict | None:
    """`responseMimeType: application/json`: JSON, following the schema if one came."""
    mime = (config.response_mime_type or "text/plain") if config else "text/plain"
    if mime == "text/plain":
        return None
    if mime != "application/json":
        raise InvalidRequest(f"generationConfig.responseMimeType: {mime!r} is not offered here "
                             "(text/plain or application/json)", param="generationConfig.responseMimeType")
    if config.response_json_schema:
        return config.response_json_schema
    return json_schema(config.response_schema) if config.response_schema else "json"


def to_sampling(config: GenerationConfig | None, context_length: int) -> SamplingOptions:
    if config is None:
        return SamplingOptions()
    if config.candidate_count not in (None, 1):
        raise InvalidRequest("generationConfig.candidateCount: only 1 candidate is generated here",
                             param="generationConfig.candidateCount")
    most = min(config.max_output_tokens, context_length) if config.max_output_tokens else None
    return SamplingOptions(max_tokens=most, temperature=config.temperature, top_p=config.top_p, top_k=config.top_k,
                           seed=config.seed, stop=list(config.stop_sequences or []))


def shows_thoughts(request: CountableRequest) -> bool:
    config = request.generation_config
    return bool(config and config.thinking_config and config.thinking_config.include_thoughts)


def hints(headers: Mapping[str, str], asked: str, streamed: bool) -> Hints:
    """Its routing hints (dialects/hints.py): a session header if the client
    sends one (Gemini CLI names none with an API key). Gemini CLI streams
    each turn a person watches; its side calls (the next-speaker check,
    compression, edit correction, routing) are unstreamed generateContent
    calls or go to a flash-lite model: background work."""
    side_call = headers.get("User-Agent", "").startswith("GeminiCLI") and not streamed
    return read(headers, asked, flagged=side_call or bool(FLASH_LITE.match(asked)))


def sends_call_ids(request: CountableRequest) -> bool:
    """The client's calls and responses carry ids (Gemini CLI's do): its replies' calls get ids too."""
    return any((part.function_call and part.function_call.id) or (part.function_response and
                                                                  part.function_response.id)
               for content in request.contents for part in content.parts)


def generate_to_job(request: GenerateContentRequest, job_id: str, model: str, capabilities,
                    context_length: int) -> Job:
    messages = conversation(request, capabilities)
    tools, choice = to_tools(request)
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request.generation_config,
                                                                              context_length),
               tools=tools, tool_choice=choice, think=to_think(request.generation_config, capabilities),
               format=to_format(request.generation_config),
               version=IMAGES_VERSION if any(m.images for m in messages) else 1)


def count_to_job(request: CountableRequest, job_id: str, model: str, capabilities) -> Job:
    """countTokens: the conversation generateContent would make, counted by the worker without a reply."""
    tools, choice = to_tools(request)
    return Job(id=job_id, model=model, messages=conversation(request, capabilities), tools=tools, tool_choice=choice,
               count_only=True, version=COUNT_VERSION)


# --- upstream side: Job -> request ---------------------------------------------------
# A call no Gemini model made (another model's, a client's own) carries
# Google's documented placeholder, which its API accepts instead of the
# signature it otherwise requires of a thinking model's calls.
SKIP_SIGNATURE = "skip_thought_signature_validator"
_BUDGETS = {True: -1, False: 0} | LEVEL_BUDGETS  # -1: the model decides


def _wire_parts(message: Message, thoughts: bool = True) -> list[dict]:
    parts: list[dict] = [{"text": message.thinking, "thought": True}] if message.thinking and thoughts else []
    parts += [{"inlineData": {"mimeType": piece.mime, "data": piece.data}} if isinstance(piece, Image)
              else {"text": piece} for piece in interleaved(message) if piece]
    parts += [{"functionCall": {"name": call.name, "args": json_object(call.arguments)}} for call in message.tool_calls]
    first_call = next((p for p in parts if "functionCall" in p), None)
    signature = message.thinking_signature or (SKIP_SIGNATURE if first_call else "")
    target = first_call or (parts[0] if parts else None)
    if signature and target is not None:  # back on the turn's first call (or its first part)
        target["thoughtSignature"] = signature
    return parts


def _wire_response(message: Message, names: dict[str, str]) -> dict:
    name = message.tool_name or names.get(message.tool_call_id or "", "")
    return {"functionResponse": {"name": name, "response": {"error" if message.failed else "output":
                                                                message.content}}}


def _wire_contents(messages: list[Message]) -> tuple[str, list[dict]]:
    """System messages as the system instruction; the rest as contents
    (function responses in user turns, adjacent turns of one role joined)."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    contents: list[dict] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        parts = [_wire_response(message, names)] if message.role == "tool" else _wire_parts(message)
        add_turn(contents, role, "parts", parts)
    return system, contents


def _wire_tool_config(choice: ToolChoice) -> dict:
    if choice.mode == "function":
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice.name]}}
    return {"functionCallingConfig": {"mode": {"required": "ANY", "none": "NONE"}.get(choice.mode, "AUTO")}}


def _wire_generation(job: Job) -> dict:
    options = job.options
    config = {"maxOutputTokens": options.max_tokens, "temperature": options.temperature, "topP": options.top_p,
              "topK": options.top_k, "seed": options.seed, "stopSequences": options.stop or None}
    if job.format is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = job.format if isinstance(job.format, dict) else None
    if job.think is not None:
        config["thinkingConfig"] = {"thinkingBudget": _BUDGETS.get(job.think, -1), "includeThoughts": bool(job.think)}
    return {k: v for k, v in config.items() if v is not None}


def upstream_request(job: Job, upstream_model: str) -> tuple[str, dict]:
    """A chat job as a streamed generateContent request (path, body). A raw
    prompt (a code completion) has no such form: refused."""
    if job.prompt is not None:
        raise InvalidRequest(f'"{job.model}" is a Gemini API model: it takes chat requests, not raw prompts '
                             "(fill-in-the-middle, raw mode)")
    system, contents = _wire_contents(job.messages)
    body: dict = {"contents": contents, "generationConfig": _wire_generation(job)}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    if job.tools:
        body["tools"] = [{"functionDeclarations": [{"name": t.name, "description": t.description,
                                                    "parametersJsonSchema": t.parameters or {"type": "object"}}
                                                   for t in job.tools]}]
        body["toolConfig"] = _wire_tool_config(job.tool_choice)
    return f"/v1beta/models/{upstream_model}:streamGenerateContent?alt=sse", body


def count_request(job: Job, upstream_model: str) -> tuple[str, dict]:
    """The same conversation, for the upstream's own countTokens."""
    _, body = upstream_request(job, upstream_model)
    body["model"] = f"models/{upstream_model}"
    return f"/v1beta/models/{upstream_model}:countTokens", {"generateContentRequest": {
        k: v for k, v in body.items() if k != "generationConfig"}}
