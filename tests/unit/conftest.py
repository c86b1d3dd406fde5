import uuid

import pytest

from protocol import keys
from protocol.presence import renew_web_lease
from tests.unit.scripted import scripted  # noqa: F401  (fixture for route tests)


@pytest.fixture
def web(clean_redis):
    """The id of a live web process (its lease renewed); and no worker marked
    idle for a one-at-a-time model but those a test marks."""
    for key in clean_redis.scan_iter(match=keys.FAIR_FREE_PREFIX + "*"):
        clean_redis.delete(key)
    web_id = uuid.uuid4().hex
    renew_web_lease(clean_redis, web_id)
    return web_id
