"""Gunicorn's configuration for the web process (gunicorn reads
./gunicorn.conf.py by default; the Procfile and the tests start it from
here). The grace period for open streams on SIGTERM comes from the settings
model; see app/shutdown.py for what happens at its end."""
from settings import settings_from_environment

graceful_timeout = settings_from_environment().graceful_timeout_seconds


def post_worker_init(worker):
    from app.persistence_check import check_at_start
    from app.shutdown import watch_for_shutdown
    from settings.collector import tune_garbage_collector

    watch_for_shutdown(worker)
    check_at_start(worker)  # a Redis that forgets is said in the log at start
    tune_garbage_collector(settings_from_environment().gc_threshold)  # the app is loaded by now


def worker_exit(server, worker):
    """The request-log records this worker still holds go to Redis as it exits."""
    services = getattr(getattr(worker, "wsgi", None), "extensions", {}).get("switchboard")
    if services is not None:
        services.records.drain()
