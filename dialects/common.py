"""Field definitions shared by the request models of several APIs."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(ge=0, le=1)]
Seed = int
PositiveInt = Annotated[int, Field(ge=1)]


class Request(BaseModel):
    """Base for request bodies: unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")


def stop_list(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


class FunctionDefinition(Request):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    description: str | None = None
    parameters: dict | None = None


class Tool(Request):
    """The same shape in the OpenAI and Ollama APIs."""

    type: Literal["function"] = "function"
    function: FunctionDefinition
