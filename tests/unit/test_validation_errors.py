"""A body that does not validate is a 400 naming the field as the client
wrote it: a `type` of the wrong kind in a block or an item (issue 41: a
500 once), without pydantic's names for union branches and tags."""
from __future__ import annotations

import pytest

TEXT = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("path, body, message", [
    ("/v1/messages", {"model": "echo", "max_tokens": 16, "messages": [
        {"role": "user", "content": [{"type": [1], "text": "hi"}]}]},
     "messages.0.content.0.type: Input should be a valid string"),
    ("/v1/messages/count_tokens", {"model": "echo", "messages": [{"role": "user", "content": [{"type": []}]}]},
     "messages.0.content.0.type: Input should be a valid string"),
    ("/v1/responses", {"model": "echo", "input": [{"type": {"a": 1}, "call_id": "c1"}]},
     "input.0.type: Input should be a valid string"),
    ("/v1/messages", {"model": "echo", "max_tokens": 16, "messages": [
        {"role": "user", "content": [{"type": "text", "text": 5}]}]},
     "messages.0.content.0.text: Input should be a valid string"),
    ("/v1/messages", {"model": "echo", "max_tokens": 16, "messages": [
        {"role": "user", "content": [{"type": "tool_use", "name": "f", "input": {}}]}]},
     "messages.0.content.0.id: Field required"),
    ("/v1/responses", {"model": "echo", "input": [{"type": "function_call", "call_id": 5, "name": "f"}]},
     "input.0.call_id: Input should be a valid string"),
], ids=["block-type-list", "count-tokens-block-type", "item-type-object", "block-field", "block-missing-field",
        "item-field"])
def test_a_bad_block_or_item_is_a_400_naming_its_field(scripted, path, body, message):
    response = scripted.client.post(path, json=body)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["message"] == message
