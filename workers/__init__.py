"""Celery workers: run jobs on backends and publish their events on Redis."""
