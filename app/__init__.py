"""Switchboard's front end: create_app() builds the Flask app.

Serve it with gunicorn's gevent worker class (the relay and the disconnect
watch are greenlets): `gunicorn -k gevent 'app:create_app()'`.
"""
from __future__ import annotations

from flask import Flask
from redis import Redis

from app.config import load_settings
from app.relay import Relay
from app.routes import ollama, openai, simple_chat
from app.services import Services, enqueue_by_name
from workers.registry import load_registry


def create_app(overrides: dict | None = None) -> Flask:
    settings = load_settings(overrides)
    registry = load_registry(settings.models_path)  # a bad registry stops start-up here
    redis = Redis.from_url(settings.redis_url)
    app = Flask(__name__, static_folder=None)
    app.json.sort_keys = False  # keep wire objects in the order the APIs document
    app.extensions["switchboard"] = Services(settings, registry, redis, Relay(redis), enqueue_by_name)
    app.register_blueprint(ollama.bp)
    app.register_blueprint(openai.bp)
    app.register_blueprint(simple_chat.bp)
    return app
