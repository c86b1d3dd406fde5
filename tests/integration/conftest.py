"""The real stack for integration tests: Redis, one Celery worker process and
one gunicorn (gevent) web process, shared by the session."""
from __future__ import annotations

import pytest

from scripts.processes import ROOT, stack_env, start_stack, start_web

KEY = "alice-anthropic-key"  # the keyed web process's one key (alice)


@pytest.fixture(scope="session")
def stack(redis_url, redis_client):
    worker, web, base = start_stack(stack_env(redis_url))
    yield base
    web.stop()
    worker.stop()


@pytest.fixture
def base_url(stack, clean_redis):
    return stack


@pytest.fixture(scope="session")
def keyed_base(stack, redis_url, tmp_path_factory):
    """A second web process beside the session's worker, with keys on and
    Claude Code's claude-*-haiku names mapped onto echo."""
    registry = tmp_path_factory.mktemp("keyed") / "models.toml"
    registry.write_text((ROOT / "models.toml").read_text().replace(
        '[models."echo"]\n', '[models."echo"]\naliases = ["claude-*-haiku-*", "claude-haiku-*"]\n', 1))
    web, base = start_web(stack_env(redis_url, SWITCHBOARD_API_KEYS=f"alice:{KEY}",
                                    SWITCHBOARD_MODELS=str(registry)))
    yield base
    web.stop()
