"""The llama-cpp-python internals the llamacpp backend relies on, pinned so
an upgrade that changes them fails here: the model's vocab handle and
end-of-generation check, token texts for the chat template, the Jinja2 chat
formatter's result, the grammar builders, and `Llama.generate`'s sampling
keywords and stopping when closed."""
from __future__ import annotations

import inspect

import llama_cpp
import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

from catalog.llamacpp import smollm2_gguf
from protocol.contract import Job, Message


@pytest.fixture(scope="module")
def llm():
    return llama_cpp.Llama(model_path=str(smollm2_gguf()), n_ctx=256, verbose=False)


def test_vocab_handle_and_end_of_generation(llm):
    assert llama_cpp.llama_vocab_is_eog(llm._model.vocab, llm.token_eos())
    assert not llama_cpp.llama_vocab_is_eog(llm._model.vocab, llm.tokenize(b"hello", add_bos=False)[0])
    assert llm._model.token_get_text(llm.token_eos()) == "<|im_end|>"


def test_chat_formatter_result(llm):
    formatter = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                                    eos_token=llm._model.token_get_text(llm.token_eos()),
                                    bos_token=llm._model.token_get_text(llm.token_bos()))
    result = formatter(messages=[{"role": "user", "content": "hi"}])
    assert "<|im_start|>user\nhi<|im_end|>" in result.prompt
    assert isinstance(result.added_special, bool) and result.stop is not None


def test_grammar_builders():
    assert LlamaGrammar.from_string(JSON_GBNF, verbose=False) is not None
    assert LlamaGrammar.from_json_schema('{"type": "object", "properties": {"a": {"type": "integer"}}}',
                                         verbose=False) is not None


def test_generate_takes_our_sampling_keywords_and_stops_when_closed(llm):
    parameters = inspect.signature(llm.generate).parameters
    assert {"temp", "top_k", "top_p", "min_p", "repeat_penalty", "grammar"} <= set(parameters)
    tokens = llm.generate(llm.tokenize(b"Once upon a time", add_bos=True), temp=0.0, top_k=40, top_p=0.9, min_p=0.0,
                          repeat_penalty=1.1, grammar=None)
    first = next(tokens)
    assert isinstance(first, int) and llm.detokenize([first])
    tokens.close()
    with pytest.raises(StopIteration):
        next(tokens)


def test_the_schema_grammar_patch_still_applies():
    """workers/backends/llamacpp.py replaces the converter's string-character
    rule; if llama-cpp-python renames it, the patch would silently stop."""
    from workers.backends.llamacpp import _JSON_CHAR, schema_grammar_text

    grammar = schema_grammar_text({"type": "object", "properties": {"a": {"type": "string"}}})
    assert _JSON_CHAR in grammar and LlamaGrammar.from_string(grammar, verbose=False) is not None


def greedy(llm, prompt: list[int], count: int = 6) -> list[int]:
    out = []
    for token in llm.generate(prompt, temp=0.0, top_k=40, top_p=0.9, min_p=0.0, repeat_penalty=1.1, grammar=None):
        out.append(token)
        if len(out) == count:
            break
    return out


def test_a_restored_prompt_state_continues_exactly_as_a_fresh_evaluation(llm):
    """workers/backends/prompt_cache.py saves and restores sequence 0 with
    llama.cpp's per-sequence state calls and sets `input_ids`, `n_tokens`
    and `_requires_eval` itself."""
    from workers.backends.prompt_cache import PromptCache

    alice = llm.tokenize(b"def add(a, b):\n    return a + b\n\ndef mul(a, b):\n", add_bos=True)
    bob = llm.tokenize(b"The capital of France is Paris. The capital of Italy is", add_bos=True)
    llm.reset()
    expected = greedy(llm, alice + llm.tokenize(b"    return", add_bos=False))
    cache = PromptCache(64 * 2**20)
    llm.reset()
    greedy(llm, alice, 1)  # alice's prompt is live
    assert cache.prepare(llm, bob).restored is False  # bob's turn: alice's state is saved
    greedy(llm, bob, 3)
    reuse = cache.prepare(llm, alice + llm.tokenize(b"    return", add_bos=False))
    assert reuse.restored and reuse.tokens >= len(alice) and cache.size_bytes > 0
    assert greedy(llm, alice + llm.tokenize(b"    return", add_bos=False)) == expected
    assert llm._requires_eval is False  # the internal flag prompt_cache sets: still the name llama-cpp-python reads


def test_the_backend_counts_a_text_with_the_models_tokenizer(llm):
    from catalog.llamacpp import LlamaCppSettings
    from workers.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend("smol", LlamaCppSettings(n_ctx=256, prompt_cache_mb=0))
    text = "Let me think: the user wants three colours."
    assert backend.count_text(text) == -(-len(text) // 4)  # not loaded: the estimate
    backend.count_tokens(Job(id="j", model="smol", messages=[Message(role="user", content="hi")]))  # loads it
    assert backend.count_text(text) == len(llm.tokenize(text.encode(), add_bos=False, special=False)) != -(-len(text) // 4)
