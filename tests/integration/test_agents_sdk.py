"""The OpenAI Agents SDK (`openai-agents`) against /v1/responses: an agent
with a Python function tool runs a whole turn on the echo model (echo's
reply calls the tool; the SDK runs it and sends the result back; the final
output is the tool's result), keys off and on. Tracing is off: it would
send traces to OpenAI."""
from __future__ import annotations

import asyncio

import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from tests.integration.conftest import KEY

set_tracing_disabled(True)
called: list[str] = []


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    called.append(city)
    return f"Sunny in {city}, 21 C"


def run_turn(base: str, key: str) -> str:
    model = OpenAIResponsesModel(model="echo", openai_client=AsyncOpenAI(base_url=f"{base}/v1", api_key=key,
                                                                        max_retries=0))
    agent = Agent(name="forecaster", instructions="Answer with the weather.", tools=[weather], model=model)
    call = '<invoke name="weather"><parameter name="city">Lyon</parameter></invoke>'
    return asyncio.run(Runner.run(agent, call, max_turns=3)).final_output


@pytest.mark.parametrize("keyed", [False, True], ids=["keys-off", "keys-on"])
def test_an_agent_runs_its_function_tool_for_a_whole_turn(base_url, keyed_base, keyed):
    called.clear()
    output = run_turn(keyed_base if keyed else base_url, KEY if keyed else "unused")
    assert called == ["Lyon"] and output == "Sunny in Lyon, 21 C"
