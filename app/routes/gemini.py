"""Google's Gemini API: /v1beta/models/<model>:generateContent and its kin
(Gemini CLI, the `google-genai` SDKs), under /v1beta and /v1.

The base URL is the server root (the SDKs append the version). A model is
named with or without `models/`; registry aliases apply (Gemini CLI asks for
`gemini-*` names unless told otherwise). `:streamGenerateContent` streams
SSE with `?alt=sse`, else one JSON array as Google does. Keys come as
`x-goog-api-key`, `?key=` or a Bearer token (app/auth.py). GET /v1/models is
OpenAI's list unless a Google client asks (app/routes/openai.py). Errors come
in Google's envelope.
"""
from __future__ import annotations

import uuid

from flask import Blueprint, Response, g, jsonify, request as flask_request

from app.pathkey import QUERY_KEY
from app.errors import ApiError, register_error_handlers
from app.routes import common
from app.routes.common import check_request_limits, note_tools_left_out, parse_body, serve, visible_entries
from catalog.registry import ModelEntry
from dialects import embeddings, gemini as translate, hints
from dialects.gemini_schemas import (
    BatchEmbedContentsRequest, CountableRequest, CountTokensRequest, EmbedContentRequest, GenerateContentRequest,
)
from dialects.gemini_writer import GenerateContentWriter, TokenCountWriter, error_body, model_object, model_page
from protocol.contract import new_job_id

bp = Blueprint("gemini", __name__)
register_error_handlers(bp, error_body)
VERSIONS = ("/v1beta", "/v1")
GOOGLE_HEADERS = ("x-goog-api-key", "x-goog-api-client")


def speaks_gemini() -> bool:
    """A Google client (its SDKs send x-goog-api-client; a key in its header
    or the query says so too), on routes this API shares with OpenAI's."""
    return any(name in flask_request.headers for name in GOOGLE_HEADERS) or QUERY_KEY in flask_request.environ


def find_served_model(name: str) -> ModelEntry:
    """Named with or without `models/`; Gemini CLI asks for gemini-* names unless each is mapped."""
    model = translate.model_id(name)
    return common.find_served_model(model, f"models/{model}")


def describe(entry: ModelEntry) -> dict:
    return model_object(entry.name, entry.info.context_length, entry.output_limit, entry.embeddings == "only",
                        entry.thinks)


def list_models() -> Response:
    page = model_page([describe(e) for e in visible_entries()], flask_request.args.get("pageSize"),
                      flask_request.args.get("pageToken"))
    return jsonify(page)


def get_model(name: str) -> Response:
    return jsonify(describe(find_served_model(name)))


def _generate(entry: ModelEntry, asked: str, stream: bool) -> Response:
    request = parse_body(GenerateContentRequest)
    check_request_limits(request.contents, [d for t in request.tools or [] for d in t.function_declarations or []])
    note_tools_left_out(translate.google_only_tools(request))
    job = translate.generate_to_job(request, new_job_id(), entry.name, entry.capabilities,
                                    entry.info.context_length)
    hints.apply(job, translate.hints(flask_request.headers, asked, stream))
    writer = GenerateContentWriter(entry.name, uuid.uuid4().hex[:22], translate.shows_thoughts(request),
                                   translate.sends_call_ids(request))
    framing = ("sse" if flask_request.args.get("alt") == "sse" else "json-array") if stream else None
    return serve(job, entry, writer, framing)


def _count(entry: ModelEntry, asked: str) -> Response:
    request = parse_body(CountTokensRequest)
    countable = request.generate_content_request or CountableRequest(contents=request.contents or [])
    if not countable.contents:
        raise ApiError(400, "contents: give the contents to count (or a generateContentRequest)", "contents")
    check_request_limits(countable.contents)
    job = translate.count_to_job(countable, new_job_id(), entry.name, entry.capabilities)
    return serve(hints.apply(job, translate.hints(flask_request.headers, asked, False)), entry, TokenCountWriter(),
                 None)


def _embed(entry: ModelEntry, asked: str, batch: bool) -> Response:
    requests = parse_body(BatchEmbedContentsRequest).requests if batch else [parse_body(EmbedContentRequest)]
    job = embeddings.gemini_embed_to_job(requests, new_job_id(), entry.name)
    writer = embeddings.GeminiEmbeddingsWriter([r.output_dimensionality for r in requests], batch)
    return serve(hints.apply(job, translate.hints(flask_request.headers, asked, False)), entry, writer, None)


METHODS = {"generateContent": lambda entry, asked: _generate(entry, asked, False),
           "streamGenerateContent": lambda entry, asked: _generate(entry, asked, True),
           "countTokens": _count,
           "embedContent": lambda entry, asked: _embed(entry, asked, False),
           "batchEmbedContents": lambda entry, asked: _embed(entry, asked, True)}


def _view(method: str):
    def view(model: str) -> Response:
        asked = translate.model_id(model)
        if g.get("exchange") is not None:  # the request's record names the model the URL names
            g.exchange.asked_for(asked)
        return METHODS[method](find_served_model(model), asked)
    return view


def unknown_method(target: str) -> Response:
    """As Google answers a method it does not have: a 404 (not a 405), naming those offered here."""
    raise ApiError(404, f"no such method: POST models/{target} (offered: {', '.join(METHODS)})")


for version in VERSIONS:
    for method in METHODS:  # a rule each: the request log and traces name the method's route
        bp.add_url_rule(f"{version}/models/<path:model>:{method}", f"{method}{version}", _view(method),
                        methods=["POST"])
    bp.add_url_rule(f"{version}/models/<path:target>", f"unknown{version}", unknown_method, methods=["POST"])
bp.add_url_rule("/v1beta/models", "models", list_models, methods=["GET"])
bp.add_url_rule("/v1beta/models/<path:name>", "model", get_model, methods=["GET"])
