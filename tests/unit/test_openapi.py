"""The OpenAPI document lists every route the app answers, with its methods."""
from __future__ import annotations

import re

from app import create_app
from app.openapi import openapi_document

IMPLICIT = {"HEAD", "OPTIONS"}  # Flask adds these to every GET route


def served_routes() -> set[tuple[str, str]]:
    app = create_app({"redis_url": "redis://unused:1/0"})
    routes = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        routes |= {(method.lower(), path) for method in rule.methods - IMPLICIT}
    return routes


def test_every_served_route_is_described():
    described = {(method, path) for path, operations in openapi_document()["paths"].items()
                 for method in operations}
    assert served_routes() - described == set()
    assert described - served_routes() == set()


def test_each_body_schema_resolves():
    document = openapi_document()
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for operation in operations.values():
            body = operation.get("requestBody")
            if body is not None:
                ref = body["content"]["application/json"]["schema"]["$ref"]
                assert ref.removeprefix("#/components/schemas/") in schemas, path
    assert {"/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/v1/embeddings",
            "/api/embed"} <= set(document["paths"])
