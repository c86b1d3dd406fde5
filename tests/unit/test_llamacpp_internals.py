"""The llama-cpp-python internals the llamacpp backend relies on, pinned so
an upgrade that changes them fails here: the model's vocab handle and
end-of-generation check, token texts for the chat template, the Jinja2 chat
formatter's result, the grammar builders and their fields, the low-level
calls of the batched engine, and the sampler order of llama-cpp-python's
own `Llama` (which our chains follow)."""
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


def test_the_low_level_calls_the_engine_makes():
    """workers/backends/llama_engine.py, llama_sampling.py and
    prompt_cache.py call these positionally."""
    arity = {"llama_init_from_model": 2, "llama_get_memory": 1, "llama_batch_init": 3, "llama_batch_free": 1,
             "llama_decode": 2, "llama_memory_seq_rm": 4, "llama_state_seq_get_size": 2,
             "llama_state_seq_get_data": 4, "llama_state_seq_set_data": 4, "llama_sampler_chain_init": 1,
             "llama_sampler_chain_add": 2, "llama_sampler_sample": 3, "llama_sampler_free": 1,
             "llama_sampler_init_penalties": 5, "llama_sampler_init_grammar": 3, "llama_sampler_init_top_k": 1,
             "llama_sampler_init_top_p": 2, "llama_sampler_init_min_p": 2, "llama_sampler_init_temp": 1,
             "llama_sampler_init_dist": 1, "llama_sampler_init_greedy": 0, "llama_vocab_is_eog": 2}
    for name, count in arity.items():
        assert len(inspect.signature(getattr(llama_cpp, name)).parameters) == count, name
    # llama-cpp-python passes the vocabulary size first; so must we, to sample as it does
    assert list(inspect.signature(llama_cpp.llama_sampler_init_penalties).parameters)[0] == "n_vocab"
    params = llama_cpp.llama_context_default_params()
    for field in ("n_ctx", "n_batch", "n_ubatch", "n_seq_max", "n_threads", "n_threads_batch", "kv_unified",
                  "flash_attn_type", "no_perf"):
        assert hasattr(params, field), field
    assert llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED == 0
    assert {"token", "pos", "n_seq_id", "seq_id", "logits", "n_tokens"} <= {f for f, _ in llama_cpp.llama_batch._fields_}


def test_llama_cpp_pythons_own_sampler_order_and_defaults(llm):
    """llama_sampling.Sampler builds the chain Llama._init_sampler builds:
    if this changes, jobs stop matching llama-cpp-python's own results."""
    source = inspect.getsource(llama_cpp.Llama._init_sampler)
    order = [source.rindex(call) for call in ("add_penalties", "add_grammar", "add_top_k", "add_top_p", "add_min_p",
                                             "add_temp", "add_dist")]
    assert order == sorted(order)
    assert llm.last_n_tokens_size == 64 and llm.context_params.flash_attn_type == 0


def test_the_model_and_grammar_internals(llm):
    model = llm._model
    assert isinstance(model.n_vocab(), int) and model.vocab is not None and "general.architecture" in model.metadata()
    assert model.detokenize(model.tokenize(b"hello", add_bos=False, special=False), special=False) == b"hello"
    grammar = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    assert isinstance(grammar._grammar, str) and grammar._root == "root"


def test_the_schema_grammar_patch_still_applies():
    """workers/backends/llamacpp.py replaces the converter's string-character
    rule; if llama-cpp-python renames it, the patch would silently stop."""
    from workers.backends.llamacpp import _JSON_CHAR, schema_grammar_text

    grammar = schema_grammar_text({"type": "object", "properties": {"a": {"type": "string"}}})
    assert _JSON_CHAR in grammar and LlamaGrammar.from_string(grammar, verbose=False) is not None


def test_the_backend_counts_a_text_with_the_models_tokenizer(llm):
    from catalog.llamacpp import LlamaCppSettings
    from workers.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend("smol", LlamaCppSettings(n_ctx=256, prompt_cache_mb=0))
    text = "Let me think: the user wants three colours."
    assert backend.count_text(text) == -(-len(text) // 4)  # not loaded: the estimate
    backend.count_tokens(Job(id="j", model="smol", messages=[Message(role="user", content="hi")]))  # loads it
    assert backend.count_text(text) == len(llm.tokenize(text.encode(), add_bos=False, special=False)) != -(-len(text) // 4)
