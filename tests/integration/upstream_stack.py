"""Processes for the upstream tests: llama-cpp-python's own OpenAI server on
the SmolLM2 GGUF, and a Switchboard web + gevent-pool worker whose registry
points at that server, at the scripted upstream, and at the session's own
Switchboard (a real server of the Ollama, OpenAI, Anthropic and Gemini APIs)."""
from __future__ import annotations

from pathlib import Path

from scripts.processes import Process, ready_together, stack_env, start_web, start_worker
from scripts.processes import start_llama_server as llama_server
from catalog.llamacpp import smollm2_gguf

LLAMA_KEY = "test-upstream-key-7f3a9"


def start_llama_server() -> tuple[Process, str]:
    # --interrupt_requests False: only a closed connection, not the next request, stops a generation
    return llama_server(smollm2_gguf(), LLAMA_KEY, ("--n_ctx", "2048", "--interrupt_requests", "False"))


def registry_text(llama: str, scripted: str, switchboard: str, closed_port: int, relay: str = "") -> str:
    fast = "retries = 0\n"
    entries = {
        "up-llama": f'backend = "openai"\nbase_url = "{llama}/v1"\nupstream_model = "smollm2"\n'
                    'api_key_env = "TEST_UPSTREAM_KEY"\ncontext_length = 2048\n',
        "up-llama-badkey": f'backend = "openai"\nbase_url = "{llama}/v1"\nupstream_model = "smollm2"\n'
                           'api_key_env = "TEST_WRONG_KEY"\ncontext_length = 2048\n' + fast,
        "up-down": f'backend = "openai"\nbase_url = "http://127.0.0.1:{closed_port}/v1"\nupstream_model = "x"\n'
                   'context_length = 2048\nretries = 1\nretry_backoff = 0.05\n',
        "up-sb": f'backend = "openai"\nbase_url = "{switchboard}/v1"\nupstream_model = "echo"\ntools = "native"\n'
                 'context_length = 131072\ndisplay_name = "Switchboard echo"\n',
        "up-sb-custom": f'backend = "openai"\nbase_url = "{switchboard}/v1"\nupstream_model = "echo"\ntools = "native"\n'
                        'custom_tools = true\ncontext_length = 131072\n',
        "up-sb-missing": f'backend = "openai"\nbase_url = "{switchboard}/v1"\nupstream_model = "nope"\n'
                         'context_length = 8192\n' + fast,
        "up-ollama": f'backend = "ollama"\nbase_url = "{switchboard}"\nupstream_model = "echo"\ntools = "native"\n'
                     'context_length = 131072\n',
        "up-embed": f'backend = "openai"\nbase_url = "{switchboard}/v1"\nupstream_model = "echo"\n'
                    'context_length = 131072\nembeddings = "only"\n',
        "up-embed-ollama": f'backend = "ollama"\nbase_url = "{switchboard}"\nupstream_model = "echo"\n'
                           'context_length = 131072\nembeddings = "only"\n',
        "vision": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "record"\nvision = true\n'
                  'context_length = 4096\n',
        "vision-ollama": f'backend = "ollama"\nbase_url = "{scripted}"\nupstream_model = "record"\nvision = true\n'
                         'context_length = 4096\n',
        "reasoner": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "reasoning"\nthinking = true\n'
                    'context_length = 4096\n',
        "reasoner-ollama": f'backend = "ollama"\nbase_url = "{scripted}"\nupstream_model = "think"\nthinking = true\n'
                           'context_length = 4096\n',
        "think-tags": 'backend = "echo"\npool = "upstream"\nthink_tags = ["<think>", "</think>"]\n',
        "up-ollama-slow": f'backend = "ollama"\nbase_url = "{switchboard}"\nupstream_model = "echo:slow"\n'
                          'context_length = 131072\n',
        "inject": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "record"\nsystem = "inject"\n'
                  'drop_params = ["stream_options", "seed"]\ncontext_length = 4096\nheaders = { X-Team = "office" }\n',
        "flaky": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "flaky"\ncontext_length = 4096\n'
                 'retries = 2\nretry_backoff = 0.05\n',
        "slow-first": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "slow-first"\n'
                      'context_length = 4096\nfirst_token_timeout = 5\nidle_timeout = 0.5\n',
        "stall": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "stall"\ncontext_length = 4096\n'
                 'idle_timeout = 0.5\n',
        "hang": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "hang"\ncontext_length = 4096\n'
                'first_token_timeout = 8\n' + fast,
        "hang-timeout": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "hang"\n'
                        'context_length = 4096\nfirst_token_timeout = 0.5\n' + fast,
        "endless": f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "endless"\ncontext_length = 4096\n',
        "held": 'backend = "openai"\nupstream_model = "held"\ncontext_length = 131072\n'
                f'deployments = [{{ base_url = "{scripted}/v1", max_concurrent = 2 }}]\n',
        "two-caches": 'backend = "openai"\ntools = "native"\ncontext_length = 131072\ndeployments = ['
                      + ", ".join(f'{{ name = "{n}", base_url = "{scripted}/v1", upstream_model = "cached-{n}" }}'
                                  for n in "ab") + "]\n",
    }
    for kind, extra in (("text", ""), ("think", "thinking = true\n"), ("tool", 'tools = "native"\n'),
                        ("error", "")):
        entries[f"claude-{kind}"] = (f'backend = "anthropic"\nbase_url = "{scripted}"\n'
                                     f'upstream_model = "anthropic-{kind}"\ncontext_length = 4096\n' + extra)
    entries["claude-too-long"] = (f'backend = "anthropic"\nbase_url = "{scripted}"\n'
                                  'upstream_model = "anthropic-too-long"\ncontext_length = 200000\n' + fast)
    entries["up-too-long"] = (f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "too-long"\n'
                              'context_length = 4096\n' + fast)
    entries["claude-529"] = (f'backend = "anthropic"\nbase_url = "{scripted}"\nupstream_model = "status-529"\n'
                             'context_length = 4096\n' + fast)
    entries["gemini-sb"] = (f'backend = "gemini"\nbase_url = "{switchboard}"\nupstream_model = "echo"\n'
                            'tools = "native"\ncontext_length = 131072\n')
    entries["gemini-embed"] = (f'backend = "gemini"\nbase_url = "{switchboard}"\nupstream_model = "echo:embed"\n'
                               'context_length = 131072\nembeddings = "only"\n')
    entries["claude-sb"] = (f'backend = "anthropic"\nbase_url = "{switchboard}"\nupstream_model = "echo"\n'
                            'tools = "native"\ncontext_length = 131072\nanthropic_version = "2023-06-01"\n')
    for shape in ("whole", "interleaved", "no-ids", "index0", "text"):
        entries[f"shape-{shape}"] = (f'backend = "openai"\nbase_url = "{scripted}/v1"\nupstream_model = "shape-{shape}"\n'
                                     'tools = "native"\ncontext_length = 4096\n')
    for status in (401, 429, 503):
        entries[f"status-{status}"] = (f'backend = "openai"\nbase_url = "{scripted}/v1"\n'
                                       f'upstream_model = "status-{status}"\ncontext_length = 4096\n' + fast)
    entries |= guarded(relay) if relay else {}
    return "".join(f'[models."{name}"]\n{body}\n' for name, body in entries.items())


def guarded(relay: str) -> dict[str, str]:
    """The guard's models: each upstream kind through the recording relay (to the session's echo), redacted;
    one that refuses; one left to the default (the relay is on loopback: inside, so not guarded)."""
    common = 'upstream_model = "echo"\ntools = "native"\ncontext_length = 131072\n'
    return {
        "guard-openai": f'backend = "openai"\nbase_url = "{relay}/v1"\n{common}guard = "redact"\n',
        "guard-ollama": f'backend = "ollama"\nbase_url = "{relay}"\n{common}guard = "redact"\n',
        "guard-anthropic": f'backend = "anthropic"\nbase_url = "{relay}"\n{common}guard = "redact"\n'
                           'anthropic_version = "2023-06-01"\n',
        "guard-gemini": f'backend = "gemini"\nbase_url = "{relay}"\n{common}guard = "redact"\n',
        "guard-embed": f'backend = "openai"\nbase_url = "{relay}/v1"\nupstream_model = "echo"\n'
                       'context_length = 131072\nembeddings = "only"\nguard = "redact"\n',
        "guard-block": f'backend = "openai"\nbase_url = "{relay}/v1"\n{common}guard = "block"\n',
        "guard-default": f'backend = "openai"\nbase_url = "{relay}/v1"\n{common}',
    }


def start_upstream_stack(redis_url: str, registry: Path):
    env = stack_env(redis_url, SWITCHBOARD_MODELS=str(registry), TEST_UPSTREAM_KEY=LLAMA_KEY,
                    TEST_WRONG_KEY="not-the-key-5c1e")
    worker = start_worker(env, concurrency=50, queues="upstream-completion,upstream", pool="gevent", wait=False)
    try:
        web, base = start_web(env, wait=False)
    except BaseException:
        worker.stop()
        raise
    ready_together([worker, web])
    return worker, web, base
