"""The web process notices a client that went away while its stream is
silent (app/disconnect.py), under gevent as gunicorn's worker runs it."""
from __future__ import annotations

from tests.unit.own_process import run_under_gevent

SCRIPT = r"""
import json, socket, gevent
from gevent.event import Event
from app.disconnect import DisconnectWatch

def watch(sock):
    gone = Event()
    return DisconnectWatch({"gunicorn.socket": sock}, gone.set).start(), gone

found = {}
client, server = socket.socketpair()
watcher, gone = watch(server)
client.close()
found["close_heard"] = gone.wait(5)

client, server = socket.socketpair()
watcher, gone = watch(server)
client.sendall(b"GET / HTTP/1.1\r\n")  # a pipelined request: not a close
while watcher._watcher is not None:  # until the hub saw it readable
    gevent.sleep(0.01)
client.close()
gevent.sleep(0.05)
found["more_bytes_heard_as_close"] = gone.is_set()
found["bytes_left_unread"] = server.recv(100) == b"GET / HTTP/1.1\r\n"

client, server = socket.socketpair()
watcher, gone = watch(server)
watcher.stop()
client.close()
gevent.sleep(0.05)
found["heard_after_stop"] = gone.is_set()
DisconnectWatch({}, gone.set).start().stop()  # no socket (not gunicorn): nothing to watch
print(json.dumps(found))
"""


def test_a_close_is_heard_and_a_pipelined_request_or_a_stopped_watch_is_not():
    found = run_under_gevent(SCRIPT)
    assert found == {"close_heard": True, "more_bytes_heard_as_close": False, "bytes_left_unread": True,
                     "heard_after_stop": False}
