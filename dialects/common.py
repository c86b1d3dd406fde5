"""Field definitions shared by the request models of several APIs."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(ge=0, le=1)]
Seed = int
PositiveInt = Annotated[int, Field(ge=1)]


class Request(BaseModel):
    """Base for request bodies: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")


# pydantic names the branch of a tagged union it tried in an error's
# location; the tags carry this mark so that the error shown to the client
# (app/errors.py) leaves them out: "messages.0.content.0.text", not "...0.text.text".
TAG_MARK = "type="


def union_by_type(kinds: dict[str, type], other: type, absent: str | None = None):
    """A block or item of the kinds named, told apart by its `type`: a known
    type's model, the kind `absent` when it has none, else `other`. A `type`
    that is not a string (a list, an object) is `other` too, whose model
    then refuses it by name, never a 500 (it is unhashable)."""
    def kind(value: Any) -> str:
        tag = value.get("type", absent) if isinstance(value, dict) else getattr(value, "type", absent)
        return TAG_MARK + (tag if isinstance(tag, str) and tag in kinds else "other")
    branches = [Annotated[model, Tag(TAG_MARK + name)] for name, model in {**kinds, "other": other}.items()]
    return Annotated[Union[tuple(branches)], Discriminator(kind)]


def stop_list(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


# A tool's name, as OpenAI restricts it.
ToolName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")]


class FunctionDefinition(Request):
    name: ToolName
    description: str | None = None
    parameters: dict | None = None


class Tool(Request):
    """The same shape in the OpenAI and Ollama APIs."""

    type: Literal["function"] = "function"
    function: FunctionDefinition


# Thinking levels onto token budgets, for the APIs that ask for a budget
# (Anthropic's, Gemini's), and a client's budget back to its nearest level.
LEVEL_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}


def budget_level(budget: int | None) -> str | bool:
    """A thinking budget as the level whose budget it is nearest (LEVEL_BUDGETS
    the way back); no budget: thinking on."""
    if budget is None:
        return True
    return "low" if budget < 4096 else "medium" if budget < 16384 else "high"


def add_turn(turns: list[dict], role: str, field: str, items: list) -> None:
    """A turn of `items` (under `field`) after `turns`, joined to the last one
    if it has the same role (the Anthropic and Gemini APIs want roles to
    alternate); a new turn of nothing is left out."""
    if turns and turns[-1]["role"] == role:
        turns[-1][field] += items
    elif items:
        turns.append({"role": role, field: items})
