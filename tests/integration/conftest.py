"""The real stack for integration tests: Redis, one Celery worker process and
one gunicorn (gevent) web process, shared by the session."""
from __future__ import annotations

import pytest

from scripts.processes import stack_env, start_stack


@pytest.fixture(scope="session")
def stack(redis_url, redis_client):
    worker, web, base = start_stack(stack_env(redis_url))
    yield base
    web.stop()
    worker.stop()


@pytest.fixture
def base_url(stack, clean_redis):
    return stack
