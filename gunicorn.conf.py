"""Gunicorn's configuration for the web process (gunicorn reads
./gunicorn.conf.py by default; the Procfile and the tests start it from
here). The grace period for open streams on SIGTERM comes from the settings
model; see app/shutdown.py for what happens at its end. The worker is
gevent's, its module imported in the worker process only."""
import os

from gunicorn.workers.base_async import AsyncWorker


class GeventWorker(AsyncWorker):
    """gunicorn's gevent worker (`-k gevent`), its module imported once
    forked: gunicorn makes a worker's object in the master, which would
    otherwise import gevent there to only supervise (5.6 MB resident)."""

    def init_process(self):
        from gunicorn.workers.ggevent import GeventWorker as Loaded

        self.__class__ = Loaded
        Loaded.init_process(self)


worker_class = GeventWorker


def _checked_in_a_child() -> int:
    """The settings checked, and the grace period read, in a forked child: the
    master only supervises, and pydantic (some 14 MB resident) stays out of it.
    A bad value stops start-up here, with the message naming the variable."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            from settings import settings_from_environment

            answer, code = str(settings_from_environment().graceful_timeout_seconds), 0
        except BaseException as error:  # noqa: BLE001 - whatever it is, the master says it
            answer, code = str(error) or repr(error), 1
        os.write(write, answer.encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode()
    if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) != 0:
        raise SystemExit(answer)
    return int(answer)


graceful_timeout = _checked_in_a_child()


def post_worker_init(worker):
    from app.persistence_check import check_at_start
    from app.shutdown import watch_for_shutdown
    from settings import settings_from_environment
    from settings.collector import tune_garbage_collector

    watch_for_shutdown(worker)
    check_at_start(worker)  # a Redis that forgets is said in the log at start
    tune_garbage_collector(settings_from_environment().gc_threshold)  # the app is loaded by now


def worker_exit(server, worker):
    """The request-log records this worker still holds go to Redis as it exits."""
    services = getattr(getattr(worker, "wsgi", None), "extensions", {}).get("switchboard")
    if services is not None:
        services.records.drain()
