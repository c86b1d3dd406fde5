import pytest

from catalog.echo import EchoSettings
from protocol.contract import Job, Message, SamplingOptions
from tests.unit.generators import drained
from workers.backends.echo import EchoBackend, echo_tokens
from workers.model_output import Prompted


def run(text, **options):
    backend = EchoBackend("echo", EchoSettings())
    job = Job(id="j", model="echo", messages=[Message(role="user", content=text)], options=SamplingOptions(**options))
    pieces, outcome = drained(backend.generate(job))
    assert pieces[0] == Prompted(outcome.prompt_tokens)  # its size first, as the outcome says
    return pieces[1:], outcome


def texts(generation) -> str:
    return "".join(piece for piece in generation if isinstance(piece, str))


@pytest.mark.parametrize("text, tokens", [
    ("hello world", ["hello", " world"]),
    ("  lead\ttab\n", ["  lead", "\ttab", "\n"]),
    ("", []),
], ids=["words", "whitespace", "empty"])
def test_tokens_keep_every_character(text, tokens):
    assert echo_tokens(text) == tokens
    assert "".join(tokens) == text


def test_echoes_the_last_message_exactly():
    pieces, outcome = run("a  b\n c")
    assert "".join(pieces) == "a  b\n c"
    assert (outcome.reason, outcome.prompt_tokens, outcome.completion_tokens) == ("stop", 3, 3)


def test_token_limit():
    pieces, outcome = run("a b c d", max_tokens=2)
    assert pieces == ["a", " b"] and outcome.reason == "length" and outcome.completion_tokens == 2


def test_stop_sequence():
    pieces, outcome = run("one two three", stop=["thr", "x"])
    assert "".join(pieces) == "one two " and outcome.reason == "stop" and outcome.stop_sequence == "thr"


def test_system_messages_after_the_last_turn_are_passed_over():
    """Claude Code ends every request with a system message: echo answers
    the prompt (or the tool results) before it."""
    backend = EchoBackend("echo", EchoSettings())
    for turn in ([Message(role="user", content="say hi")],
                 [Message(role="tool", content="a", tool_call_id="1"), Message(role="tool", content="b", tool_call_id="2")]):
        job = Job(id="j", model="echo", messages=turn + [Message(role="system", content="reminder")])
        assert texts(backend.generate(job)) == "\n".join(m.content for m in turn)
    alone = Job(id="j", model="echo", messages=[Message(role="system", content="only this")])
    assert texts(backend.generate(alone)) == "only this"
